// The backend's program cache: bounded, least recently used programs evicted first, and a
// program evicted while another thread runs it stays alive until that launch is done.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "ember/ember.h"
#include "scheduler/launch.h"
#include "test_util.h"

namespace ember {
namespace {

struct CapacityGuard {
  Backend& be;
  size_t saved;
  explicit CapacityGuard(Backend& b) : be(b), saved(b.program_capacity()) {}
  ~CapacityGuard() { be.set_program_capacity(saved); }
};

// A chain of k + 1 steps y = 2y + 1 over x: one fused program whose structure depends on k.
std::vector<float> chain(const Array& x, int k) {
  Array y = x;
  for (int i = 0; i <= k; ++i) y = add(mul(y, 2.0), 1.0);
  return y.to_vector<float>();
}
std::vector<float> chain_expected(const std::vector<float>& x, int k) {
  std::vector<float> r;
  for (float v : x) {
    double y = v;
    for (int i = 0; i <= k; ++i) y = 2 * y + 1;
    r.push_back(float(y));
  }
  return r;
}

TEST(ProgramCacheTest, KeepsTheMostRecentlyUsedPrograms) {
  for (Device d : testing::test_devices()) {
    SCOPED_TRACE(d.str());
    Backend& be = backend_for(d);
    CapacityGuard guard(be);
    be.set_program_capacity(3);
    EXPECT_LE(be.program_count(), 3u);
    std::vector<float> xv = {1, -2, 0.5f};
    Array x = from_vector<float>(xv, {3}, d);
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(chain(x, k), chain_expected(xv, k)) << "k = " << k;
      EXPECT_LE(be.program_count(), 3u);
    }
    // k = 4, 3, 2 are cached; k = 0 and 1 were evicted and are built again.
    reset_execution_stats();
    EXPECT_EQ(chain(x, 4), chain_expected(xv, 4));
    EXPECT_EQ(execution_stats().programs_created, 0);
    EXPECT_EQ(chain(x, 0), chain_expected(xv, 0));
    EXPECT_EQ(execution_stats().programs_created, 1);
    // Using k = 2 made it the most recent: building k = 1 evicts k = 3 (the least recent) instead.
    EXPECT_EQ(chain(x, 2), chain_expected(xv, 2));
    EXPECT_EQ(chain(x, 1), chain_expected(xv, 1));
    reset_execution_stats();
    EXPECT_EQ(chain(x, 2), chain_expected(xv, 2));
    EXPECT_EQ(execution_stats().programs_created, 0);
    EXPECT_EQ(chain(x, 3), chain_expected(xv, 3));
    EXPECT_EQ(execution_stats().programs_created, 1);
  }
}

// Capacity 1 and two threads running different programs: each launch evicts the other thread's
// program, possibly while it runs. Results stay right (and ThreadSanitizer stays quiet).
TEST(ProgramCacheTest, ThreadsRunProgramsTheOtherEvicts) {
  Device d = Device::cpu();
  Backend& be = backend_for(d);
  CapacityGuard guard(be);
  be.set_program_capacity(1);
  std::vector<float> xv(4096);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(i % 7) - 3;
  Array x = from_vector<float>(xv, {int64_t(xv.size())}, d);
  std::vector<int> failures(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i)
        if (chain(x, t + 2 * (i % 2)) != chain_expected(xv, t + 2 * (i % 2))) ++failures[size_t(t)];
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures[0], 0);
  EXPECT_EQ(failures[1], 0);
  EXPECT_LE(be.program_count(), 1u);
}

}  // namespace
}  // namespace ember
