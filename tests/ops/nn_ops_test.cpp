// The neural-network tensor ops of ember/ops_nn.h that are not covered by the layer tests in
// tests/nn: the functional batch_norm (PyTorch's F.batch_norm, returning the updated running
// statistics instead of changing buffers), checked against statistics computed here in plain
// loops, its errors, and that the nn namespace still names the moved functions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
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

// The weight's and bias's gradients of the closed-form backward (src/ops/nn_norm.cpp), and the
// second derivative through create_graph (the composition differentiated again): d/dx of
// h(x) = sum(w2 * (d loss / dx)^2), against central differences of h, whose inner gradient is the
// closed form. Over [N, C, H, W] with a reduction over N, H and W.
TEST(NnOpsTest, BatchNormWeightBiasAndSecondOrderGradientsMatchCentralDifferences) {
  const Shape shape{2, 3, 2, 2};
  std::vector<double> xv(24), gv(24), w2v(24);
  for (size_t i = 0; i < 24; ++i) {
    xv[i] = std::sin(1.3 * double(i) + 0.2) * 2 + double(i % 3);
    gv[i] = std::cos(0.7 * double(i)) + 0.1;
    w2v[i] = 0.5 + double(i % 5) * 0.25;
  }
  const std::vector<double> wv = {1.5, -2, 0.5}, bv = {0.25, 3, -1};
  auto loss = [&](const Array& x, const Array& w, const Array& b) {
    return sum(mul(batch_norm(x, Array(), Array(), w, b, {.training = true}).output, from_vector(gv, shape)));
  };
  auto central = [](const std::vector<double>& at, size_t i, const std::function<double(const std::vector<double>&)>& f) {
    std::vector<double> hi = at, lo = at;
    hi[i] += 1e-6;
    lo[i] -= 1e-6;
    return (f(hi) - f(lo)) / 2e-6;
  };
  Array x = from_vector(xv, shape).require_grad();
  Array w = from_vector(wv, {3}).require_grad(), b = from_vector(bv, {3}).require_grad();
  std::vector<Array> g = grad(loss(x, w, b), {w, b});
  std::vector<double> gw = g[0].to_vector<double>(), gb = g[1].to_vector<double>();
  for (size_t c = 0; c < 3; ++c) {
    const double nw = central(wv, c, [&](const std::vector<double>& v) {
      return loss(from_vector(xv, shape), from_vector(v, {3}), from_vector(bv, {3})).item<double>();
    });
    const double nb = central(bv, c, [&](const std::vector<double>& v) {
      return loss(from_vector(xv, shape), from_vector(wv, {3}), from_vector(v, {3})).item<double>();
    });
    EXPECT_NEAR(gw[c], nw, 1e-6 * (1 + std::fabs(nw))) << "weight " << c;
    EXPECT_NEAR(gb[c], nb, 1e-6 * (1 + std::fabs(nb))) << "bias " << c;
  }
  auto h = [&](const Array& xin, bool create_graph) {
    Array dx = grad(loss(xin, from_vector(wv, {3}), from_vector(bv, {3})), {xin}, {.create_graph = create_graph})[0];
    return sum(mul(mul(dx, dx), from_vector(w2v, shape)));
  };
  Array x2 = from_vector(xv, shape).require_grad();
  std::vector<double> second = grad(h(x2, true), {x2})[0].to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    const double numeric = central(xv, i, [&](const std::vector<double>& v) {
      return h(from_vector(v, shape).require_grad(), false).item<double>();
    });
    EXPECT_NEAR(second[i], numeric, 1e-5 * (1 + std::fabs(numeric))) << "element " << i;
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

// PyTorch's bicubic interpolation as its CPU kernel defines it, written as a direct 2-D loop in
// f64 (independent of resize()'s separable taps): source coordinate (o + 0.5) / factor - 0.5, or
// o (in - 1) / (out - 1) with align_corners; floor and fraction t; Keys' weights with a = -0.75;
// the 4 x 4 neighbours read clamped to the input.
std::vector<double> bicubic_loop(const std::vector<double>& x, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                 bool align_corners) {
  const double A = -0.75;
  auto w1 = [&](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };        // |d| <= 1
  auto w2 = [&](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1 < |d| < 2
  auto coeffs = [&](double t) { return std::vector<double>{w2(t + 1), w1(t), w1(1 - t), w2(2 - t)}; };
  auto src = [&](int64_t o, int64_t in, int64_t out) {
    return align_corners ? (out > 1 ? double(o) * double(in - 1) / double(out - 1) : 0.0)
                         : (double(o) + 0.5) * double(in) / double(out) - 0.5;
  };
  std::vector<double> y;
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      const double sy = src(oh, H, OH), sx = src(ow, W, OW);
      const int64_t iy = int64_t(std::floor(sy)), ix = int64_t(std::floor(sx));
      const std::vector<double> cy = coeffs(sy - double(iy)), cx = coeffs(sx - double(ix));
      double v = 0;
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) {
          const int64_t r = std::clamp<int64_t>(iy - 1 + a, 0, H - 1), c = std::clamp<int64_t>(ix - 1 + b, 0, W - 1);
          v += cy[size_t(a)] * cx[size_t(b)] * x[size_t(r * W + c)];
        }
      y.push_back(v);
    }
  return y;
}

