// The CPU backend's contractions read subnormal operands as zero (src/backend/cpu/subnormal_inputs.h):
// products whose operands are partly or wholly subnormal stay within the documented bound of an
// exact float64 product, an infinity met by a subnormal gives NaN as documented, and every op
// after a product, on every OpenMP thread, still computes with subnormals (the flag is restored).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

// Rows of attention-like probabilities whose scores span more than 87: 40 % of the entries are
// subnormal floats (exp(-88) to exp(-103)), the others normal; each row sums to 1.
std::vector<float> subnormal_probabilities(int64_t rows, int64_t cols) {
  std::vector<float> p(size_t(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double score = (j % 5 < 2) ? -88.0 - double((i + j) % 16) : -double((i * 7 + j) % 20) * 0.5;
      p[size_t(i * cols + j)] = float(std::exp(score));
      sum += double(p[size_t(i * cols + j)]);
    }
    for (int64_t j = 0; j < cols; ++j) p[size_t(i * cols + j)] = float(double(p[size_t(i * cols + j)]) / sum);
  }
  return p;
}

std::vector<double> product_f64(const std::vector<float>& a, const std::vector<float>& b, int64_t M, int64_t K,
                                int64_t N) {
  std::vector<double> c(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) c[size_t(i * N + j)] += double(a[size_t(i * K + k)]) * double(b[size_t(k * N + j)]);
  return c;
}

TEST(CpuSubnormals, ProductsOfPartlySubnormalOperandsMatchFloat64) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  const int64_t M = 96, K = 128, N = 64;
  const std::vector<float> p = subnormal_probabilities(M, K);
  size_t subnormal = 0;
  for (float x : p) subnormal += std::fpclassify(x) == FP_SUBNORMAL;
  ASSERT_GT(subnormal, p.size() / 4);  // the case this test is about
  std::vector<float> v(size_t(K * N));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(double(i) * 0.37) * 3.0);
  const std::vector<double> want = product_f64(p, v, M, K, N);
  const Array got = matmul(from_vector(p, {M, K}), from_vector(v, {K, N}));
  EXPECT_TRUE(testing::all_close(got, want, 1e-5, 1e-6));
  // Batched (the per-head products of attention, split over the threads), both operand orders.
  const Array pb = expand(from_vector(p, {1, M, K}), {4, M, K}), vb = expand(from_vector(v, {1, K, N}), {4, K, N});
  const std::vector<double> got_b = matmul(pb, vb).to_vector<double>();
  for (int64_t b = 0; b < 4; ++b)
    EXPECT_TRUE(testing::all_close(std::vector<double>(got_b.begin() + b * M * N, got_b.begin() + (b + 1) * M * N),
                                   want, 1e-5, 1e-6))
        << "batch entry " << b;
  std::vector<float> vt(size_t(N * M));
  for (size_t i = 0; i < vt.size(); ++i) vt[i] = float(std::cos(double(i) * 0.11));
  EXPECT_TRUE(testing::all_close(matmul(from_vector(vt, {N, M}), from_vector(p, {M, K})),
                                 product_f64(vt, p, N, M, K), 1e-5, 1e-6));
}

TEST(CpuSubnormals, AllSubnormalProductIsWithinTheBound) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  // Every entry of a is subnormal: the product may lose them all, but by no more than
  // K * 2^-126 * max|b| (the documented bound), and the reference backend keeps them.
  const int64_t M = 8, K = 32, N = 8;
  const std::vector<float> a(size_t(M * K), 1e-39f), b(size_t(K * N), 2.0f);
  const double bound = double(K) * std::ldexp(1.0, -126) * 2.0, exact = double(K) * double(1e-39f) * 2.0;
  for (double x : matmul(from_vector(a, {M, K}), from_vector(b, {K, N})).to_vector<double>()) {
    EXPECT_LE(std::abs(x - exact), bound);
    EXPECT_GE(x, 0.0);
  }
  if (Device::reference().available()) {
    const std::vector<double> ref =
        matmul(from_vector(a, {M, K}, Device::reference()), from_vector(b, {K, N}, Device::reference()))
            .to_vector<double>();
    EXPECT_NEAR(ref[0], exact, 1e-44);  // the oracle keeps gradual underflow
  }
}

