// More learning-rate schedulers (include/ember/optim/lr_scheduler_extra.h).
#include "ember/optim/lr_scheduler_extra.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ember::optim {

MultiStepLr::MultiStepLr(Optimizer& opt, MultiStepLrOptions o) : LrScheduler(opt), options(std::move(o)) {
  if (!std::is_sorted(options.milestones.begin(), options.milestones.end()))
    throw Error("MultiStepLr: milestones must be increasing");
}
double MultiStepLr::lr_at(int64_t epoch) const {
  auto passed = std::upper_bound(options.milestones.begin(), options.milestones.end(), epoch) - options.milestones.begin();
  return base_lr_ * std::pow(options.gamma, double(passed));
}

ExponentialLr::ExponentialLr(Optimizer& opt, ExponentialLrOptions o) : LrScheduler(opt), options(o) {}
double ExponentialLr::lr_at(int64_t epoch) const { return base_lr_ * std::pow(options.gamma, double(epoch)); }

LinearLr::LinearLr(Optimizer& opt, LinearLrOptions o) : LrScheduler(opt), options(o) {
  if (o.total_iters <= 0) throw Error(fmt::format("LinearLr: total_iters must be positive, got {}", o.total_iters));
}
double LinearLr::lr_at(int64_t epoch) const {
  const auto& o = options;
  double t = double(std::min(epoch, o.total_iters)) / double(o.total_iters);
  return base_lr_ * (o.start_factor + (o.end_factor - o.start_factor) * t);
}

CosineWarmRestartsLr::CosineWarmRestartsLr(Optimizer& opt, CosineWarmRestartsOptions o) : LrScheduler(opt), options(o) {
  if (o.t_0 <= 0 || o.t_mult < 1)
    throw Error(fmt::format("CosineWarmRestartsLr: need t_0 >= 1 and t_mult >= 1, got {} and {}", o.t_0, o.t_mult));
}
double CosineWarmRestartsLr::lr_at(int64_t epoch) const {
  const auto& o = options;
  int64_t cycle = o.t_0, t = epoch;
  if (o.t_mult == 1) t = epoch % cycle;
  else {
    while (t >= cycle) {
      t -= cycle;
      cycle *= o.t_mult;
    }
  }
  return o.eta_min + (base_lr_ - o.eta_min) * (1 + std::cos(M_PI * double(t) / double(cycle))) / 2;
}

OneCycleLr::OneCycleLr(Optimizer& opt, OneCycleOptions o) : LrScheduler(opt), options(o) {
  if (o.total_steps < 2 || o.pct_start <= 0 || o.pct_start >= 1 || o.max_lr < 0 || o.div_factor <= 0 ||
      o.final_div_factor <= 0)
    throw Error(fmt::format("OneCycleLr: need total_steps >= 2, 0 < pct_start < 1 and positive factors "
                            "(total_steps = {}, pct_start = {})",
                            o.total_steps, o.pct_start));
}
double OneCycleLr::lr_at(int64_t epoch) const {
  const auto& o = options;
  double initial = o.max_lr / o.div_factor, final_lr = initial / o.final_div_factor;
  double total = double(o.total_steps), up = o.pct_start * total - 1;
  struct Phase {
    double end, from, to;
  };
  std::vector<Phase> phases;
  if (o.three_phase) phases = {{up, initial, o.max_lr}, {2 * o.pct_start * total - 2, o.max_lr, initial}, {total - 1, initial, final_lr}};
  else phases = {{up, initial, o.max_lr}, {total - 1, o.max_lr, final_lr}};
  double step = double(epoch), start = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    const Phase& p = phases[i];
    if (step <= p.end || i + 1 == phases.size()) {
      double pct = std::min(1.0, (step - start) / (p.end - start));
      return o.cosine ? p.to + (p.from - p.to) / 2 * (std::cos(M_PI * pct) + 1) : p.from + (p.to - p.from) * pct;
    }
    start = p.end;
  }
  return final_lr;
}

NoamLr::NoamLr(Optimizer& opt, NoamOptions o) : LrScheduler(opt), options(o) {
  if (o.d_model <= 0 || o.warmup <= 0)
    throw Error(fmt::format("NoamLr: d_model ({}) and warmup ({}) must be positive", o.d_model, o.warmup));
}
double NoamLr::lr_at(int64_t epoch) const {
  double t = double(std::max<int64_t>(epoch, 1));
  return base_lr_ / std::sqrt(double(options.d_model)) *
         std::min(1.0 / std::sqrt(t), t * std::pow(double(options.warmup), -1.5));
}

SequentialLr::SequentialLr(Optimizer& opt, std::vector<std::shared_ptr<LrScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LrScheduler(opt), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  if (schedulers_.empty() || milestones_.size() + 1 != schedulers_.size())
    throw Error(fmt::format("SequentialLr: {} schedulers need {} milestones, got {}", schedulers_.size(),
                            schedulers_.empty() ? 0 : schedulers_.size() - 1, milestones_.size()));
  for (const auto& s : schedulers_)
    if (!s) throw Error("SequentialLr: a scheduler is null");
  if (!std::is_sorted(milestones_.begin(), milestones_.end()))
    throw Error("SequentialLr: milestones must be increasing");
}
double SequentialLr::lr_at(int64_t epoch) const {
  size_t i = size_t(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin());
  return schedulers_[i]->lr_at(i == 0 ? epoch : epoch - milestones_[i - 1]);
}

}  // namespace ember::optim
