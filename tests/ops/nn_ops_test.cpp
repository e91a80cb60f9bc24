// The neural-network tensor ops of ember/ops_nn.h that are not covered by the layer tests in
// tests/nn: the functional batch_norm (PyTorch's F.batch_norm, returning the updated running
// statistics instead of changing buffers), checked against statistics computed here in plain
// loops, its errors, and that the nn namespace still names the moved functions.
#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

// x [N, C, L] and the per-channel statistics computed with plain loops in f64.
struct Stats {
  std::vector<double> mean, biased, unbiased;
};
Stats channel_stats(const std::vector<double>& x, int64_t N, int64_t C, int64_t L) {
  Stats s;
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t l = 0; l < L; ++l) sum += x[size_t((n * C + c) * L + l)];
    const double count = double(N * L), mean = sum / count;
    double sq = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t l = 0; l < L; ++l) sq += std::pow(x[size_t((n * C + c) * L + l)] - mean, 2);
    s.mean.push_back(mean);
    s.biased.push_back(sq / count);
    s.unbiased.push_back(sq / (count - 1));
  }
  return s;
}

const std::vector<double> kX = {1, 2, -1, -1, 3, 6, 1, 5, 0.5, -2, 4, 0};  // [N 2, C 2, L 3]

TEST(NnOpsTest, BatchNormTrainingNormalizesWithBatchStatisticsAndUpdatesRunningOnes) {
  const int64_t N = 2, C = 2, L = 3;
  Array x = from_vector(kX, Shape{N, C, L});
  Array rm = from_vector<double>({0.5, -1}, {2}), rv = from_vector<double>({2, 0.25}, {2});
  Array w = from_vector<double>({1.5, -2}, {2}), b = from_vector<double>({0.25, 3}, {2});
  const double eps = 1e-3, momentum = 0.2;
  BatchNormResult r = batch_norm(x, rm, rv, w, b, {.training = true, .momentum = momentum, .eps = eps});
  const Stats s = channel_stats(kX, N, C, L);
  const std::vector<double> wv = {1.5, -2}, bv = {0.25, 3}, rmv = {0.5, -1}, rvv = {2, 0.25};
  std::vector<double> y = r.output.to_vector<double>();
  ASSERT_EQ(r.output.shape(), (Shape{N, C, L}));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t l = 0; l < L; ++l) {
        const size_t i = size_t((n * C + c) * L + l);
        const double want = (kX[i] - s.mean[size_t(c)]) / std::sqrt(s.biased[size_t(c)] + eps) * wv[size_t(c)] + bv[size_t(c)];
        EXPECT_NEAR(y[i], want, 1e-12) << "n " << n << " c " << c << " l " << l;
      }
  std::vector<double> new_mean = r.running_mean.to_vector<double>(), new_var = r.running_var.to_vector<double>();
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(new_mean[c], (1 - momentum) * rmv[c] + momentum * s.mean[c], 1e-12);
    EXPECT_NEAR(new_var[c], (1 - momentum) * rvv[c] + momentum * s.unbiased[c], 1e-12);  // unbiased, as PyTorch
  }
  // The inputs are values: nothing changed them.
  EXPECT_EQ(rm.to_vector<double>(), (std::vector<double>{0.5, -1}));
  // Without running statistics: the same output, no statistics returned.
  BatchNormResult bare = batch_norm(x, Array(), Array(), w, b, {.training = true, .eps = eps});
  EXPECT_FALSE(bare.running_mean.defined());
  EXPECT_FALSE(bare.running_var.defined());
  EXPECT_TRUE(testing::all_close(bare.output, y, 0, 1e-12));
}

