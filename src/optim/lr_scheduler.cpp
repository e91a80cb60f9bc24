// Learning-rate schedulers (include/ember/optim/lr_scheduler.h).
#include "ember/optim/lr_scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ember::optim {

StepLr::StepLr(Optimizer& opt, StepLrOptions o) : LrScheduler(opt), options(o) {
  if (o.step_size <= 0) throw Error(fmt::format("StepLr: step_size must be positive, got {}", o.step_size));
}
double StepLr::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(options.gamma, double(epoch / options.step_size));
}

CosineAnnealingLr::CosineAnnealingLr(Optimizer& opt, CosineAnnealingOptions o) : LrScheduler(opt), options(o) {
  if (o.t_max <= 0) throw Error(fmt::format("CosineAnnealingLr: t_max must be positive, got {}", o.t_max));
}
double CosineAnnealingLr::lr_at(int64_t epoch) const {
  double t = double(std::min(epoch, options.t_max));
  return options.eta_min + (base_lr_ - options.eta_min) * (1 + std::cos(M_PI * t / double(options.t_max))) / 2;
}

WarmupDecayLr::WarmupDecayLr(Optimizer& opt, WarmupDecayOptions o) : LrScheduler(opt), options(o) {
  if (o.warmup < 0 || o.total <= o.warmup)
    throw Error(fmt::format("WarmupDecayLr: need 0 <= warmup < total, got warmup = {}, total = {}", o.warmup, o.total));
}
double WarmupDecayLr::lr_at(int64_t epoch) const {
  const auto& o = options;
  if (epoch < o.warmup)
    return base_lr_ * (o.start_factor + (1 - o.start_factor) * double(epoch) / double(o.warmup));
  double progress = std::min(1.0, double(epoch - o.warmup) / double(o.total - o.warmup));
  double shape = o.cosine ? (1 + std::cos(M_PI * progress)) / 2 : 1 - progress;
  return base_lr_ * (o.final_factor + (1 - o.final_factor) * shape);
}

}  // namespace ember::optim
