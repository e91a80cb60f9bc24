// The lazy graph: nothing computes before a read or eval(), realized nodes drop their inputs,
// deep chains neither overflow the stack nor grow without bound, memory stays flat in loops,
// EMBER_SYNC-style eager mode, errors that name the user's line, and concurrent use.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ember/ember.h"
#include "graph/node.h"
#include "test_util.h"

namespace ember {
namespace {

Device test_device() { return Device::cpu().available() ? Device::cpu() : Device::reference(); }

// Restores the run-time policy a test changed.
struct PolicyGuard {
  RuntimePolicy saved = runtime_policy();
  ~PolicyGuard() { runtime_policy() = saved; }
};

TEST(GraphTest, OpsAreLazyUntilRead) {
  Device d = test_device();
  Array x = from_vector<float>({1, 2, 3}, {3}, d);
  EXPECT_TRUE(x.is_evaluated());  // host data is ready at once
  Array y = exp(add(x, 1.0));
  Array z = sum(y);
  EXPECT_FALSE(y.is_evaluated());
  EXPECT_FALSE(z.is_evaluated());
  double got = z.item<double>();
  EXPECT_NEAR(got, std::exp(2.0) + std::exp(3.0) + std::exp(4.0), 1e-4);
  EXPECT_TRUE(z.is_evaluated());
  // y was an intermediate of z: realizing z realized y as a kernel input.
  EXPECT_TRUE(y.is_evaluated());
}

TEST(GraphTest, ExplicitEvalRealizesSeveralArraysAndDropsInputs) {
  Device d = test_device();
  Array x = from_vector<float>({1, 2, 3, 4}, {2, 2}, d);
  Array a = mul(x, 2.0), b = sub(x, 1.0);
  EXPECT_EQ(a.node()->inputs.size(), 2u);
  eval({a, b});
  synchronize();  // eval() only schedules the work
  EXPECT_TRUE(a.is_evaluated());
  EXPECT_TRUE(b.is_evaluated());
  EXPECT_TRUE(a.node()->inputs.empty());  // ready nodes let go of their inputs
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
}

// eval_and_wait returns with every array computed (no synchronize needed) and throws the error
// of one that failed, naming the op.
TEST(GraphTest, EvalAndWaitReturnsComputedArraysOrTheError) {
  Device d = test_device();
  Array x = from_vector<float>({1, 2, 3, 4}, {4}, d);
  Array a = mul(x, 3.0), b = sum(x);
  eval_and_wait({a, b});
  EXPECT_TRUE(a.is_evaluated());
  EXPECT_TRUE(b.is_evaluated());
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 6, 9, 12}));
  EXPECT_EQ(b.item<float>(), 10.0f);
  Array bad = index_select(x, 0, from_vector<int64_t>({0, 9}, {2}, d));
  std::string e = testing::error_of([&] { eval_and_wait({bad}); });
  EXPECT_NE(e.find("index_select"), std::string::npos) << e;
  EXPECT_NE(e.find("9"), std::string::npos) << e;
}

TEST(GraphTest, MillionOpChainIsComputedAndFreedWithoutStackOverflow) {
  PolicyGuard guard;
  Device d = test_device();
  Array x = from_vector<float>({0, 0}, {2}, d);
  for (int i = 0; i < 1000000; ++i) x = add(x, 1.0);
  // Automatic evaluation (pending-node count) bounded the pending chain; the value is exact in f32.
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1e6f, 1e6f}));
}

TEST(GraphTest, MillionOpPendingChainIsDestroyedIteratively) {
  PolicyGuard guard;
  runtime_policy().auto_eval_depth = 0;  // let the pending chain grow
  runtime_policy().auto_eval_nodes = 0;
  Device d = test_device();
  int64_t live_before = memory_stats(d).live_bytes;
  {
    Array x = from_vector<float>({1}, {1}, d);
    for (int i = 0; i < 1000000; ++i) x = neg(x);
    EXPECT_EQ(x.node()->depth, 1000000u);
    EXPECT_FALSE(x.is_evaluated());
  }  // dropping the last handle releases a million nodes: a recursive destructor would crash here
  EXPECT_EQ(memory_stats(d).live_bytes, live_before);
}

TEST(GraphTest, AutoEvalDepthRealizesDeepPendingChains) {
  PolicyGuard guard;
  runtime_policy().auto_eval_depth = 100;
  Device d = test_device();
  Array x = from_vector<float>({1}, {1}, d);
  Array mid;
  for (int i = 0; i < 250; ++i) {
    x = mul(x, 1.0);
    if (i == 50) mid = x;
  }
  synchronize();
  EXPECT_TRUE(mid.is_evaluated());  // realized without any read or eval()
  EXPECT_LE(x.node()->depth, 100u);
}

