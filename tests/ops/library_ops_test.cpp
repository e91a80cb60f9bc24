// Library-backed ops (include/ember/ops_library.h) on every backend: convolution (forward,
// backward data / weights, conv1d), pooling, sorting, top-k, unique and scans. Expected values are
// hand-computed or come from the f64 direct loops below (written here, independent of Ember and of
// both plugins); errors name the op and the values; the CPU backend is compared with the reference
// on random inputs.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "ember/autograd.h"
#include "ember/debug.h"
#include "ember/tensor.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

class OpLibrary : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

// ---- f64 direct loops (the expected values) ----------------------------------------------------
struct ConvCase {
  int64_t N, C, H, W, O, KH, KW;
  int64_t sh = 1, sw = 1, pt = 0, pb = 0, pl = 0, pr = 0, dh = 1, dw = 1, G = 1;
  bool bias = true;
  int64_t OH() const { return (H + pt + pb - dh * (KH - 1) - 1) / sh + 1; }
  int64_t OW() const { return (W + pl + pr - dw * (KW - 1) - 1) / sw + 1; }
  Conv2dOptions opts() const {
    return {.stride = {sh, sw}, .padding = {pt, pb, pl, pr}, .dilation = {dh, dw}, .groups = G};
  }
};

// Calls f(n, o, oh, ow, ci, c, kh, kw, ih, iw) for every tap that reads the input.
template <class F>
void conv_taps(const ConvCase& k, F f) {
  const int64_t Cg = k.C / k.G, Og = k.O / k.G;
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t o = 0; o < k.O; ++o)
      for (int64_t oh = 0; oh < k.OH(); ++oh)
        for (int64_t ow = 0; ow < k.OW(); ++ow)
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < k.KH; ++kh)
              for (int64_t kw = 0; kw < k.KW; ++kw) {
                int64_t ih = oh * k.sh - k.pt + kh * k.dh, iw = ow * k.sw - k.pl + kw * k.dw;
                if (ih >= 0 && ih < k.H && iw >= 0 && iw < k.W) f(n, o, oh, ow, (o / Og) * Cg + c, c, kh, kw, ih, iw);
              }
}

std::vector<double> conv_fwd_ref(const ConvCase& k, const std::vector<double>& x, const std::vector<double>& w,
                                 const std::vector<double>& b) {
  const int64_t OH = k.OH(), OW = k.OW(), Cg = k.C / k.G;
  std::vector<double> y(size_t(k.N * k.O * OH * OW), 0.0);
  for (int64_t i = 0; i < int64_t(y.size()); ++i) y[size_t(i)] = k.bias ? b[size_t((i / (OH * OW)) % k.O)] : 0.0;
  conv_taps(k, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t ci, int64_t c, int64_t kh, int64_t kw,
                   int64_t ih, int64_t iw) {
    y[size_t(((n * k.O + o) * OH + oh) * OW + ow)] +=
        x[size_t(((n * k.C + ci) * k.H + ih) * k.W + iw)] * w[size_t(((o * Cg + c) * k.KH + kh) * k.KW + kw)];
  });
  return y;
}
std::vector<double> conv_bwd_data_ref(const ConvCase& k, const std::vector<double>& dy, const std::vector<double>& w) {
  const int64_t OH = k.OH(), OW = k.OW(), Cg = k.C / k.G;
  std::vector<double> dx(size_t(k.N * k.C * k.H * k.W), 0.0);
  conv_taps(k, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t ci, int64_t c, int64_t kh, int64_t kw,
                   int64_t ih, int64_t iw) {
    dx[size_t(((n * k.C + ci) * k.H + ih) * k.W + iw)] +=
        dy[size_t(((n * k.O + o) * OH + oh) * OW + ow)] * w[size_t(((o * Cg + c) * k.KH + kh) * k.KW + kw)];
  });
  return dx;
}
std::vector<double> conv_bwd_weights_ref(const ConvCase& k, const std::vector<double>& x, const std::vector<double>& dy) {
  const int64_t OH = k.OH(), OW = k.OW(), Cg = k.C / k.G;
  std::vector<double> dw(size_t(k.O * Cg * k.KH * k.KW), 0.0);
  conv_taps(k, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t ci, int64_t c, int64_t kh, int64_t kw,
                   int64_t ih, int64_t iw) {
    dw[size_t(((o * Cg + c) * k.KH + kh) * k.KW + kw)] +=
        dy[size_t(((n * k.O + o) * OH + oh) * OW + ow)] * x[size_t(((n * k.C + ci) * k.H + ih) * k.W + iw)];
  });
  return dw;
}

struct PoolCase {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw;
  bool include_pad = true;
  int64_t OH() const { return (H + 2 * ph - kh) / sh + 1; }
  int64_t OW() const { return (W + 2 * pw - kw) / sw + 1; }
  Pool2dOptions opts() const {
    return {.kernel = {kh, kw}, .stride = {sh, sw}, .padding = {ph, pw}, .count_include_pad = include_pad};
  }
};

// Max (first maximum; NaN wins), its flat index, and the average of each window.
void pool_ref(const PoolCase& p, const std::vector<double>& x, std::vector<double>& mx, std::vector<double>& arg,
              std::vector<double>& avg) {
  for (int64_t nc = 0; nc < p.N * p.C; ++nc)
    for (int64_t oh = 0; oh < p.OH(); ++oh)
      for (int64_t ow = 0; ow < p.OW(); ++ow) {
        double best = 0, s = 0;
        int64_t bi = -1, inside = 0;
        for (int64_t i = oh * p.sh - p.ph; i < oh * p.sh - p.ph + p.kh; ++i)
          for (int64_t j = ow * p.sw - p.pw; j < ow * p.sw - p.pw + p.kw; ++j) {
            if (i < 0 || i >= p.H || j < 0 || j >= p.W) continue;
            double v = x[size_t((nc * p.H + i) * p.W + j)];
            ++inside;
            s += v;
            if (bi < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
              best = v;
              bi = i * p.W + j;
            }
          }
        mx.push_back(best);
        arg.push_back(double(bi));
        avg.push_back(s / double(p.include_pad ? p.kh * p.kw : inside));
      }
}

