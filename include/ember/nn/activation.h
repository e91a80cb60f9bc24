// Activations as modules, and as functions on typed tensors (the Array forms are ember ops:
// relu, gelu, gelu_tanh, silu, leaky_relu, elu, softplus, sigmoid, tanh, softmax, log_softmax in
// ember/ops.h). Softmax/LogSoftmax take a dim.
#pragma once

#include "ember/nn/module.h"

namespace ember::nn {

// ---- typed tensor forms ----------------------------------------------------------------------
// The elementwise activations are ops of the table (ember/elementwise_ops.def), which gives them
// their Tensor forms; nn:: names them too (one function, so calls are never ambiguous).
using ember::elu;
using ember::gelu_tanh;
using ember::leaky_relu;
using ember::silu;
using ember::softplus;
template <int D>
Tensor<D> softmax(const Tensor<D>& x, int dim) {
  return Tensor<D>(ember::softmax(x.array(), dim));
}
template <int D>
Tensor<D> log_softmax(const Tensor<D>& x, int dim) {
  return Tensor<D>(ember::log_softmax(x.array(), dim));
}

// ---- modules -------------------------------------------------------------------------------
// A parameterless elementwise module: forward(Array) and a typed operator().
template <class Derived>
class Activation : public Module {
 public:
  EMBER_MODULE()
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(static_cast<Derived*>(this)->forward(x.array(), loc));
  }
  // The Array form (EMBER_MODULE's call operator would look for forward in this base).
  Array operator()(const Array& x, Loc loc = Loc::current()) { return static_cast<Derived*>(this)->forward(x, loc); }
};

class ReLU : public Activation<ReLU> {
 public:
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("ReLU", loc);
    return ember::relu(x);
  }
  std::string type_name() const override { return "ReLU"; }
};
class Sigmoid : public Activation<Sigmoid> {
 public:
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("Sigmoid", loc);
    return ember::sigmoid(x);
  }
  std::string type_name() const override { return "Sigmoid"; }
};
class Tanh : public Activation<Tanh> {
 public:
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("Tanh", loc);
    return ember::tanh(x);
  }
  std::string type_name() const override { return "Tanh"; }
};
class SiLU : public Activation<SiLU> {
 public:
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("SiLU", loc);
    return ember::silu(x);
  }
  std::string type_name() const override { return "SiLU"; }
};

struct LeakyReLUOptions {
  double negative_slope = 0.01;
};
class LeakyReLU : public Activation<LeakyReLU> {
 public:
  explicit LeakyReLU(LeakyReLUOptions opts = {}) : options(opts) {}
  LeakyReLUOptions options;
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("LeakyReLU", loc);
    return ember::leaky_relu(x, options.negative_slope);
  }
  std::string type_name() const override { return "LeakyReLU"; }
  std::string config() const override;
};

struct ELUOptions {
  double alpha = 1.0;
};
class ELU : public Activation<ELU> {
 public:
  explicit ELU(ELUOptions opts = {}) : options(opts) {}
  ELUOptions options;
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("ELU", loc);
    return ember::elu(x, options.alpha);
  }
  std::string type_name() const override { return "ELU"; }
  std::string config() const override;
};

struct GELUOptions {
  bool tanh_approximation = false;  // PyTorch's approximate="tanh"
};
class GELU : public Activation<GELU> {
 public:
  explicit GELU(GELUOptions opts = {}) : options(opts) {}
  GELUOptions options;
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("GELU", loc);
    return options.tanh_approximation ? ember::gelu_tanh(x) : ember::gelu(x);
  }
  std::string type_name() const override { return "GELU"; }
  std::string config() const override;
};

struct SoftplusOptions {
  double beta = 1.0;
  double threshold = 20.0;
};
class Softplus : public Activation<Softplus> {
 public:
  explicit Softplus(SoftplusOptions opts = {}) : options(opts) {}
  SoftplusOptions options;
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("Softplus", loc);
    return ember::softplus(x, options.beta, options.threshold);
  }
  std::string type_name() const override { return "Softplus"; }
  std::string config() const override;
};

struct SoftmaxOptions {
  int dim = -1;
};
class Softmax : public Activation<Softmax> {
 public:
  explicit Softmax(SoftmaxOptions opts = {}) : options(opts) {}
  SoftmaxOptions options;
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("Softmax", loc);
    return ember::softmax(x, options.dim);
  }
  std::string type_name() const override { return "Softmax"; }
  std::string config() const override;
};
class LogSoftmax : public Activation<LogSoftmax> {
 public:
  explicit LogSoftmax(SoftmaxOptions opts = {}) : options(opts) {}
  SoftmaxOptions options;
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("LogSoftmax", loc);
    return ember::log_softmax(x, options.dim);
  }
  std::string type_name() const override { return "LogSoftmax"; }
  std::string config() const override;
};

}  // namespace ember::nn
