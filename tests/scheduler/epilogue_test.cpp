// Contraction epilogues (src/scheduler/epilogue.cpp): matmul / conv2d followed by bias or residual
// adds, scales and activations become one library call. Every result is compared with the
// unfused graph on the reference backend (Device::reference(), fusion off) and on the CPU with
// fusion off; the counts show the elementwise kernel gone. Values needed elsewhere (held by the
// user, saved for backward) keep the chain apart, and training steps give the same loss and
// gradients with the rewrite on and off.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "ember/ember.h"
#include "ember/nn/linear.h"
#include "scheduler/epilogue.h"
#include "scheduler/epilogue_guard.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

using Guard = ember::testing::EpilogueSwitchesGuard;

std::vector<double> host_random(int64_t n, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(g);
  return v;
}

// Host data as a realized array of `dt` on `d`.
Array make(const std::vector<double>& v, const Shape& s, DType dt, Device d) {
  if (dt == DType::F64) return from_vector<double>(v, s, d).eval();
  std::vector<float> f(v.begin(), v.end());
  return from_vector<float>(f, s, d).eval();
}

struct Input {
  Shape shape;
  uint32_t seed;
};
using Graph = std::function<Array(const std::vector<Array>&)>;

struct Counts {
  int64_t kernels, library_calls;
};

// Realizes g on device d (inputs realized first) and returns the values and the counts.
std::vector<double> run(const Graph& g, const std::vector<Input>& ins, DType dt, Device d, Counts* counts = nullptr) {
  std::vector<Array> xs;
  for (const Input& i : ins) xs.push_back(make(host_random(i.shape.numel(), i.seed), i.shape, dt, d));
  synchronize();
  reset_execution_stats();
  Array y = g(xs).eval();
  synchronize();
  if (counts) *counts = {execution_stats().kernels, execution_stats().library_calls};
  return y.to_vector<double>();
}

// The graph with the rewrite equals the unfused graph on the reference backend and on the CPU,
// and takes exactly one library call and no kernel (`folded`), or as many as without it.
void check(const Graph& g, const std::vector<Input>& ins, bool folded = true) {
  Guard guard;
  for (DType dt : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    const double rtol = dt == DType::F32 ? 2e-5 : 1e-12, atol = dt == DType::F32 ? 2e-5 : 1e-12;
    set_fusion_enabled(false);
    std::vector<double> want = run(g, ins, dt, Device::reference());
    std::vector<double> cpu_unfused = run(g, ins, dt, Device::cpu());
    set_fusion_enabled(true);
    set_epilogue_folding_enabled(false);
    Counts before{};
    std::vector<double> cpu_plain = run(g, ins, dt, Device::cpu(), &before);
    set_epilogue_folding_enabled(true);
    Counts after{};
    std::vector<double> cpu = run(g, ins, dt, Device::cpu(), &after);
    Counts ref_counts{};
    std::vector<double> ref = run(g, ins, dt, Device::reference(), &ref_counts);
    EXPECT_TRUE(all_close(cpu, want, rtol, atol));
    EXPECT_TRUE(all_close(cpu, cpu_unfused, rtol, atol));
    EXPECT_TRUE(all_close(cpu, cpu_plain, rtol, atol));
    EXPECT_TRUE(all_close(ref, want, rtol, atol));  // the reference backend's own post-ops
    if (folded) {
      EXPECT_EQ(after.library_calls, 1);
      EXPECT_EQ(after.kernels, 0);
      EXPECT_EQ(ref_counts.kernels, 0);
      EXPECT_GE(before.kernels, 1);  // the elementwise kernel the rewrite removes
    } else {
      EXPECT_EQ(after.kernels, before.kernels);
      EXPECT_EQ(after.library_calls, before.library_calls);
    }
  }
}

TEST(EpilogueTest, MatmulBiasRelu) {
  check([](const std::vector<Array>& x) { return relu(add(matmul(x[0], x[1]), x[2])); },
        {{{64, 48}, 1}, {{48, 40}, 2}, {{40}, 3}});
  // bias first, [1, N]
  check([](const std::vector<Array>& x) { return relu(add(x[2], matmul(x[0], x[1]))); },
        {{{33, 17}, 4}, {{17, 29}, 5}, {{1, 29}, 6}});
}

TEST(EpilogueTest, MatmulScaleResidual) {
  check([](const std::vector<Array>& x) { return add(mul(matmul(x[0], x[1]), 0.5), x[2]); },
        {{{40, 32}, 7}, {{32, 24}, 8}, {{40, 24}, 9}});
  // A transposed residual (a strided operand) and x - c.
  check([](const std::vector<Array>& x) { return sub(add(matmul(x[0], x[1]), transpose(x[2], 0, 1)), 0.25); },
        {{{40, 32}, 10}, {{32, 24}, 11}, {{24, 40}, 12}});
}

