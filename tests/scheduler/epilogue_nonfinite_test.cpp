// Contraction epilogues (src/scheduler/epilogue.cpp and the CPU backend's oneDNN post-ops) on
// inputs with NaN, +-inf, -0 and huge values: every post-op kind and chains of them after matmul
// (oneDNN's kernels, the few-rows loops, matrix-vector) and conv2d (direct, depthwise, 1x1, 16
// channels) must give what the unfused graph gives on the reference backend: NaN where it has NaN,
// the same infinities, the same signed zeros, finite values within rounding. oneDNN's relu turned
// NaN into 0, its JIT convolutions applied a repeated scale's first parameters to the second, its
// erf-gelu gave +0 where Ember's gelu gives -0, and its linear with beta +0 turned a -0 product
// into +0; each gave silently different results before it was kept out of oneDNN's post-ops (or,
// for the linear, given beta -0).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "ember/ember.h"
#include "scheduler/epilogue.h"
#include "scheduler/epilogue_guard.h"

namespace ember {
namespace {

using Guard = ember::testing::EpilogueSwitchesGuard;

// Values in [-1, 1] with every `stride`-th one replaced by a special value (none for stride 0).
std::vector<float> with_specials(int64_t n, uint32_t seed, int64_t stride) {
  static const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e30f, -1e30f, 0.0f, -40.0f, 40.0f};
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = stride > 0 && i % stride == 3 ? specials[size_t(i / stride) % std::size(specials)] : u(g);
  return v;
}

// A zero must have the reference's sign: gelu's tail is -0 (0.5 x (1 + erf(x / sqrt 2)) with
// 1 + erf rounded to 0, inputs below about -5.5), x * c of a +0 with c < 0 is -0, relu(-0) is +0.
::testing::AssertionResult same_values(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  int64_t nan = 0, inf = 0, zero = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
      ++nan;
    } else if (std::isinf(w)) {
      ok = g == w;
      ++inf;
    } else if (w == 0) {
      // A tiny value for a zero is rounding (a tail value one erf rounds to 0 and another not).
      ok = std::fabs(g) <= 1e-5f && (g != 0 || std::signbit(g) == std::signbit(w));
      ++zero;
    } else {
      ok = std::fabs(g - w) <= 1e-4f * std::fabs(w) + 1e-5f;
    }
    if (!ok) return ::testing::AssertionFailure() << "element " << i << ": got " << g << " (sign " << std::signbit(g)
                                                  << "), the reference " << w << " (sign " << std::signbit(w) << ")";
  }
  return ::testing::AssertionSuccess() << nan << " NaN, " << inf << " inf, " << zero << " zeros";
}

using Chain = std::function<Array(const Array& y, const std::vector<Array>& operands)>;
struct NamedChain {
  std::string name;
  Chain f;
};

