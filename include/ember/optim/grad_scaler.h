// optim::GradScaler: dynamic loss scaling for f16 training (PyTorch's torch.amp.GradScaler). f16
// gradients of small magnitude underflow to zero; scaling the loss by S before backward scales
// every gradient by S, unscale() divides the f32 parameter gradients by S again. A step whose
// gradients hold an inf or NaN (S too large) is skipped and S shrinks by backoff_factor; after
// growth_interval finite steps in a row S grows by growth_factor.
//
//   optim::GradScaler scaler;
//   Gradients grads = scaler.scale(loss).backward();
//   scaler.unscale(grads, model.parameters());  // optional: before clipping
//   bool stepped = scaler.step(opt, grads, model.parameters());
//
// bf16 has f32's exponent range and needs no scaler.
#pragma once

#include <cstdint>
#include <vector>

#include "ember/autograd.h"
#include "ember/nn/module.h"
#include "ember/optim/optimizer.h"

namespace ember::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;     // 2^16, as PyTorch
  double growth_factor = 2.0;      // > 1
  double backoff_factor = 0.5;     // in (0, 1)
  int64_t growth_interval = 2000;  // finite steps in a row before the scale grows (>= 1)
  bool enabled = true;             // disabled: scale() and unscale() are the identity, step() always steps
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions opts = {});  // throws ember::Error on bad options

  // loss * scale (lazy, differentiable).
  Array scale(const Array& loss) const;
  // Divides the gradients of `params` in `grads` by the scale (once per step: a second call
  // before step() throws) and returns whether every gradient in `grads` is finite (one host sync).
  bool unscale(Gradients& grads, const std::vector<nn::ParamRef>& params);
  // Unscales unless unscale() was called this step, then steps `opt` when every gradient is
  // finite, else skips the step (counted in skipped_steps()); then updates the scale. Returns
  // whether the optimizer stepped.
  bool step(Optimizer& opt, Gradients& grads, const std::vector<nn::ParamRef>& params);

  double scale_value() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }
  int64_t growth_tracker() const { return growth_tracker_; }  // finite steps since the last change
  const GradScalerOptions& options() const { return opts_; }

  // "scale", "growth_tracker", "skipped_steps" (f64 scalars), saved with optimizer checkpoints.
  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& state);  // throws naming a missing or malformed entry

 private:
  void update(bool found_nonfinite);

  GradScalerOptions opts_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_ = 0;
  bool unscaled_ = false;     // unscale() ran for the current step
  bool last_finite_ = true;   // its result
};

}  // namespace ember::optim
