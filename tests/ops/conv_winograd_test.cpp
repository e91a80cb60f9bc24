// The CPU backend's f32 convolutions at the shapes where it picks oneDNN's Winograd kernels (3x3,
// stride 1, >= 16 input and output channels, >= 64 output pixels; src/backend/cpu/conv_dnnl.cpp:
// the forward as inference, F(4x4, 3x3) kernels, or F(2x2, 3x3) at batch 1) and next to them
// (too few channels, stride 2: direct kernels, as inference on small outputs), forward / backward-data / backward-weights against
// the reference backend's f64 loops, on repeated calls (cached primitives, reused buffers).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "ember/nn/conv.h"
#include "ember/optim/sgd.h"
#include "test_util.h"

namespace ember {
namespace {

Array det_on(const Shape& s, double a, double b, Device d, DType dt) {
  std::vector<double> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i) + b);
  return cast(from_vector(v, s, d), dt);
}

// Largest |got - want| over the largest |want|: Winograd's transforms round differently from a
// direct sum, so the error is relative to the output's scale, not to each element.
double scaled_error(const Array& got, const Array& want) {
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  EXPECT_EQ(g.size(), w.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
    err = std::max(err, std::fabs(g[i] - w[i]));
    scale = std::max(scale, std::fabs(w[i]));
  }
  return err / scale;
}

struct ConvCase {
  const char* name;
  int64_t N, C, H, W, O;
  Conv2dOptions opts;
};

TEST(ConvDnnlTest, F32MatchesReferenceAroundWinogradShapes) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  const ConvCase cases[] = {
      {"winograd_pad1", 3, 32, 12, 10, 48, {.padding = 1}},
      {"winograd_pad0", 2, 16, 9, 11, 16, {}},
      {"winograd_64", 2, 32, 28, 28, 64, {.padding = 1}},
      {"winograd_batch1", 1, 32, 16, 16, 32, {.padding = 1}},      // F(2x2, 3x3)
      {"winograd_batch1_8x8", 1, 64, 8, 8, 128, {.padding = 1}},   // 64 output pixels
      {"small_4x4", 1, 32, 4, 4, 32, {.padding = 1}},  // 16 output pixels: direct (its data pass 5.5e-6)
      {"direct_few_channels", 3, 3, 12, 10, 32, {.padding = 1}},
      {"direct_stride2", 2, 32, 12, 10, 32, {.stride = 2, .padding = 1}},
      // 256 output pixels, 32 input channels: oneDNN's brgemm kernels as inference once the
      // weights stay (the batch-1 ResNet's 32 -> 64 layer).
      {"direct_stride2_batch1", 1, 32, 32, 32, 64, {.stride = 2, .padding = 1}},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Shape xs{c.N, c.C, c.H, c.W}, ws{c.O, c.C, 3, 3};
    struct Operands {
      Array x, w, b, dy;
    };
    auto operands = [&](Device d, DType dt) {
      Array x = det_on(xs, 0.37, 0.1, d, dt), w = mul(det_on(ws, 0.53, 0.7, d, dt), 0.2);
      Array b = det_on({c.O}, 0.9, 0.4, d, dt);
      const Shape ys = conv2d(x, w, b, c.opts).shape();  // (not run)
      return Operands{x, w, b, det_on(ys, 0.29, 0.4, d, dt)};
    };
    auto on = [&](const Operands& o) {
      return std::vector<Array>{conv2d(o.x, o.w, o.b, c.opts), conv2d_backward_data(o.dy, o.w, xs, c.opts),
                                conv2d_backward_weights(o.x, o.dy, ws, c.opts)};
    };
    const std::vector<Array> want = on(operands(Device::reference(), DType::F64));
    // New weights, then the same weights again (cached primitives and reused buffers; Winograd
    // forwards of weights that stay run as inference from the third call on).
    const Operands fresh = operands(Device::cpu(), DType::F32);
    for (int rep = 0; rep < 4; ++rep) {
      SCOPED_TRACE("call " + std::to_string(rep));
      const std::vector<Array> got = on(rep == 0 ? operands(Device::cpu(), DType::F32) : fresh);
      for (size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(got[k].shape(), want[k].shape());
        // Measured: Winograd ~5e-6 of the output's scale; direct ~1e-6 (mostly the f32 inputs).
        const double tol = std::string(c.name).rfind("direct", 0) == 0 ? 3e-6 : 2e-5;
        EXPECT_LT(scaled_error(got[k], want[k]), tol) << "pass " << k << " (forward, data, weights)";
      }
    }
  }
}