// ---- convolution ---------------------------------------------------------------------------
TEST_P(OpLibrary, Conv2dHandComputed) {
  for (DType t : float_dtypes()) {
    // 1..9 in a 3x3 image; the 2x2 filter [[1, 0], [0, 1]] adds each pixel to its lower-right one.
    Array x = make(iota_d(9, 1), {1, 1, 3, 3}, t, dev);
    Array w = make({1, 0, 0, 1}, {1, 1, 2, 2}, t, dev);
    Array y = conv2d(x, w);
    EXPECT_EQ(y.dtype(), t);
    EXPECT_TRUE(same_shape(y, {1, 1, 2, 2}));
    EXPECT_TRUE(same(y, {6, 8, 12, 14}));
    EXPECT_TRUE(same(conv2d(x, w, make({0.5}, {1}, t, dev)), {6.5, 8.5, 12.5, 14.5}));
    // padding 1, stride 2: corners of the padded 4x4 output grid.
    Array yp = conv2d(x, w, {.stride = 2, .padding = 1});
    EXPECT_TRUE(same_shape(yp, {1, 1, 2, 2}));
    EXPECT_TRUE(same(yp, {1, 3, 7, 14}));
  }
}

TEST_P(OpLibrary, Conv2dOptionsAgainstDirectLoop) {
  std::vector<ConvCase> cases = {
      {.N = 2, .C = 3, .H = 7, .W = 6, .O = 4, .KH = 3, .KW = 3},
      {.N = 1, .C = 2, .H = 8, .W = 9, .O = 3, .KH = 3, .KW = 2, .sh = 2, .sw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
      {.N = 2, .C = 2, .H = 6, .W = 7, .O = 2, .KH = 2, .KW = 3, .pt = 0, .pb = 2, .pl = 3, .pr = 1, .bias = false},
      {.N = 1, .C = 3, .H = 9, .W = 8, .O = 2, .KH = 3, .KW = 3, .pt = 2, .pb = 2, .pl = 2, .pr = 2, .dh = 2, .dw = 2},
      {.N = 2, .C = 4, .H = 5, .W = 5, .O = 6, .KH = 3, .KW = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .G = 2},
      {.N = 1, .C = 4, .H = 6, .W = 5, .O = 4, .KH = 3, .KW = 3, .sh = 2, .sw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .G = 4},  // depthwise
      {.N = 3, .C = 5, .H = 4, .W = 4, .O = 7, .KH = 1, .KW = 1, .bias = false},
  };
  uint64_t seed = 1;
  for (const ConvCase& k : cases) {
    for (DType t : {DType::F32, DType::F64}) {
      auto xv = rand_f32(k.N * k.C * k.H * k.W, -1, 1, seed++), wv = rand_f32(k.O * (k.C / k.G) * k.KH * k.KW, -1, 1, seed++);
      auto bv = rand_f32(k.O, -1, 1, seed++);
      Array x = make(xv, {k.N, k.C, k.H, k.W}, t, dev), w = make(wv, {k.O, k.C / k.G, k.KH, k.KW}, t, dev);
      Array y = k.bias ? conv2d(x, w, make(bv, {k.O}, t, dev), k.opts()) : conv2d(x, w, k.opts());
      ASSERT_TRUE(same_shape(y, {k.N, k.O, k.OH(), k.OW()}));
      const double tol = t == DType::F64 ? 1e-12 : 1e-5;
      EXPECT_TRUE(all_close(y, conv_fwd_ref(k, xv, wv, bv), tol, tol)) << "case " << seed;
      auto gv = rand_f32(k.N * k.O * k.OH() * k.OW(), -1, 1, seed++);
      Array g = make(gv, {k.N, k.O, k.OH(), k.OW()}, t, dev);
      EXPECT_TRUE(all_close(conv2d_backward_data(g, w, x.shape(), k.opts()), conv_bwd_data_ref(k, gv, wv), tol, tol));
      EXPECT_TRUE(all_close(conv2d_backward_weights(x, g, w.shape(), k.opts()), conv_bwd_weights_ref(k, xv, gv), tol, tol));
    }
  }
}

TEST_P(OpLibrary, Conv2dSamePaddingStridedInputsAndHalfPrecision) {
  // 'same' with an even kernel: the extra row/column of padding goes bottom/right.
  ConvCase k{.N = 1, .C = 2, .H = 5, .W = 6, .O = 3, .KH = 4, .KW = 3, .pt = 1, .pb = 2, .pl = 1, .pr = 1};
  auto xv = rand_f32(60, -1, 1, 77), wv = rand_f32(72, -1, 1, 78), bv = rand_f32(3, -1, 1, 79);
  Array x = f32(xv, {1, 2, 5, 6}, dev), w = f32(wv, {3, 2, 4, 3}, dev), b = f32(bv, {3}, dev);
  Array y = conv2d(x, w, b, {.padding = Padding2d::same()});
  ASSERT_TRUE(same_shape(y, {1, 3, 5, 6}));
  EXPECT_TRUE(all_close(y, conv_fwd_ref(k, xv, wv, bv), 1e-5, 1e-5));
  // Dilated 'same': total padding dilation * (K - 1).
  Array yd = conv2d(x, w, {.padding = Padding2d::same(), .dilation = 2});
  EXPECT_TRUE(same_shape(yd, {1, 3, 5, 6}));
  // A transposed (non-contiguous) input gives the same as its contiguous copy.
  Array xt = transpose(f32(xv, {1, 2, 6, 5}, dev), 2, 3);
  EXPECT_TRUE(all_close(conv2d(xt, w, b, {.padding = 1}), conv2d(contiguous(xt), w, b, {.padding = 1}).to_vector<double>(), 1e-6, 1e-6));
  // f16 / bf16 compute in f32 and round the result.
  for (DType t : {DType::F16, DType::BF16}) {
    Array yh = conv2d(cast(x, t), cast(w, t), cast(b, t), {.padding = 1});
    EXPECT_EQ(yh.dtype(), t);
    EXPECT_TRUE(all_close(yh, conv2d(cast(cast(x, t), DType::F32), cast(cast(w, t), DType::F32), cast(cast(b, t), DType::F32), {.padding = 1}).to_vector<double>(),
                          rtol_for(t), 2e-2));
  }
  // Mixed dtypes promote; an empty batch gives an empty result.
  EXPECT_EQ(conv2d(x, cast(w, DType::F64)).dtype(), DType::F64);
  EXPECT_TRUE(same_shape(conv2d(f32({}, {0, 2, 5, 6}, dev), w), {0, 3, 2, 4}));
}

TEST_P(OpLibrary, Conv1d) {
  // x [1, 1, 5] = 1..5, w = [1, 2, 3], padding 1.
  Array x = f64(iota_d(5, 1), {1, 1, 5}, dev);
  Array w = f64({1, 2, 3}, {1, 1, 3}, dev);
  EXPECT_TRUE(same(conv1d(x, w), {14, 20, 26}));
  EXPECT_TRUE(same(conv1d(x, w, {.padding = 1}), {8, 14, 20, 26, 14}));
  EXPECT_TRUE(same(conv1d(x, w, f64({1}, {1}, dev), {.stride = 2, .padding = 1}), {9, 21, 15}));
  EXPECT_TRUE(same(conv1d(x, w, {.padding = Padding1d::same(), .dilation = 2}), {11, 16, 22, 10, 13}));
  Array y = conv1d(f32(rand_f32(2 * 4 * 9, -1, 1, 5), {2, 4, 9}, dev), f32(rand_f32(6 * 2 * 3, -1, 1, 6), {6, 2, 3}, dev), {.groups = 2});
  EXPECT_TRUE(same_shape(y, {2, 6, 7}));
}

TEST_P(OpLibrary, ConvErrors) {
  Array x = f32(iota_d(2 * 3 * 5 * 5), {2, 3, 5, 5}, dev);
  Array w = f32(iota_d(4 * 3 * 3 * 3), {4, 3, 3, 3}, dev);
  EMBER_EXPECT_ERROR(conv2d(x, f32(iota_d(4 * 2 * 9), {4, 2, 3, 3}, dev)), "conv2d", "channel mismatch", "3 channels",
                     "library_ops_test.cpp");
  EMBER_EXPECT_ERROR(conv2d(x, f32(iota_d(4 * 3 * 36), {4, 3, 6, 6}, dev)), "conv2d", "kernel (6, 6)", "larger than the padded input (5, 5)");
  EMBER_EXPECT_ERROR(conv2d(x, w, {.dilation = 3}), "conv2d", "dilated (7, 7)");
  EMBER_EXPECT_ERROR(conv2d(x, w, {.groups = 2}), "conv2d", "groups 2 must divide", "3");
  EMBER_EXPECT_ERROR(conv2d(x, w, {.stride = 0}), "conv2d", "stride must be at least 1");
  EMBER_EXPECT_ERROR(conv2d(x, w, {.padding = -1}), "conv2d", "padding must not be negative");
  EMBER_EXPECT_ERROR(conv2d(x, w, {.stride = 2, .padding = Padding2d::same()}), "conv2d", "'same' needs stride 1");
  EMBER_EXPECT_ERROR(conv2d(x, w, f32({1, 2}, {2}, dev)), "conv2d", "bias must have shape [4]", "[2]");
  EMBER_EXPECT_ERROR(conv2d(reshape(x, {6, 5, 5}), w), "conv2d", "input must be 4-D", "[6, 5, 5]");
  EMBER_EXPECT_ERROR(conv2d(cast(x, DType::I32), cast(w, DType::I32)), "conv2d", "floating", "int32");
  EMBER_EXPECT_ERROR(conv1d(x, w), "conv1d", "3-D");
  EMBER_EXPECT_ERROR(conv2d_backward_data(f32(iota_d(4), {1, 1, 2, 2}, dev), w, x.shape()), "conv2d_backward_data", "grad_out has shape");
}

// ---- pooling -------------------------------------------------------------------------------
TEST_P(OpLibrary, PoolingHandComputed) {
  for (DType t : float_dtypes()) {
    // 4x4 image 0..15: 2x2 max pooling takes each block's bottom-right value.
    Array x = make(iota_d(16), {1, 1, 4, 4}, t, dev);
    EXPECT_TRUE(same(max_pool2d(x, {.kernel = 2}), {5, 7, 13, 15}));
    EXPECT_TRUE(same(avg_pool2d(x, {.kernel = 2}), {2.5, 4.5, 10.5, 12.5}));
    EXPECT_TRUE(same(max_pool2d_indices(x, {.kernel = 2}), {5, 7, 13, 15}));
    ValuesIndices both = max_pool2d_with_indices(x, {.kernel = 2});
    EXPECT_EQ(both.values.dtype(), t);
    EXPECT_EQ(both.indices.dtype(), DType::I64);
    EXPECT_TRUE(same(both.values, {5, 7, 13, 15}));
    EXPECT_TRUE(same(both.indices, {5, 7, 13, 15}));
    // 3x3 windows, stride 1: maximum of each window.
    EXPECT_TRUE(same(max_pool2d(x, {.kernel = 3, .stride = 1}), {10, 11, 14, 15}));
    // Padding 1, kernel 2, stride 2: windows at the borders see one real value (the padding counts
    // in the average unless count_include_pad is false).
    Array x3 = make(iota_d(9, 1), {1, 1, 3, 3}, t, dev);
    EXPECT_TRUE(same(max_pool2d(x3, {.kernel = 2, .stride = 2, .padding = 1}), {1, 3, 7, 9}));
    EXPECT_TRUE(same(avg_pool2d(x3, {.kernel = 2, .stride = 2, .padding = 1}), {0.25, 1.25, 2.75, 7}));
    EXPECT_TRUE(same(avg_pool2d(x3, {.kernel = 2, .stride = 2, .padding = 1, .count_include_pad = false}), {1, 2.5, 5.5, 7}));
    // Unbatched [C, H, W].
    EXPECT_TRUE(same_shape(max_pool2d(make(iota_d(16), {1, 4, 4}, t, dev), {.kernel = 2}), {1, 2, 2}));
  }
  // Negative values and padding: padding never wins.
  Array neg = f32({-5, -4, -3, -2}, {1, 1, 2, 2}, dev);
  EXPECT_TRUE(same(max_pool2d(neg, {.kernel = 2, .stride = 1, .padding = 1}), {-5, -4, -4, -3, -2, -2, -3, -2, -2}));
  // 1-D pools.
  Array l = f32({1, 3, 2, 5, 4, 0}, {1, 1, 6}, dev);
  EXPECT_TRUE(same(max_pool1d(l, {.kernel = 2}), {3, 5, 4}));
  EXPECT_TRUE(same(avg_pool1d(l, {.kernel = 3, .stride = 3}), {2, 3}));
  EXPECT_TRUE(same(max_pool1d(f32({1, 3, 2, 5}, {2, 2}, dev), {.kernel = 2}), {3, 5}));
}

TEST_P(OpLibrary, PoolingAgainstDirectLoop) {
  std::vector<PoolCase> cases = {
      {2, 3, 7, 6, 2, 2, 2, 2, 0, 0},      {1, 2, 9, 8, 3, 3, 2, 2, 1, 1},
      {1, 2, 9, 8, 3, 3, 2, 2, 1, 1, false}, {2, 1, 5, 7, 3, 2, 1, 3, 1, 1},
      {1, 3, 6, 6, 4, 4, 1, 1, 2, 2, false}, {1, 1, 1, 5, 1, 3, 1, 1, 0, 1},
  };
  uint64_t seed = 200;
  for (const PoolCase& p : cases)
    for (DType t : {DType::F32, DType::F64}) {
      auto xv = rand_f32(p.N * p.C * p.H * p.W, -2, 2, seed++);
      std::vector<double> mx, arg, avg;
      pool_ref(p, xv, mx, arg, avg);
      Array x = make(xv, {p.N, p.C, p.H, p.W}, t, dev);
      EXPECT_TRUE(same(max_pool2d(x, p.opts()), mx));
      EXPECT_TRUE(same(max_pool2d_indices(x, p.opts()), arg));
      ValuesIndices both = max_pool2d_with_indices(x, p.opts());  // one call, two outputs
      EXPECT_TRUE(same(both.values, mx));
      EXPECT_TRUE(same(both.indices, arg));
      EXPECT_TRUE(all_close(avg_pool2d(x, p.opts()), avg, 1e-6, 1e-6));
      // avg_pool2d_backward is the adjoint: <avg(x), g> == <x, avg_backward(g)>.
      auto gv = rand_f32(int64_t(avg.size()), -1, 1, seed++);
      Array g = make(gv, {p.N, p.C, p.OH(), p.OW()}, t, dev);
      std::vector<double> bx = avg_pool2d_backward(g, x.shape(), p.opts()).to_vector<double>();
      double lhs = 0, rhs = 0;
      for (size_t i = 0; i < avg.size(); ++i) lhs += avg[i] * gv[i];
      for (size_t i = 0; i < bx.size(); ++i) rhs += xv[i] * bx[i];
      EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
    }
}

TEST_P(OpLibrary, MaxPoolNaNAndTies) {
  const double nan = std::nan("");
  Array x = f32({1, nan, 3, 2, 4, 4, 4, 4}, {1, 2, 2, 2}, dev);
  EXPECT_TRUE(same(max_pool2d(x, {.kernel = 2}), {nan, 4}));
  EXPECT_TRUE(same(max_pool2d_indices(x, {.kernel = 2}), {1, 0}));  // NaN wins; ties: the first
  ValuesIndices both = max_pool2d_with_indices(x, {.kernel = 2});
  EXPECT_TRUE(same(both.values, {nan, 4}));
  EXPECT_TRUE(same(both.indices, {1, 0}));
  // -inf and +inf windows, unbatched [C, H, W].
  const double inf = std::numeric_limits<double>::infinity();
  ValuesIndices infs = max_pool2d_with_indices(f32({-inf, -inf, -inf, -inf, 1, inf, inf, 2}, {2, 2, 2}, dev), {.kernel = 2});
  EXPECT_TRUE(same_shape(infs.values, {2, 1, 1}));
  EXPECT_TRUE(same(infs.values, {-inf, inf}));
  EXPECT_TRUE(same(infs.indices, {0, 1}));
}

// max_pool2d_with_indices is one node with two outputs (values, i64 indices): its gradient equals
// max_pool2d's (the first maximum of each window gets it), and a kernel reading both fuses them.
TEST_P(OpLibrary, MaxPoolWithIndicesIsOneNodeWithMaxPoolsGradient) {
  auto xv = rand_f32(2 * 3 * 6 * 5, -2, 2, 901);
  xv[7] = xv[8];  // a tie
  const Pool2dOptions p{.kernel = 3, .stride = 2, .padding = 1};
  Array x = f64(std::vector<double>(xv.begin(), xv.end()), {2, 3, 6, 5}, dev).require_grad();
  ValuesIndices both = max_pool2d_with_indices(x, p);
  Array y = add(mul(both.values, 3.0), cast(both.indices, DType::F64));  // one kernel reads both outputs
  const std::string text = graph_text({y});
  size_t calls = 0;
  for (size_t at = text.find("max_pool2d_with_indices("); at != std::string::npos;
       at = text.find("max_pool2d_with_indices(", at + 1))
    ++calls;
  EXPECT_EQ(calls, 1u) << text;
  Array want = add(mul(max_pool2d(x, p), 3.0), cast(max_pool2d_indices(x, p), DType::F64));
  EXPECT_TRUE(same(y, want.to_vector<double>()));
  const Array g_got = grad(sum(y), {x})[0];
  const std::vector<double> g = g_got.to_vector<double>();
  const std::vector<double> g_want = grad(sum(mul(max_pool2d(x, p), 3.0)), {x})[0].to_vector<double>();
  EXPECT_TRUE(same(g_got, g_want));
  double total = 0;
  for (double v : g) total += v;
  EXPECT_DOUBLE_EQ(total, 3.0 * double(both.values.numel()));  // every window's gradient lands once
}

TEST_P(OpLibrary, AdaptiveAvgPool) {
  Array x = f64(iota_d(16), {1, 1, 4, 4}, dev);
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(x, 2), {2.5, 4.5, 10.5, 12.5}, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(x, 1), {7.5}, 1e-12, 1e-12));
  // 5 -> 3 windows: [0, 2), [1, 4), [3, 5) (overlapping, PyTorch's definition).
  Array r = f64({1, 2, 3, 4, 5}, {1, 1, 1, 5}, dev);
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(r, {1, 3}), {1.5, 3, 4.5}, 1e-12, 1e-12));
  EXPECT_TRUE(same_shape(adaptive_avg_pool2d(f32(iota_d(2 * 7 * 9), {2, 7, 9}, dev), {3, 4}), {2, 3, 4}));
}

