// More learning-rate schedulers (closed forms of PyTorch's): multi-step, exponential, linear,
// cosine annealing with warm restarts, one-cycle, Noam (the Transformer paper's warmup then
// inverse square root), and SequentialLr, which runs one schedule after another:
//   auto warm = std::make_shared<optim::LinearLr>(opt, optim::LinearLrOptions{.start_factor = 0.1, .total_iters = 3});
//   auto decay = std::make_shared<optim::ExponentialLr>(opt, optim::ExponentialLrOptions{.gamma = 0.9});
//   optim::SequentialLr sched(opt, {warm, decay}, {3});
// As with every LrScheduler, the rate is set by step(): the first optimizer step runs at the
// optimizer's own rate. PyTorch's schedulers set lr_at(0) when they are made; to start on the
// schedule the same way (one-cycle, linear warmup, Noam), call opt.set_lr(sched.lr_at(0)) once
// after making the scheduler (not before: schedulers read their base rate from the optimizer).
#pragma once

#include <memory>
#include <vector>

#include "ember/optim/lr_scheduler.h"

namespace ember::optim {

// base * gamma^(number of milestones <= epoch) (MultiStepLR).
struct MultiStepLrOptions {
  std::vector<int64_t> milestones{};
  double gamma = 0.1;
};
class MultiStepLr : public LrScheduler {
 public:
  MultiStepLr(Optimizer& opt, MultiStepLrOptions o);
  double lr_at(int64_t epoch) const override;
  MultiStepLrOptions options;
};

// base * gamma^epoch (ExponentialLR).
struct ExponentialLrOptions {
  double gamma = 0.9;
};
class ExponentialLr : public LrScheduler {
 public:
  ExponentialLr(Optimizer& opt, ExponentialLrOptions o);
  double lr_at(int64_t epoch) const override;
  ExponentialLrOptions options;
};

// base * (start + (end - start) min(epoch, total_iters) / total_iters) (LinearLR).
struct LinearLrOptions {
  double start_factor = 1.0 / 3;
  double end_factor = 1.0;
  int64_t total_iters = 5;
};
class LinearLr : public LrScheduler {
 public:
  LinearLr(Optimizer& opt, LinearLrOptions o);
  double lr_at(int64_t epoch) const override;
  LinearLrOptions options;
};

// Cosine annealing from base to eta_min over cycles of t_0, t_0 t_mult, t_0 t_mult^2, ... epochs,
// restarting at base (CosineAnnealingWarmRestarts, SGDR).
struct CosineWarmRestartsOptions {
  int64_t t_0 = 1;
  int64_t t_mult = 1;
  double eta_min = 0;
};
class CosineWarmRestartsLr : public LrScheduler {
 public:
  CosineWarmRestartsLr(Optimizer& opt, CosineWarmRestartsOptions o);
  double lr_at(int64_t epoch) const override;
  CosineWarmRestartsOptions options;
};

// OneCycleLR (Smith's 1cycle): from max_lr / div_factor up to max_lr over the first pct_start of
// total_steps, then down to max_lr / div_factor / final_div_factor (three_phase: back to the
// initial rate first, then down). Cosine or linear annealing. The optimizer's own rate is not
// used. Past the last step the rate stays at the final one (PyTorch raises an error there).
struct OneCycleOptions {
  double max_lr = 0.1;
  int64_t total_steps = 1;
  double pct_start = 0.3;
  bool cosine = true;  // false: linear annealing
  double div_factor = 25;
  double final_div_factor = 1e4;
  bool three_phase = false;
};
class OneCycleLr : public LrScheduler {
 public:
  OneCycleLr(Optimizer& opt, OneCycleOptions o);
  double lr_at(int64_t epoch) const override;
  OneCycleOptions options;
};

// base * d_model^-0.5 * min(t^-0.5, t warmup^-1.5), t = max(epoch, 1) ("Attention Is All You
// Need", section 5.3; base 1 gives the paper's rate, base is the annotated Transformer's factor).
struct NoamOptions {
  int64_t d_model = 512;
  int64_t warmup = 4000;
};
class NoamLr : public LrScheduler {
 public:
  NoamLr(Optimizer& opt, NoamOptions o);
  double lr_at(int64_t epoch) const override;
  NoamOptions options;
};

// Composition: schedulers[i] runs from milestones[i - 1] (0 for the first), restarted there:
// epoch e past milestone m uses schedulers[i].lr_at(e - m) (SequentialLR). Each scheduler keeps
// the base rate the optimizer had when it was made; only this one should be stepped.
class SequentialLr : public LrScheduler {
 public:
  SequentialLr(Optimizer& opt, std::vector<std::shared_ptr<LrScheduler>> schedulers, std::vector<int64_t> milestones);
  double lr_at(int64_t epoch) const override;

 private:
  std::vector<std::shared_ptr<LrScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace ember::optim
