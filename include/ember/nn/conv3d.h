// 3-D convolution: the free function conv3d and the layer Conv3d (stride, padding incl. "same",
// dilation, groups, bias). Inputs are [N, C, D, H, W], weights [O, C / groups, KD, KH, KW]
// (PyTorch's layout). A composite of existing ops: the KD depth taps of every output depth are
// strided depth slices of the (depth-padded) input, folded into the channels and the batch of one
// conv2d, so gradients come from those ops' rules. Layer defaults match PyTorch: weight and bias
// ~ U(±1/sqrt(fan_in)) with fan_in = in / groups * kd * kh * kw.
#pragma once

#include <optional>

#include "ember/nn/module.h"

namespace ember::nn {

// A (depth, height, width) triple; one number means all three.
struct IntTriple {
  int64_t d = 0, h = 0, w = 0;
  IntTriple() = default;
  IntTriple(int64_t v) : d(v), h(v), w(v) {}  // NOLINT: implicit, so `.stride = 2` works
  IntTriple(int64_t d_, int64_t h_, int64_t w_) : d(d_), h(h_), w(w_) {}
};

// Zero padding of a 3-D convolution: per dim on both sides (one number or {d, h, w}), or same()
// (stride 1 only: the output has the input's size; an odd total puts the extra plane at the end,
// as PyTorch does).
struct Padding3d {
  IntTriple size = 0;
  bool is_same = false;
  Padding3d() = default;
  Padding3d(int64_t p) : size(p) {}  // NOLINT: implicit on purpose
  Padding3d(int64_t d, int64_t h, int64_t w) : size(d, h, w) {}
  static Padding3d same() {
    Padding3d p;
    p.is_same = true;
    return p;
  }
};

struct Conv3dOptions {
  IntTriple stride = 1;
  Padding3d padding = 0;
  IntTriple dilation = 1;
  int64_t groups = 1;
};

// x [N, C, D, H, W], weight [O, C / groups, KD, KH, KW], bias [O] (optional) -> [N, O, OD, OH, OW]
// with OD = (D + 2 * pad_d - dilation_d * (KD - 1) - 1) / stride_d + 1 (likewise OH, OW).
Array conv3d(const Array& x, const Array& weight, const Array& bias, Conv3dOptions opts = {}, Loc loc = Loc::current());
Array conv3d(const Array& x, const Array& weight, Conv3dOptions opts = {}, Loc loc = Loc::current());

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