TEST_P(OpLibrary, PoolErrors) {
  Array x = f32(iota_d(2 * 3 * 4 * 4), {2, 3, 4, 4}, dev);
  EMBER_EXPECT_ERROR(max_pool2d(x, {.kernel = 5}), "max_pool2d", "kernel (5, 5) is larger than the padded input (4, 4)",
                     "library_ops_test.cpp");
  EMBER_EXPECT_ERROR(avg_pool2d(x, {.kernel = 2, .padding = 2}), "avg_pool2d", "padding (2, 2)", "half the kernel");
  EMBER_EXPECT_ERROR(max_pool2d(x, {.kernel = 0}), "max_pool2d", "kernel must be at least 1");
  EMBER_EXPECT_ERROR(max_pool2d(cast(x, DType::I32), {.kernel = 2}), "max_pool2d", "floating", "int32");
  EMBER_EXPECT_ERROR(max_pool2d(reshape(x, {96}), {.kernel = 2}), "max_pool2d", "4-D");
  EMBER_EXPECT_ERROR(adaptive_avg_pool2d(x, 0), "adaptive_avg_pool2d", "output size");
}

// ---- sorting -------------------------------------------------------------------------------
TEST_P(OpLibrary, SortStableWithTiesAndNaN) {
  const double nan = std::nan("");
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Array x = make({3, 1, nan, 2, 1, 3}, {6}, t, dev);
    ValuesIndices s = sort(x);
    EXPECT_TRUE(same(s.values, {1, 1, 2, 3, 3, nan}));
    EXPECT_TRUE(same(s.indices, {1, 4, 3, 0, 5, 2}));
    ValuesIndices d = sort(x, 0, true);
    EXPECT_TRUE(same(d.values, {nan, 3, 3, 2, 1, 1}));
    EXPECT_TRUE(same(d.indices, {2, 0, 5, 3, 1, 4}));  // ties keep their order in both directions
    EXPECT_EQ(s.indices.dtype(), DType::I64);
  }
  for (DType t : {DType::I32, DType::I64, DType::U8}) {
    Array x = make({5, 2, 9, 2, 0}, {5}, t, dev);
    EXPECT_TRUE(same(sort(x).values, {0, 2, 2, 5, 9}));
    EXPECT_TRUE(same(argsort(x, -1, true), {2, 0, 1, 3, 4}));
  }
  EXPECT_TRUE(same(argsort(make({1, 0, 1, 0}, {4}, DType::Bool, dev)), {1, 3, 0, 2}));
  // Large integers sort exactly (no rounding through double).
  Array big = from_vector<int64_t>({(int64_t(1) << 60) + 1, int64_t(1) << 60}, {2}, dev);
  EXPECT_TRUE(same(argsort(big), {1, 0}));
}