TEST(NnOpsTest, BicubicInterpolationMatchesPyTorchsDefinition) {
  // arange(16) as 4 x 4, scale 2: PyTorch gives -0.52734375 at (0, 0) (by hand: the ramp's 1-D
  // value there is -0.10546875, and the image is 4 row + column).
  std::vector<double> ramp(16);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = double(i);
  for (const Device& dev : testing::test_devices()) {
    Array x = from_vector(ramp, {1, 1, 4, 4}, dev);
    Array y = interpolate(x, {.scale_factor = {2.0}, .mode = InterpolateMode::Bicubic});
    ASSERT_EQ(y.shape(), Shape({1, 1, 8, 8}));
    EXPECT_DOUBLE_EQ(y.to_vector<double>()[0], -0.52734375);
    EXPECT_TRUE(testing::all_close(y, bicubic_loop(ramp, 4, 4, 8, 8, false), 1e-12, 1e-12)) << dev.str();
  }
  // Random images, up and down, both corner conventions, sizes and factors, against the loop.
  struct Case {
    int64_t H, W, OH, OW;
    bool align;
  };
  uint32_t seed = 7;
  for (Case c : {Case{5, 7, 9, 4, false}, Case{5, 7, 9, 4, true}, Case{3, 3, 7, 7, true}, Case{6, 4, 2, 3, false},
                 Case{2, 5, 1, 11, false}}) {
    std::vector<double> v(size_t(2 * 3 * c.H * c.W));
    for (double& e : v) e = std::sin(double(seed++) * 0.77);
    Array x = from_vector(v, {2, 3, c.H, c.W}, Device::cpu());
    Array y = interpolate(x, {.size = {c.OH, c.OW}, .mode = InterpolateMode::Bicubic, .align_corners = c.align});
    const std::vector<double> got = y.to_vector<double>();
    for (int64_t img = 0; img < 6; ++img) {
      std::vector<double> one(v.begin() + img * c.H * c.W, v.begin() + (img + 1) * c.H * c.W);
      std::vector<double> want = bicubic_loop(one, c.H, c.W, c.OH, c.OW, c.align);
      std::vector<double> part(got.begin() + img * c.OH * c.OW, got.begin() + (img + 1) * c.OH * c.OW);
      EXPECT_TRUE(testing::all_close(part, want, 1e-12, 1e-12)) << c.H << "x" << c.W << " -> " << c.OH << "x" << c.OW;
    }
  }
  // NaN and inf spread to exactly the outputs whose 4 x 4 neighbourhood reads them.
  std::vector<double> v(36, 1.0);
  v[0] = std::nan("");
  v[35] = INFINITY;
  std::vector<double> want = bicubic_loop(v, 6, 6, 12, 12, false);
  std::vector<double> got = interpolate(from_vector(v, {1, 1, 6, 6}, Device::cpu()),
                                        {.size = {12, 12}, .mode = InterpolateMode::Bicubic})
                                .to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << i;
  // Gradients flow (the op is gathers and products): d sum(y) / dx sums each input's weights.
  Array xg = from_vector(std::vector<double>(16, 0.5), {1, 1, 4, 4}, Device::cpu()).require_grad();
  Array g = grad(sum(interpolate(xg, {.scale_factor = {2.0}, .mode = InterpolateMode::Bicubic})), {xg})[0];
  double total = 0;
  for (double e : g.to_vector<double>()) total += e;
  EXPECT_NEAR(total, 64.0, 1e-12);  // every output's weights sum to 1
  EXPECT_THROW(interpolate(from_vector(ramp, {1, 4, 4}, Device::cpu()), {.size = {8}, .mode = InterpolateMode::Bicubic}),
               Error);
}

TEST(NnOpsTest, ResizeChecksItsOptions) {
  Array x = zeros({2, 3});
  EXPECT_NE(testing::error_of([&] { resize(x, {.sizes = {4}}); }).find("resize: sizes has 1 entries; the input [2, 3] has 2 dims"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { resize(x, {.sizes = {2, 3}, .scales = {1, -2}}); }).find("scales[1] is -2"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { resize(zeros({2, 3}, {DType::I32}), {.sizes = {2, 3}}); }).find("floating"),
            std::string::npos);
  // Nearest, asymmetric, floor: output j reads floor(j / 2) (a 2x upsampling).
  Array r = resize(from_vector(std::vector<double>{1, 2, 3}, {3}, Device::cpu()),
                   {.sizes = {6}, .coordinates = ResizeCoordinates::Asymmetric, .nearest = NearestRounding::Floor});
  EXPECT_TRUE(testing::all_close(r, {1, 1, 2, 2, 3, 3}, 0, 0));
}

}  // namespace
}  // namespace ember
