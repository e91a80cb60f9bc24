// 3-D convolution: the free function conv3d and the layer Conv3d (stride, padding incl. "same",
// dilation, groups, bias). Inputs are [N, C, D, H, W], weights [O, C / groups, KD, KH, KW]
// (PyTorch's layout). A composite of existing ops: the KD depth taps of every output depth are
// strided depth slices of the (depth-padded) input, folded into the channels and the batch of one
// conv2d, so gradients come from those ops' rules. Layer defaults match PyTorch: weight and bias
// ~ U(±1/sqrt(fan_in)) with fan_in = in / groups * kd * kh * kw.
#pragma once

#include <optional>

#include "ember/nn/module.h"
#include "ember/ops_nn.h"

namespace ember::nn {

// The functional forms are tensor ops (ember/ops_nn.h); these names stay for existing code.
using ember::IntTriple;
using ember::Padding3d;
using ember::Conv3dOptions;
using ember::conv3d;

struct Conv3dLayerOptions {
  int64_t in = 0;
  int64_t out = 0;
  IntTriple kernel = 1;
  IntTriple stride = 1;
  Padding3d padding = 0;
  IntTriple dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  std::optional<uint64_t> seed{};  // weight uses seed, bias seed + 1
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static Conv3dLayerOptions from_json(const std::string& json);
};

class Conv3d : public Module {
 public:
  Conv3d() = default;
  explicit Conv3d(Conv3dLayerOptions opts);
  Param<5> weight;  // [out, in / groups, kd, kh, kw]
  Param<1> bias;    // [out]
  Conv3dLayerOptions options;
  EMBER_MODULE(weight, bias)

  Array forward(const Array& x, Loc loc = Loc::current());
  Tensor<5> operator()(const Tensor<5>& x, Loc loc = Loc::current()) { return Tensor<5>(forward(x.array(), loc)); }
  std::string type_name() const override { return "Conv3d"; }
  std::string config() const override { return options.to_json(); }
};

}  // namespace ember::nn