TEST_P(OpLibrary, SortAlongDimsEmptyAndScalar) {
  Array x = f32({3, 1, 2, 9, 8, 7}, {2, 3}, dev);
  EXPECT_TRUE(same(sort(x, 1).values, {1, 2, 3, 7, 8, 9}));
  EXPECT_TRUE(same(sort(x, 0).indices, {0, 0, 0, 1, 1, 1}));
  EXPECT_TRUE(same(sort(x, 0, true).values, {9, 8, 7, 3, 1, 2}));
  // Non-contiguous input.
  EXPECT_TRUE(same(sort(transpose(x, 0, 1), 1).values, {3, 9, 1, 8, 2, 7}));
  EXPECT_TRUE(same_shape(sort(f32({}, {0, 3}, dev), 1).values, {0, 3}));
  EXPECT_TRUE(same_shape(sort(f32({}, {2, 0}, dev), 1).indices, {2, 0}));
  ValuesIndices s = sort(f32({4}, {}, dev));
  EXPECT_TRUE(same_shape(s.values, {}));
  EXPECT_TRUE(same(s.indices, {0}));
  EMBER_EXPECT_ERROR(sort(x, 2), "sort", "dim 2 is out of range");
}

TEST_P(OpLibrary, Topk) {
  Array x = f32({4, 1, 4, 7, 0, 7, 2}, {7}, dev);
  ValuesIndices t = topk(x, 3);
  EXPECT_TRUE(same(t.values, {7, 7, 4}));
  EXPECT_TRUE(same(t.indices, {3, 5, 0}));
  ValuesIndices s = topk(x, 2, 0, false);
  EXPECT_TRUE(same(s.values, {0, 1}));
  EXPECT_TRUE(same(s.indices, {4, 1}));
  EXPECT_TRUE(same_shape(topk(x, 0).values, {0}));
  EXPECT_TRUE(same(topk(x, 7).indices, {3, 5, 0, 2, 6, 1, 4}));
  Array m = i32({1, 5, 3, 6, 4, 2}, {2, 3}, dev);
  ValuesIndices r = topk(m, 1, 0);
  EXPECT_EQ(r.values.dtype(), DType::I32);
  EXPECT_TRUE(same(r.values, {6, 5, 3}));
  EXPECT_TRUE(same(r.indices, {1, 0, 0}));
  const double nan = std::nan("");
  EXPECT_TRUE(same(topk(f64({1, nan, 3}, {3}, dev), 2).values, {nan, 3}));
  EMBER_EXPECT_ERROR(topk(x, 8), "topk", "k = 8 is out of range", "size 7", "library_ops_test.cpp");
  EMBER_EXPECT_ERROR(topk(x, -1), "topk", "k = -1");
}