TEST(EpilogueTest, MatmulActivations) {
  const std::vector<Input> ins{{{50, 30}, 13}, {{30, 70}, 14}, {{70}, 15}};
  check([](const std::vector<Array>& x) { return tanh(add(matmul(x[0], x[1]), x[2])); }, ins);
  check([](const std::vector<Array>& x) { return sigmoid(add(matmul(x[0], x[1]), x[2])); }, ins);
  check([](const std::vector<Array>& x) { return gelu(add(matmul(x[0], x[1]), x[2])); }, ins);
  check([](const std::vector<Array>& x) { return gelu_tanh(mul(matmul(x[0], x[1]), 2.0)); }, ins);
  // The benchmark's chain: gelu(relu(A·B) + bias), three post-ops.
  check([](const std::vector<Array>& x) { return gelu(add(relu(matmul(x[0], x[1])), x[2])); }, ins);
}

TEST(EpilogueTest, BatchedMatmul) {
  // Shared b (the batch folds into M) and per-batch b, with a per-batch residual.
  check([](const std::vector<Array>& x) { return relu(add(matmul(x[0], x[1]), x[2])); },
        {{{3, 16, 24}, 16}, {{24, 20}, 17}, {{20}, 18}});
  check([](const std::vector<Array>& x) { return add(mul(matmul(x[0], x[1]), 0.5), x[2]); },
        {{{3, 16, 24}, 19}, {{3, 24, 20}, 20}, {{3, 16, 20}, 21}});
  // A residual broadcast over the batch.
  check([](const std::vector<Array>& x) { return tanh(add(matmul(x[0], x[1]), x[2])); },
        {{{2, 5, 8}, 22}, {{2, 8, 6}, 23}, {{5, 6}, 24}});
}

TEST(EpilogueTest, SmallMatmulRowsUseTheGemvPath) {
  // M = 1 and M = 3 with Linear's x·Wᵀ (the CPU's small-M loops), bias and activations.
  check([](const std::vector<Array>& x) { return relu(add(matmul(x[0], transpose(x[1], 0, 1)), x[2])); },
        {{{1, 256}, 25}, {{128, 256}, 26}, {{128}, 27}});
  check([](const std::vector<Array>& x) { return sigmoid(add(matmul(x[0], x[1]), x[2])); },
        {{{3, 64}, 28}, {{64, 96}, 29}, {{3, 96}, 30}});
}

TEST(EpilogueTest, EmptySumAndGroupedStridedConv) {
  // K = 0: the product is zeros, the post-ops still apply (relu(0 + b)).
  check([](const std::vector<Array>& x) { return relu(add(matmul(x[0], x[1]), x[2])); },
        {{{4, 0}, 53}, {{0, 6}, 54}, {{6}, 55}});
  // Groups, stride and dilation with a per-channel add and sigmoid.
  check([](const std::vector<Array>& x) {
    return sigmoid(add(conv2d(x[0], x[1], {.stride = 2, .padding = 2, .dilation = 2, .groups = 2}),
                       reshape(x[2], {6, 1, 1})));
  }, {{{2, 4, 11, 9}, 56}, {{6, 2, 3, 3}, 57}, {{6}, 58}});
}

TEST(EpilogueTest, Conv2dBiasRelu) {
  Conv2dOptions o{.padding = 1};
  // The op's own bias, then relu.
  check([o](const std::vector<Array>& x) { return relu(conv2d(x[0], x[1], x[2], o)); },
        {{{2, 3, 10, 10}, 31}, {{8, 3, 3, 3}, 32}, {{8}, 33}});
  // A bias added as [O, 1, 1] (per channel: oneDNN binary post-op), relu, scale.
  check([o](const std::vector<Array>& x) {
    return mul(relu(add(conv2d(x[0], x[1], o), reshape(x[2], {8, 1, 1}))), 0.5);
  }, {{{2, 3, 10, 10}, 34}, {{8, 3, 3, 3}, 35}, {{8}, 36}});
  // A full residual (the loops after oneDNN's convolution) with tanh; 16 channels (Winograd).
  check([](const std::vector<Array>& x) { return tanh(add(conv2d(x[0], x[1], x[2], {.padding = 1}), x[3])); },
        {{{2, 16, 8, 8}, 37}, {{16, 16, 3, 3}, 38}, {{16}, 39}, {{2, 16, 8, 8}, 40}});
}