// One input channel (src/backend/cpu/conv_small_c.cpp: NCHW loops over whole 16-float vectors,
// stride 1): output rows of 28 (one vector and a tail), 69 (four vectors and a tail), 16 and 33
// columns, asymmetric padding, 5x5 and 1x1 windows (and 3 channels, which oneDNN serves);
// forward, forward + ReLU (the epilogue applied per plane), without bias, and the weight gradient
// (sums over thousands of terms) against the reference's f64.
TEST(ConvDnnlTest, FewInputChannelsMatchTheReference) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  struct Case {
    const char* name;
    int64_t N, C, H, W, O, K;
    Conv2dOptions opts;
  };
  const Case cases[] = {
      {"mnist_first_layer", 3, 1, 28, 28, 8, 3, {.padding = 1}},
      {"unpadded_odd_planes", 2, 1, 17, 18, 5, 3, {}},
      {"wide_5x5_asymmetric", 2, 1, 9, 70, 6, 5, {.padding = Padding2d(2, 1, 0, 3)}},
      {"1x1_rows_of_33", 2, 1, 7, 33, 3, 1, {}},
      // 37 output channels: the weight gradient's blocks of 32 channels, pairs and a lone one.
      {"37_channels", 2, 1, 10, 12, 37, 3, {.padding = 1}},
      {"rgb_stays_with_onednn", 2, 3, 16, 18, 5, 3, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Shape xs{c.N, c.C, c.H, c.W}, ws{c.O, c.C, c.K, c.K};
    auto run = [&](Device d, DType dt) {
      Array x = det_on(xs, 0.37, 0.1, d, dt), w = mul(det_on(ws, 0.53, 0.7, d, dt), 0.2);
      Array b = det_on({c.O}, 0.9, 0.4, d, dt);
      Array y = conv2d(x, w, b, c.opts);
      Array dy = det_on(y.shape(), 0.29, 0.4, d, dt);
      return std::vector<Array>{y, relu(conv2d(x, w, b, c.opts)), conv2d(x, w, c.opts),
                                conv2d_backward_weights(x, dy, ws, c.opts)};
    };
    const std::vector<Array> want = run(Device::reference(), DType::F64), got = run(Device::cpu(), DType::F32);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(got[k].shape(), want[k].shape());
      EXPECT_LT(scaled_error(got[k], want[k]), 3e-6) << "result " << k << " (forward, + relu, no bias, weights)";
    }
  }
}

// The padding's products are +-0: where a sum is -0 (bias -0, every product -0), adding them
// would give +0; the reference skips the padding and keeps -0. And the weight gradient with a
// NaN or infinite output gradient (a product with the padding would be NaN: the f64 loops).
TEST(ConvDnnlTest, FewInputChannelsKeepNegativeZeroAndNonFiniteGradients) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  const Shape xs{2, 1, 6, 20}, ws{3, 1, 3, 3};
  auto forward = [&](Device d) {
    Array x = full(xs, -0.0, {.dtype = DType::F32, .device = d}), w = full(ws, 0.5, {.dtype = DType::F32, .device = d});
    Array b = full({3}, -0.0, {.dtype = DType::F32, .device = d});
    return conv2d(x, w, b, {.padding = 1}).to_vector<float>();
  };
  const std::vector<float> y = forward(Device::cpu()), y_ref = forward(Device::reference());
  ASSERT_EQ(y.size(), size_t(2 * 3 * 6 * 20));
  ASSERT_EQ(y_ref.size(), y.size());
  int negative = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_TRUE(y[i] == 0.0f && std::signbit(y[i]) == std::signbit(y_ref[i])) << "output " << i << ": " << y[i];
    negative += std::signbit(y_ref[i]);
  }
  EXPECT_GT(negative, 0);

  std::vector<double> dyv(2 * 3 * 6 * 20), xv(size_t(xs.numel()));
  for (size_t i = 0; i < dyv.size(); ++i) dyv[i] = std::sin(0.3 * double(i));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::cos(0.7 * double(i));
  dyv[1 * 120 + 5] = INFINITY;  // dy[0, 1, 0, 5]: a border row, so padded taps meet it
  dyv[2 * 120 + 119] = NAN;     // dy[0, 2, 5, 19]
  auto grad = [&](Device d, DType dt) {
    return conv2d_backward_weights(cast(from_vector(xv, xs, d), dt), cast(from_vector(dyv, {2, 3, 6, 20}, d), dt), ws,
                                   {.padding = 1})
        .to_vector<double>();
  };
  const std::vector<double> want = grad(Device::reference(), DType::F64), got = grad(Device::cpu(), DType::F32);
  ASSERT_EQ(got.size(), want.size());
  int specials = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ++specials;
      EXPECT_TRUE(std::isnan(got[i])) << "weight " << i;
    } else if (std::isinf(want[i])) {
      ++specials;
      EXPECT_EQ(got[i], want[i]) << "weight " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "weight " << i;
    }
  }
  EXPECT_GT(specials, 0);
}