TEST(CpuSubnormals, SubnormalTimesInfinityIsNaNAndOtherNonFiniteValuesPropagate) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Row 0: a subnormal meets +inf (documented: NaN, as 0 * inf). Row 1: a normal value meets
  // +inf (+inf). Row 2: NaN in a propagates. Row 3: -0 meets +inf (NaN in IEEE too).
  const std::vector<float> a = {1e-39f, 0.0f, 1.0f, 0.0f, 0.0f, nan, -0.0f, -0.0f};
  const std::vector<float> b = {inf, 1.0f};
  const std::vector<float> got = matmul(from_vector(a, {4, 2}), from_vector(b, {2, 1})).to_vector<float>();
  EXPECT_TRUE(std::isnan(got[0])) << got[0];
  EXPECT_EQ(got[1], inf);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_TRUE(std::isnan(got[3]));
}

TEST(CpuSubnormals, OpsAfterAProductKeepSubnormalsOnEveryThread) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  // A product large enough for the whole OpenMP team (and oneDNN's own parallel region), then a
  // large elementwise op that runs on every thread: halving a subnormal is exact only with
  // gradual underflow (read as zero it would give 0).
  const Array a = uniform({512, 512}, -1, 1, {.seed = 3}), b = uniform({512, 512}, -1, 1, {.seed = 4});
  matmul(a, b).eval();
  const int64_t n = 1 << 20;
  const float tiny = 3e-39f;
  const std::vector<float> halves = mul(full({n}, double(tiny)), 0.5).to_vector<float>();
  const float want = tiny * 0.5f;
  ASSERT_EQ(std::fpclassify(want), FP_SUBNORMAL);
  size_t wrong = 0;
  for (float h : halves) wrong += std::memcmp(&h, &want, sizeof h) != 0;
  EXPECT_EQ(wrong, 0u) << "elementwise results after a product lost their subnormals";
  // And the same after a batched product split over the threads, and after fused attention.
  matmul(uniform({16, 64, 64}, -1, 1, {.seed = 5}), uniform({16, 64, 64}, -1, 1, {.seed = 6})).eval();
  fused_attention(uniform({8, 64, 32}, -1, 1, {.seed = 7}), uniform({8, 64, 32}, -1, 1, {.seed = 8}),
                  uniform({8, 64, 32}, -1, 1, {.seed = 9}))
      .eval();
  wrong = 0;
  for (float h : mul(full({n}, double(tiny)), 0.5).to_vector<float>()) wrong += std::memcmp(&h, &want, sizeof h) != 0;
  EXPECT_EQ(wrong, 0u);
}

TEST(CpuSubnormals, FusedAttentionWithScoresSpanningMoreThan87MatchesReference) {
  if (!Device::cpu().available() || !Device::reference().available()) GTEST_SKIP() << "needs cpu and reference";
  // Scores q.k spanning a few hundred: many probabilities of a row are subnormal. The forward and
  // the backward (both read subnormal operands as zero) against the reference backend, to the
  // accuracy f32 scores of that size allow (the same with EMBER_CPU_SUBNORMALS=keep).
  std::vector<Array> grads_on[2];
  std::vector<double> out_on[2];
  for (int side = 0; side < 2; ++side) {
    const Device dev = side == 0 ? Device::cpu() : Device::reference();
    const Array q = to_device(mul(uniform({2, 48, 16}, -1, 1, {.seed = 11}), 4.0), dev).eval().require_grad();
    const Array k = to_device(mul(uniform({2, 40, 16}, -1, 1, {.seed = 12}), 4.0), dev).eval().require_grad();
    const Array v = to_device(uniform({2, 40, 8}, -1, 1, {.seed = 13}), dev).eval().require_grad();
    const Array w = to_device(uniform({2, 48, 8}, -1, 1, {.seed = 14}), dev);
    const Array o = fused_attention(q, k, v, {.scale = 1.0});
    out_on[side] = o.to_vector<double>();
    const Gradients g = sum(mul(o, w)).backward();
    grads_on[side] = {q.grad(g), k.grad(g), v.grad(g)};
  }
  EXPECT_TRUE(testing::all_close(out_on[0], out_on[1], 2e-4, 1e-6));
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(testing::all_close(grads_on[0][i], grads_on[1][i].to_vector<double>(), 2e-4, 1e-5)) << "gradient " << i;
}

}  // namespace
}  // namespace ember