TEST(EpilogueTest, TensorMultiplies) {
  // An inference batch norm after a convolution: y * scale + shift per channel, relu (oneDNN's
  // binary post-ops), then with a residual (the loops after the convolution); 16 channels.
  check([](const std::vector<Array>& x) {
    return relu(add(mul(conv2d(x[0], x[1], {.padding = 1}), reshape(x[2], {8, 1, 1})), reshape(x[3], {8, 1, 1})));
  }, {{{2, 3, 10, 10}, 60}, {{8, 3, 3, 3}, 61}, {{8}, 62}, {{8}, 63}});
  check([](const std::vector<Array>& x) {
    Array bn = add(mul(reshape(x[2], {16, 1, 1}), conv2d(x[0], x[1], {.padding = 1})), reshape(x[3], {16, 1, 1}));
    return relu(add(bn, x[4]));
  }, {{{2, 16, 8, 8}, 64}, {{16, 16, 3, 3}, 65}, {{16}, 66}, {{16}, 67}, {{2, 16, 8, 8}, 68}});
  // A matmul scaled per column, and by a full tensor (a gate).
  check([](const std::vector<Array>& x) { return add(mul(matmul(x[0], x[1]), x[2]), x[3]); },
        {{{40, 32}, 69}, {{32, 24}, 70}, {{24}, 71}, {{24}, 72}});
  check([](const std::vector<Array>& x) { return mul(matmul(x[0], x[1]), x[2]); },
        {{{3, 32}, 73}, {{32, 24}, 74}, {{3, 24}, 75}});
  // A difference with a tensor stays a separate kernel.
  check([](const std::vector<Array>& x) { return sub(matmul(x[0], x[1]), x[2]); },
        {{{8, 4}, 76}, {{4, 6}, 77}, {{6}, 78}}, false);
}

TEST(EpilogueTest, ValueNeededElsewhereIsNotFolded) {
  Guard guard;
  for (DType dt : {DType::F32, DType::F64}) {
    Device d = Device::cpu();
    Array x = make(host_random(20 * 12, 41), {20, 12}, dt, d), w = make(host_random(12 * 9, 42), {12, 9}, dt, d);
    Array b = make(host_random(9, 43), {9}, dt, d);
    // The product is held by the user: it is stored, and the add + relu stay one kernel.
    synchronize();
    reset_execution_stats();
    Array m = matmul(x, w);
    Array y = relu(add(m, b));
    eval({m, y});
    synchronize();
    EXPECT_EQ(execution_stats().library_calls, 1);
    EXPECT_EQ(execution_stats().kernels, 1);
    set_fusion_enabled(false);
    Array xr = make(host_random(20 * 12, 41), {20, 12}, dt, Device::reference());
    Array wr = make(host_random(12 * 9, 42), {12, 9}, dt, Device::reference());
    Array br = make(host_random(9, 43), {9}, dt, Device::reference());
    Array mr = matmul(xr, wr);
    EXPECT_TRUE(all_close(m, mr.to_vector<double>(), 1e-5, 1e-6));
    EXPECT_TRUE(all_close(y, relu(add(mr, br)).to_vector<double>(), 1e-5, 1e-6));
    set_fusion_enabled(true);
  }
}

// One training step's loss and gradients for f(x, w, b); with the rewrite on and off, and on the
// reference backend unfused.
struct Step {
  double loss;
  std::vector<double> dw, db;
};
Step train_step(const std::function<Array(const Array&, const Array&, const Array&)>& f, Device d,
                Counts* counts = nullptr) {
  Array x = make(host_random(16 * 24, 44), {16, 24}, DType::F32, d);
  Array w = make(host_random(24 * 12, 45), {24, 12}, DType::F32, d).require_grad();
  Array b = make(host_random(12, 46), {12}, DType::F32, d).require_grad();
  synchronize();
  reset_execution_stats();
  Array loss = f(x, w, b);
  Gradients g = loss.backward();
  Array dw = w.grad(g), db = b.grad(g);
  eval({loss, dw, db});
  synchronize();
  if (counts) *counts = {execution_stats().kernels, execution_stats().library_calls};
  return {loss.item<double>(), dw.to_vector<double>(), db.to_vector<double>()};
}