// oneDNN 2.6's AVX-512 convolutions gave NaN for outputs whose sum is -inf or +inf when a weight
// is infinite (694 of these 1568 outputs): operands with a non-finite value take the f64 loops.
// Expected values are summed here in f64, one output at a time.
TEST(ConvDnnlTest, InfiniteAndNaNOperandsGiveTheSumsInfinitiesAndNaNs) {
  const Shape xs{2, 16, 9, 9}, ws{16, 16, 3, 3};
  for (int special = 0; special < 3; ++special) {
    SCOPED_TRACE(special == 0 ? "-inf weight" : special == 1 ? "+inf input" : "NaN input");
    std::vector<double> x(size_t(xs.numel())), w(size_t(ws.numel()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * double(i) + 0.1);
    for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.53 * double(i) + 0.2);
    if (special == 0) w[((1 * 16 + 4) * 3 + 0) * 3 + 1] = -INFINITY;    // w[1, 4, 0, 1]
    if (special == 1) x[((0 * 16 + 13) * 9 + 2) * 9 + 5] = INFINITY;     // x[0, 13, 2, 5]
    if (special == 2) x[((1 * 16 + 7) * 9 + 4) * 9 + 4] = NAN;           // x[1, 7, 4, 4]
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(dtype_name(dt));
      // The operands as the dtype holds them, so the f64 sums below see the same values.
      Array xa = cast(from_vector(x, xs, Device::cpu()), dt), wa = cast(from_vector(w, ws, Device::cpu()), dt);
      std::vector<double> xq = xa.to_vector<double>(), wq = wa.to_vector<double>();
      std::vector<double> got = conv2d(xa, wa).to_vector<double>();
      ASSERT_EQ(got.size(), size_t(2 * 16 * 7 * 7));
      int64_t specials = 0;
      for (int64_t i = 0; i < int64_t(got.size()); ++i) {
        const int64_t n = i / (16 * 49), o = (i / 49) % 16, oh = (i % 49) / 7, ow = i % 7;
        double want = 0;
        for (int64_t c = 0; c < 16; ++c)
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw)
              want += xq[size_t(((n * 16 + c) * 9 + oh + kh) * 9 + ow + kw)] * wq[size_t(((o * 16 + c) * 3 + kh) * 3 + kw)];
        if (!std::isfinite(want)) {
          ++specials;
          if (std::isnan(want)) ASSERT_TRUE(std::isnan(got[size_t(i)])) << "output " << i;
          else ASSERT_EQ(got[size_t(i)], want) << "output " << i;
        } else {
          ASSERT_NEAR(got[size_t(i)], want, (dt == DType::F32 ? 1e-5 : 2e-2) * (1 + std::fabs(want))) << "output " << i;
        }
      }
      EXPECT_GT(specials, 0);
    }
  }
}

