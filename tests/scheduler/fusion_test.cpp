// The fusion scheduler: kernel counts of common compositions (GELU, softmax, log-softmax, layer
// norm, RMS norm from primitives), multi-output kernels, boundaries, and fused-vs-unfused
// equality on randomly generated graphs mixing elementwise, broadcast, reduce and movement ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <functional>
#include <random>

#include "runtime/registry.h"
#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

// Restores fusion to on when a test turned it off.
struct FusionGuard {
  bool saved = fusion_enabled();
  ~FusionGuard() { set_fusion_enabled(saved); }
};

// Kernels launched to realize f() (its inputs are realized first).
int64_t kernels_for(const std::function<Array()>& f) {
  Array y = f();
  synchronize();
  reset_execution_stats();
  y.eval();
  synchronize();
  return execution_stats().kernels;
}

class FusionTest : public ::testing::TestWithParam<Device> {
 protected:
  Device d = GetParam();
  Array x = uniform({64, 100}, -3, 3, {.seed = 1, .device = d}).eval();
};

Array gelu_from_primitives(const Array& x) { return mul(mul(x, 0.5), add(erf(mul(x, 0.7071067811865476)), 1.0)); }
Array layer_norm_from_primitives(const Array& x) {
  Array xc = sub(x, mean(x, {1}, true));
  return div(xc, sqrt(add(mean(mul(xc, xc), {1}, true), 1e-5)));
}
Array rms_norm_from_primitives(const Array& x) { return div(x, sqrt(add(mean(mul(x, x), {1}, true), 1e-6))); }

TEST_P(FusionTest, CommonCompositionsAreOneKernel) {
  EXPECT_EQ(kernels_for([&] { return gelu_from_primitives(x); }), 1);
  EXPECT_EQ(kernels_for([&] { return softmax(x, 1); }), 1);
  EXPECT_EQ(kernels_for([&] { return softmax(x, 0); }), 1);  // reduce over a non-inner dim
  EXPECT_EQ(kernels_for([&] { return log_softmax(x, 1); }), 1);
  EXPECT_EQ(kernels_for([&] { return layer_norm_from_primitives(x); }), 1);
  EXPECT_EQ(kernels_for([&] { return rms_norm_from_primitives(x); }), 1);
  // A chain of 10 elementwise ops with exp, tanh and sigmoid.
  EXPECT_EQ(kernels_for([&] {
              Array h = x;
              h = exp(mul(h, 0.1));
              h = tanh(add(h, 1.0));
              h = sigmoid(mul(h, 2.0));
              h = sub(mul(h, h), 0.5);
              return abs(add(h, x));
            }),
            1);
  // Movement ops fold into index maps: a transposed, sliced, broadcast input.
  EXPECT_EQ(kernels_for([&] { return add(exp(transpose(x, 0, 1)), slice(transpose(x, 0, 1), 1, 0, 1)); }), 1);
}

TEST_P(FusionTest, FusedResultsMatchTheFormulas) {
  std::vector<float> v = x.to_vector<float>();
  std::vector<double> want_sm(v.size()), want_ln(v.size());
  for (int r = 0; r < 64; ++r) {
    const float* row = v.data() + r * 100;
    double m = -INFINITY, s = 0, mu = 0, var = 0;
    for (int c = 0; c < 100; ++c) m = std::max(m, double(row[c]));
    for (int c = 0; c < 100; ++c) s += std::exp(row[c] - m);
    for (int c = 0; c < 100; ++c) mu += row[c] / 100.0;
    for (int c = 0; c < 100; ++c) var += (row[c] - mu) * (row[c] - mu) / 100.0;
    for (int c = 0; c < 100; ++c) {
      want_sm[size_t(r * 100 + c)] = std::exp(row[c] - m) / s;
      want_ln[size_t(r * 100 + c)] = (row[c] - mu) / std::sqrt(var + 1e-5);
    }
  }
  EXPECT_TRUE(all_close(softmax(x, 1), want_sm, 1e-5, 1e-7));
  EXPECT_TRUE(all_close(layer_norm_from_primitives(x), want_ln, 1e-4, 1e-5));
}

