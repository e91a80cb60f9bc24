// Concurrent use of the framework from several user threads (docs/semantics.md, "Threads"):
// graphs built and evaluated at once that share parameter tensors and pending intermediates,
// backward passes running at the same time (also through one shared history), value reads, and
// another thread calling synchronize()/memory_stats()/profiler_start()/profiler_stop() meanwhile.
// Every result is compared with the same computation run on one thread. The ThreadSanitizer
// build (`make tsan-test`) runs these to find data races; the Release build checks the values.
#include <gtest/gtest.h>

#include <cstdlib>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

// EMBER_TEST_DEVICE picks another device (ctest's backend.async_device: the asynchronous one).
Device dev() {
  if (const char* d = std::getenv("EMBER_TEST_DEVICE")) return Device::parse(d);
  return Device::cpu().available() ? Device::cpu() : Device::reference();
}

constexpr int kThreads = 4;
constexpr int kSteps = 10;

// What one step of one thread computes: the loss value and the gradients of both parameters.
struct StepResult {
  double loss = 0;
  std::vector<double> g1, g2;
};

// A small two-layer model on the shared parameters; the input depends on (thread, step).
StepResult model_step(const Array& w1, const Array& w2, int t, int k) {
  Array x = uniform({8, 16}, -1, 1, {.seed = uint64_t(1000 + 100 * t + k), .dtype = DType::F64, .device = dev()});
  Array h = tanh(matmul(x, w1));
  Array y = matmul(h, w2);
  Array loss = sum(mul(y, y));
  StepResult r;
  r.loss = loss.item<double>();
  Gradients g = loss.backward();
  r.g1 = w1.grad(g).to_vector<double>();
  r.g2 = w2.grad(g).to_vector<double>();
  return r;
}

// Runs `body` while another thread keeps calling synchronize() and memory_stats().
template <class Body>
void with_monitor(Body body) {
  std::atomic<bool> done{false};
  std::atomic<int64_t> polls{0};
  std::thread monitor([&] {
    while (!done.load()) {
      synchronize();
      MemoryStats m = memory_stats(dev());
      EXPECT_GE(m.live_bytes, 0);
      EXPECT_GE(m.cached_bytes, 0);
      polls.fetch_add(1);
      std::this_thread::yield();
    }
  });
  // The monitor must have polled once before the body starts: on a loaded machine a short body
  // could otherwise finish before the monitor thread is first scheduled (polls == 0).
  while (polls.load() == 0) std::this_thread::yield();
  body();
  done.store(true);
  monitor.join();
  EXPECT_GT(polls.load(), 0);
}

TEST(ThreadStressTest, ThreadsShareParametersWhileAnotherSynchronizes) {
  Array w1 = uniform({16, 32}, -0.5, 0.5, {.seed = 1, .dtype = DType::F64, .device = dev()}).eval().require_grad();
  Array w2 = uniform({32, 4}, -0.5, 0.5, {.seed = 2, .dtype = DType::F64, .device = dev()}).eval().require_grad();
  std::vector<StepResult> single(kThreads * kSteps), threaded(kThreads * kSteps);
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kSteps; ++k) single[size_t(t * kSteps + k)] = model_step(w1, w2, t, k);

  with_monitor([&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int k = 0; k < kSteps; ++k) threaded[size_t(t * kSteps + k)] = model_step(w1, w2, t, k);
      });
    for (auto& th : threads) th.join();
  });
  for (size_t i = 0; i < single.size(); ++i) {
    EXPECT_NEAR(threaded[i].loss, single[i].loss, 1e-12 * (1 + std::fabs(single[i].loss))) << i;
    EXPECT_TRUE(all_close(threaded[i].g1, single[i].g1, 1e-12, 1e-14)) << i;
    EXPECT_TRUE(all_close(threaded[i].g2, single[i].g2, 1e-12, 1e-14)) << i;
  }
}

