// Transposed convolutions (the adjoint of a convolution, a.k.a. "deconvolution"): the free
// functions conv_transpose1d / conv_transpose2d and the layers ConvTranspose1d / ConvTranspose2d.
// Inputs are [N, C, L] / [N, C, H, W]; weights use PyTorch's layout [in, out / groups, k...].
// The output size per spatial dim is (in - 1) * stride - 2 * padding + dilation * (k - 1)
// + output_padding + 1, as in PyTorch. Built on the library op conv2d_backward_data (the
// data-gradient of a convolution is a transposed convolution), so the gradients with respect to
// input, weight and bias come from that op's own autograd rule. Layer defaults match PyTorch:
// weight and bias ~ U(±1/sqrt(fan_in)) with fan_in = out / groups * kernel (PyTorch computes the
// fan from the weight's dim 1).
#pragma once

#include <optional>

#include "ember/nn/module.h"
#include "ember/ops_nn.h"

namespace ember::nn {

// The functional forms are tensor ops (ember/ops_nn.h); these names stay for existing code.
using ember::ConvTranspose1dOptions;
using ember::ConvTranspose2dOptions;
using ember::conv_transpose1d;
using ember::conv_transpose2d;

// ---- layers -------------------------------------------------------------------------------------
struct ConvTranspose1dLayerOptions {
  int64_t in = 0;
  int64_t out = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t output_padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  std::optional<uint64_t> seed{};  // weight uses seed, bias seed + 1
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static ConvTranspose1dLayerOptions from_json(const std::string& json);
};

class ConvTranspose1d : public Module {
 public:
  ConvTranspose1d() = default;
  explicit ConvTranspose1d(ConvTranspose1dLayerOptions opts);
  Param<3> weight;  // [in, out / groups, kernel]
  Param<1> bias;    // [out]
  ConvTranspose1dLayerOptions options;
  EMBER_MODULE(weight, bias)

  Array forward(const Array& x, Loc loc = Loc::current());
  Tensor<3> operator()(const Tensor<3>& x, Loc loc = Loc::current()) { return Tensor<3>(forward(x.array(), loc)); }
  std::string type_name() const override { return "ConvTranspose1d"; }
  std::string config() const override { return options.to_json(); }
};

struct ConvTranspose2dLayerOptions {
  int64_t in = 0;
  int64_t out = 0;
  IntPair kernel = 1;
  IntPair stride = 1;
  IntPair padding = 0;
  IntPair output_padding = 0;
  IntPair dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  std::optional<uint64_t> seed{};  // weight uses seed, bias seed + 1
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static ConvTranspose2dLayerOptions from_json(const std::string& json);
};

class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d() = default;
  explicit ConvTranspose2d(ConvTranspose2dLayerOptions opts);
  Param<4> weight;  // [in, out / groups, kh, kw]
  Param<1> bias;    // [out]
  ConvTranspose2dLayerOptions options;
  EMBER_MODULE(weight, bias)

  Array forward(const Array& x, Loc loc = Loc::current());
  Tensor<4> operator()(const Tensor<4>& x, Loc loc = Loc::current()) { return Tensor<4>(forward(x.array(), loc)); }
  std::string type_name() const override { return "ConvTranspose2d"; }
  std::string config() const override { return options.to_json(); }
};

}  // namespace ember::nn
