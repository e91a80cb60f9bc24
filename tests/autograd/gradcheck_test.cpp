// Finite-difference gradient checks: every differentiable op of the op table against central
// differences in f64 on the reference backend, with broadcasting and non-contiguous inputs. A
// test enumerates the op table and fails if a differentiable op has no check here.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "autograd/grad_node.h"
#include "ember/ember.h"
#include "ops/op_coverage.h"

namespace ember {
namespace {

const Device kRef = Device::reference();

// Deterministic f64 inputs in [lo, hi) (a seeded uniform draw).
Array input(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  return uniform(shape, lo, hi, {.seed = seed, .dtype = DType::F64, .device = kRef});
}

// Values away from 0 (|v| in [0.3, 1.3)) with random signs, for ops with a kink at 0.
Array away_from_zero(const Shape& shape, uint64_t seed) {
  Array mag = input(shape, seed, 0.3, 1.3);
  Array sgn = sub(mul(cast(gt(input(shape, seed + 1000), 0.0), DType::F64), 2.0), 1.0);
  return mul(mag, sgn);
}

struct Case {
  Op op;
  std::string name;
  // Made when the test runs (not at registration: arrays must not outlive the backends).
  std::function<std::vector<Array>()> inputs;           // f64 leaves
  std::function<Array(const std::vector<Array>&)> f;     // the function under test
  double tol = 1e-6;
  double eps = 1e-6;                                     // finite-difference step
};

// Central differences of sum(f(inputs) * w) for every element of every input, compared with the
// gradients from backward().
::testing::AssertionResult gradcheck(const Case& c) {
  std::vector<Array> leaves;
  for (const Array& in : c.inputs()) leaves.push_back(contiguous(in).eval().detach().require_grad());
  Array out = c.f(leaves);
  Array w = input(out.shape(), 999, 0.5, 1.5);
  Array loss = sum(mul(out, w));
  Gradients grads = loss.backward();
  const double eps = c.eps;
  for (size_t k = 0; k < leaves.size(); ++k) {
    std::vector<double> base = leaves[k].to_vector<double>();
    Array g = leaves[k].grad(grads);
    std::vector<double> analytic = g.defined() ? g.to_vector<double>() : std::vector<double>(base.size(), 0.0);
    if (analytic.size() != base.size())
      return ::testing::AssertionFailure() << c.name << ": gradient of input " << k << " has " << analytic.size()
                                           << " elements, the input " << base.size();
    for (size_t i = 0; i < base.size(); ++i) {
      auto eval_at = [&](double v) {
        std::vector<double> data = base;
        data[i] = v;
        std::vector<Array> args = leaves;
        args[k] = from_vector(data, leaves[k].shape(), kRef);
        NoGradGuard ng;
        return sum(mul(c.f(args), w)).item<double>();
      };
      double numeric = (eval_at(base[i] + eps) - eval_at(base[i] - eps)) / (2 * eps);
      double err = std::fabs(numeric - analytic[i]);
      if (err > c.tol * (1 + std::fabs(numeric)))
        return ::testing::AssertionFailure() << c.name << ": d/d input" << k << "[" << i << "] analytic "
                                             << analytic[i] << " vs numeric " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

// The library-backed ops (ops_library.def) and the composites built on them.
std::vector<Case> library_cases() {
  using V = std::vector<Array>;
  const Conv2dOptions o{.stride = {2, 1}, .padding = {1, 0, 1, 1}, .dilation = {1, 2}, .groups = 2};
  const Conv2dOptions same{.padding = Padding2d::same()};
  const Pool2dOptions mp{.kernel = 3, .stride = 2, .padding = 1};
  const Pool2dOptions ap{.kernel = {2, 3}, .stride = {1, 2}, .padding = 1, .count_include_pad = false};
  return {
      Case{Op::Conv2d, "conv2d_groups_stride_dilation_bias", [] { return V{input({2, 4, 5, 4}, 70), input({4, 2, 3, 3}, 71), input({4}, 72)}; },
           [o](const V& a) { return conv2d(a[0], a[1], a[2], o); }},
      Case{Op::Conv2d, "conv2d_same_no_bias", [] { return V{input({2, 2, 4, 4}, 73), input({3, 2, 2, 3}, 74)}; },
           [same](const V& a) { return conv2d(a[0], a[1], same); }},
      Case{Op::Conv2d, "conv1d", [] { return V{input({2, 2, 7}, 75), input({3, 2, 3}, 76), input({3}, 77)}; },
           [](const V& a) { return conv1d(a[0], a[1], a[2], {.stride = 2, .padding = 1}); }},
      Case{Op::Conv2dBackwardData, "conv2d_backward_data", [] { return V{input({2, 4, 2, 2}, 78), input({4, 2, 3, 3}, 79)}; },
           [o](const V& a) { return conv2d_backward_data(a[0], a[1], {2, 4, 5, 4}, o); }},
      Case{Op::Conv2dBackwardWeights, "conv2d_backward_weights", [] { return V{input({2, 4, 5, 4}, 80), input({2, 4, 2, 2}, 81)}; },
           [o](const V& a) { return conv2d_backward_weights(a[0], a[1], {4, 2, 3, 3}, o); }},
      Case{Op::MaxPool2d, "max_pool2d_padded", [] { return V{input({2, 2, 5, 5}, 82)}; },
           [mp](const V& a) { return max_pool2d(a[0], mp); }},
      // Linear in dy; piecewise constant in x (a zero gradient away from ties).
      Case{Op::MaxPool2dWithIndices, "max_pool2d_with_indices", [] { return V{input({2, 2, 5, 5}, 122)}; },
           [mp](const V& a) { return max_pool2d_with_indices(a[0], mp).values; }},
      Case{Op::MaxPool2dBackward, "max_pool2d_backward", [] { return V{input({2, 2, 3, 3}, 120), input({2, 2, 5, 5}, 121)}; },
           [mp](const V& a) { return max_pool2d_backward(a[0], a[1], mp); }},
      Case{Op::AvgPool2d, "avg_pool2d_exclude_pad", [] { return V{input({2, 2, 5, 6}, 83)}; },
           [ap](const V& a) { return avg_pool2d(a[0], ap); }},
      Case{Op::AvgPool2dBackward, "avg_pool2d_backward", [] { return V{input({2, 2, 6, 3}, 84)}; },
           [ap](const V& a) { return avg_pool2d_backward(a[0], {2, 2, 5, 6}, ap); }},
      Case{Op::Matmul, "adaptive_avg_pool2d", [] { return V{input({2, 3, 5, 7}, 85)}; },
           [](const V& a) { return adaptive_avg_pool2d(a[0], {3, 2}); }},
      Case{Op::Cumsum, "cumsum", [] { return V{input({3, 4}, 86)}; }, [](const V& a) { return cumsum(a[0], 1); }},
      Case{Op::Cumprod, "cumprod_no_zeros", [] { return V{away_from_zero({2, 5}, 87)}; }, [](const V& a) { return cumprod(a[0], 1); }},
      Case{Op::Gather, "sort_values", [] { return V{input({3, 5}, 88)}; }, [](const V& a) { return sort(a[0], 1, true).values; }},
      Case{Op::Gather, "topk_values", [] { return V{input({4, 3}, 89)}; }, [](const V& a) { return topk(a[0], 2, 0).values; }},
      Case{Op::Gather, "cummin_values", [] { return V{input({2, 6}, 90)}; }, [](const V& a) { return cummin(a[0], 1).values; }},
      Case{Op::FusedAttention, "fused_attention_causal_mask",
           [] { return V{input({2, 3, 4}, 91), input({2, 5, 4}, 92), input({2, 5, 2}, 93), input({3, 5}, 94)}; },
           [](const V& a) { return fused_attention(a[0], a[1], a[2], {.causal = true, .mask = a[3]}); }},
      // Both outputs of the one node (the lse through an output_of node): o + lse, broadcast.
      Case{Op::OutputOf, "fused_attention_both_outputs",
           [] { return V{input({1, 4, 3}, 98), input({1, 5, 3}, 99), input({1, 5, 2}, 100)}; },
           [](const V& a) {
             AttentionResult r = fused_attention_lse(a[0], a[1], a[2], {.causal = true});
             return add(r.out, unsqueeze(r.lse, 2));
           }},
      Case{Op::FusedAttention, "fused_attention_lse", [] { return V{input({1, 4, 3}, 95), input({1, 6, 3}, 96), input({1, 6, 2}, 97)}; },
           [](const V& a) { return fused_attention_lse(a[0], a[1], a[2], {.scale = 0.8}).lse; }},
      // Both state outputs of the recurrence (c through an output_of node), in both directions.
      Case{Op::LstmRecurrence, "lstm_recurrence_h_plus_c",
           [] { return V{input({3, 2, 8}, 101), input({2, 2}, 102), input({2, 2}, 103), input({8, 2}, 104)}; },
           [](const V& a) {
             LstmRecurrenceResult r = lstm_recurrence(a[0], a[1], a[2], a[3]);
             return add(r.h, r.c);
           }},
      Case{Op::LstmRecurrence, "lstm_recurrence_reverse",
           [] { return V{input({4, 1, 4}, 105), input({1, 1}, 106), input({1, 1}, 107), input({4, 1}, 108)}; },
           [](const V& a) { return lstm_recurrence(a[0], a[1], a[2], a[3], {.reverse = true}).h; }},
      Case{Op::GruRecurrence, "gru_recurrence",
           [] { return V{input({3, 2, 6}, 109), input({2, 2}, 110), input({6, 2}, 111), input({6}, 112)}; },
           [](const V& a) { return gru_recurrence(a[0], a[1], a[2], a[3]); }},
      // Sums of rows at an index with repeats, along the middle dim (strided rows) and along dim 0;
      // src through a transpose, so the call reads a strided view.
      Case{Op::IndexAdd, "index_add_repeats_dim1", [] { return V{input({2, 3, 2}, 117), input({2, 4, 2}, 118)}; },
           [](const V& a) { return index_add(a[0], 1, from_vector<int64_t>({2, 0, 2, 1}, {4}, kRef), a[1]); }},
      Case{Op::IndexAdd, "index_add_dim0_transposed_src", [] { return V{input({3, 2}, 119), input({2, 4}, 120)}; },
           [](const V& a) {
             return index_add(a[0], 0, from_vector<int64_t>({1, 1, 0, 2}, {4}, kRef), transpose(a[1], 0, 1));
           }},
      Case{Op::GruRecurrence, "gru_recurrence_reverse",
           [] { return V{input({4, 1, 3}, 113), input({1, 1}, 114), input({3, 1}, 115), input({3}, 116)}; },
           [](const V& a) { return gru_recurrence(a[0], a[1], a[2], a[3], {.reverse = true}); }},
  };
}

std::vector<Case> all_cases() {
  using Make = std::function<Array()>;
  auto un = [](Op op, std::string name, Make x, std::function<Array(const Array&)> f, double tol = 1e-6,
               double eps = 1e-6) {
    return Case{op, std::move(name), [x] { return std::vector<Array>{x()}; },
                [f](const std::vector<Array>& a) { return f(a[0]); }, tol, eps};
  };
  auto bin = [](Op op, std::string name, Make x, Make y, std::function<Array(const Array&, const Array&)> f) {
    return Case{op, std::move(name), [x, y] { return std::vector<Array>{x(), y()}; },
                [f](const std::vector<Array>& a) { return f(a[0], a[1]); }};
  };
  Shape s23{2, 3};
  auto idx2 = [] { return from_vector<int64_t>({2, 0, 1, 1, 0, 2}, {2, 3}, kRef); };
  std::vector<Case> cs = {
      un(Op::Neg, "neg", [s23] { return input(s23, 1); }, [](const Array& x) { return neg(x); }),
      un(Op::Abs, "abs", [s23] { return away_from_zero(s23, 2); }, [](const Array& x) { return abs(x); }),
      un(Op::Exp, "exp_transposed", [] { return input({3, 2}, 3); }, [](const Array& x) { return exp(transpose(x, 0, 1)); }),
      un(Op::Log, "log", [s23] { return input(s23, 4, 0.5, 2); }, [](const Array& x) { return log(x); }),
      un(Op::Sqrt, "sqrt", [s23] { return input(s23, 5, 0.5, 2); }, [](const Array& x) { return sqrt(x); }),
      un(Op::Tanh, "tanh", [s23] { return input(s23, 6); }, [](const Array& x) { return tanh(x); }),
      un(Op::Erf, "erf", [s23] { return input(s23, 7); }, [](const Array& x) { return erf(x); }),
      un(Op::Sigmoid, "sigmoid", [s23] { return input(s23, 8, -3, 3); }, [](const Array& x) { return sigmoid(x); }),
      un(Op::Relu, "relu", [s23] { return away_from_zero(s23, 9); }, [](const Array& x) { return relu(x); }),
      un(Op::Gelu, "gelu", [s23] { return input(s23, 10, -3, 3); }, [](const Array& x) { return gelu(x); }),
      un(Op::Cast, "cast_f32_roundtrip", [s23] { return input(s23, 11); },
         [](const Array& x) { return cast(mul(cast(x, DType::F32), 3.0), DType::F64); }, 1e-4, 1e-2),
      bin(Op::Add, "add_broadcast", [] { return input({3, 1}, 12); }, [] { return input({1, 4}, 13); }, [](const Array& x, const Array& y) { return add(x, y); }),
      bin(Op::Sub, "sub_rank_difference", [] { return input({2, 3}, 14); }, [] { return input({3}, 15); }, [](const Array& x, const Array& y) { return sub(x, y); }),
      bin(Op::Mul, "mul_broadcast", [] { return input({2, 1, 3}, 16); }, [] { return input({4, 1}, 17); }, [](const Array& x, const Array& y) { return mul(x, y); }),
      bin(Op::Div, "div", [s23] { return input(s23, 18); }, [s23] { return input(s23, 19, 0.5, 2); }, [](const Array& x, const Array& y) { return div(x, y); }),
      bin(Op::Rem, "rem", [s23] { return input(s23, 20, 0.1, 0.9); }, [s23] { return input(s23, 21, 1.1, 2); }, [](const Array& x, const Array& y) { return rem(add(x, 3.0), y); }),
      // x + 5 in (5.1, 5.9) over y in (2.1, 2.4): the quotient stays in (2.1, 2.9), away from the jumps.
      bin(Op::Fmod, "fmod", [s23] { return input(s23, 22, 0.1, 0.9); }, [s23] { return input(s23, 23, 2.1, 2.4); }, [](const Array& x, const Array& y) { return fmod(neg(add(x, 5.0)), y); }),
      bin(Op::Pow, "pow", [s23] { return input(s23, 22, 0.5, 2); }, [s23] { return input(s23, 23, -1, 2); }, [](const Array& x, const Array& y) { return pow(x, y); }),
      bin(Op::Maximum, "maximum", [s23] { return input(s23, 24); }, [s23] { return input(s23, 25); }, [](const Array& x, const Array& y) { return maximum(x, y); }),
      bin(Op::Minimum, "minimum", [s23] { return input(s23, 26); }, [s23] { return input(s23, 27); }, [](const Array& x, const Array& y) { return minimum(x, y); }),
      bin(Op::Where, "where", [s23] { return input(s23, 28); }, [] { return input({3}, 29); },
          [](const Array& x, const Array& y) { return where(from_vector<bool>({true, false, true, false, false, true}, {2, 3}, kRef), x, y); }),
      Case{Op::Clamp, "clamp_tensor_bounds", [s23] { return std::vector<Array>{input(s23, 30, -2, 2), input(s23, 31, -1.5, -0.5), input(s23, 32, 0.5, 1.5)}; },
           [](const std::vector<Array>& a) { return clamp(a[0], a[1], a[2]); }},
      un(Op::Sum, "sum_dims", [] { return input({2, 3, 4}, 33); }, [](const Array& x) { return sum(x, {0, 2}); }),
      un(Op::Mean, "mean_keepdim", [] { return input({2, 3, 4}, 34); }, [](const Array& x) { return mean(x, {1}, true); }),
      un(Op::Prod, "prod", [] { return away_from_zero({2, 3}, 35); }, [](const Array& x) { return prod(x, {1}); }),
      un(Op::Max, "max", [] { return input({3, 4}, 36); }, [](const Array& x) { return max(x, {1}); }),
      un(Op::Min, "min_all", [] { return input({3, 4}, 37); }, [](const Array& x) { return min(x); }),
      un(Op::Reshape, "reshape_of_permuted", [] { return input({2, 3, 4}, 38); },
         [](const Array& x) { return mul(reshape(permute(x, {2, 0, 1}), {4, 6}), 2.0); }),
      un(Op::Permute, "permute", [] { return input({2, 3, 4}, 39); }, [](const Array& x) { return tanh(permute(x, {1, 2, 0})); }),
      un(Op::Slice, "slice_step", [] { return input({3, 7}, 40); }, [](const Array& x) { return tanh(slice(x, 1, 1, 7, 2)); }),
      un(Op::Expand, "expand", [] { return input({3, 1}, 41); }, [](const Array& x) { return tanh(expand(x, {2, 3, 4})); }),
      un(Op::Contiguous, "contiguous", [] { return input({3, 4}, 42); }, [](const Array& x) { return contiguous(transpose(x, 0, 1)); }),
      bin(Op::Cat, "cat", [] { return input({2, 3}, 43); }, [] { return input({2, 2}, 44); }, [](const Array& x, const Array& y) { return cat({x, y}, 1); }),
      un(Op::Gather, "gather", [] { return input({2, 4}, 45); }, [idx2](const Array& x) { return gather(x, 1, idx2()); }),
      un(Op::IndexSelect, "index_select_repeats", [] { return input({4, 3}, 46); },
         [](const Array& x) { return index_select(x, 0, from_vector<int64_t>({3, 0, 3}, {3}, kRef)); }),
      bin(Op::ScatterAdd, "scatter_add", [] { return input({2, 3}, 47); }, [] { return input({2, 3}, 48); },
          [idx2](const Array& x, const Array& y) { return scatter_add(x, 1, idx2(), y); }),
      bin(Op::Matmul, "matmul_batch_broadcast", [] { return input({2, 1, 3, 4}, 49); }, [] { return input({5, 4, 2}, 50); },
          [](const Array& x, const Array& y) { return matmul(x, y); }),
      // A weight shared by every batch entry (rules.cpp: one 2-D product over the flattened rows),
      // plain and, as Linear has it, transposed; rank 3 and 4.
      bin(Op::Matmul, "matmul_shared_weight", [] { return input({3, 5, 4}, 51); }, [] { return input({4, 2}, 52); },
          [](const Array& x, const Array& w) { return matmul(x, w); }),
      bin(Op::Matmul, "matmul_shared_weight_transposed", [] { return input({2, 3, 5, 4}, 53); },
          [] { return input({6, 4}, 54); }, [](const Array& x, const Array& w) { return matmul(x, transpose(w, 0, 1)); }),
      // ---- math and activations of the op table (src/op_table/ops.def) ----
      un(Op::Expm1, "expm1", [s23] { return input(s23, 70); }, [](const Array& x) { return expm1(x); }),
      un(Op::Log1p, "log1p", [s23] { return input(s23, 71, -0.5, 2); }, [](const Array& x) { return log1p(x); }),
      un(Op::Log2, "log2", [s23] { return input(s23, 72, 0.5, 2); }, [](const Array& x) { return log2(x); }),
      un(Op::Log10, "log10", [s23] { return input(s23, 73, 0.5, 2); }, [](const Array& x) { return log10(x); }),
      un(Op::Rsqrt, "rsqrt", [s23] { return input(s23, 74, 0.5, 2); }, [](const Array& x) { return rsqrt(x); }),
      un(Op::Square, "square_transposed", [] { return input({3, 2}, 75); }, [](const Array& x) { return square(transpose(x, 0, 1)); }),
      un(Op::Recip, "recip", [s23] { return input(s23, 76, 0.5, 2); }, [](const Array& x) { return recip(x); }),
      un(Op::Sin, "sin", [s23] { return input(s23, 77, -3, 3); }, [](const Array& x) { return sin(x); }),
      un(Op::Cos, "cos", [s23] { return input(s23, 78, -3, 3); }, [](const Array& x) { return cos(x); }),
      un(Op::Tan, "tan", [s23] { return input(s23, 79); }, [](const Array& x) { return tan(x); }),
      un(Op::Asin, "asin", [s23] { return input(s23, 80, -0.9, 0.9); }, [](const Array& x) { return asin(x); }),
      un(Op::Acos, "acos", [s23] { return input(s23, 81, -0.9, 0.9); }, [](const Array& x) { return acos(x); }),
      un(Op::Atan, "atan", [s23] { return input(s23, 82, -3, 3); }, [](const Array& x) { return atan(x); }),
      un(Op::Sinh, "sinh", [s23] { return input(s23, 83, -2, 2); }, [](const Array& x) { return sinh(x); }),
      un(Op::Cosh, "cosh", [s23] { return input(s23, 84, -2, 2); }, [](const Array& x) { return cosh(x); }),
      un(Op::Asinh, "asinh", [s23] { return input(s23, 85, -3, 3); }, [](const Array& x) { return asinh(x); }),
      un(Op::Acosh, "acosh", [s23] { return input(s23, 86, 1.2, 3); }, [](const Array& x) { return acosh(x); }),
      un(Op::Atanh, "atanh", [s23] { return input(s23, 87, -0.9, 0.9); }, [](const Array& x) { return atanh(x); }),
      un(Op::Deg2rad, "deg2rad", [s23] { return input(s23, 88); }, [](const Array& x) { return deg2rad(x); }),
      un(Op::Rad2deg, "rad2deg", [s23] { return input(s23, 89); }, [](const Array& x) { return rad2deg(x); }),
      un(Op::GeluTanh, "gelu_tanh", [s23] { return input(s23, 90, -3, 3); }, [](const Array& x) { return gelu_tanh(x); }),
      un(Op::Silu, "silu", [s23] { return input(s23, 91, -3, 3); }, [](const Array& x) { return silu(x); }),
      un(Op::Softplus, "softplus_beta_threshold", [s23] { return input(s23, 92, -3, 3); },
         [](const Array& x) { return softplus(x, 2, 3); }),
      un(Op::Mish, "mish", [s23] { return input(s23, 93, -3, 3); }, [](const Array& x) { return mish(x); }),
      un(Op::HardSigmoid, "hard_sigmoid", [s23] { return input(s23, 94, -4, 4); }, [](const Array& x) { return hard_sigmoid(x); }),
      un(Op::HardSwish, "hard_swish", [s23] { return input(s23, 95, -4, 4); }, [](const Array& x) { return hard_swish(x); }),
      un(Op::LeakyRelu, "leaky_relu", [s23] { return away_from_zero(s23, 96); }, [](const Array& x) { return leaky_relu(x, 0.2); }),
      un(Op::Elu, "elu", [s23] { return away_from_zero(s23, 97); }, [](const Array& x) { return elu(x, 1.5); }),
      bin(Op::Atan2, "atan2_broadcast", [] { return input({2, 3}, 98); }, [] { return input({3}, 99, 0.5, 2); },
          [](const Array& x, const Array& y) { return atan2(x, y); }),
      // ---- composites (gradients from their parts) ----
      un(Op::Sum, "var_std_composite", [] { return input({3, 4}, 100); },
         [](const Array& x) { return add(var(x, {1}, 1, true), std(x, {0}, 0, true)); }),
      un(Op::Gather, "max_with_indices_values", [] { return input({3, 4}, 101); },
         [](const Array& x) { return max_with_indices(x, 1).values; }),
      un(Op::IndexSelect, "pad_reflect_replicate_constant", [] { return input({2, 3}, 102); },
         [](const Array& x) { return pad(pad(pad(x, {2, 1}, PadMode::Reflect), {0, 0, 1, 1}, PadMode::Replicate), {1, 1}); }),
      un(Op::Where, "tril_triu", [] { return input({3, 3}, 103); }, [](const Array& x) { return add(tril(x, -1), mul(triu(x), 2.0)); }),
      bin(Op::Cat, "stack_roll_flip", [] { return input({2, 3}, 104); }, [] { return input({2, 3}, 105); },
          [](const Array& x, const Array& y) { return stack({roll(x, 1, 1), flip(y, {0})}, 1); }),
      bin(Op::ScatterAdd, "scatter_last_wins", [] { return input({2, 4}, 106); }, [] { return input({2, 3}, 107); },
          [](const Array& x, const Array& y) {
            return scatter(x, 1, from_vector<int64_t>({1, 3, 1, 0, 0, 2}, {2, 3}, kRef), y);
          }),
      bin(Op::Where, "slice_assign", [] { return input({3, 5}, 108); }, [] { return input({3, 1}, 109); },
          [](const Array& x, const Array& y) { return slice_assign(x, 1, 0, 5, 2, y); }),
      un(Op::IndexSelect, "gather_nd_repeat", [] { return input({3, 2}, 110); },
         [](const Array& x) { return repeat(gather_nd(x, from_vector<int64_t>({2, 0, 2}, {3, 1}, kRef)), {2, 1}); }),
  };
  for (Case& c : library_cases()) cs.push_back(std::move(c));
  return cs;
}

class GradcheckTest : public ::testing::TestWithParam<Case> {};

TEST_P(GradcheckTest, MatchesCentralDifferences) { EXPECT_TRUE(gradcheck(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Ops, GradcheckTest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(GradcheckCoverage, EveryDifferentiableOpHasAGradientCheck) {
  std::set<Op> checked;
  for (const Case& c : all_cases()) checked.insert(c.op);
  for (int i = 0; i < int(Op::NumOps); ++i) {
    Op op = Op(i);
    // Piecewise-constant ops (zero gradients) are checked in tests/autograd/pytorch_semantics_test.cpp.
    if (autograd::is_differentiable(op) && !autograd::has_zero_gradient(op)) {
      EXPECT_TRUE(checked.count(op)) << "op '" << op_name(op) << "' is differentiable but has no gradient check";
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, std::set<Op>>> testing::gradcheck_case_ops() {
  std::vector<std::pair<std::string, std::set<Op>>> out;
  for (const Case& c : all_cases()) {
    std::set<Op> ops = testing::ops_in_graph(c.f(c.inputs()));
    ops.insert(c.op);
    out.emplace_back(c.name, std::move(ops));
  }
  return out;
}

namespace {

TEST(GradcheckCoverage, NonDifferentiableOpsGiveNoGradient) {
  Array x = input({4}, 60).require_grad();
  EXPECT_FALSE(argmax(x, 0).requires_grad());
  EXPECT_FALSE(gt(x, 0.0).requires_grad());
  EXPECT_FALSE(is_nan(x).requires_grad());
  EXPECT_TRUE(add(x, 1.0).requires_grad());
}

}  // namespace
}  // namespace ember