TEST_P(FusionTest, ValuesNeededLaterAreExtraOutputsOfOneKernel) {
  // h is held by the caller (as a value saved for backward would be): the kernel stores it too.
  Array h = tanh(mul(x, 0.5));
  Array y = add(mul(h, h), 1.0);
  synchronize();
  reset_execution_stats();
  eval({y});
  synchronize();
  EXPECT_EQ(execution_stats().kernels, 1);
  EXPECT_TRUE(h.is_evaluated());
  std::vector<float> xv = x.to_vector<float>(), hv = h.to_vector<float>(), yv = y.to_vector<float>();
  for (size_t i = 0; i < xv.size(); i += 97) {
    EXPECT_NEAR(hv[i], std::tanh(xv[i] * 0.5), 1e-6);
    EXPECT_NEAR(yv[i], hv[i] * hv[i] + 1, 1e-6);
  }
}

TEST_P(FusionTest, MlpForwardAndBackwardKernelCount) {
  Array w1 = uniform({100, 32}, -0.1, 0.1, {.seed = 2, .device = d}).eval().require_grad();
  Array w2 = uniform({32, 10}, -0.1, 0.1, {.seed = 3, .device = d}).eval().require_grad();
  Array labels = from_vector<int64_t>(std::vector<int64_t>(64, 3), {64, 1}, d);
  auto step = [&] {
    Array logits = matmul(relu(matmul(x, w1)), w2);
    Array loss = neg(mean(gather(log_softmax(logits, 1), 1, labels)));
    Gradients g = loss.backward();
    eval({w1.grad(g), w2.grad(g)});
  };
  step();  // warm up program caches
  synchronize();
  reset_execution_stats();
  step();
  synchronize();
  ExecutionStats s = execution_stats();
  // 5 library calls: 2 forward matmuls (the first with relu as its epilogue) + 3 backward
  // (d hidden, d w2, d w1). 10 kernels: forward log-softmax, gather, mean; backward the fused
  // elementwise/reduce steps between the matmuls, the gather's scatter-add and the relu mask
  // (measured with EMBER_LOG=fusion; one more with EMBER_FUSION_EPILOGUE=0, relu its own
  // kernel), and the scatter-add's index check (a gather of the indices from zeros, then the
  // subtraction of those zeros from its values: an index out of range is an error).
  // A device without contraction epilogues (SwiftShader) runs the relu as a kernel of its own, as
  // does one that cannot bind x (64 x 100 f32) whole (the small-bindings Vulkan configuration).
  Backend& be = Backend::get(d.kind);
  const bool epilogues = be.supports(d.index, EMBER_SUPPORT_LIBRARY, EMBER_LIB_MATMUL_EPILOGUE, EMBER_F32) &&
                         be.max_binding(d.index) >= 64 * 100 * sizeof(float);
  EXPECT_EQ(s.library_calls, 5);
  EXPECT_EQ(s.kernels, epilogues ? 10 : 11);
  // The same structure again: every realization takes its partition from the cache, and no
  // automatic evaluation was needed.
  synchronize();
  reset_execution_stats();
  for (int i = 0; i < 3; ++i) step();
  synchronize();
  ExecutionStats again = execution_stats();
  EXPECT_EQ(again.plan_cache_misses, 0);
  EXPECT_EQ(again.plan_cache_hits, again.realizations);
  EXPECT_GT(again.realizations, 0);
  EXPECT_EQ(again.auto_flushes, 0);
  std::cout << "[ MLP step ] " << s.kernels << " kernels, " << s.library_calls << " library calls\n";
}

// ---- random graphs: fused vs unfused vs reference --------------------------------------------
struct RandomGraph {
  std::mt19937_64 rng;
  Device d;
  Array pick(std::vector<Array>& pool) { return pool[rng() % pool.size()]; }

  Array grow(Array a, std::vector<Array>& pool) {
    switch (rng() % 10) {
      case 0: return tanh(a);
      case 1: return exp(mul(a, 0.3));
      case 2: return add(a, pick(pool));  // may broadcast
      case 3: return mul(a, sigmoid(pick(pool)));
      case 4: return sub(a, mean(a, {int(rng() % 2)}, true));        // reduce, broadcast back
      case 5: return add(a, max(a, {1}, true));
      case 6: return transpose(transpose(a, 0, 1), 0, 1);
      case 7: return softmax(a, int(rng() % 2));
      case 8: return maximum(a, 0.1);
      default: return div(a, add(abs(pick(pool)), 1.0));
    }
  }

