// The asynchronous test device: the reference plugin with EMBER_REFERENCE_ASYNC=1 (every
// operation queued and run later by a worker thread after a random delay, new and freed buffers
// poisoned; src/backend/reference/plugin.cpp). ctest's backend.async_device runs the test suite
// that way with two devices. Here: tensors exchanged between the two devices through the
// plugin's own copy; a plan mixing devices stays correct under random delays (100 repetitions);
// a deliberate ordering bug (reads on a second queue that does not wait for the first) is caught
// by the poison, proof that the device can catch one. Without the asynchronous mode these tests
// skip and say why; with EMBER_REQUIRE_ASYNC_DEVICE=1 (the ctest run) a skip is a failure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "backend/registry.h"
#include "ember/ember.h"

namespace ember {
namespace {

bool async_devices(int n) {
  Backend* b = Backend::try_get(DeviceKind::Reference);
  return b && b->device_count() >= n && b->properties(0).async;
}

#define REQUIRE_ASYNC_DEVICES(n)                                                                          \
  do {                                                                                                    \
    if (!async_devices(n)) {                                                                              \
      if (std::getenv("EMBER_REQUIRE_ASYNC_DEVICE")) FAIL() << "the asynchronous test device is missing"; \
      GTEST_SKIP() << "needs EMBER_REFERENCE_ASYNC=1 EMBER_REFERENCE_DEVICES=" << (n)                   \
                   << " (ctest -R backend.async_device)";                                                 \
    }                                                                                                     \
  } while (0)

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Same values bit for bit (NaN matches NaN, -0 only -0).
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i]);
    EXPECT_TRUE(same) << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
  }
}

TEST(AsyncDeviceTest, TwoDevicesExchangeTensorsThroughThePluginsCopy) {
  REQUIRE_ASYNC_DEVICES(2);
  const Device d0{DeviceKind::Reference, 0}, d1{DeviceKind::Reference, 1};
  EXPECT_EQ(d1.str(), "reference:1");
  EXPECT_EQ(Device::parse("reference:1"), d1);
  std::vector<float> x = {1.5f, -0.0f, kNan, kInf, -kInf, 3.0f, -2.25f, 0.0f};
  Array on0 = from_vector(x, {8}, d0);
  Array y = add(mul(on0, 2.0), 1.0);  // queued on device 0
  Array on1 = to_device(y, d1);
  EXPECT_EQ(on1.device(), d1);
  Array z = sub(exp(on1), 1.0);  // queued on device 1
  Array back = to_device(z, d0);
  std::vector<float> want;
  for (float v : x) want.push_back(std::exp(v * 2.0f + 1.0f) - 1.0f);
  expect_same(back.to_vector<float>(), want, "exp(2x + 1) - 1 via two devices");
  expect_same(to_device(z, Device::cpu()).to_vector<float>(), want, "to the cpu");
}

TEST(AsyncDeviceTest, MixedDevicePlansAreCorrectUnderRandomDelays) {
  REQUIRE_ASYNC_DEVICES(2);
  const Device d0{DeviceKind::Reference, 0}, d1{DeviceKind::Reference, 1};
  for (int rep = 0; rep < 100; ++rep) {
    std::vector<float> a(64), b(64);
    for (int i = 0; i < 64; ++i) {
      a[size_t(i)] = float((i * 7 + rep) % 23) - 11.0f;
      b[size_t(i)] = float((i * 5 + 3 * rep) % 17) * 0.5f;
    }
    Array A = from_vector(a, {8, 8}, d0), B = from_vector(b, {8, 8}, d1);
    Array C = add(to_device(mul(A, A), d1), B);          // device 0's work feeds device 1's
    Array D = sub(to_device(sum(C, {1}), d0), 1.0); // and back
    Array E = matmul(to_device(C, d0), A);         // a library call on device 0
    std::vector<float> c(64), d(8, 0.0f), e(64, 0.0f);
    for (int i = 0; i < 64; ++i) c[size_t(i)] = a[size_t(i)] * a[size_t(i)] + b[size_t(i)];
    for (int r = 0; r < 8; ++r) {
      for (int k = 0; k < 8; ++k) d[size_t(r)] += c[size_t(r * 8 + k)];
      d[size_t(r)] -= 1.0f;
      for (int j = 0; j < 8; ++j)
        for (int k = 0; k < 8; ++k) e[size_t(r * 8 + j)] += c[size_t(r * 8 + k)] * a[size_t(k * 8 + j)];
    }
    // Small integers: every sum is exact in f32, in any order.
    expect_same(D.to_vector<float>(), d, "row sums");
    expect_same(E.to_vector<float>(), e, "matmul");
    if (HasFailure()) FAIL() << "repetition " << rep;
  }
}

TEST(AsyncDeviceTest, ReadsThatDoNotWaitForTheirWorkAreCaught) {
  REQUIRE_ASYNC_DEVICES(1);
  const Device d0{DeviceKind::Reference, 0};
  Backend& be = Backend::get(DeviceKind::Reference);
  auto run = [&] {
    std::vector<float> x(4096, 0.5f);
    Array y = add(mul(exp(from_vector(x, {4096}, d0)), 0.0), 3.0);
    std::vector<float> got = y.to_vector<float>();
    for (float v : got)
      if (v != 3.0f) return false;
    return true;
  };
  int wrong = 0;
  be.set_unordered_reads_for_testing(true);
  for (int i = 0; i < 20; ++i) wrong += run() ? 0 : 1;
  be.set_unordered_reads_for_testing(false);
  synchronize(d0);
  EXPECT_GT(wrong, 0) << "20 reads overtook their kernels and none saw poisoned memory";
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(run()) << "ordered read " << i;
}

}  // namespace
}  // namespace ember