// The default automatic evaluation counts the pending nodes a thread has alive: a wide graph of
// shallow nodes is realized too, not only deep chains.
TEST(GraphTest, AutoEvalCountRealizesWidePendingGraphs) {
  PolicyGuard guard;
  runtime_policy().auto_eval_depth = 0;
  runtime_policy().auto_eval_nodes = 1000;
  Device d = test_device();
  Array a = from_vector<float>({1, 2}, {2}, d);
  Array b = from_vector<float>({10, 20}, {2}, d);  // realized operands: one new node per op
  synchronize();
  reset_execution_stats();
  std::vector<Array> wide;
  for (int i = 0; i < 999; ++i) wide.push_back(i % 2 ? add(a, b) : mul(a, b));  // depth 1 each
  EXPECT_EQ(execution_stats().auto_flushes, 0);  // below the count: all lazy
  EXPECT_FALSE(wide.front().is_evaluated());
  for (int i = 999; i < 3000; ++i) wide.push_back(i % 2 ? add(a, b) : mul(a, b));
  synchronize();
  EXPECT_EQ(execution_stats().auto_flushes, 3);  // at 1000, 2000 and 3000 live pending nodes
  for (size_t i = 0; i < wide.size(); ++i) ASSERT_TRUE(wide[i].is_evaluated()) << i;
  EXPECT_EQ(wide[2999].to_vector<float>(), (std::vector<float>{11, 22}));
  EXPECT_EQ(wide[2998].to_vector<float>(), (std::vector<float>{10, 40}));
}

// Nodes that died or were read do not count: a loop that evaluates as it goes never flushes.
TEST(GraphTest, AutoEvalCountIgnoresDeadAndRealizedNodes) {
  PolicyGuard guard;
  runtime_policy().auto_eval_depth = 0;
  runtime_policy().auto_eval_nodes = 1000;
  Device d = test_device();
  Array x = from_vector<float>({0}, {1}, d);
  synchronize();
  reset_execution_stats();
  for (int i = 0; i < 5000; ++i) {
    Array t = mul(add(x, 1.0), 1.0);  // dies pending at the end of the iteration
    x = add(x, 1.0);
    if (i % 100 == 99) x.eval();
  }
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{5000}));
  EXPECT_EQ(execution_stats().auto_flushes, 0);
}

// A flushed chain stays fused: only the chain's end is a root, so the interior is computed
// inside kernels, not stored node by node.
TEST(GraphTest, AutoEvalCountKeepsChainsFused) {
  PolicyGuard guard;
  runtime_policy().auto_eval_depth = 0;
  runtime_policy().auto_eval_nodes = 1000;
  Device d = test_device();
  Array x = from_vector<float>({1, 2, 3}, {3}, d);
  Array one = from_vector<float>({1}, {1}, d);
  synchronize();
  reset_execution_stats();
  for (int i = 0; i < 2500; ++i) x = add(x, one);
  synchronize();
  ExecutionStats s = execution_stats();
  EXPECT_EQ(s.auto_flushes, 2);
  EXPECT_LE(s.kernels, 40);  // 2000 ops flushed in kernels of many ops each (not 2000 kernels)
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2501, 2502, 2503}));
}

TEST(GraphTest, LiveBytesStayFlatOverTenThousandIterations) {
  Device d = test_device();
  Array x = zeros({256}, {.device = d});
  x = add(mul(x, 0.5), 1.0).eval();
  int64_t live = memory_stats(d).live_bytes;
  for (int i = 0; i < 10000; ++i) {
    x = add(mul(x, 0.5), 1.0);
    x.eval();
    ASSERT_EQ(memory_stats(d).live_bytes, live) << "iteration " << i;
  }
  EXPECT_NEAR(x.to_vector<float>()[0], 2.0f, 1e-6);  // fixed point of x/2 + 1
}

TEST(GraphTest, EvalReturnsBeforeTheWorkIsDone) {
  PolicyGuard guard;
  runtime_policy().async = AsyncMode::always;  // the queue worker, whatever the cores
  Device d = test_device();
  if (!(d == Device::cpu())) GTEST_SKIP() << "needs the cpu backend (the reference one is too slow for this size)";
  Array a = uniform({1024, 1024}, -1, 1, {.seed = 1, .device = d});
  Array c = a;
  for (int i = 0; i < 8; ++i) c = matmul(c, a);  // about 17 GFLOP: far longer than scheduling it
  auto t0 = std::chrono::steady_clock::now();
  c.eval();
  auto t1 = std::chrono::steady_clock::now();
  bool done_at_return = c.is_evaluated();
  std::vector<float> v = c.to_vector<float>();  // waits
  auto t2 = std::chrono::steady_clock::now();
  EXPECT_FALSE(done_at_return);
  EXPECT_LT(t1 - t0, t2 - t1);
  EXPECT_EQ(v.size(), 1024u * 1024u);
}

