// Max pooling's gradient path (max_pool2d_backward, one library call that finds each window's
// maximum again) against PyTorch (tools/reference/max_pool_backward_reference.py, float64) on the
// CPU backend and the reference backend: the 2x2 / stride-2 fast path (even and odd sizes),
// overlapping padded and rectangular windows, f32 / f16 operands, strided inputs, NaN windows,
// the second derivative and bad arguments.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "nn/nn_test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;
using ember::testing::det;
using ember::testing::read_reference;
using ember::testing::tests_dir;

const std::vector<double>& want(const std::string& name) {
  static const auto ref = read_reference(tests_dir() + "/nn/data/max_pool_backward.txt");
  auto it = ref.find(name);
  if (it == ref.end()) throw std::runtime_error("no reference value " + name);
  return it->second;
}

struct Case {
  std::string name;
  Shape shape;
  Pool2dOptions opts;
};

std::vector<Case> cases() {
  return {{"k2", {2, 3, 8, 6}, {.kernel = 2}},
          {"k2_odd", {2, 3, 7, 9}, {.kernel = 2}},
          {"k3s2p1", {2, 3, 7, 9}, {.kernel = 3, .stride = 2, .padding = 1}},
          {"k3s1p1", {1, 2, 6, 5}, {.kernel = 3, .stride = 1, .padding = 1}},
          {"rect", {2, 2, 6, 7}, {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 0}}}};
}

std::vector<Device> devices() {
  std::vector<Device> d{Device::reference()};
  if (Device::cpu().available()) d.push_back(Device::cpu());
  return d;
}

// y = max_pool2d(x) and dx for loss = sum(y * det(y.shape, 0.29, 0.4)), x = det(shape, 0.37, 0.1).
std::pair<Array, Array> run(const Case& c, Device dev, DType dt) {
  Array x = cast(to_device(det(c.shape, 0.37, 0.1), dev), dt).require_grad();
  Array y = max_pool2d(x, c.opts);
  Array w = cast(to_device(det(y.shape(), 0.29, 0.4), dev), dt);
  Gradients g = sum(mul(y, w)).backward();
  return {y, x.grad(g)};
}

TEST(MaxPoolBackwardTest, MatchesTorchF64) {
  for (Device dev : devices())
    for (const Case& c : cases()) {
      SCOPED_TRACE(c.name + " on " + dev.str());
      auto [y, dx] = run(c, dev, DType::F64);
      EXPECT_TRUE(all_close(y, want("maxpool." + c.name + ".y"), 1e-12, 1e-14));
      EXPECT_TRUE(all_close(dx, want("maxpool." + c.name + ".d0"), 1e-12, 1e-14));
    }
}

TEST(MaxPoolBackwardTest, MatchesTorchF32AndF16) {
  for (Device dev : devices())
    for (const Case& c : cases()) {
      SCOPED_TRACE(c.name + " on " + dev.str());
      auto [y, dx] = run(c, dev, DType::F32);
      EXPECT_EQ(dx.dtype(), DType::F32);
      EXPECT_TRUE(all_close(y, want("maxpool." + c.name + ".y"), 1e-6, 1e-7));
      EXPECT_TRUE(all_close(dx, want("maxpool." + c.name + ".d0"), 1e-6, 1e-6));
      auto [yh, dxh] = run(c, dev, DType::F16);
      EXPECT_EQ(dxh.dtype(), DType::F16);
      EXPECT_TRUE(all_close(yh, want("maxpool." + c.name + ".y"), 2e-3, 2e-3));
      // Rounding x to f16 can make two window entries equal (then the first wins): compare with
      // the same computation on the reference backend rather than with f64 PyTorch.
      auto [yr, dxr] = run(c, Device::reference(), DType::F16);
      EXPECT_TRUE(all_close(dxh, dxr.to_vector<double>(), 0, 0));
    }
}

// A transposed (strided) input and an upstream gradient that is a broadcast view.
TEST(MaxPoolBackwardTest, StridedOperands) {
  for (DType dt : {DType::F32, DType::F64}) {
    std::vector<Array> dxs;
    for (Device dev : devices()) {
      Array base = cast(to_device(det({2, 3, 9, 8}, 0.71, 0.3), dev), dt).require_grad();
      Array x = transpose(base, 2, 3);  // [2, 3, 8, 9], not contiguous
      Array y = max_pool2d(x, {.kernel = 3, .stride = 2, .padding = 1});
      Array dy = expand(cast(to_device(det({1, 3, 1, 5}, 0.5, 0.2), dev), dt), y.shape());
      Array dx = max_pool2d_backward(dy, x, {.kernel = 3, .stride = 2, .padding = 1});
      EXPECT_EQ(dx.shape(), x.shape());
      dxs.push_back(dx);
      Gradients g = sum(mul(y, dy)).backward();
      EXPECT_TRUE(all_close(base.grad(g), transpose(dx, 2, 3).to_vector<double>(), 0, 0));
    }
    // Overlapping windows add up to 4 terms: f32 sums may round differently from the reference's
    // double sums.
    const double tol = dt == DType::F32 ? 1e-6 : 0;
    for (size_t i = 1; i < dxs.size(); ++i) EXPECT_TRUE(all_close(dxs[i], dxs[0].to_vector<double>(), tol, tol));
  }
}

