// More activations, as functions (Array and typed tensor forms) and modules: PReLU (a learnable
// slope per channel or one shared), SELU, Mish, HardSigmoid, HardSwish, Softsign and SwiGLU.
// Mish, HardSigmoid and HardSwish are the ops of ember/ops.h (mish, hard_sigmoid, hard_swish).
#pragma once

#include "ember/nn/activation.h"

namespace ember::nn {

// scale * elu(x, alpha) with PyTorch's constants.
inline constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
inline constexpr double kSeluScale = 1.0507009873554804934193349852946;
Array selu(const Array& x, Loc loc = Loc::current());
// x / (1 + |x|)
Array softsign(const Array& x, Loc loc = Loc::current());
// The size along `dim` split in halves (a, b): silu(a) * b (the gated unit of Shazeer's
// "GLU Variants Improve Transformer", with the projections left to the caller). [.., 2h] -> [.., h].
Array swiglu(const Array& x, int dim = -1, Loc loc = Loc::current());
// x > 0 ? x : weight * x; weight has one element or one per channel (dim 1 of x; dim 0 of a
// rank-1 x).
Array prelu(const Array& x, const Array& weight, Loc loc = Loc::current());

// ---- typed tensor forms ----------------------------------------------------------------------
template <int D>
Tensor<D> selu(const Tensor<D>& x) {
  return Tensor<D>(selu(x.array()));
}
using ember::hard_sigmoid;  // ops of the table, with their Tensor forms (see activation.h)
using ember::hard_swish;
using ember::mish;
template <int D>
Tensor<D> softsign(const Tensor<D>& x) {
  return Tensor<D>(softsign(x.array()));
}
template <int D>
Tensor<D> swiglu(const Tensor<D>& x, int dim = -1) {
  return Tensor<D>(swiglu(x.array(), dim));
}
template <int D>
Tensor<D> prelu(const Tensor<D>& x, const Tensor<1>& weight) {
  return Tensor<D>(prelu(x.array(), weight.array()));
}

// ---- modules -------------------------------------------------------------------------------
class SELU : public Activation<SELU> {
 public:
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("SELU", loc);
    return selu(x);
  }
  std::string type_name() const override { return "SELU"; }
};
class Mish : public Activation<Mish> {
 public:
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("Mish", loc);
    return ember::mish(x);
  }
  std::string type_name() const override { return "Mish"; }
};
class HardSigmoid : public Activation<HardSigmoid> {
 public:
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("HardSigmoid", loc);
    return ember::hard_sigmoid(x);
  }
  std::string type_name() const override { return "HardSigmoid"; }
};
class HardSwish : public Activation<HardSwish> {
 public:
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("HardSwish", loc);
    return ember::hard_swish(x);
  }
  std::string type_name() const override { return "HardSwish"; }
};
class Softsign : public Activation<Softsign> {
 public:
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("Softsign", loc);
    return softsign(x);
  }
  std::string type_name() const override { return "Softsign"; }
};

struct SwiGLUOptions {
  int dim = -1;
};
class SwiGLU : public Activation<SwiGLU> {
 public:
  explicit SwiGLU(SwiGLUOptions opts = {}) : options(opts) {}
  SwiGLUOptions options;
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("SwiGLU", loc);
    return swiglu(x, options.dim);
  }
  std::string type_name() const override { return "SwiGLU"; }
  std::string config() const override;
};

struct PReLUOptions {
  int64_t num_parameters = 1;  // 1 (shared) or the number of channels
  double init = 0.25;
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static PReLUOptions from_json(const std::string& json);
};
class PReLU : public Module {
 public:
  explicit PReLU(PReLUOptions opts = {});
  Param<1> weight;  // [num_parameters], init
  PReLUOptions options;
  EMBER_MODULE(weight)
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("PReLU", loc);
    check_input_dtype("PReLU", x, weight);
    return prelu(x, weight.array());
  }
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  std::string type_name() const override { return "PReLU"; }
  std::string config() const override { return options.to_json(); }
};

}  // namespace ember::nn