// oneDNN adds a bias to a sum that starts at +0; the reference starts the sum at the bias, so an
// output whose bias and products are all -0 is -0 there (conv_dnnl.cpp keep_negative_zero_sums).
// 16 input channels (oneDNN, direct and Winograd geometries), a bias of -0, +0 and 1 in turn,
// weights of -0, +0 or mixed signs by output channel, an input of zeros and positive values, with
// padding; alone and under tanh (which keeps the sign of a zero): the bits of every
// output must be the reference's.
TEST(ConvDnnlTest, NegativeZeroBiasKeepsTheReferenceSign) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  for (const int64_t hw : {5, 12}) {
    SCOPED_TRACE("planes of " + std::to_string(hw));
    const Shape xs{2, 16, hw, hw}, ws{16, 16, 3, 3};
    std::vector<double> x(size_t(xs.numel())), w(size_t(ws.numel())), b(16);
    // x >= 0 (no -0: a -0 input times a -0 weight is +0, and one such product makes a sum +0).
    for (size_t i = 0; i < x.size(); ++i) x[i] = i % 5 == 0 ? 0.0 : 0.5 + double(i % 3);
    for (size_t i = 0; i < w.size(); ++i) {
      const size_t o = i / (16 * 9);
      w[i] = o % 4 == 0 ? -0.0 : o % 4 == 1 ? 0.0 : (i % 2 ? 0.25 : -0.25);
    }
    for (size_t o = 0; o < 16; ++o) b[o] = o % 3 == 0 ? -0.0 : o % 3 == 1 ? 0.0 : 1.0;
    for (int with_tanh = 0; with_tanh < 2; ++with_tanh) {
      std::vector<std::vector<float>> ys;
      for (Device d : {Device::reference(), Device::cpu()}) {
        Array y = conv2d(cast(from_vector(x, xs, d), DType::F32), cast(from_vector(w, ws, d), DType::F32),
                         cast(from_vector(b, {16}, d), DType::F32), {.padding = 1});
        ys.push_back((with_tanh ? tanh(y) : y).to_vector<float>());
      }
      SCOPED_TRACE(with_tanh ? "under tanh" : "alone");
      ASSERT_EQ(ys[1].size(), ys[0].size());
      int64_t negative_zeros = 0;
      for (size_t i = 0; i < ys[0].size(); ++i) {
        const float want = ys[0][i], got = ys[1][i];
        // A -0 (every product -0) bit for bit, as any zero that comes out zero; the rest as Winograd
        // rounds (a sum that cancels exactly may come out at 1e-7).
        if ((want == 0.0f && std::signbit(want)) || (want == 0.0f && got == 0.0f)) {
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "output " << i;
          negative_zeros += std::signbit(want);
        } else {
          ASSERT_NEAR(got, want, 1e-5 * (1 + std::fabs(want))) << "output " << i;
        }
      }
      EXPECT_GT(negative_zeros, 0);
    }
  }
}

// The gradients scan their result, not their operands (conv_dnnl.cpp): a result that is not
// finite sends the call to the f64 loops. Each gradient with an infinite or NaN operand (in the
// middle and at a border, where oneDNN and the one-channel loops multiply the padding that the
// reference skips) against the reference backend's sums: the same infinities and NaN, the same
// finite values up to rounding. One and 16 input channels (the one-channel loops and oneDNN).
TEST(ConvDnnlTest, GradientsOfInfiniteAndNaNOperandsMatchTheReference) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  for (const int64_t channels : {1, 16}) {
    const Shape xs{2, channels, 9, 9}, ws{16, channels, 3, 3}, ys{2, 16, 9, 9};
    const Conv2dOptions opts{.padding = 1};
    for (int special = 0; special < 5; ++special) {
      const char* names[] = {"+inf output gradient at a corner", "NaN output gradient", "-inf input at a border",
                             "+inf weight", "finite"};
      SCOPED_TRACE(std::string(names[special]) + ", " + std::to_string(channels) + " channels");
      std::vector<double> x(size_t(xs.numel())), w(size_t(ws.numel())), dy(size_t(ys.numel()));
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * double(i) + 0.1);
      for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.53 * double(i) + 0.2);
      for (size_t i = 0; i < dy.size(); ++i) dy[i] = std::sin(0.29 * double(i) + 0.4);
      if (special == 0) dy[size_t((1 * 16 + 3) * 81)] = INFINITY;             // dy[1, 3, 0, 0]
      if (special == 1) dy[size_t((0 * 16 + 9) * 81 + 4 * 9 + 4)] = NAN;     // dy[0, 9, 4, 4]
      if (special == 2) x[size_t((1 * channels + channels - 1) * 81 + 8 * 9 + 3)] = -INFINITY;  // last row
      if (special == 3) w[size_t((5 * channels + 0) * 9 + 2 * 3 + 1)] = INFINITY;               // w[5, 0, 2, 1]
      std::vector<std::vector<double>> dx, dw;
      for (Device d : {Device::reference(), Device::cpu()}) {
        const DType dt = d == Device::reference() ? DType::F64 : DType::F32;
        Array xa = cast(from_vector(x, xs, d), dt), wa = cast(from_vector(w, ws, d), dt);
        Array ga = cast(from_vector(dy, ys, d), dt);
        dx.push_back(conv2d_backward_data(ga, wa, xs, opts).to_vector<double>());
        dw.push_back(conv2d_backward_weights(xa, ga, ws, opts).to_vector<double>());
      }
      int64_t not_finite = 0;
      for (int which = 0; which < 2; ++which) {
        const std::vector<double>& want = which == 0 ? dx[0] : dw[0];
        const std::vector<double>& got = which == 0 ? dx[1] : dw[1];
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          if (std::isnan(want[i])) {
            ++not_finite;
            ASSERT_TRUE(std::isnan(got[i])) << (which ? "dw " : "dx ") << i;
          } else if (std::isinf(want[i])) {
            ++not_finite;
            ASSERT_EQ(got[i], want[i]) << (which ? "dw " : "dx ") << i;
          } else {
            ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << (which ? "dw " : "dx ") << i;
          }
        }
      }
      EXPECT_EQ(not_finite > 0, special < 4);
    }
  }
}