TEST(NnOpsTest, BatchNormOutOfTrainingUsesTheRunningStatistics) {
  const int64_t N = 2, C = 2, L = 3;
  Array x = from_vector(kX, Shape{N, C, L});
  const std::vector<double> rmv = {0.5, -1}, rvv = {2, 0.25};
  BatchNormResult r = batch_norm(x, from_vector(rmv, Shape{2}), from_vector(rvv, Shape{2}), Array(), Array(),
                                 {.eps = 1e-5});
  EXPECT_FALSE(r.running_mean.defined());
  std::vector<double> y = r.output.to_vector<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t l = 0; l < L; ++l) {
        const size_t i = size_t((n * C + c) * L + l);
        EXPECT_NEAR(y[i], (kX[i] - rmv[size_t(c)]) / std::sqrt(rvv[size_t(c)] + 1e-5), 1e-12);
      }
}

TEST(NnOpsTest, BatchNormGradientsMatchCentralDifferences) {
  // d/dx of sum(batch_norm(x) * g) in training (the statistics depend on x), against central
  // differences computed here in f64.
  const Shape shape{2, 2, 3};
  const std::vector<double> gv = {0.3, -1, 2, 0.5, 1, -0.25, 1.5, 0.75, -2, 1, 0.1, 0.4};
  Array w = from_vector<double>({1.5, -2}, {2}), b = from_vector<double>({0.25, 3}, {2});
  auto loss = [&](const Array& x) {
    return sum(mul(batch_norm(x, Array(), Array(), w, b, {.training = true}).output, from_vector(gv, shape)));
  };
  Array x = from_vector(kX, shape).require_grad();
  std::vector<double> analytic = grad(loss(x), {x})[0].to_vector<double>();
  for (size_t i = 0; i < kX.size(); ++i) {
    auto at = [&](double d) {
      std::vector<double> v = kX;
      v[i] += d;
      return loss(from_vector(v, shape)).item<double>();
    };
    const double numeric = (at(1e-6) - at(-1e-6)) / 2e-6;
    EXPECT_NEAR(analytic[i], numeric, 1e-6 * (1 + std::fabs(numeric))) << "element " << i;
  }
}

TEST(NnOpsTest, BatchNormErrorsNameTheFunctionAndTheValues) {
  Array x = zeros({2, 3, 4});
  using testing::error_of;
  EXPECT_NE(error_of([&] { batch_norm(x, Array(), Array(), Array(), Array()); })
                .find("batch_norm: out of training, batch_norm normalizes with the running statistics"),
            std::string::npos);
  const std::string wrong = error_of([&] { batch_norm(x, zeros({2}), ones({2}), Array(), Array(), {.training = true}); });
  EXPECT_NE(wrong.find("running_mean must have shape [3] (the channels of input [2, 3, 4]), got [2]"), std::string::npos)
      << wrong;
  EXPECT_NE(error_of([&] { batch_norm(x, zeros({3}), Array(), Array(), Array(), {.training = true}); })
                .find("running_mean and running_var must be given together"),
            std::string::npos);
  EXPECT_NE(error_of([&] { batch_norm(x, Array(), Array(), Array(), Array(), {.training = true, .momentum = 2}); })
                .find("momentum must be in [0, 1], got 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { batch_norm(zeros({3}), Array(), Array(), Array(), Array(), {.training = true}); })
                .find("expected input [N, C, *], got [3]"),
            std::string::npos);
}

// The functions moved from ember::nn to ember; the old names still compile and are the same
// functions (their options structs too).
TEST(NnOpsTest, NnNamesStillNameTheOps) {
  static_assert(std::is_same_v<nn::Conv3dOptions, Conv3dOptions>);
  static_assert(std::is_same_v<nn::ConvTranspose2dOptions, ConvTranspose2dOptions>);
  static_assert(std::is_same_v<nn::InterpolateOptions, InterpolateOptions>);
  static_assert(std::is_same_v<nn::SdpaOptions, SdpaOptions>);
  Array x = from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  Array w = from_vector<float>({1, 0, 0, 1}, {1, 1, 2, 2});
  // conv_transpose2d of a 2x2 input with the identity-diagonal 2x2 kernel, by hand: each input
  // element spreads to (i, j) and (i + 1, j + 1).
  EXPECT_TRUE(testing::all_close(nn::conv_transpose2d(x, w), {1, 2, 0, 3, 5, 2, 0, 3, 4}, 0, 0));
}

}  // namespace
}  // namespace ember