TEST_P(OpLibrary, Unique) {
  Array x = i64({3, 1, 3, 2, 1, 3}, {2, 3}, dev);
  UniqueResult u = unique(x);
  EXPECT_TRUE(same(u.values, {1, 2, 3}));
  EXPECT_EQ(u.values.dtype(), DType::I64);
  EXPECT_TRUE(same(u.counts, {2, 1, 3}));
  EXPECT_TRUE(same_shape(u.inverse, {2, 3}));
  EXPECT_TRUE(same(u.inverse, {2, 0, 2, 1, 0, 2}));
  const double nan = std::nan("");
  UniqueResult f = unique(f32({0.5, nan, -1, 0.5, nan}, {5}, dev));
  EXPECT_TRUE(same(f.values, {-1, 0.5, nan}));
  EXPECT_TRUE(same(f.counts, {1, 2, 2}));
  EXPECT_TRUE(same(f.inverse, {1, 2, 0, 1, 2}));
  UniqueResult e = unique(f32({}, {0}, dev));
  EXPECT_TRUE(same_shape(e.values, {0}));
  EXPECT_TRUE(same_shape(e.counts, {0}));
  // A pending input is realized first.
  EXPECT_TRUE(same(unique(mul(x, 2)).values, {2, 4, 6}));
}