// One pending intermediate (built on this thread, never evaluated here) that every thread uses:
// whichever thread reads first realizes it, and all backward passes run through its history
// (retain_graph, so each pass can use the saved values).
TEST(ThreadStressTest, ThreadsShareAPendingHistory) {
  Array w = uniform({16, 8}, -0.5, 0.5, {.seed = 3, .dtype = DType::F64, .device = dev()}).eval().require_grad();
  Array x = uniform({6, 16}, -1, 1, {.seed = 4, .dtype = DType::F64, .device = dev()});
  Array h = sigmoid(matmul(x, w));  // pending, shared
  auto step = [&](int t) {
    Array c = uniform({6, 8}, -1, 1, {.seed = uint64_t(50 + t), .dtype = DType::F64, .device = dev()});
    Array loss = sum(mul(mul(h, h), c));
    Gradients g = loss.backward({.retain_graph = true});
    std::vector<double> out = w.grad(g).to_vector<double>();
    out.push_back(loss.item<double>());
    return out;
  };
  std::vector<std::vector<double>> threaded(kThreads), single(kThreads);
  with_monitor([&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { threaded[size_t(t)] = step(t); });
    for (auto& th : threads) th.join();
  });
  for (int t = 0; t < kThreads; ++t) single[size_t(t)] = step(t);
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(all_close(threaded[size_t(t)], single[size_t(t)], 1e-12, 1e-14)) << t;
}

// Backward passes without retain_graph through one shared history at the same time: the first
// to finish releases the saved values. Each thread either gets the right gradients or the
// "already used by a backward pass" error (as it would one after the other), never a crash or a
// torn read; at least one gets the gradients.
TEST(ThreadStressTest, ConcurrentBackwardThroughOneHistoryReleasesSafely) {
  Array w = uniform({12, 12}, -0.5, 0.5, {.seed = 6, .dtype = DType::F64, .device = dev()}).eval().require_grad();
  Array x = uniform({5, 12}, -1, 1, {.seed = 7, .dtype = DType::F64, .device = dev()}).eval();
  auto build = [&] {
    Array h = x;
    for (int i = 0; i < 6; ++i) h = tanh(matmul(h, w));
    return sum(mul(h, h));
  };
  const std::vector<double> want = w.grad(build().backward()).to_vector<double>();
  for (int round = 0; round < 10; ++round) {
    Array loss = build();
    std::vector<std::vector<double>> got(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        try {
          got[size_t(t)] = w.grad(loss.backward()).to_vector<double>();
        } catch (const Error& e) {
          errors[size_t(t)] = e.what();
        }
      });
    for (auto& th : threads) th.join();
    int succeeded = 0;
    for (int t = 0; t < kThreads; ++t) {
      if (errors[size_t(t)].empty()) {
        ++succeeded;
        EXPECT_TRUE(all_close(got[size_t(t)], want, 1e-12, 1e-14)) << round << " " << t;
      } else {
        EXPECT_NE(errors[size_t(t)].find("retain_graph"), std::string::npos) << errors[size_t(t)];
      }
    }
    EXPECT_GE(succeeded, 1) << round;
  }
}

// The profiler is started and stopped while other threads run work (the queue worker records
// spans meanwhile): no races on its clock origin or its records, and the values are unchanged.
TEST(ThreadStressTest, ProfilerStartsAndStopsWhileWorkRuns) {
  Array w = uniform({16, 16}, -0.5, 0.5, {.seed = 8, .dtype = DType::F64, .device = dev()}).eval();
  auto work = [&](int t) {
    Array y = uniform({4, 16}, -1, 1, {.seed = uint64_t(60 + t), .dtype = DType::F64, .device = dev()});
    for (int i = 0; i < 20; ++i) y = tanh(matmul(y, w)).eval();
    return y.to_vector<double>();
  };
  std::vector<std::vector<double>> single(kThreads), threaded(kThreads);
  for (int t = 0; t < kThreads; ++t) single[size_t(t)] = work(t);
  std::atomic<bool> done{false};
  std::thread toggler([&] {
    while (!done.load()) {
      profiler_start();
      std::this_thread::yield();
      std::vector<KernelRecord> records = profiler_stop();
      for (const KernelRecord& r : records) EXPECT_GE(r.duration_ns, 0);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { threaded[size_t(t)] = work(t); });
  for (auto& th : threads) th.join();
  done.store(true);
  toggler.join();
  EXPECT_FALSE(profiler_running());
  // Close, not bit-equal: a kernel may switch tiers (interpreter -> compiled) between the runs.
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(all_close(threaded[size_t(t)], single[size_t(t)], 1e-12, 1e-14)) << t;
}

}  // namespace
}  // namespace ember