// By default a host device (cpu, reference) runs an eval() on the calling thread: the work is done
// when eval() returns, and the kernels' profiler records carry the planning thread's number. With
// AsyncMode::always the same eval() goes to the queue worker (the test above).
TEST(GraphTest, HostDeviceWorkRunsOnTheCallingThreadByDefault) {
  PolicyGuard guard;
  runtime_policy().async = AsyncMode::automatic;
  Device d = test_device();
  if (std::getenv("EMBER_REFERENCE_ASYNC")) GTEST_SKIP() << "the asynchronous test device computes elsewhere";
  Array a = uniform({64, 64}, -1, 1, {.seed = 2, .device = d});
  Array c = a;
  for (int i = 0; i < 4; ++i) c = tanh(matmul(c, a));
  profiler_start();
  c.eval();
  const bool done_at_return = c.is_evaluated();
  std::vector<KernelRecord> records = profiler_stop();
  EXPECT_TRUE(done_at_return);
  ASSERT_FALSE(records.empty());
  // The plan's record comes from the planning thread; every kernel's from the same one.
  ASSERT_EQ(records.front().name, "plan");
  for (const KernelRecord& r : records) EXPECT_EQ(r.thread, records.front().thread) << r.name << " " << r.where;
}

TEST(GraphTest, ErrorsOfQueuedWorkSurfaceAtTheReadAndPropagate) {
  Device d = test_device();
  Array i = from_vector<int64_t>({1, 2}, {2}, d);
  Array bad = floor_div(i, sub(i, i));  // integer division by zero, found when computed
  int line = __LINE__ - 1;
  Array later = add(bad, 1);            // depends on the failed value
  later.eval();                         // returns: the error is kept, not thrown here
  for (const Array& r : {bad, later}) {
    try {
      (void)r.to_vector<int64_t>();
      FAIL() << "expected the division error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("graph_test.cpp:" + std::to_string(line)), std::string::npos) << e.what();
    }
  }
  // The queue keeps working after an error.
  EXPECT_EQ(add(i, 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
}

TEST(GraphTest, PeakMemoryIsTracked) {
  Device d = test_device();
  reset_peak_memory(d);
  int64_t live = memory_stats(d).live_bytes;
  {
    Array big = zeros({1 << 16}, {.device = d}).eval();  // 256 KiB
    EXPECT_GE(memory_stats(d).live_bytes, live + (1 << 18));
  }
  EXPECT_EQ(memory_stats(d).live_bytes, live);
  EXPECT_GE(memory_stats(d).peak_bytes, live + (1 << 18));
}

TEST(GraphTest, EagerModeRealizesEveryOpAtCreation) {
  PolicyGuard guard;
  runtime_policy().eager = true;  // what EMBER_SYNC=1 sets
  Device d = test_device();
  Array x = from_vector<float>({1, 2}, {2}, d);
  Array y = mul(x, 3.0);
  EXPECT_TRUE(y.is_evaluated());
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 6}));
}

TEST(GraphTest, KernelErrorsNameTheOpAndTheUsersLine) {
  Device d = test_device();
  Array x = from_vector<float>({1, 2, 3}, {3}, d);
  Array idx = from_vector<int64_t>({0, 5}, {2}, d);
  Array g = index_select(x, 0, idx);  // fails only when computed
  int line = __LINE__ - 1;
  try {
    (void)g.to_vector<float>();
    FAIL() << "expected an out-of-range error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("index_select"), std::string::npos) << msg;
    EXPECT_NE(msg.find("graph_test.cpp:" + std::to_string(line)), std::string::npos) << msg;
    EXPECT_NE(msg.find('5'), std::string::npos) << msg;
  }
}

TEST(GraphTest, ShapeErrorsAreThrownAtTheCall) {
  Device d = test_device();
  Array a = zeros({2, 3}, {.device = d}), b = zeros({4}, {.device = d});
  try {
    Array c = add(a, b);
    FAIL() << "expected a broadcast error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("add"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("graph_test.cpp:"), std::string::npos) << msg;
  }
}

TEST(GraphTest, SharedTensorsAcrossThreads) {
  Device d = test_device();
  Array shared = arange(0, 1000, 1, DType::F32, d);  // pending: realized by whichever thread gets there
  Array base = mul(shared, 2.0);
  std::vector<double> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Array y = base;
      for (int i = 0; i < 50; ++i) y = add(y, double(t));
      results[size_t(t)] = sum(y).item<double>();
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_DOUBLE_EQ(results[size_t(t)], 999000.0 + 50.0 * t * 1000) << t;
}

TEST(GraphTest, DeviceStringsParse) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_EQ(Device::parse("reference").str(), "reference");
  EXPECT_THROW(Device::parse("tpu"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
}

TEST(GraphTest, OperandsOnDifferentDevicesAreRejected) {
  if (!Device::cpu().available()) GTEST_SKIP() << "needs both the cpu and the reference plugin";
  Array a = zeros({2}, {.device = Device::cpu()}), b = zeros({2}, {.device = Device::reference()});
  EXPECT_THROW(add(a, b), Error);
  Array moved = to_device(add(from_vector<float>({1, 2}, {2}, Device::cpu()), 1.0), Device::reference());
  EXPECT_EQ(moved.device(), Device::reference());
  EXPECT_EQ(add(moved, b).to_vector<float>(), (std::vector<float>{2, 3}));
}

}  // namespace
}  // namespace ember