// A training step's x and dy are kept in oneDNN's layout for the next call that reorders the same
// bytes (src/backend/cpu/reordered_activations.h: same address, layouts and write stamp). Here
// every call gets fresh activations, which the buffer cache hands out at the addresses of the
// last ones, then two pairs alternate and one is used again after other calls: each gradient and
// forward must equal the reference's for its own operands. 16 channels: oneDNN's blocked layout.
TEST(ConvDnnlTest, KeptActivationsAreNeverServedForOtherBytes) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  const Shape xs{2, 16, 8, 8}, ws{16, 16, 3, 3}, ys{2, 16, 8, 8};
  const Conv2dOptions opts{.padding = 1};
  const Array w32 = mul(det_on(ws, 0.53, 0.7, Device::cpu(), DType::F32), 0.2);
  const Array w64 = mul(det_on(ws, 0.53, 0.7, Device::reference(), DType::F64), 0.2);
  std::vector<int> sequence = {0, 1, 2, 3, 4, 5, 6, 5, 6, 5, 0, 2};
  for (size_t call = 0; call < sequence.size(); ++call) {
    const int k = sequence[call];
    SCOPED_TRACE("call " + std::to_string(call) + ", activations " + std::to_string(k));
    const Array x32 = det_on(xs, 0.37 + 0.01 * k, 0.1 * k, Device::cpu(), DType::F32);
    const Array x64 = det_on(xs, 0.37 + 0.01 * k, 0.1 * k, Device::reference(), DType::F64);
    const Array dy32 = det_on(ys, 0.29 - 0.01 * k, 0.4 * k, Device::cpu(), DType::F32);
    const Array dy64 = det_on(ys, 0.29 - 0.01 * k, 0.4 * k, Device::reference(), DType::F64);
    const double tol = 2e-5;  // Winograd rounds differently (above)
    EXPECT_LT(scaled_error(conv2d(x32, w32, {}, opts), conv2d(x64, w64, {}, opts)), tol);
    EXPECT_LT(scaled_error(conv2d_backward_data(dy32, w32, xs, opts), conv2d_backward_data(dy64, w64, xs, opts)), tol);
    EXPECT_LT(scaled_error(conv2d_backward_weights(x32, dy32, ws, opts), conv2d_backward_weights(x64, dy64, ws, opts)),
              tol);
    if (HasFailure()) return;
  }
}