// A NaN is a window's maximum: its gradient goes there (the position max_pool2d_indices names).
TEST(MaxPoolBackwardTest, NanWins) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> xv(2 * 1 * 4 * 4);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.9 * double(i));
  xv[5] = nan;   // window (0, 0) of plane 0 ...
  xv[0] = 5.0;   // ... even though a larger number comes first
  xv[22] = nan;  // window (0, 1) of plane 1, where 23 is the largest number
  for (Device dev : devices())
    for (DType dt : {DType::F32, DType::F64}) {
      SCOPED_TRACE(dev.str());
      Array x = cast(from_vector(xv, Shape{2, 1, 4, 4}, dev), dt);
      Array dy = cast(from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, Shape{2, 1, 2, 2}, dev), dt);
      std::vector<double> dx = max_pool2d_backward(dy, x, {.kernel = 2}).to_vector<double>();
      std::vector<int64_t> idx = max_pool2d_indices(x, {.kernel = 2}).to_vector<int64_t>();
      EXPECT_EQ(idx[0], 5);
      EXPECT_EQ(idx[5], 6);
      std::vector<double> expect(xv.size(), 0.0);
      for (size_t k = 0; k < 8; ++k) expect[(k / 4) * 16 + size_t(idx[k])] += double(k + 1);
      EXPECT_EQ(dx, expect);
      EXPECT_TRUE(std::isnan(max_pool2d(x, {.kernel = 2}).to_vector<double>()[0]));
    }
}

// The gradient of the gradient with respect to the upstream gradient gathers at the maxima.
TEST(MaxPoolBackwardTest, SecondDerivativeMatchesTorch) {
  const Case c = cases()[2];
  for (Device dev : devices()) {
    SCOPED_TRACE(dev.str());
    Array x = to_device(det(c.shape, 0.37, 0.1), dev).require_grad();
    Array y = max_pool2d(x, c.opts);
    Array u = to_device(det(y.shape(), 0.29, 0.4), dev).require_grad();
    Array dx = grad(sum(mul(y, u)), {x}, {.create_graph = true})[0];
    Array v = to_device(det(c.shape, 0.61, 0.2), dev);
    std::vector<Array> d = grad(sum(mul(dx, v)), {u, x}, {.materialize_grads = true});
    EXPECT_TRUE(all_close(d[0], want("maxpool.second.du"), 1e-12, 1e-14));
    EXPECT_TRUE(all_close(d[1], std::vector<double>(size_t(c.shape.numel()), 0.0), 0, 0));
  }
}

// The 2x2 / stride-2 f32 path combines rows of pairs with masked 16-lane vectors on AVX-512
// (src/backend/cpu/pool_max.cpp): rows of 7, 14, 16, 20 and 33 outputs (one partial vector, one
// full one, a full one and a part, three), odd input sizes, and values drawn from a small set
// with NaN, infinities and both zeros, so that windows tie often. The CPU's forward values and
// gradients must equal the reference backend's bit for bit (the first maximum in row-major
// order: -0 against +0 shows which entry won).
TEST(MaxPoolBackwardTest, RowsOfAnyWidthMatchTheReferenceBitForBit) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> pool = {1.0, -0.0, 0.0, 2.0, -1.0, 0.0, nan, inf, -inf, 2.0, -0.0, 0.5};
  auto bits = [](const Array& a) {
    std::vector<uint32_t> out;
    for (float v : a.to_vector<float>()) out.push_back(std::bit_cast<uint32_t>(v));
    return out;
  };
  const std::vector<Pool2dOptions> windows = {{.kernel = 2}, {.kernel = 3, .stride = 2, .padding = 1}};
  for (const Pool2dOptions& opts : windows)
    for (int64_t ow : {7, 14, 16, 20, 33})
      for (int64_t extra : {0, 1}) {  // odd sizes: the 2x2 windows leave the last row and column out
        const Shape shape{2, 3, 2 * 5 + extra, 2 * ow + extra};
        std::vector<double> xv(size_t(shape.numel()));
        for (size_t i = 0; i < xv.size(); ++i) xv[i] = pool[(i * 7 + i / 5) % pool.size()];
        std::vector<std::vector<uint32_t>> y, dx;
        for (Device dev : {Device::reference(), Device::cpu()}) {
          Array x = cast(from_vector(xv, shape, dev), DType::F32);
          Array yv = max_pool2d(x, opts);
          std::vector<double> gv(size_t(yv.shape().numel()));
          for (size_t i = 0; i < gv.size(); ++i) gv[i] = i % 5 == 0 ? -0.0 : 0.25 * double(i % 13) - 1.0;
          gv[3] = nan;
          Array dy = cast(from_vector(gv, yv.shape(), dev), DType::F32);
          y.push_back(bits(yv));
          dx.push_back(bits(max_pool2d_backward(dy, x, opts)));
        }
        SCOPED_TRACE("kernel " + std::to_string(opts.kernel.h) + ", OW " + std::to_string(ow) +
                     (extra ? ", odd sizes" : ""));
        EXPECT_EQ(y[1], y[0]);
        EXPECT_EQ(dx[1], dx[0]);
      }
}

TEST(MaxPoolBackwardTest, BadArguments) {
  Array x = ones({1, 2, 6, 6});
  EXPECT_THROW(max_pool2d_backward(ones({1, 2, 2, 2}), x, {.kernel = 2}), Error);  // wants [1, 2, 3, 3]
  EXPECT_THROW(max_pool2d_backward(ones({1, 2, 3, 3}, {.dtype = DType::F64}), x, {.kernel = 2}), Error);
  EXPECT_THROW(max_pool2d_backward(ones({1, 2, 3, 3}), ones({2, 6, 6}), {.kernel = 2}), Error);
  EXPECT_THROW(max_pool2d_backward(ones({1, 2, 3, 3}), x, {.kernel = 0}), Error);
  try {
    max_pool2d_backward(ones({1, 2, 2, 2}), x, {.kernel = 2});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_pool2d_backward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[1, 2, 3, 3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ember
