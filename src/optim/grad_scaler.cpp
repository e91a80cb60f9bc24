// optim::GradScaler (include/ember/optim/grad_scaler.h): loss scaling, the inf/NaN check and the
// scale's growth and backoff.
#include "ember/optim/grad_scaler.h"

#include <fmt/format.h>

#include <cmath>

namespace ember::optim {

GradScaler::GradScaler(GradScalerOptions opts) : opts_(opts), scale_(opts.init_scale) {
  if (!(opts.init_scale > 0) || !std::isfinite(opts.init_scale))
    throw Error(fmt::format("GradScaler: init_scale must be positive and finite, got {}", opts.init_scale));
  if (!(opts.growth_factor > 1) || !std::isfinite(opts.growth_factor))
    throw Error(fmt::format("GradScaler: growth_factor must be > 1, got {}", opts.growth_factor));
  if (!(opts.backoff_factor > 0 && opts.backoff_factor < 1))
    throw Error(fmt::format("GradScaler: backoff_factor must be in (0, 1), got {}", opts.backoff_factor));
  if (opts.growth_interval < 1)
    throw Error(fmt::format("GradScaler: growth_interval must be >= 1, got {}", opts.growth_interval));
}

Array GradScaler::scale(const Array& loss) const {
  if (!opts_.enabled) return loss;
  // In f32 at least: an f16 loss times 65536 would overflow at once.
  Array l = loss.dtype() == DType::F16 || loss.dtype() == DType::BF16 ? cast(loss, DType::F32) : loss;
  return mul(l, scale_);
}

bool GradScaler::unscale(Gradients& grads, const std::vector<nn::ParamRef>& params) {
  if (!opts_.enabled) return true;
  if (unscaled_) throw Error("GradScaler::unscale: already called for this step (call step() first)");
  NoGradGuard no_grad;
  const double inv = 1.0 / scale_;
  for (const nn::ParamRef& p : params) {
    Array g = grads.get(p.array());
    if (!g.defined()) continue;
    grads.remove(p.array());
    // The product in f32 (f16 gradients of a scaled loss may exceed f16's range only by the scale).
    Array gf = is_floating(g.dtype()) && g.dtype() != DType::F64 ? cast(g, DType::F32) : g;
    grads.accumulate(p.array(), cast(mul(gf, inv), g.dtype()));
  }
  // Every gradient (also of leaves not in params): one bool, one sync.
  Array bad;
  for (const Array& g : grads.arrays()) {
    if (!is_floating(g.dtype())) continue;
    Array b = any(logical_not(is_finite(g)));
    bad = bad.defined() ? logical_or(bad, b) : b;
  }
  last_finite_ = !bad.defined() || cast(bad, DType::I32).item<int32_t>() == 0;
  unscaled_ = true;
  return last_finite_;
}

bool GradScaler::step(Optimizer& opt, Gradients& grads, const std::vector<nn::ParamRef>& params) {
  if (!opts_.enabled) {
    opt.step(grads);
    return true;
  }
  if (!unscaled_) unscale(grads, params);
  bool finite = last_finite_;
  unscaled_ = false;
  if (finite) opt.step(grads);
  else ++skipped_;
  update(!finite);
  return finite;
}

void GradScaler::update(bool found_nonfinite) {
  if (found_nonfinite) {
    scale_ *= opts_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ >= opts_.growth_interval) {
    double grown = scale_ * opts_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;  // as PyTorch: never grows to inf
    growth_tracker_ = 0;
  }
}

nn::StateDict GradScaler::state_dict() const {
  auto scalar = [](double v) { return full(Shape{}, v, {DType::F64}); };
  return {{"scale", scalar(scale_)},
          {"growth_tracker", scalar(double(growth_tracker_))},
          {"skipped_steps", scalar(double(skipped_))}};
}

void GradScaler::load_state_dict(const nn::StateDict& state) {
  auto read = [&](const char* key) {
    auto it = state.find(key);
    if (it == state.end()) throw Error(fmt::format("GradScaler::load_state_dict: missing entry \"{}\"", key));
    if (it->second.numel() != 1)
      throw Error(fmt::format("GradScaler::load_state_dict: \"{}\" must hold one value, got shape {}", key,
                              it->second.shape().str()));
    return cast(it->second, DType::F64).item<double>();
  };
  double s = read("scale"), g = read("growth_tracker"), k = read("skipped_steps");
  if (!(s > 0) || !std::isfinite(s))
    throw Error(fmt::format("GradScaler::load_state_dict: scale must be positive and finite, got {}", s));
  if (g < 0 || k < 0)
    throw Error(fmt::format("GradScaler::load_state_dict: negative counters (growth_tracker {}, skipped_steps {})", g, k));
  scale_ = s;
  growth_tracker_ = int64_t(g);
  skipped_ = int64_t(k);
  unscaled_ = false;
}

}  // namespace ember::optim
