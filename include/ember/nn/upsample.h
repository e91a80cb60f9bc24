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

namespace ember::nn {

enum class InterpolateMode { Nearest, NearestExact, Linear, Bilinear };

struct InterpolateOptions {
  std::vector<int64_t> size{};         // output size per spatial dim (one number: every dim), or empty
  std::vector<double> scale_factor{};  // output = floor(input * factor) per spatial dim (one: every dim), or empty
  InterpolateMode mode = InterpolateMode::Nearest;
  bool align_corners = false;  // linear / bilinear only: the corner samples of input and output line up
  bool recompute_scale_factor = false;  // with scale_factor: interpolate with in / out instead of 1 / factor

  std::string to_json() const;
  static InterpolateOptions from_json(const std::string& json);
};

// Exactly one of size and scale_factor must be given.
Array interpolate(const Array& x, const InterpolateOptions& opts, Loc loc = Loc::current());

// The name of a mode as PyTorch spells it ("nearest", "nearest-exact", "linear", "bilinear").
const char* interpolate_mode_name(InterpolateMode mode);

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
