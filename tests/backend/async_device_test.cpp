// The asynchronous test device: the reference plugin with EMBER_REFERENCE_ASYNC=1 (every
// operation queued and run later by a worker thread after a random delay, new and freed buffers
// poisoned; src/backend/reference/plugin.cpp). ctest's backend.async_device runs the test suite
// that way with two devices. Here: tensors exchanged between the two devices through the
// plugin's own copy; a plan mixing devices stays correct under random delays (100 repetitions);
// a deliberate ordering bug (reads on a second queue that does not wait for the first) is caught
// by the poison, proof that the device can catch one; kernels that can fail while they run are
// not waited for, and their errors reach exactly the reads that depend on them
// (runtime/kernel_checks.h); the profiler records the device's own times of the work, not the
// time to enqueue it (runtime/device_timing.h). Without the asynchronous mode these tests
// skip and say why; with EMBER_REQUIRE_ASYNC_DEVICE=1 (the ctest run) a skip is a failure.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "runtime/registry.h"
#include "ember/ember.h"
#include "graph/node.h"

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

// The error of a kernel the device runs later: the kernel is not waited for (its check is still
// pending once the host has enqueued it), reads of arrays that do not depend on it go on, and
// every array that does, through fused kernels, a library call or a later plan, throws the
// error named after the op and line, as on a synchronous device.
TEST(AsyncDeviceTest, KernelErrorsReachTheReadsThatDependOnThem) {
  REQUIRE_ASYNC_DEVICES(1);
  const Device d0{DeviceKind::Reference, 0};
  Backend& be = Backend::get(DeviceKind::Reference);
  synchronize(d0);
  ASSERT_EQ(be.pending_checks(0), 0u);

  Array x = from_vector<float>({1, 2, 3}, {3}, d0);
  Array fine = index_select(x, 0, from_vector<int64_t>({2, 0}, {2}, d0));
  eval({fine});
  // Once the host has enqueued the gather (the node is published) and before anything waits for
  // the device, its check is still pending.
  for (int i = 0; i < 10000 && !fine.node()->is_ready(); ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  ASSERT_TRUE(fine.node()->is_ready());
  EXPECT_EQ(be.pending_checks(0), 1u) << "the gather was waited for when it was enqueued";
  EXPECT_EQ(fine.to_vector<float>(), (std::vector<float>{3, 1}));
  EXPECT_EQ(be.pending_checks(0), 0u);

  Array i = from_vector<int64_t>({4, 6}, {2}, d0);
  Array bad = add(mul(floor_div(i, sub(i, i)), 3), 1);  // one fused kernel, failing in floor_div
  const int line = __LINE__ - 1;
  Array through_library = matmul(reshape(cast(bad, DType::F32), {1, 2}), ones({2, 2}, {.device = d0}));
  Array independent = add(i, 10);
  eval({bad, through_library, independent});
  Array later = add(bad, 5);  // planned before anything is read
  EXPECT_EQ(independent.to_vector<int64_t>(), (std::vector<int64_t>{14, 16}));
  Array after_the_error_is_known = neg(bad);
  for (const Array& a : {bad, through_library, later, after_the_error_is_known}) {
    try {
      (void)a.to_vector<double>();
      ADD_FAILURE() << "expected the division error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("floor_div (at async_device_test.cpp:" + std::to_string(line) + "): floor_div: integer "
                          "division by zero"), std::string::npos) << what;
    }
  }
  EXPECT_THROW(eval_and_wait({bad}), Error);
  EXPECT_EQ(add(i, 1).to_vector<int64_t>(), (std::vector<int64_t>{5, 7}));  // the device goes on
}