// Kernel counts: the rewrite never adds kernels; the elementwise ops it takes over often fused
// into a following reduction anyway (the loss), so the count may stay the same.
void check_training(const std::function<Array(const Array&, const Array&, const Array&)>& f, bool folds) {
  Guard guard;
  set_fusion_enabled(false);
  Step want = train_step(f, Device::reference());
  set_fusion_enabled(true);
  set_epilogue_folding_enabled(false);
  Counts before{}, after{};
  Step plain = train_step(f, Device::cpu(), &before);
  set_epilogue_folding_enabled(true);
  Step got = train_step(f, Device::cpu(), &after);
  EXPECT_NEAR(got.loss, want.loss, 1e-4 * std::fabs(want.loss) + 1e-5);
  EXPECT_NEAR(got.loss, plain.loss, 1e-4 * std::fabs(plain.loss) + 1e-5);
  EXPECT_TRUE(all_close(got.dw, want.dw, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(got.db, want.db, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(got.dw, plain.dw, 1e-4, 1e-5));
  EXPECT_LE(after.kernels, before.kernels);
  EXPECT_EQ(after.library_calls, before.library_calls);
  if (!folds) {
    EXPECT_EQ(after.kernels, before.kernels);
  }
}

TEST(EpilogueTest, TrainingStepWithRelu) {
  // relu saves its output, the add and the product are needed only by their consumers: folded.
  check_training([](const Array& x, const Array& w, const Array& b) { return sum(relu(add(matmul(x, w), b))); },
                 true);
}

TEST(EpilogueTest, TrainingStepWithGeluKeepsItsSavedInput) {
  // gelu's gradient needs its input (the add), so gelu stays a kernel; the add still folds.
  check_training([](const Array& x, const Array& w, const Array& b) { return mean(gelu(add(matmul(x, w), b))); },
                 true);
  // x·W * 0.5: mul saves both operands (the product), so nothing folds.
  check_training([](const Array& x, const Array& w, const Array& b) { return sum(add(mul(matmul(x, w), 0.5), b)); },
                 false);
}

TEST(EpilogueTest, MlpTrainingStepMatchesWithTheRewriteOff) {
  Guard guard;
  auto step = [](bool on, Device d, Counts* counts = nullptr) {
    set_epilogue_folding_enabled(on);
    nn::Linear fc1({.in = 20, .out = 32, .seed = 1, .device = d}), fc2({.in = 32, .out = 5, .seed = 3, .device = d});
    Array x = make(host_random(8 * 20, 47), {8, 20}, DType::F32, d);
    Array t = make(host_random(8 * 5, 48), {8, 5}, DType::F32, d);
    eval({fc1.weight.array(), fc1.bias.array(), fc2.weight.array(), fc2.bias.array()});
    synchronize();
    reset_execution_stats();
    Array out = fc2.forward(relu(fc1.forward(x)));
    Array diff = sub(out, t);
    Array loss = mean(mul(diff, diff));
    Gradients g = loss.backward();
    std::vector<Array> grads{fc1.weight.array().grad(g), fc1.bias.array().grad(g), fc2.weight.array().grad(g),
                             fc2.bias.array().grad(g)};
    std::vector<Array> all = grads;
    all.push_back(loss);
    eval(all);
    synchronize();
    if (counts) *counts = {execution_stats().kernels, execution_stats().library_calls};
    std::vector<std::vector<double>> r{{loss.item<double>()}};
    for (const Array& a : grads) r.push_back(a.to_vector<double>());
    return r;
  };
  Counts c_on{}, c_off{};
  auto on = step(true, Device::cpu(), &c_on), off = step(false, Device::cpu(), &c_off);
  // Both layers' bias adds (and fc1's relu) are folded: their forward kernels are gone.
  EXPECT_LT(c_on.kernels, c_off.kernels);
  EXPECT_EQ(c_on.library_calls, c_off.library_calls);
  set_fusion_enabled(false);
  auto ref = step(true, Device::reference());
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < on.size(); ++i) {
    EXPECT_TRUE(all_close(on[i], off[i], 1e-4, 1e-6)) << "value " << i;
    EXPECT_TRUE(all_close(on[i], ref[i], 1e-4, 1e-6)) << "value " << i;
  }
}

TEST(EpilogueTest, NanPropagatesAndBadInputStillFails) {
  Guard guard;
  Device d = Device::cpu();
  std::vector<double> xv = host_random(6 * 5, 49);
  xv[7] = NAN;  // row 1
  Array x = make(xv, {6, 5}, DType::F32, d), w = make(host_random(5 * 4, 50), {5, 4}, DType::F32, d);
  Array b = make(host_random(4, 51), {4}, DType::F32, d);
  std::vector<double> y = relu(add(matmul(x, w), b)).to_vector<double>();
  for (int j = 0; j < 4; ++j) {
    EXPECT_TRUE(std::isnan(y[size_t(4 + j)]));
    EXPECT_FALSE(std::isnan(y[size_t(j)]));
  }
  // Mismatched shapes are still refused by the front end, before any rewrite.
  EXPECT_THROW(relu(add(matmul(x, transpose(w, 0, 1)), b)), Error);
  EXPECT_THROW(relu(add(matmul(x, w), make(host_random(5, 52), {5}, DType::F32, d))), Error);
}

}  // namespace
}  // namespace ember
