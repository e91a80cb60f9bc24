// Host fallback (src/scheduler/host_fallback.cpp): on a device whose plugin lacks f64 (the
// reference plugin started with EMBER_REFERENCE_WEAK=1, as ctest backend.weak_device does; a
// Vulkan device without shaderFloat64), f64 kernels and library calls run on the CPU with the
// buffers staged through host memory. The results must be bit for bit what the CPU gives, NaN,
// infinities and signed zeros included, for fused chains, reductions, partial writes into a
// buffer (cat), library calls with index outputs, and chains that mix staged and device work.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "runtime/registry.h"
#include "ember/ember.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

bool lacks_f64(Device d) {
  return (Backend::get(d.kind).properties(d.index).dtypes & EMBER_DTYPE_BIT(EMBER_F64)) == 0;
}

::testing::AssertionResult same_bits(const Array& got, const Array& want) {
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  if (got.shape() != want.shape()) return ::testing::AssertionFailure() << "shape " << got.shape().str();
  if (got.dtype() != want.dtype()) return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype());
  for (size_t i = 0; i < g.size(); ++i) {
    const bool both_nan = std::isnan(g[i]) && std::isnan(w[i]);
    if (!both_nan && (g[i] != w[i] || std::signbit(g[i]) != std::signbit(w[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " vs " << w[i] << " on the cpu";
  }
  return ::testing::AssertionSuccess();
}

const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();

class HostFallbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev = Device::reference();
    if (std::getenv("EMBER_REFERENCE_WEAK") && !lacks_f64(dev))
      FAIL() << "EMBER_REFERENCE_WEAK is set but the reference device claims f64";
    if (!lacks_f64(dev))
      GTEST_SKIP() << "the reference device has f64; ctest backend.weak_device runs this with EMBER_REFERENCE_WEAK=1";
  }
  Device dev;
  std::vector<double> values = {1.5, -0.0, 0.0, nan, inf, -inf, 3.25, -2.0, 1e300, -1e-300, 7.0, 0.5};
};

TEST_F(HostFallbackTest, FusedF64ChainsAndReductionsMatchTheCpu) {
  auto compute = [&](Device d) {
    Array x = f64(values, {3, 4}, d);
    Array y = mul(exp(neg(x)), add(x, full({3, 4}, -0.0, {.dtype = DType::F64, .device = d})));
    Array z = sum(y, {1});
    Array m = max(x, {0});
    return std::vector<Array>{y, z, m, softmax(x, -1)};
  };
  std::vector<Array> on_dev = compute(dev), on_cpu = compute(Device::cpu());
  for (size_t i = 0; i < on_dev.size(); ++i) {
    EXPECT_EQ(on_dev[i].device(), dev);
    EXPECT_TRUE(same_bits(on_dev[i], on_cpu[i])) << "result " << i;
  }
}

TEST_F(HostFallbackTest, PartialWritesAndMixedDtypesKeepTheRestOfTheBuffer) {
  auto compute = [&](Device d) {
    Array a = f64(values, {12}, d);
    Array b = f32(values, {12}, d);  // f32 stays on the device
    Array c = cat({mul(a, a), cast(add(b, b), DType::F64), neg(a)}, 0);
    return add(c, cast(sum(b, {0}), DType::F64));
  };
  EXPECT_TRUE(same_bits(compute(dev), compute(Device::cpu())));
}

TEST_F(HostFallbackTest, LibraryCallsWithIndexOutputsMatchTheCpu) {
  auto compute = [&](Device d) {
    Array x = f64(values, {3, 4}, d);
    Array w = f64({0.5, -1.0, 2.0, -0.0, 1.0, 3.0, -2.5, 0.25}, {4, 2}, d);
    Array img = f64(std::vector<double>(values.begin(), values.begin() + 9), {1, 1, 3, 3}, d);
    Array k = f64({1.0, -1.0, 0.5, 2.0}, {1, 1, 2, 2}, d);
    return std::vector<Array>{matmul(x, w), argsort(x, 1), cumsum(x, 1), conv2d(img, k)};
  };
  std::vector<Array> on_dev = compute(dev), on_cpu = compute(Device::cpu());
  for (size_t i = 0; i < on_dev.size(); ++i) EXPECT_TRUE(same_bits(on_dev[i], on_cpu[i])) << "result " << i;
}

TEST_F(HostFallbackTest, GradientsThroughFallbackKernelsMatchTheCpu) {
  auto compute = [&](Device d) {
    Array x = f64({0.5, -1.25, 2.0, 3.0, -0.0, 1.0}, {2, 3}, d).require_grad();
    Array w = f64({1.0, 2.0, -0.5, 0.25, 1.5, -3.0}, {3, 2}, d).require_grad();
    Array loss = sum(tanh(matmul(x, w)));
    Gradients g = loss.backward();
    return std::vector<Array>{loss, x.grad(g), w.grad(g)};
  };
  std::vector<Array> on_dev = compute(dev), on_cpu = compute(Device::cpu());
  for (size_t i = 0; i < on_dev.size(); ++i) EXPECT_TRUE(same_bits(on_dev[i], on_cpu[i])) << "result " << i;
}

// The weak device indexes in 32 bits: a launch of more than 2^31 - 1 points (a sum over a
// broadcast row of 2^31 + 5 ones) takes the host fallback instead of wrapping its indices; the
// recording's refusal says why. The CPU computes it in about a second.
TEST_F(HostFallbackTest, LaunchesPastThirtyTwoBitIndexingRunOnTheHost) {
  ASSERT_EQ(Backend::get(dev.kind).properties(dev.index).index_bits, 32u);
  const int64_t n = (int64_t(1) << 31) + 5;
  CapturedFunction f = capture([n](const std::vector<Array>& in) {
    return std::vector<Array>{sum(expand(in[0], {n}))};
  });
  const Array one = from_vector(std::vector<int64_t>{1}, {1}, dev);
  EXPECT_EQ(f({one})[0].item<int64_t>(), n);
  EXPECT_NE(f.stats().last_refusal.find("runs on the host fallback"), std::string::npos) << f.stats().last_refusal;
}

}  // namespace
}  // namespace ember::testing