  // The same random program built twice gives the same graph (same seed).
  Array build(uint64_t seed, const std::vector<Array>& leaves) {
    rng.seed(seed);
    std::vector<Array> pool = leaves;
    Array a = leaves[0];
    for (int i = 0; i < 12; ++i) {
      a = grow(a, pool);
      pool.push_back(a);
    }
    return add(a, sum(pick(pool), {0}, true));
  }
};

// Fused and unfused f32 results are each as close to the graph's f64 value (reference backend) as
// the reference backend's own f32 result is, within a factor 4 (or 1e-5). Some of these random
// graphs are ill-conditioned (softmax outputs minus their mean): f32 results then differ from the
// f64 value by ~1e-3 on every path, and paths that sum in different orders (the tile interpreter,
// compiled tier-1 kernels, fused or not) differ from each other by as much.
TEST_P(FusionTest, RandomGraphsGiveTheSameResultsFusedAndUnfused) {
  FusionGuard guard;
  auto leaves_on = [](Device dev, DType dt) {
    return std::vector<Array>{cast(uniform({17, 33}, -1, 1, {.seed = 10, .device = dev}), dt).eval(),
                              cast(uniform({1, 33}, -1, 1, {.seed = 11, .device = dev}), dt).eval(),
                              cast(uniform({17, 1}, -1, 1, {.seed = 12, .device = dev}), dt).eval()};
  };
  const std::vector<Array> leaves = leaves_on(d, DType::F32), ref32 = leaves_on(Device::reference(), DType::F32),
                           ref64 = leaves_on(Device::reference(), DType::F64);
  auto error = [](const std::vector<double>& v, const std::vector<double>& truth) {
    double e = 0;
    for (size_t i = 0; i < v.size(); ++i) e = std::max(e, std::fabs(v[i] - truth[i]) / (1e-3 + std::fabs(truth[i])));
    return e;
  };
  for (uint64_t seed = 0; seed < 40; ++seed) {
    RandomGraph g{{}, d};
    set_fusion_enabled(true);
    const std::vector<double> truth = g.build(seed, ref64).to_vector<double>();
    const double bound = std::max(4 * error(g.build(seed, ref32).to_vector<double>(), truth), 1e-5);
    std::vector<double> fused = g.build(seed, leaves).to_vector<double>();
    set_fusion_enabled(false);
    std::vector<double> unfused = g.build(seed, leaves).to_vector<double>();
    EXPECT_LE(error(fused, truth), bound) << "graph " << seed << ", fused";
    EXPECT_LE(error(unfused, truth), bound) << "graph " << seed << ", unfused";
  }
}

// The same random graphs in f16 and bf16, where every op's result is rounded to the dtype: the
// fused graph computes what the unfused one does, op for op, so the two agree except where an
// f32 sum taken in another order lands on the other side of a rounding boundary (at most one
// element in a thousand is allowed). Before sums inside a kernel were rounded (a fused consumer
// read the sum's unrounded f32 value), 30-37 % of the elements differed on the CPU.
TEST_P(FusionTest, RandomSixteenBitGraphsGiveTheUnfusedResults) {
  FusionGuard guard;
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const std::vector<Array> leaves{cast(uniform({17, 33}, -1, 1, {.seed = 10, .device = d}), dt).eval(),
                                    cast(uniform({1, 33}, -1, 1, {.seed = 11, .device = d}), dt).eval(),
                                    cast(uniform({17, 1}, -1, 1, {.seed = 12, .device = d}), dt).eval()};
    int64_t elements = 0, differ = 0;
    for (uint64_t seed = 0; seed < 12; ++seed) {
      RandomGraph g{{}, d};
      set_fusion_enabled(true);
      const std::vector<double> fused = g.build(seed, leaves).to_vector<double>();
      set_fusion_enabled(false);
      const std::vector<double> unfused = g.build(seed, leaves).to_vector<double>();
      ASSERT_EQ(fused.size(), unfused.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        ++elements;
        differ += !(fused[i] == unfused[i] || (std::isnan(fused[i]) && std::isnan(unfused[i])));
      }
    }
    EXPECT_LE(differ * 1000, elements) << differ << " of " << elements << " elements differ";
  }
}

