// The max-pooling gradient's epilogue (src/scheduler/epilogue.cpp): max_pool2d_backward followed by
// a ReLU's gradient, where(gt(o, 0), dx, 0), becomes one library call
// (EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE) that masks each plane of dx while it is in cache. Every
// result is compared bit for bit with the unfused graph on the reference backend and on the CPU
// (NaN, infinities, signed zeros and ties in the pooled input and in dy); the counts show the
// mask's kernel gone; graphs that differ from the pattern stay apart; and a conv -> relu -> pool
// network's gradients are the same with the rewrite on and off.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "ember/ember.h"
#include "scheduler/epilogue.h"
#include "scheduler/epilogue_guard.h"
#include "test_util.h"

namespace ember {
namespace {

using Guard = ember::testing::EpilogueSwitchesGuard;

// Values in [-1, 1] on a coarse grid (so windows hold ties), with NaN, +-inf and +-0 sprinkled in
// when `special`.
std::vector<double> values(int64_t n, uint32_t seed, bool special) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> u(-4, 4), pick(0, 11);
  std::vector<double> v(static_cast<size_t>(n));
  const double inf = std::numeric_limits<double>::infinity();
  for (double& x : v) {
    x = u(g) / 4.0;
    if (!special) continue;
    switch (pick(g)) {
      case 0: x = std::nan(""); break;
      case 1: x = inf; break;
      case 2: x = -inf; break;
      case 3: x = -0.0; break;
      case 4: x = 0.0; break;
      default: break;
    }
  }
  return v;
}

Array make(const std::vector<double>& v, const Shape& s, DType dt, Device d) {
  if (dt == DType::F64) return from_vector<double>(v, s, d).eval();
  std::vector<float> f(v.begin(), v.end());
  return from_vector<float>(f, s, d).eval();
}

// Bit patterns of the result in f64 (NaNs all alike, zeros keep their sign).
std::vector<uint64_t> bits_of(const Array& a) {
  std::vector<uint64_t> b;
  for (double x : a.to_vector<double>()) b.push_back(std::isnan(x) ? 0x7ff8000000000000ull : std::bit_cast<uint64_t>(x));
  return b;
}

struct Counts {
  int64_t kernels = 0, library_calls = 0;
};

// dx masked by m > 0: the ReLU gradient's graph (elementwise_ops.def) after the pooling gradient.
Array masked(const Array& dy, const Array& x, const Array& m, const Pool2dOptions& o) {
  return where(gt(m, 0.0), max_pool2d_backward(dy, x, o), 0.0);
}

struct Case {
  const char* name;
  Shape x;
  Pool2dOptions opts;
};

const Case kCases[] = {
    {"2x2 even planes", {2, 3, 28, 28}, {.kernel = 2}},
    {"2x2 odd planes (last row and column uncovered)", {2, 3, 7, 9}, {.kernel = 2}},
    {"3x3 stride 2 padding 1 (overlapping windows)", {2, 2, 9, 10}, {.kernel = 3, .stride = 2, .padding = 1}},
    {"2x2 stride 1 (overlapping windows)", {1, 4, 6, 5}, {.kernel = 2, .stride = 1}},
};

// Runs masked() on device d with the inputs made there; `mask_is_x`: the mask is the pooled input
// itself (the ReLU case), else a tensor of its own.
std::vector<uint64_t> run(const Case& c, DType dt, Device d, bool mask_is_x, Counts* counts = nullptr) {
  const Shape ys = max_pool2d(zeros(c.x), c.opts).shape();  // (not run)
  const Array x = make(values(c.x.numel(), 11, true), c.x, dt, d);
  const Array dy = make(values(ys.numel(), 12, true), ys, dt, d);
  const Array m = mask_is_x ? x : make(values(c.x.numel(), 13, true), c.x, dt, d);
  synchronize();
  reset_execution_stats();
  const Array r = masked(dy, x, m, c.opts).eval();
  synchronize();
  if (counts) *counts = {execution_stats().kernels, execution_stats().library_calls};
  return bits_of(r);
}

TEST(PoolEpilogueTest, MaskedGradientMatchesTheUnfusedGraphBitForBit) {
  Guard guard;
  for (const Case& c : kCases) {
    for (DType dt : {DType::F32, DType::F64}) {
      for (bool mask_is_x : {true, false}) {
        SCOPED_TRACE(std::string(c.name) + ", " + std::string(dtype_name(dt)) + (mask_is_x ? ", mask x" : ", own mask"));
        set_fusion_enabled(false);
        const std::vector<uint64_t> want = run(c, dt, Device::reference(), mask_is_x);
        set_fusion_enabled(true);
        set_epilogue_folding_enabled(false);
        Counts before;
        const std::vector<uint64_t> plain = run(c, dt, Device::cpu(), mask_is_x, &before);
        set_epilogue_folding_enabled(true);
        Counts after, ref_counts;
        const std::vector<uint64_t> cpu = run(c, dt, Device::cpu(), mask_is_x, &after);
        const std::vector<uint64_t> ref = run(c, dt, Device::reference(), mask_is_x, &ref_counts);
        EXPECT_EQ(plain, want);
        EXPECT_EQ(cpu, want);
        EXPECT_EQ(ref, want);  // the reference backend's own epilogue
        EXPECT_EQ(before.kernels, 1);  // the mask's kernel, which the rewrite removes
        EXPECT_EQ(after.kernels, 0);
        EXPECT_EQ(after.library_calls, 1);
        EXPECT_EQ(ref_counts.kernels, 0);
      }
    }
  }
}

// The mask's comparison and zero must be exactly gt(o, 0) and +0; anything else stays a kernel
// (and is still right).
TEST(PoolEpilogueTest, OtherMasksAndSharedComparisonsAreNotFolded) {
  Guard guard;
  set_fusion_enabled(true);
  set_epilogue_folding_enabled(true);
  const Pool2dOptions o{.kernel = 2};
  const Shape xs{1, 2, 4, 6};
  const Array x = make(values(xs.numel(), 21, true), xs, DType::F32, Device::cpu());
  const Array dy = make(values(12, 22, true), {1, 2, 2, 3}, DType::F32, Device::cpu());
  auto expect_unfolded = [&](const char* what, const std::function<Array()>& g, const std::function<double(double, double)>& f) {
    SCOPED_TRACE(what);
    synchronize();
    reset_execution_stats();
    const Array r = g().eval();
    synchronize();
    EXPECT_EQ(execution_stats().kernels, 1);
    const std::vector<double> dx = max_pool2d_backward(dy, x, o).to_vector<double>(), xv = x.to_vector<double>();
    const std::vector<double> got = r.to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) {
      const double w = f(xv[i], dx[i]);
      EXPECT_TRUE(std::bit_cast<uint64_t>(got[i]) == std::bit_cast<uint64_t>(w) || (std::isnan(w) && std::isnan(got[i])))
          << i << ": " << got[i] << " != " << w;
    }
  };
  expect_unfolded("threshold 0.5", [&] { return where(gt(x, 0.5), max_pool2d_backward(dy, x, o), 0.0); },
                  [](double m, double d) { return m > 0.5 ? d : 0.0; });
  expect_unfolded("-0 where the mask is false", [&] { return where(gt(x, 0.0), max_pool2d_backward(dy, x, o), -0.0); },
                  [](double m, double d) { return m > 0 ? d : -0.0; });
  expect_unfolded("ge instead of gt", [&] { return where(ge(x, 0.0), max_pool2d_backward(dy, x, o), 0.0); },
                  [](double m, double d) { return m >= 0 ? d : 0.0; });
  expect_unfolded("mask on the other side", [&] { return where(gt(x, 0.0), 0.0, max_pool2d_backward(dy, x, o)); },
                  [](double m, double d) { return m > 0 ? 0.0 : d; });
  // The comparison held by the caller: it is computed anyway, so the chain stays apart.
  Array cond = gt(x, 0.0);
  synchronize();
  reset_execution_stats();
  Array r = where(cond, max_pool2d_backward(dy, x, o), 0.0);
  eval({r, cond});
  synchronize();
  EXPECT_EQ(execution_stats().library_calls, 1);  // the plain pooling gradient
  EXPECT_GE(execution_stats().kernels, 1);
  const std::vector<double> dx = max_pool2d_backward(dy, x, o).to_vector<double>(), xv = x.to_vector<double>();
  const std::vector<double> got = r.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(std::bit_cast<uint64_t>(got[i]), std::bit_cast<uint64_t>(xv[i] > 0 ? dx[i] : 0.0)) << i;
}

