// oneDNN primitives on any thread (src/backend/cpu/dnnl_scratchpad.h). The CPU backend caches each
// oneDNN primitive and runs it on whichever thread executes the queued work: the device's worker
// or a reading thread that runs it inline. With oneDNN's library scratchpad, implementations that
// use a "global" scratchpad (Winograd on AVX-512, gemm-based convolutions) looked the buffer up in
// the executing thread's thread_local storage, which is null when another thread created the
// primitive: a dilated convolution's backward-weights pass (gemm-based here) crashed with a null
// store every time, and Winograd convolutions crashed at random in plain inference. Each test
// first runs a geometry on a fresh thread (the queue is idle, so that thread executes it and
// creates the primitives), then on other threads, and compares with the reference backend.
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

std::vector<float> host_values(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(g);
  return v;
}

struct ConvCase {
  int64_t n, c, h, o, k;
  Conv2dOptions opts;
};

// Forward, backward-data and backward-weights of one geometry, and an average pooling of the
// output, as one vector of values.
std::vector<double> conv_passes(const ConvCase& g, Device d) {
  const Shape xs{g.n, g.c, g.h, g.h}, ws{g.o, g.c / g.opts.groups, g.k, g.k};
  Array x = from_vector<float>(host_values(xs.numel(), 1), xs, d);
  Array w = from_vector<float>(host_values(ws.numel(), 2), ws, d);
  Array y = conv2d(x, w, g.opts);
  Array gy = from_vector<float>(host_values(y.shape().numel(), 3), y.shape(), d);
  Array dx = conv2d_backward_data(gy, w, xs, g.opts);
  Array dw = conv2d_backward_weights(x, gy, ws, g.opts);
  Array pooled = avg_pool2d(y, {.kernel = 2});
  std::vector<double> out;
  for (const Array& a : {y, dx, dw, pooled}) {
    std::vector<double> v = a.to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

const std::vector<ConvCase>& cases() {
  static const std::vector<ConvCase> c = {
      {4, 3, 16, 8, 3, {.dilation = 2}},           // backward weights: oneDNN's gemm-based kernel
      {2, 32, 12, 64, 3, {}},                      // Winograd where the CPU has it (AVX-512)
      {4, 1, 14, 16, 3, {}},                       // a first layer
      {2, 8, 13, 8, 3, {.padding = 1, .groups = 8}},  // depthwise
      {2, 16, 11, 24, 1, {}},                      // 1x1
      {2, 4, 17, 6, 5, {.stride = 2, .padding = 2}},
  };
  return c;
}

TEST(CpuDnnlThreadsTest, PrimitivesCreatedOnOneThreadRunOnAnother) {
  for (const ConvCase& g : cases()) {
    SCOPED_TRACE(::testing::Message() << "conv C=" << g.c << " O=" << g.o << " K=" << g.k);
    const std::vector<double> want = conv_passes(g, Device::reference());
    synchronize();  // an idle queue: the next thread runs its work inline
    std::vector<double> first;
    std::thread([&] { first = conv_passes(g, Device::cpu()); }).join();
    EXPECT_TRUE(all_close(first, want, 1e-4, 1e-4));
    EXPECT_TRUE(all_close(conv_passes(g, Device::cpu()), want, 1e-4, 1e-4));  // the main thread
    std::vector<std::vector<double>> got(3);
    std::vector<std::thread> threads;
    for (auto& r : got) threads.emplace_back([&r, &g] { r = conv_passes(g, Device::cpu()); });
    for (std::thread& t : threads) t.join();
    for (const auto& r : got) EXPECT_TRUE(all_close(r, want, 1e-4, 1e-4));
  }
}

TEST(CpuDnnlThreadsTest, MatmulCreatedOnOneThreadRunsOnAnother) {
  // Large K with few rows (oneDNN splits K and reduces partial sums in its scratchpad), with and
  // without a fused bias + relu epilogue.
  auto run = [](Device d, bool epilogue) {
    Array a = from_vector<float>(host_values(16 * 4096, 4), {16, 4096}, d);
    Array b = from_vector<float>(host_values(4096 * 24, 5), {4096, 24}, d);
    Array bias = from_vector<float>(host_values(24, 6), {24}, d);
    Array y = matmul(a, b);
    return (epilogue ? relu(add(y, bias)) : y).to_vector<double>();
  };
  for (bool epilogue : {false, true}) {
    const std::vector<double> want = run(Device::reference(), epilogue);
    synchronize();
    std::vector<double> first;
    std::thread([&] { first = run(Device::cpu(), epilogue); }).join();
    EXPECT_TRUE(all_close(first, want, 1e-4, 1e-4));
    EXPECT_TRUE(all_close(run(Device::cpu(), epilogue), want, 1e-4, 1e-4));
  }
}

// The reported pattern: a two-layer CNN whose parameters live in an optimizer's arena, inference
// under no_grad, results read on the main thread while the queue's worker runs (and on user
// threads at once), many times.
TEST(CpuDnnlThreadsTest, ConvInferenceStress) {
  struct Net : nn::Module {
    nn::Conv2d conv1{{.in = 1, .out = 32, .kernel = 3}};
    nn::Conv2d conv2{{.in = 32, .out = 64, .kernel = 3}};
    EMBER_MODULE_VISIT(conv1, conv2)  // a local class: no call operator (member template)
    Tensor<4> forward(const Tensor<4>& x) { return relu(conv2(relu(conv1(x)))); }
  };
  Net m;
  optim::Sgd opt(m, {.lr = 0.01});  // moves the parameters into the optimizer's arena
  const Tensor<4> x = Tensor<4>::randn({16, 1, 28, 28}, {.seed = 3});
  double first = 0;
  {
    NoGradGuard g;
    first = m.forward(x).mean().item();
  }
  ASSERT_TRUE(std::isfinite(first));
  auto loop = [&](int rounds, std::vector<double>& out) {
    NoGradGuard g;
    for (int i = 0; i < rounds; ++i) out.push_back(m.forward(x).mean().item());
  };
  std::vector<double> main_values;
  std::vector<std::vector<double>> thread_values(2);
  std::vector<std::thread> threads;
  for (auto& v : thread_values) threads.emplace_back([&loop, &v] { loop(6, v); });
  loop(12, main_values);
  for (std::thread& t : threads) t.join();
  // The same input and weights: every read gives the first value (a kernel may switch to its
  // compiled tier meanwhile, which may round the mean differently in the last bits).
  for (double v : main_values) EXPECT_NEAR(v, first, 1e-6 * std::max(1.0, std::fabs(first)));
  for (const auto& vs : thread_values)
    for (double v : vs) EXPECT_NEAR(v, first, 1e-6 * std::max(1.0, std::fabs(first)));
}

}  // namespace
}  // namespace ember