// Every post-op kind, alone and in chains (repeated kinds included). Operands: o[0] per column or
// channel, o[1] of the output's shape, o[2] per column or channel.
std::vector<NamedChain> chains() {
  return {
      {"relu", [](const Array& y, const std::vector<Array>&) { return relu(y); }},
      {"tanh", [](const Array& y, const std::vector<Array>&) { return tanh(y); }},
      {"sigmoid", [](const Array& y, const std::vector<Array>&) { return sigmoid(y); }},
      {"gelu", [](const Array& y, const std::vector<Array>&) { return gelu(y); }},
      {"gelu_tanh", [](const Array& y, const std::vector<Array>&) { return gelu_tanh(y); }},
      {"scale", [](const Array& y, const std::vector<Array>&) { return mul(y, 2.0); }},
      {"shift", [](const Array& y, const std::vector<Array>&) { return sub(y, 0.25); }},
      {"bias relu", [](const Array& y, const std::vector<Array>& o) { return relu(add(y, o[0])); }},
      {"residual", [](const Array& y, const std::vector<Array>& o) { return add(y, o[1]); }},
      {"relu scale", [](const Array& y, const std::vector<Array>&) { return mul(relu(y), 0.5); }},
      {"scale scale", [](const Array& y, const std::vector<Array>&) { return mul(mul(y, 2.0), 0.5); }},
      {"shift scale", [](const Array& y, const std::vector<Array>&) { return mul(add(y, 1.0), 0.5); }},
      {"relu relu", [](const Array& y, const std::vector<Array>&) { return relu(sub(relu(y), 0.5)); }},
      {"bias gelu residual", [](const Array& y, const std::vector<Array>& o) { return add(gelu(add(y, o[0])), o[1]); }},
      {"tanh tanh", [](const Array& y, const std::vector<Array>&) { return tanh(mul(tanh(y), 3.0)); }},
      // Zeros of both signs into the next post-op: a negative scale of +0, a scale by zero, gelu's
      // and gelu-tanh's -0 tails.
      {"negative scale", [](const Array& y, const std::vector<Array>&) { return mul(y, -2.0); }},
      {"zero scale", [](const Array& y, const std::vector<Array>&) { return mul(y, 0.0); }},
      {"negative scale relu", [](const Array& y, const std::vector<Array>&) { return relu(mul(y, -0.5)); }},
      {"gelu scale", [](const Array& y, const std::vector<Array>&) { return mul(gelu(y), 3.0); }},
      {"gelu_tanh scale", [](const Array& y, const std::vector<Array>&) { return mul(gelu_tanh(y), 3.0); }},
      // Tensor multiplies: a per-channel (per-column) scale, an inference batch norm (scale,
      // shift, relu; oneDNN's binary post-ops on the CPU), two scales, and a full-tensor product.
      {"channel scale", [](const Array& y, const std::vector<Array>& o) { return mul(y, o[0]); }},
      {"batch norm relu", [](const Array& y, const std::vector<Array>& o) { return relu(add(mul(y, o[0]), o[2])); }},
      {"two channel scales", [](const Array& y, const std::vector<Array>& o) { return mul(mul(o[0], y), o[2]); }},
      {"batch norm residual relu",
       [](const Array& y, const std::vector<Array>& o) { return relu(add(add(mul(y, o[0]), o[2]), o[1])); }},
      {"full product", [](const Array& y, const std::vector<Array>& o) { return mul(y, o[1]); }},
  };
}

// Runs head + chain on device d (inputs realized first); `kernels`: the fused kernels it took.
std::vector<float> run(const std::function<Array(Device)>& head, const Chain& chain,
                       const std::function<std::vector<Array>(Device, const Shape&)>& operands, Device d,
                       int64_t* kernels = nullptr) {
  const Shape shape = head(d).shape();
  std::vector<Array> ops = operands(d, shape);
  for (Array& o : ops) o.eval();
  synchronize();
  reset_execution_stats();
  // The product is a temporary, gone at the end of this statement: a held value keeps its chain
  // out of the library call.
  Array out = chain(head(d), ops);
  std::vector<float> v = out.eval().to_vector<float>();
  if (kernels) *kernels = execution_stats().kernels;
  return v;
}

void check_all(const std::function<Array(Device)>& head,
               const std::function<std::vector<Array>(Device, const Shape&)>& operands) {
  Guard guard;
  for (const NamedChain& c : chains()) {
    SCOPED_TRACE(c.name);
    set_fusion_enabled(false);
    const std::vector<float> want = run(head, c.f, operands, Device::reference());
    set_fusion_enabled(true);
    set_epilogue_folding_enabled(true);
    int64_t kernels = -1;
    EXPECT_TRUE(same_values(run(head, c.f, operands, Device::cpu(), &kernels), want));
    EXPECT_EQ(kernels, 0) << "the chain was not folded into the library call";
    EXPECT_TRUE(same_values(run(head, c.f, operands, Device::reference()), want));  // its own post-ops
  }
}

