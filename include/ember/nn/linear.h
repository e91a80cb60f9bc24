// nn::Linear: y = x W^T + b over the last dim of x (any rank >= 1). Weight [out, in], bias [out].
// Defaults as PyTorch: W ~ U(-1/sqrt(in), 1/sqrt(in)), b likewise.
#pragma once

#include <optional>

#include "ember/nn/module.h"

namespace ember::nn {

struct LinearOptions {
  int64_t in = 0;
  int64_t out = 0;
  bool bias = true;
  std::optional<uint64_t> seed{};  // weight uses seed, bias seed + 1; unset: global sequence
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static LinearOptions from_json(const std::string& json);
};

class Linear : public Module {
 public:
  Linear() = default;
  explicit Linear(LinearOptions opts);

  Param<2> weight;  // [out, in]
  Param<1> bias;    // [out]; absent when options.bias is false
  LinearOptions options;
  EMBER_MODULE(weight, bias)

  Array forward(const Array& x, Loc loc = Loc::current());
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  std::string type_name() const override { return "Linear"; }
  std::string config() const override { return options.to_json(); }
};

}  // namespace ember::nn

namespace ember::nn {

// nn::Flatten: merges dims start_dim..end_dim (default: all but the batch dim, as PyTorch).
struct FlattenOptions {
  int start_dim = 1;
  int end_dim = -1;
};
class Flatten : public Module {
 public:
  explicit Flatten(FlattenOptions opts = {}) : options(opts) {}
  FlattenOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("Flatten", loc);
    return flatten(x, options.start_dim, options.end_dim);
  }
  // Typed: the caller names the result rank, Tensor<2> y = flat.operator()<2>(x) or flat.to<2>(x).
  template <int Out, int In>
  Tensor<Out> to(const Tensor<In>& x, Loc loc = Loc::current()) {
    return Tensor<Out>(forward(x.array(), loc));
  }
  template <int In>
  Tensor<2> operator()(const Tensor<In>& x, Loc loc = Loc::current()) {  // the common case: [N, ...] -> [N, features]
    return Tensor<2>(forward(x.array(), loc));
  }
  std::string type_name() const override { return "Flatten"; }
  std::string config() const override;
};

}  // namespace ember::nn