// ---- scans ---------------------------------------------------------------------------------
TEST_P(OpLibrary, Scans) {
  Array x = f64({1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  EXPECT_TRUE(same(cumsum(x, 1), {1, 3, 6, 4, 9, 15}));
  EXPECT_TRUE(same(cumsum(x, 0), {1, 2, 3, 5, 7, 9}));
  EXPECT_TRUE(same(cumprod(x, 1), {1, 2, 6, 4, 20, 120}));
  EXPECT_TRUE(same(cumprod(x, -2), {1, 2, 3, 4, 10, 18}));
  Array xi = i32({1, 2, 3}, {3}, dev);
  EXPECT_EQ(cumsum(xi, 0).dtype(), DType::I64);
  EXPECT_TRUE(same(cumsum(make({1, 1, 0, 1}, {4}, DType::Bool, dev), 0), {1, 2, 2, 3}));
  EXPECT_EQ(cumsum(f32({1}, {1}, dev), 0).dtype(), DType::F32);
  EXPECT_TRUE(same(cumsum(transpose(x, 0, 1), 1), {1, 5, 2, 7, 3, 9}));
  EXPECT_TRUE(same_shape(cumsum(f32({}, {0, 2}, dev), 0), {0, 2}));
  EXPECT_TRUE(same(cumprod(i64({-2, 3, -4}, {3}, dev), 0), {-2, -6, 24}));
  // cummax / cummin: ties take the latest index; a NaN stays once seen.
  Array c = f32({1, 3, 2, 3, 0, 5}, {6}, dev);
  ValuesIndices mx = cummax(c, 0);
  EXPECT_TRUE(same(mx.values, {1, 3, 3, 3, 3, 5}));
  EXPECT_TRUE(same(mx.indices, {0, 1, 1, 3, 3, 5}));
  ValuesIndices mn = cummin(c, 0);
  EXPECT_TRUE(same(mn.values, {1, 1, 1, 1, 0, 0}));
  EXPECT_TRUE(same(mn.indices, {0, 0, 0, 0, 4, 4}));
  const double nan = std::nan("");
  ValuesIndices n = cummax(f64({1, nan, 5, nan}, {4}, dev), 0);
  EXPECT_TRUE(same(n.values, {1, nan, nan, nan}));
  EXPECT_TRUE(same(n.indices, {0, 1, 1, 3}));
  EXPECT_TRUE(same(cummin(i32({4, 2, 2, 7}, {2, 2}, dev), 0).indices, {0, 0, 1, 0}));
  EMBER_EXPECT_ERROR(cumsum(x, 2), "cumsum", "dim 2 is out of range", "library_ops_test.cpp");
}

// ---- gradients through the library ops (end to end; gradcheck_test.cpp checks all of them) --
TEST_P(OpLibrary, MaxPoolGradientGoesToTheFirstMaximum) {
  Array x = f32({1, 4, 4, 2, 0, 0, 0, 0}, {1, 1, 2, 4}, dev).require_grad();
  Gradients g = sum(max_pool2d(x, {.kernel = 2})).backward();
  EXPECT_TRUE(same(x.grad(g), {0, 1, 1, 0, 0, 0, 0, 0}));
  Array s = f32({3, 1, 2}, {3}, dev).require_grad();
  Gradients gs = sum(mul(sort(s).values, f32({1, 10, 100}, {3}, dev))).backward();
  EXPECT_TRUE(same(s.grad(gs), {100, 1, 10}));
}

TEST_P(OpLibrary, TypedFacade) {
  Tensor<4> x(f32(iota_d(16), {1, 1, 4, 4}, dev));
  Tensor<4> w(f32({1, 0, 0, 1}, {1, 1, 2, 2}, dev));
  EXPECT_TRUE(same(conv2d(x, w, {.stride = 2}).array(), {5, 9, 21, 25}));
  EXPECT_TRUE(same(x.conv2d(w, Tensor<1>(f32({1}, {1}, dev)), {.stride = 2}).array(), {6, 10, 22, 26}));
  EXPECT_TRUE(same(max_pool2d(x, {.kernel = 2}).array(), {5, 7, 13, 15}));
  EXPECT_TRUE(same(x.avg_pool2d({.kernel = 4}).array(), {7.5}));
  EXPECT_TRUE(same(x.adaptive_avg_pool2d(2).array(), {2.5, 4.5, 10.5, 12.5}));
  auto [v, i] = Tensor<1>(f32({3, 1, 2}, {3}, dev)).sort();
  EXPECT_TRUE(same(v.array(), {1, 2, 3}));
  EXPECT_TRUE(same(i.array(), {1, 2, 0}));
  auto [tv, ti] = Tensor<2>(f32({3, 1, 2, 0, 5, 4}, {2, 3}, dev)).topk(1, 1);
  EXPECT_TRUE(same(tv.array(), {3, 5}));
  EXPECT_TRUE(same(ti.array(), {0, 1}));
  EXPECT_TRUE(same(x.cumsum(3).array(), {0, 1, 3, 6, 4, 9, 15, 22, 8, 17, 27, 38, 12, 25, 39, 54}));
  Tensor<3> l(f32({1, 3, 2, 5}, {1, 1, 4}, dev));
  EXPECT_TRUE(same(l.max_pool1d({.kernel = 2}).array(), {3, 5}));
  EXPECT_TRUE(same(l.conv1d(Tensor<3>(f32({1, 1}, {1, 1, 2}, dev))).array(), {4, 5, 7}));
}

EMBER_OP_SUITE(OpLibrary);

// ---- cpu (oneDNN and OpenMP loops) against the reference on random inputs -----------------------
TEST(LibraryCrossBackend, CpuMatchesReference) {
  const Device cpu = Device::cpu(), ref = Device::reference();
  if (!cpu.available() || !ref.available()) GTEST_SKIP() << "needs both cpu and reference";
  auto both = [&](const std::function<Array(Device)>& f, double tol, const char* what) {
    std::vector<double> a = f(cpu).to_vector<double>(), b = f(ref).to_vector<double>();
    EXPECT_TRUE(all_close(a, b, tol, tol)) << what;
  };
  auto xv = rand_f32(4 * 8 * 13 * 11, -1, 1, 901), wv = rand_f32(16 * 4 * 3 * 3, -1, 1, 902);
  auto bv = rand_f32(16, -1, 1, 903), gv = rand_f32(4 * 16 * 7 * 6, -1, 1, 904);
  const Conv2dOptions o{.stride = 2, .padding = {1, 2, 1, 1}, .groups = 2};
  both([&](Device d) { return conv2d(f32(xv, {4, 8, 13, 11}, d), f32(wv, {16, 4, 3, 3}, d), f32(bv, {16}, d), o); }, 1e-5, "conv2d");
  both([&](Device d) { return conv2d_backward_data(f32(gv, {4, 16, 7, 6}, d), f32(wv, {16, 4, 3, 3}, d), {4, 8, 13, 11}, o); }, 1e-5, "backward data");
  both([&](Device d) { return conv2d_backward_weights(f32(xv, {4, 8, 13, 11}, d), f32(gv, {4, 16, 7, 6}, d), {16, 4, 3, 3}, o); }, 1e-4, "backward weights");
  both([&](Device d) { return conv2d(f64(xv, {4, 8, 13, 11}, d), f64(wv, {16, 4, 3, 3}, d), f64(bv, {16}, d), o); }, 1e-12, "conv2d f64");
  both([&](Device d) { return conv2d_backward_weights(f64(xv, {4, 8, 13, 11}, d), f64(gv, {4, 16, 7, 6}, d), {16, 4, 3, 3}, o); }, 1e-12, "backward weights f64");
  both([&](Device d) { return conv2d_backward_data(f64(gv, {4, 16, 7, 6}, d), f64(wv, {16, 4, 3, 3}, d), {4, 8, 13, 11}, o); }, 1e-12, "backward data f64");
  const Pool2dOptions p{.kernel = 3, .stride = 2, .padding = 1, .count_include_pad = false};
  both([&](Device d) { return max_pool2d(f32(xv, {4, 8, 13, 11}, d), p); }, 0, "max_pool2d");
  both([&](Device d) { return avg_pool2d(f32(xv, {4, 8, 13, 11}, d), p); }, 1e-6, "avg_pool2d");
  both([&](Device d) { return avg_pool2d(f32(xv, {4, 8, 13, 11}, d), {.kernel = 2, .padding = 1}); }, 1e-6, "avg_pool2d incl. pad");
  both([&](Device d) { return max_pool2d_indices(f64(xv, {4, 8, 13, 11}, d), p); }, 0, "max_pool2d indices");
  auto sv = rand_int(6 * 300, -20, 20, 905);
  both([&](Device d) { return argsort(f32(sv, {6, 300}, d), 1); }, 0, "argsort with ties");
  both([&](Device d) { return argsort(i64(sv, {6, 300}, d), 0, true); }, 0, "argsort i64 descending");
  both([&](Device d) { return topk(f32(sv, {6, 300}, d), 17, 1).indices; }, 0, "topk");
  both([&](Device d) { return topk(f32(sv, {6, 300}, d), 4, 0, false).indices; }, 0, "topk smallest");
  both([&](Device d) { return cumsum(f32(xv, {4, 8, 143}, d), 2); }, 0, "cumsum");
  both([&](Device d) { return cumprod(f64(xv, {4, 8, 143}, d), 1); }, 0, "cumprod");
  both([&](Device d) { return cummax(f32(sv, {6, 300}, d), 1).indices; }, 0, "cummax");
  both([&](Device d) { return cummin(i32(sv, {6, 300}, d), 0).indices; }, 0, "cummin");
}

// Max pooling's values bit for bit against the reference, on windows the 2x2 path does not take
// (the CPU computes them in separable passes: rows, then columns of rows): every window sees NaN,
// +-inf and ties of -0 and +0, so a pass that takes the wrong first maximum (-0 for +0) or lets a
// later number replace a NaN shows here; f64, f32, and f16/bf16 (computed through f32).
TEST(LibraryCrossBackend, MaxPoolNonFiniteAndSignedZeroBitForBit) {
  const Device cpu = Device::cpu(), ref = Device::reference();
  if (!cpu.available() || !ref.available()) GTEST_SKIP() << "needs both cpu and reference";
  // Mostly zeros of both signs, so that many windows' maximum is a tie of -0 and +0.
  const double pick[] = {-0.0, 0.0, 0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY};
  // 11 x 10 planes, and 10 x 12 ones for the 2x2 stride-2 window's path for even planes (the odd
  // one takes its per-window path).
  for (const Shape& shape : {Shape{2, 3, 11, 10}, Shape{2, 3, 10, 12}}) {
  std::vector<double> xv(size_t(shape.numel()));
  uint64_t state = 77;
  for (double& v : xv) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    // NaN rarely (1 in 40), so that most windows have a number as their maximum.
    const uint64_t r = (state >> 33) % 40;
    v = r == 0 ? std::nan("") : r % 9 == 0 ? 0.5 : pick[r % 8];
  }
  const std::vector<Pool2dOptions> windows = {
      {.kernel = 3, .stride = 2, .padding = 1}, {.kernel = 3, .stride = 1, .padding = 1},
      {.kernel = {2, 3}, .stride = {1, 3}, .padding = {1, 1}}, {.kernel = 4, .stride = 3, .padding = 2},
      {.kernel = {1, 2}, .stride = {1, 1}}, {.kernel = 2},
      // Rows exactly stride x OW wide take the plane-wide row pass (pool_max.cpp, plane_rows_max)
      // with its edge columns: 3x3/2/1 and 3x3/1/1 above, a 5-wide window half in padding here.
      {.kernel = 5, .stride = 2, .padding = 2}, {.kernel = {3, 1}, .stride = 2}};
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16})
    for (size_t w = 0; w < windows.size(); ++w) {
      SCOPED_TRACE(shape.str());
      std::vector<double> a = max_pool2d(make(xv, shape, t, cpu), windows[w]).to_vector<double>();
      std::vector<double> b = max_pool2d(make(xv, shape, t, ref), windows[w]).to_vector<double>();
      ASSERT_EQ(a.size(), b.size());
      size_t nan = 0, neg_zero = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        nan += std::isnan(b[i]);
        neg_zero += b[i] == 0 && std::signbit(b[i]);
        const bool same_bits = std::isnan(a[i]) ? std::isnan(b[i])
                                                : a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i]);
        ASSERT_TRUE(same_bits) << dtype_name(t) << " window " << w << " at " << i << ": cpu " << a[i]
                               << ", reference " << b[i];
      }
      // The inputs did reach the cases: some windows' maximum is NaN, some -0 (not in 25-element
      // windows, where a positive value nearly always appears).
      EXPECT_GT(nan, 0u) << dtype_name(t) << " window " << w;
      if (w != 4 && w != 6) {
        EXPECT_GT(neg_zero, 0u) << dtype_name(t) << " window " << w;
      }
      if (t != DType::F64 && t != DType::F32) continue;
      // The positions (indices) and the gradient, which adds dy at each window's position; dy are
      // small integers, so overlapping windows' sums are exact in any order.
      EXPECT_EQ(max_pool2d_indices(make(xv, shape, t, cpu), windows[w]).to_vector<int64_t>(),
                max_pool2d_indices(make(xv, shape, t, ref), windows[w]).to_vector<int64_t>())
          << dtype_name(t) << " window " << w;
      std::vector<double> dyv(a.size());
      for (size_t i = 0; i < dyv.size(); ++i) dyv[i] = double(int(i % 7) - 3);
      const Shape ys = max_pool2d(make(xv, shape, t, ref), windows[w]).shape();
      EXPECT_EQ(max_pool2d_backward(make(dyv, ys, t, cpu), make(xv, shape, t, cpu), windows[w]).to_vector<double>(),
                max_pool2d_backward(make(dyv, ys, t, ref), make(xv, shape, t, ref), windows[w]).to_vector<double>())
          << dtype_name(t) << " window " << w;
    }
  }
}