// The forward and backward-data convolutions keep their weights in oneDNN's layout between calls
// (src/backend/cpu/reordered_weights.h), reused only for the same bytes at the same address. Here
// the weights change between calls in every pattern that matters: fresh arrays (whose memory the
// buffer cache hands out again at the same address), constant stretches after changes (the slot
// stops copying, then retries), and alternation between two weights.
// Run at 8 channels (direct kernels, blocked weights) and at 16 on 8x8 (Winograd: the weights kept
// transformed).
TEST(ConvDnnlTest, ChangingWeightsAreNeverServedFromAnOldLayout) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  for (const int64_t channels : {8, 16}) {
  SCOPED_TRACE(std::to_string(channels) + " channels");
  const int64_t hw = channels == 8 ? 6 : 8;
  const Shape xs{1, channels, hw, hw}, ws{16, channels, 3, 3};
  const Conv2dOptions opts{.padding = 1};
  auto weights = [&](int k, Device d, DType dt) { return mul(det_on(ws, 0.53 + 0.01 * k, 0.7 * k, d, dt), 0.2); };
  const Array x32 = det_on(xs, 0.37, 0.1, Device::cpu(), DType::F32);
  const Array x64 = det_on(xs, 0.37, 0.1, Device::reference(), DType::F64);
  const Array dy32 = det_on({1, 16, hw, hw}, 0.29, 0.4, Device::cpu(), DType::F32);
  const Array dy64 = det_on({1, 16, hw, hw}, 0.29, 0.4, Device::reference(), DType::F64);
  // Which weights each call uses: new ones for 6 calls, one kept for 70 (past the retry), then
  // two alternating.
  std::vector<int> sequence;
  for (int k = 0; k < 6; ++k) sequence.push_back(k);
  for (int k = 0; k < 70; ++k) sequence.push_back(6);
  for (int k = 0; k < 8; ++k) sequence.push_back(7 + k % 2);
  for (size_t call = 0; call < sequence.size(); ++call) {
    const int k = sequence[call];
    SCOPED_TRACE("call " + std::to_string(call) + ", weights " + std::to_string(k));
    const Array w = weights(k, Device::cpu(), DType::F32);
    const Array w64 = weights(k, Device::reference(), DType::F64);
    const double tol = channels == 8 ? 3e-6 : 2e-5;  // Winograd rounds differently (above)
    EXPECT_LT(scaled_error(conv2d(x32, w, {}, opts), conv2d(x64, w64, {}, opts)), tol);
    if (call % 7 == 0) {
      EXPECT_LT(scaled_error(conv2d_backward_data(dy32, w, xs, opts), conv2d_backward_data(dy64, w64, xs, opts)), tol);
    }
    if (HasFailure()) return;
  }
  }
}

// Weights rewritten in their own buffer (an update whose input dies with it is donated its buffer,
// scheduler/donation.cpp) and weights trained by SGD (rewritten in the optimizer's arena), each run
// twice after each change, the second time from the kept weight layout: every output must come
// from the weights of that moment, compared with the reference backend's f64 convolution of the
// values the weights hold then. The kept layout is reused on the write stamp of the weights'
// buffer (src/backend/common/host_memory.h), so a write that went unmarked would give an earlier
// output here. Winograd (16 channels on 8x8) and direct (8 channels).
TEST(ConvDnnlTest, WeightsRewrittenInPlaceAreReadAfresh) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  const Conv2dOptions opts{.padding = 1};
  for (const int64_t channels : {8, 16}) {
    SCOPED_TRACE(std::to_string(channels) + " channels");
    const Shape xs{1, channels, 8, 8}, ws{16, channels, 3, 3};
    const Array x = det_on(xs, 0.37, 0.1, Device::cpu(), DType::F32);
    const Array x64 = det_on(xs, 0.37, 0.1, Device::reference(), DType::F64);
    auto check = [&](const Array& y, const Array& w) {
      const Array w64 = cast(from_vector(w.to_vector<double>(), w.shape(), Device::reference()), DType::F64);
      EXPECT_LT(scaled_error(y, conv2d(x64, w64, {}, opts)), 2e-5);
    };
    Array w = mul(det_on(ws, 0.53, 0.7, Device::cpu(), DType::F32), 0.2).eval();
    for (int step = 0; step < 6; ++step) {
      SCOPED_TRACE("update " + std::to_string(step));
      for (int run = 0; run < 2; ++run) check(conv2d(x, w, {}, opts).eval(), w);
      w = add(w, mul(det_on(ws, 0.11 * step, 0.3, Device::cpu(), DType::F32), 0.05)).eval();
    }
    nn::Conv2d conv({.in = channels, .out = 16, .kernel = 3, .padding = 1, .bias = false});
    optim::Sgd opt(conv, {.lr = 0.5, .momentum = 0.9});
    for (int step = 0; step < 6; ++step) {
      SCOPED_TRACE("SGD step " + std::to_string(step));
      conv.eval();
      for (int run = 0; run < 2; ++run) check(conv.forward(x).eval(), conv.named_parameters().at(0).param.array());
      conv.train();
      const Array y = conv.forward(x);
      opt.step(sum(mul(y, y)).backward());
    }
  }
}

}  // namespace
}  // namespace ember