// Two kernels fail before anything waits for the device, and a third is fine: the device keeps
// every kernel's error (abi.h), so each failed array throws its own error and the good one, and
// work after a failure nobody read, read as usual.
TEST(AsyncDeviceTest, EveryFailingKernelReportsItsOwnError) {
  REQUIRE_ASYNC_DEVICES(1);
  const Device d0{DeviceKind::Reference, 0};
  Array i = from_vector<int64_t>({4, 6}, {2}, d0);
  Array x = from_vector<float>({1, 2, 3}, {3}, d0);
  Array first = floor_div(i, sub(i, i));
  const int first_line = __LINE__ - 1;
  Array second = index_select(x, 0, from_vector<int64_t>({7}, {1}, d0));
  const int second_line = __LINE__ - 1;
  Array fine = index_select(x, 0, from_vector<int64_t>({1}, {1}, d0));
  eval({first, second, fine});
  Array never_read = index_select(x, 0, from_vector<int64_t>({-9}, {1}, d0));
  eval({never_read});
  Array after = index_select(x, 0, from_vector<int64_t>({2}, {1}, d0));
  EXPECT_EQ(after.to_vector<float>(), (std::vector<float>{3}));
  EXPECT_EQ(fine.to_vector<float>(), (std::vector<float>{2}));
  auto expect_error = [](const Array& a, const std::string& want) {
    try {
      (void)a.to_vector<double>();
      ADD_FAILURE() << "expected: " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_error(second, "index_select (at async_device_test.cpp:" + std::to_string(second_line) +
                           "): index_select: index out of range (7 for a dimension of size 3)");
  expect_error(first, "floor_div (at async_device_test.cpp:" + std::to_string(first_line) +
                          "): floor_div: integer division by zero");
}

// A queue that keeps fewer errors than its kernels made (EMBER_REFERENCE_ASYNC_MAX_ERRORS=1, ctest
// backend.async_device_lost_errors) flags the last error it kept (EMBER_STATUS_ERRORS_LOST): the
// kept error reaches its read, and every other checked call of that synchronize, failed or not,
// fails as "not verified" instead of passing (a dropped error must never pass silently).
TEST(AsyncDeviceTest, DroppedKernelErrorsFailTheUnverifiedCalls) {
  REQUIRE_ASYNC_DEVICES(1);
  const char* max_errors = std::getenv("EMBER_REFERENCE_ASYNC_MAX_ERRORS");
  if (!max_errors || std::string(max_errors) != "1") {
    if (std::getenv("EMBER_REQUIRE_LOST_ERRORS")) FAIL() << "EMBER_REFERENCE_ASYNC_MAX_ERRORS=1 is not set";
    GTEST_SKIP() << "needs EMBER_REFERENCE_ASYNC_MAX_ERRORS=1 (ctest -R backend.async_device_lost_errors)";
  }
  const Device d0{DeviceKind::Reference, 0};
  Array x = from_vector<float>({1, 2, 3}, {3}, d0);
  Array first = index_select(x, 0, from_vector<int64_t>({5}, {1}, d0));
  const int first_line = __LINE__ - 1;
  Array dropped = index_select(x, 0, from_vector<int64_t>({-9}, {1}, d0));
  Array fine = index_select(x, 0, from_vector<int64_t>({2}, {1}, d0));
  eval({first, dropped, fine});
  auto error_of = [](const Array& a) -> std::string {
    try {
      (void)a.to_vector<double>();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string first_error = error_of(first), dropped_error = error_of(dropped), fine_error = error_of(fine);
  EXPECT_NE(first_error.find("index_select (at async_device_test.cpp:" + std::to_string(first_line) +
                             "): index_select: index out of range (5 for a dimension of size 3)"),
            std::string::npos)
      << first_error;
  for (const std::string& e : {dropped_error, fine_error})
    EXPECT_NE(e.find("not verified: reference dropped kernel errors after this one: "), std::string::npos) << e;
  // The next synchronize starts afresh: a good call passes, a bad one reports its own error.
  Array again = index_select(x, 0, from_vector<int64_t>({0}, {1}, d0));
  EXPECT_EQ(again.to_vector<float>(), (std::vector<float>{1}));
  Array bad = index_select(x, 0, from_vector<int64_t>({3}, {1}, d0));
  EXPECT_NE(error_of(bad).find("index out of range (3 for a dimension of size 3)"), std::string::npos);
}

// A replayed capture (ember/capture.h) does not wait for its gathers either: a replay with an
// index out of range throws at the read of its output, naming the recorded line, and the next
// replay with good indices reads its values.
TEST(AsyncDeviceTest, ReplayedCapturesReportKernelErrorsAtTheRead) {
  REQUIRE_ASYNC_DEVICES(1);
  const Device d0{DeviceKind::Reference, 0};
  Backend& be = Backend::get(DeviceKind::Reference);
  Array x = from_vector<float>({1, 2, 3}, {3}, d0);
  CapturedFunction f = capture([&](const std::vector<Array>& in) { return std::vector<Array>{mul(index_select(x, 0, in[0]), 2.0)}; });
  const int line = __LINE__ - 1;
  auto idx = [&](std::vector<int64_t> v) { return from_vector<int64_t>(v, {2}, d0); };
  EXPECT_EQ(f({idx({0, 1})})[0].to_vector<float>(), (std::vector<float>{2, 4}));  // records
  synchronize(d0);
  Array bad = f({idx({2, 5})})[0];
  ASSERT_EQ(f.stats().replays, 1) << f.stats().last_refusal;
  eval({bad});
  for (int i = 0; i < 10000 && !bad.node()->is_ready(); ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  EXPECT_EQ(be.pending_checks(0), 1u) << "the replayed gather was waited for";
  try {
    (void)bad.to_vector<float>();
    ADD_FAILURE() << "expected the gather's error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("async_device_test.cpp:" + std::to_string(line)), std::string::npos) << what;
    EXPECT_NE(what.find("index out of range (5 for a dimension of size 3)"), std::string::npos) << what;
  }
  EXPECT_EQ(f({idx({2, 2})})[0].to_vector<float>(), (std::vector<float>{6, 6}));
}

// The profiler on a device that computes apart from the host: a call returns once its work is
// queued, so the host's time around it says nothing about the work. Each kernel record carries
// the device's time instead: a 384 x 384 x 384 matmul on the reference plugin (scalar loops,
// milliseconds) is recorded as taking most of the wall time between its enqueue and the end of
// synchronize(), which the host measures independently; and the records of one device's in-order
// queue do not overlap.
TEST(AsyncDeviceTest, TheProfilerTimesKernelsOnTheDevice) {
  REQUIRE_ASYNC_DEVICES(1);
  const Device d = Device::reference();
  Array a = uniform({384, 384}, -1, 1, {.seed = 11, .device = d});
  Array b = uniform({384, 384}, -1, 1, {.seed = 12, .device = d});
  a.eval();
  b.eval();
  synchronize();
  profiler_start();
  const auto t0 = std::chrono::steady_clock::now();
  Array y = matmul(a, b);
  y.eval();  // enqueued; the device runs it after a random delay
  Array z = add(exp(y), 1.0);
  z.eval();
  synchronize();
  const double wall_ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - t0).count());
  std::vector<KernelRecord> records = profiler_stop();
  std::vector<KernelRecord> device;
  for (const KernelRecord& r : records)
    if (r.device == d.str()) device.push_back(r);
  ASSERT_GE(device.size(), 2u) << profile_summary(records);
  const KernelRecord* mm = nullptr;
  for (const KernelRecord& r : device) {
    EXPECT_TRUE(r.device_timed) << r.name << " (" << r.ops << ") kept the host's time";
    EXPECT_GE(r.duration_ns, 0) << r.name;
    if (r.name == "matmul") mm = &r;
  }
  ASSERT_NE(mm, nullptr) << profile_summary(records);
  EXPECT_GT(double(mm->duration_ns), 0.25 * wall_ns)
      << "the matmul's device time " << mm->duration_ns << " ns is not most of the " << wall_ns
      << " ns the host waited for it";
  EXPECT_LE(double(mm->duration_ns), wall_ns);
  for (size_t i = 1; i < device.size(); ++i)
    EXPECT_GE(device[i].start_ns, device[i - 1].start_ns + device[i - 1].duration_ns)
        << device[i - 1].name << " and " << device[i].name << " overlap on one in-order queue";
  std::vector<float> got = z.to_vector<float>();
  EXPECT_TRUE(std::isfinite(got[0]));
  // The Chrome trace puts device-timed records on the device's own track, named after it.
  const std::string path = (std::filesystem::temp_directory_path() / "ember_async_profiler_test.json").string();
  write_chrome_trace(path, records);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  std::remove(path.c_str());
  bool matmul_on_device_track = false, track_named = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "matmul") matmul_on_device_track = e["pid"] == 2;
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 2) track_named = e["args"]["name"] == d.str();
  }
  EXPECT_TRUE(matmul_on_device_track);
  EXPECT_TRUE(track_named);
}

}  // namespace
}  // namespace ember