// ---- timing (printed, not asserted): run with --gtest_also_run_disabled_tests ---------------
TEST(LibraryPerf, DISABLED_Conv2dResNetShape) {
  const int64_t N = 8, C = 64, H = 56, W = 56, O = 64;
  auto xv = rand_f32(N * C * H * W, -1, 1, 1), wv = rand_f32(O * C * 9, -1, 1, 2);
  Array x = f32(xv, {N, C, H, W}, Device::cpu()).eval(), w = f32(wv, {O, C, 3, 3}, Device::cpu()).eval();
  auto time_it = [](const std::function<void()>& f, int reps) {
    f();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  const double flops = 2.0 * N * O * H * W * C * 9;
  double t_fwd = time_it([&] { conv2d(x, w, {.padding = 1}).eval(); }, 5);
  Array g = f32(rand_f32(N * O * H * W, -1, 1, 3), {N, O, H, W}, Device::cpu()).eval();
  double t_bd = time_it([&] { conv2d_backward_data(g, w, x.shape(), {.padding = 1}).eval(); }, 3);
  double t_bw = time_it([&] { conv2d_backward_weights(x, g, w.shape(), {.padding = 1}).eval(); }, 3);
  // Naive loop (the same sum, f32 accumulation, one image) for comparison.
  std::vector<float> xf(xv.begin(), xv.begin() + C * H * W), wf(wv.begin(), wv.end()), yf(size_t(O * H * W));
  double t_naive = time_it([&] {
    for (int64_t o = 0; o < O; ++o)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t e = 0; e < W; ++e) {
          float acc = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t kh = 0; kh < 3; ++kh)
              for (int64_t kw = 0; kw < 3; ++kw) {
                int64_t ih = h - 1 + kh, iw = e - 1 + kw;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W) acc += xf[size_t((c * H + ih) * W + iw)] * wf[size_t(((o * C + c) * 3 + kh) * 3 + kw)];
              }
          yf[size_t((o * H + h) * W + e)] = acc;
        }
  }, 1) * double(N);
  std::printf("conv2d [8,64,56,56] x [64,64,3,3] pad 1, f32 on cpu:\n");
  std::printf("  forward          %8.2f ms  %6.1f GFLOP/s\n", t_fwd * 1e3, flops / t_fwd * 1e-9);
  std::printf("  backward data    %8.2f ms  %6.1f GFLOP/s\n", t_bd * 1e3, flops / t_bd * 1e-9);
  std::printf("  backward weights %8.2f ms  %6.1f GFLOP/s\n", t_bw * 1e3, flops / t_bw * 1e-9);
  std::printf("  naive loop       %8.2f ms  %6.1f GFLOP/s (x%.1f slower than oneDNN)\n", t_naive * 1e3,
              flops / t_naive * 1e-9, t_naive / t_fwd);
}

}  // namespace
}  // namespace ember::testing
