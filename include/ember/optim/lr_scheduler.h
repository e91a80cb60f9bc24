// Learning-rate schedulers: each computes the rate for an epoch (or step) count from the
// optimizer's rate when the scheduler was made, and step() sets it on the optimizer:
//   optim::CosineAnnealingLr sched(opt, {.t_max = 100});
//   for (...) { opt.step(grads); sched.step(); }
// The optimizer must outlive its scheduler.
#pragma once

#include <cstdint>

#include "ember/optim/optimizer.h"

namespace ember::optim {

class LrScheduler {
 public:
  explicit LrScheduler(Optimizer& opt) : opt_(&opt), base_lr_(opt.lr()) {}
  virtual ~LrScheduler() = default;
  // The rate after `epoch` calls of step().
  virtual double lr_at(int64_t epoch) const = 0;
  void step() { opt_->set_lr(lr_at(++epoch_)); }
  int64_t epoch() const { return epoch_; }
  double base_lr() const { return base_lr_; }

 protected:
  Optimizer* opt_;
  double base_lr_;
  int64_t epoch_ = 0;
};

// The base rate, always.
class ConstantLr : public LrScheduler {
 public:
  explicit ConstantLr(Optimizer& opt) : LrScheduler(opt) {}
  double lr_at(int64_t) const override { return base_lr_; }
};

// base * gamma^floor(epoch / step_size) (torch.optim.lr_scheduler.StepLR).
struct StepLrOptions {
  int64_t step_size = 1;
  double gamma = 0.1;
};
class StepLr : public LrScheduler {
 public:
  StepLr(Optimizer& opt, StepLrOptions o);
  double lr_at(int64_t epoch) const override;
  StepLrOptions options;
};

// eta_min + (base - eta_min) (1 + cos(pi epoch / t_max)) / 2 (CosineAnnealingLR, closed form;
// stays at eta_min after t_max).
struct CosineAnnealingOptions {
  int64_t t_max = 1;
  double eta_min = 0;
};
class CosineAnnealingLr : public LrScheduler {
 public:
  CosineAnnealingLr(Optimizer& opt, CosineAnnealingOptions o);
  double lr_at(int64_t epoch) const override;
  CosineAnnealingOptions options;
};

// Linear warmup from base * start_factor to base over `warmup` steps, then linear or cosine
// decay to base * final_factor at `total` steps (constant after).
struct WarmupDecayOptions {
  int64_t warmup = 0;
  int64_t total = 1;
  double start_factor = 0;
  double final_factor = 0;
  bool cosine = true;  // false: linear decay
};
class WarmupDecayLr : public LrScheduler {
 public:
  WarmupDecayLr(Optimizer& opt, WarmupDecayOptions o);
  double lr_at(int64_t epoch) const override;
  WarmupDecayOptions options;
};

}  // namespace ember::optim
