// Resampling of the spatial dims of [N, C, L] and [N, C, H, W] inputs: interpolate() (PyTorch's
// torch.nn.functional.interpolate for these ranks) and the layer Upsample. Modes: nearest
// (source index floor(dst * scale), PyTorch's rule, computed in single precision as PyTorch
// does), nearest_exact (floor((dst + 0.5) * scale)), linear (3-D inputs) and bilinear (4-D
// inputs), the last two with or without align_corners. scale is in / out, or 1 / scale_factor
// when a scale factor is given (unless recompute_scale_factor). Nearest modes are index_selects
// and the linear modes matmuls with host-built interpolation matrices, so both differentiate.
#pragma once

#include <vector>

#include "ember/nn/module.h"
#include "ember/ops_nn.h"

namespace ember::nn {

// The functional forms are tensor ops (ember/ops_nn.h); these names stay for existing code.
using ember::InterpolateMode;
using ember::InterpolateOptions;
using ember::interpolate;
using ember::interpolate_mode_name;

class Upsample : public Module {
 public:
  // Checks the options now (PyTorch checks them at the first forward).
  explicit Upsample(InterpolateOptions opts);
  InterpolateOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("Upsample", loc);
    return interpolate(x, options);
  }
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  std::string type_name() const override { return "Upsample"; }
  std::string config() const override { return options.to_json(); }
};

}  // namespace ember::nn
