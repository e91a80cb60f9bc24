// 1-D convolution and pooling layers over the library ops of ember/ops_library.h: Conv1d (stride,
// padding incl. "same", dilation, groups, bias), MaxPool1d, AvgPool1d and AdaptiveAvgPool1d.
// Inputs are [N, C, L]. Conv1d defaults match PyTorch: weight and bias ~ U(±1/sqrt(fan_in)) with
// fan_in = in / groups * kernel.
#pragma once

#include <optional>

#include "ember/nn/module.h"

namespace ember::nn {

struct Conv1dLayerOptions {
  int64_t in = 0;
  int64_t out = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  Padding1d padding = 0;  // a number, {left, right} or Padding1d::same()
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  std::optional<uint64_t> seed{};  // weight uses seed, bias seed + 1
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static Conv1dLayerOptions from_json(const std::string& json);
};

class Conv1d : public Module {
 public:
  Conv1d() = default;
  explicit Conv1d(Conv1dLayerOptions opts);
  Param<3> weight;  // [out, in / groups, kernel]
  Param<1> bias;    // [out]
  Conv1dLayerOptions options;
  EMBER_MODULE(weight, bias)

  Array forward(const Array& x, Loc loc = Loc::current());
  Tensor<3> operator()(const Tensor<3>& x, Loc loc = Loc::current()) { return Tensor<3>(forward(x.array(), loc)); }
  std::string type_name() const override { return "Conv1d"; }
  std::string config() const override { return options.to_json(); }
};

// Pooling modules take the op's options: nn::MaxPool1d pool{{.kernel = 2}}. [N, C, L] or [C, L].
class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(Pool1dOptions opts = {}) : options(opts) {}
  Pool1dOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("MaxPool1d", loc);
    return max_pool1d(x, options);
  }
  Tensor<3> operator()(const Tensor<3>& x, Loc loc = Loc::current()) { return Tensor<3>(forward(x.array(), loc)); }
  std::string type_name() const override { return "MaxPool1d"; }
  std::string config() const override;
};

class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(Pool1dOptions opts = {}) : options(opts) {}
  Pool1dOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("AvgPool1d", loc);
    return avg_pool1d(x, options);
  }
  Tensor<3> operator()(const Tensor<3>& x, Loc loc = Loc::current()) { return Tensor<3>(forward(x.array(), loc)); }
  std::string type_name() const override { return "AvgPool1d"; }
  std::string config() const override;
};

// Averages over windows [floor(i L / OL), ceil((i + 1) L / OL)) of the last dim (PyTorch's
// definition); [N, C, L] or [C, L].
Array adaptive_avg_pool1d(const Array& x, int64_t output, Loc loc = Loc::current());

struct AdaptiveAvgPool1dOptions {
  int64_t output = 1;
};
class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(AdaptiveAvgPool1dOptions opts = {}) : options(opts) {}
  AdaptiveAvgPool1dOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("AdaptiveAvgPool1d", loc);
    return adaptive_avg_pool1d(x, options.output);
  }
  Tensor<3> operator()(const Tensor<3>& x, Loc loc = Loc::current()) { return Tensor<3>(forward(x.array(), loc)); }
  std::string type_name() const override { return "AdaptiveAvgPool1d"; }
  std::string config() const override;
};

}  // namespace ember::nn
