// Ops as function values. Every op of the elementwise table (ember/elementwise_ops.def) has a
// function object in ember::fn with the same name, callable on Arrays and Tensors exactly as the
// function is, and usable wherever C++ wants a value:
//
//   std::function<Array(const Array&)> act = fn::gelu;
//   std::vector<std::function<Array(const Array&)>> acts{fn::relu, fn::tanh, fn::sigmoid};
//   std::function<Array(const Array&, const Array&)> combine = fn::maximum;
//   Tensor<2> y = fn::exp(x);                       // as exp(x); fn::exp(int_tensor) does not compile
//
// Why a namespace of objects rather than making ember::exp itself an object: the functions are
// overload sets (Array, Tensor, Scalar forms, a defaulted source location), which a
// std::function cannot be initialized from; and an *object* named ember::exp would make
// `using namespace ember; exp(x)` ambiguous with <cmath>'s ::exp. The objects call the functions,
// so they stay one declaration in the table. A direct call keeps the caller's source location
// for errors; a call through std::function names the std::function's line.
#pragma once

#include <utility>

#include "ember/ops.h"
#include "ember/tensor.h"

namespace ember::fn {

#define EMBER_FN_UNARY_Plain(name)                                                              \
  inline constexpr struct name##_op {                                                           \
    template <class X>                                                                          \
    auto operator()(const X& x, Loc loc = Loc::current()) const -> decltype(ember::name(x, loc)) { \
      return ember::name(x, loc);                                                               \
    }                                                                                           \
  } name{};
#define EMBER_FN_UNARY_Rounding(name) EMBER_FN_UNARY_Plain(name)
#define EMBER_FN_UNARY_Params(name)  // written below: their parameters differ
#define EMBER_FN_UNARY_Cast(name)    // cast takes a dtype: not a function of its tensor alone
#define EMBER_UNARY_OP(Name, name, rule, form, ...) EMBER_FN_UNARY_##form(name)
#define EMBER_BINARY_OP(Name, name, ...)                                                        \
  inline constexpr struct name##_op {                                                           \
    template <class A, class B>                                                                 \
    auto operator()(const A& a, const B& b, Loc loc = Loc::current()) const                     \
        -> decltype(ember::name(a, b, loc)) {                                                   \
      return ember::name(a, b, loc);                                                            \
    }                                                                                           \
  } name{};
#include "ember/elementwise_ops.def"
#undef EMBER_FN_UNARY_Plain
#undef EMBER_FN_UNARY_Rounding
#undef EMBER_FN_UNARY_Params
#undef EMBER_FN_UNARY_Cast

// The unary ops with parameters (form Params in the table), with the functions' defaults.
inline constexpr struct softplus_op {
  template <class X>
  auto operator()(const X& x, double beta = 1, double threshold = 20, Loc loc = Loc::current()) const
      -> decltype(ember::softplus(x, beta, threshold, loc)) {
    return ember::softplus(x, beta, threshold, loc);
  }
} softplus{};
inline constexpr struct leaky_relu_op {
  template <class X>
  auto operator()(const X& x, double slope = 0.01, Loc loc = Loc::current()) const
      -> decltype(ember::leaky_relu(x, slope, loc)) {
    return ember::leaky_relu(x, slope, loc);
  }
} leaky_relu{};
inline constexpr struct elu_op {
  template <class X>
  auto operator()(const X& x, double alpha = 1, Loc loc = Loc::current()) const -> decltype(ember::elu(x, alpha, loc)) {
    return ember::elu(x, alpha, loc);
  }
} elu{};

}  // namespace ember::fn