// A per-channel subexpression broadcast over a large elementwise kernel (an inference batch
// norm's scale rsqrt(var + eps) * w and shift b - mean * scale over [8, 64, 8, 8]) is computed
// once by kernels of its own instead of at every point (fusion.cpp, kHoistRatio); small kernels
// keep it inline. Both give the unfused graph's values bit for bit, NaN, inf and -0 included.
TEST_P(FusionTest, BroadcastSubexpressionsOfLargeKernelsAreComputedOnce) {
  FusionGuard guard;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const int64_t side : {8, 2}) {
    SCOPED_TRACE("side " + std::to_string(side));
    const int64_t C = 64;
    Array x = uniform({8, C, side, side}, -3, 3, {.seed = 5, .device = d}).eval();
    std::vector<float> w(static_cast<size_t>(C)), b = w, m = w, v = w;
    for (int64_t c = 0; c < C; ++c) {
      w[size_t(c)] = 0.5f + 0.01f * float(c);
      b[size_t(c)] = -0.25f * float(c % 5);
      m[size_t(c)] = 0.1f * float(c % 7) - 0.3f;
      v[size_t(c)] = 0.5f + 0.02f * float(c);
    }
    w[1] = inf, w[2] = nan, w[3] = -0.0f, v[4] = 0, v[5] = -1, m[6] = inf, b[7] = nan, b[8] = -0.0f;
    auto channel = [&](const std::vector<float>& p) { return from_vector(p, {1, C, 1, 1}, d).eval(); };
    const Array wc = channel(w), bc = channel(b), mc = channel(m), vc = channel(v);
    auto bn = [&] { return nn::batch_norm_inference(x, mc, vc, wc, bc, 1e-5); };
    set_fusion_enabled(true);
    EXPECT_EQ(kernels_for(bn), side == 8 ? 3 : 1);
    // Per-row values that follow from a reduction stay in the row's kernel at this size too.
    const Array rows = reshape(x, {8 * C, side * side});
    EXPECT_EQ(kernels_for([&] { return layer_norm_from_primitives(rows); }), 1);
    EXPECT_EQ(kernels_for([&] { return softmax(rows, 1); }), 1);
    const std::vector<float> fused = bn().to_vector<float>();
    set_fusion_enabled(false);
    const std::vector<float> unfused = bn().to_vector<float>();
    ASSERT_EQ(fused.size(), unfused.size());
    int64_t differ = 0;
    for (size_t i = 0; i < fused.size(); ++i)
      if (!(std::isnan(fused[i]) && std::isnan(unfused[i])) && std::memcmp(&fused[i], &unfused[i], 4) != 0) ++differ;
    EXPECT_EQ(differ, 0);
    // And the formula, per channel, in double.
    const std::vector<float> xv = x.to_vector<float>();
    for (size_t i = 0; i < fused.size(); ++i) {
      const size_t c = (i / size_t(side * side)) % size_t(C);
      const double a = double(w[c]) / std::sqrt(double(v[c]) + 1e-5);
      const double want = double(xv[i]) * a + (double(b[c]) - double(m[c]) * a);
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(fused[i])) << i;
      else if (std::isinf(want)) EXPECT_EQ(double(fused[i]), want) << i;
      else EXPECT_NEAR(fused[i], want, 1e-5 * std::max(1.0, std::abs(want))) << i;
      if (HasFailure()) break;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, FusionTest, ::testing::ValuesIn(ember::testing::test_devices()),
                         ember::testing::device_test_name);

TEST(FusionLog, BoundariesAreReported) {
  // A reduction over dims different from its consumer's kernel cannot join it.
  Device d = Device::cpu().available() ? Device::cpu() : Device::reference();
  Array x = uniform({8, 16}, -1, 1, {.seed = 4, .device = d}).eval();
  Array y = add(sum(x, {0}, true), sum(x, {1}, true));  // [1,16] + [8,1] -> [8,16]
  synchronize();
  reset_execution_stats();
  y.eval();
  synchronize();
  EXPECT_GE(execution_stats().kernels, 2);
  std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  double c0 = 0, r0 = 0;
  for (int i = 0; i < 8; ++i) c0 += xv[size_t(i * 16)];
  for (int j = 0; j < 16; ++j) r0 += xv[size_t(j)];
  EXPECT_NEAR(yv[0], c0 + r0, 1e-5);
}

}  // namespace
}  // namespace ember