struct MatmulCase {
  int64_t M, K, N;
};

class EpilogueNonFiniteMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(EpilogueNonFiniteMatmul, EveryPostOpKeepsNonFiniteValues) {
  const MatmulCase m = GetParam();
  auto head = [m](Device d) {
    Array a = from_vector<float>(with_specials(m.M * m.K, 1, 7), {m.M, m.K}, d).eval();
    Array b = from_vector<float>(with_specials(m.K * m.N, 2, 11), {m.K, m.N}, d).eval();
    return matmul(a, b);
  };
  auto operands = [](Device d, const Shape& s) {
    const int64_t n = s[s.rank() - 1];
    return std::vector<Array>{from_vector<float>(with_specials(n, 3, 5), {n}, d),
                              from_vector<float>(with_specials(s.numel(), 4, 13), s, d),
                              from_vector<float>(with_specials(n, 9, 4), {n}, d)};
  };
  check_all(head, operands);
}

INSTANTIATE_TEST_SUITE_P(Shapes, EpilogueNonFiniteMatmul,
                         ::testing::Values(MatmulCase{64, 48, 40},   // oneDNN
                                           MatmulCase{3, 20, 24},    // the few-rows loops
                                           MatmulCase{50, 30, 1},    // matrix-vector
                                           MatmulCase{128, 4, 96},   // short K: each special shows
                                           MatmulCase{64, 1, 40}),   // K = 1: zero rows, every special
                         [](const ::testing::TestParamInfo<MatmulCase>& i) {
                           // (fmt: g++ 12 flags a chain of std::string + as -Wrestrict)
                           return fmt::format("M{}K{}N{}", i.param.M, i.param.K, i.param.N);
                         });

struct ConvCase {
  int64_t n, c, h, o, k;
  Conv2dOptions opts;
  std::string name;
  bool finite_head = false;  // x and w finite: oneDNN's convolution and post-ops (else the f64 loops)
};

class EpilogueNonFiniteConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(EpilogueNonFiniteConv, EveryPostOpKeepsNonFiniteValues) {
  const ConvCase g = GetParam();
  const Shape xs{g.n, g.c, g.h, g.h}, ws{g.o, g.c / g.opts.groups, g.k, g.k};
  auto head = [&](Device d) {
    Array x = from_vector<float>(with_specials(xs.numel(), 5, g.finite_head ? 0 : 97), xs, d).eval();
    Array w = from_vector<float>(with_specials(ws.numel(), 6, g.finite_head ? 0 : 89), ws, d).eval();
    return conv2d(x, w, g.opts);
  };
  auto operands = [](Device d, const Shape& s) {
    const int64_t o = s[1];
    return std::vector<Array>{reshape(from_vector<float>(with_specials(o, 7, 5), {o}, d).eval(), {o, 1, 1}),
                              from_vector<float>(with_specials(s.numel(), 8, 101), s, d),
                              reshape(from_vector<float>(with_specials(o, 10, 4), {o}, d).eval(), {o, 1, 1})};
  };
  check_all(head, operands);
}

INSTANTIATE_TEST_SUITE_P(Shapes, EpilogueNonFiniteConv,
                         ::testing::Values(ConvCase{2, 3, 10, 8, 3, {.padding = 1}, "direct"},
                                           ConvCase{2, 16, 9, 16, 3, {}, "sixteen_channels"},
                                           ConvCase{2, 8, 9, 8, 3, {.padding = 1, .groups = 8}, "depthwise"},
                                           ConvCase{2, 8, 7, 16, 1, {}, "pointwise"},
                                           ConvCase{2, 16, 9, 16, 3, {.padding = 1}, "finite_operands_onednn", true},
                                           ConvCase{2, 3, 10, 8, 3, {.padding = 1}, "finite_operands_direct", true}),
                         [](const ::testing::TestParamInfo<ConvCase>& i) { return i.param.name; });

}  // namespace
}  // namespace ember