// conv -> relu -> max pool -> loss: the ReLU's gradient meets the pooling's (the Fashion-MNIST
// CNN's shape). The gradients with the rewrite on equal those with it off, bit for bit, on the CPU
// and on the reference backend.
TEST(PoolEpilogueTest, ConvReluPoolGradientsAreTheSameWithTheRewriteOnAndOff) {
  Guard guard;
  set_fusion_enabled(true);
  for (Device d : {Device::cpu(), Device::reference()}) {
    SCOPED_TRACE(d.str());
    auto grads = [&](bool fold, Counts* counts) {
      set_epilogue_folding_enabled(fold);
      Array x = make(values(2 * 3 * 12 * 12, 31, false), {2, 3, 12, 12}, DType::F32, d);
      Array w = make(values(4 * 3 * 3 * 3, 32, false), {4, 3, 3, 3}, DType::F32, d).require_grad();
      Array b = make(values(4, 33, false), {4}, DType::F32, d).require_grad();
      Array h = max_pool2d(relu(conv2d(x, w, b, {.padding = 1})), {.kernel = 2});
      Array loss = sum(mul(h, make(values(h.shape().numel(), 34, false), h.shape(), DType::F32, d)));
      synchronize();
      reset_execution_stats();
      std::vector<Array> g = grad(loss, {w, b});
      eval(g);
      synchronize();
      *counts = {execution_stats().kernels, execution_stats().library_calls};
      return std::vector<std::vector<uint64_t>>{bits_of(g[0]), bits_of(g[1])};
    };
    Counts off, on;
    const auto want = grads(false, &off);
    const auto got = grads(true, &on);
    EXPECT_EQ(got, want);
    // Two kernels fewer: the forward's relu joins the convolution (conv2d_epilogue), the mask
    // joins the pooling gradient; the library calls stay as many.
    EXPECT_EQ(on.kernels, off.kernels - 2);
    EXPECT_EQ(on.library_calls, off.library_calls);
  }
}

}  // namespace
}  // namespace ember
