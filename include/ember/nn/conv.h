// Convolution and pooling layers over the library ops of ember/ops_library.h: Conv2d (stride,
// padding incl. "same", dilation, groups, bias), MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and
// GlobalAvgPool2d. Inputs are [N, C, H, W]. Conv2d defaults match PyTorch: weight and bias
// ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in / groups * kh * kw.
#pragma once

#include <optional>

#include "ember/nn/module.h"

namespace ember::nn {

// Conv2d's options: shapes, the op's options (as ember::Conv2dOptions) and initialization. Layers
// whose op has an options struct of its own name theirs <Layer>LayerOptions (Conv1dLayerOptions,
// Conv3dLayerOptions, ...), so the two never clash under using-directives.
struct Conv2dLayerOptions {
  int64_t in = 0;
  int64_t out = 0;
  IntPair kernel = 1;
  IntPair stride = 1;
  Padding2d padding = 0;  // a number, {h, w}, {top, bottom, left, right} or Padding2d::same()
  IntPair dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  std::optional<uint64_t> seed{};  // weight uses seed, bias seed + 1
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static Conv2dLayerOptions from_json(const std::string& json);
};

class Conv2d : public Module {
 public:
  Conv2d() = default;
  explicit Conv2d(Conv2dLayerOptions opts);
  Param<4> weight;  // [out, in / groups, kh, kw]
  Param<1> bias;    // [out]
  Conv2dLayerOptions options;
  EMBER_MODULE(weight, bias)

  Array forward(const Array& x, Loc loc = Loc::current());
  Tensor<4> operator()(const Tensor<4>& x, Loc loc = Loc::current()) { return Tensor<4>(forward(x.array(), loc)); }
  std::string type_name() const override { return "Conv2d"; }
  std::string config() const override { return options.to_json(); }
};

// Pooling modules take the op's options: nn::MaxPool2d pool{{.kernel = 2}}.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Pool2dOptions opts = {}) : options(opts) {}
  Pool2dOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("MaxPool2d", loc);
    return max_pool2d(x, options);
  }
  Tensor<4> operator()(const Tensor<4>& x, Loc loc = Loc::current()) { return Tensor<4>(forward(x.array(), loc)); }
  std::string type_name() const override { return "MaxPool2d"; }
  std::string config() const override;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Pool2dOptions opts = {}) : options(opts) {}
  Pool2dOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("AvgPool2d", loc);
    return avg_pool2d(x, options);
  }
  Tensor<4> operator()(const Tensor<4>& x, Loc loc = Loc::current()) { return Tensor<4>(forward(x.array(), loc)); }
  std::string type_name() const override { return "AvgPool2d"; }
  std::string config() const override;
};

struct AdaptiveAvgPool2dOptions {
  IntPair output = 1;
};
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(AdaptiveAvgPool2dOptions opts = {}) : options(opts) {}
  AdaptiveAvgPool2dOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("AdaptiveAvgPool2d", loc);
    return adaptive_avg_pool2d(x, options.output);
  }
  Tensor<4> operator()(const Tensor<4>& x, Loc loc = Loc::current()) { return Tensor<4>(forward(x.array(), loc)); }
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string config() const override;
};

// Mean over H and W: [N, C, H, W] -> [N, C].
Array global_avg_pool2d(const Array& x, Loc loc = Loc::current());
class GlobalAvgPool2d : public Module {
 public:
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("GlobalAvgPool2d", loc);
    return global_avg_pool2d(x);
  }
  Tensor<2> operator()(const Tensor<4>& x, Loc loc = Loc::current()) { return Tensor<2>(forward(x.array(), loc)); }
  std::string type_name() const override { return "GlobalAvgPool2d"; }
};

}  // namespace ember::nn
