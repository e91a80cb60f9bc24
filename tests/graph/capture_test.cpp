// Captured functions (ember/capture.h): a replay gives what the eager function gives (NaN, inf
// and -0 included) with fresh inputs, reads the module's current weights, keeps one recording per
// signature (shapes, dtypes, layouts, aliasing), and runs eagerly where a replay would be wrong:
// gradients, host reads of data, fixed random seeds, training; random ops drawn from the global
// sequence draw anew on each replay, as the eager calls would. Errors found while a replay runs fail
// its outputs with the op's name; concurrent replays of one recording do not interfere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using testing::error_of;

std::vector<float> values(const Array& a) { return a.to_vector<float>(); }

// Bitwise equality (NaN payloads aside: any NaN matches any NaN; -0 differs from +0).
::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b) return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i];
  }
  return ::testing::AssertionSuccess();
}

class CaptureTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  Array vec(std::vector<float> v, Shape s) const { return from_vector(v, s, dev()); }
};

// y = relu(x @ w + b) * 2 - 1, a sum over rows, and exp: matmul, fused elementwise, reductions.
std::vector<Array> small_net(const std::vector<Array>& in) {
  Array h = sub(mul(relu(add(matmul(in[0], in[1]), in[2])), 2.0), 1.0);
  return {h, sum(h, {1}), exp(in[0])};
}

TEST_P(CaptureTest, ReplayMatchesHandComputedValuesWithFreshInputs) {
  CapturedFunction f = capture(small_net);
  Array w = vec({1, 0, -1, 2, 0.5f, 0}, {2, 3});
  Array b = vec({0, -1, 1}, {3});
  // Three calls with different x: the first records, the others replay.
  const std::vector<std::vector<float>> xs = {{1, 2, 3, 4}, {-1, 0.5f, 2, -2}, {0, 0, 1, 1}};
  for (size_t call = 0; call < xs.size(); ++call) {
    const std::vector<float>& x = xs[call];
    std::vector<Array> out = f({vec(x, {2, 2}), w, b});
    std::vector<float> want_h, want_s, want_e;
    const float wv[2][3] = {{1, 0, -1}, {2, 0.5f, 0}}, bv[3] = {0, -1, 1};
    for (int i = 0; i < 2; ++i) {
      float row = 0;
      for (int j = 0; j < 3; ++j) {
        float z = x[size_t(2 * i)] * wv[0][j] + x[size_t(2 * i + 1)] * wv[1][j] + bv[j];
        float h = std::max(z, 0.0f) * 2 - 1;
        want_h.push_back(h);
        row += h;
      }
      want_s.push_back(row);
    }
    for (float v : x) want_e.push_back(std::exp(v));
    EXPECT_TRUE(testing::all_close(out[0], std::vector<double>(want_h.begin(), want_h.end()))) << "call " << call;
    EXPECT_TRUE(testing::all_close(out[1], std::vector<double>(want_s.begin(), want_s.end()))) << "call " << call;
    EXPECT_TRUE(testing::all_close(out[2], std::vector<double>(want_e.begin(), want_e.end()), 1e-6)) << "call " << call;
  }
  CaptureStats s = f.stats();
  EXPECT_EQ(s.recordings, 1) << s.last_refusal;
  EXPECT_EQ(s.replays, 2);
  EXPECT_EQ(s.eager_calls, 0);
}

TEST_P(CaptureTest, NanInfAndSignedZeroReplayBitForBit) {
  auto fn = [](const std::vector<Array>& in) {
    return std::vector<Array>{add(mul(in[0], in[1]), in[1]), maximum(in[0], in[1]), sqrt(in[0]), sum(mul(in[0], in[1]), {0})};
  };
  CapturedFunction f = capture(fn);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Array a0 = vec({1, 2, 3, 4, 5, 6}, {6}), b0 = vec({1, 1, 1, 1, 1, 1}, {6});
  f({a0, b0});  // records
  Array a = vec({-0.0f, inf, -inf, nan, -1, 0}, {6}), b = vec({-0.0f, 0, 2, 1, nan, -0.0f}, {6});
  std::vector<Array> got = f({a, b}), want = fn({a, b});
  ASSERT_EQ(f.stats().replays, 1) << f.stats().last_refusal;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(values(got[i]), values(want[i]))) << "output " << i;
  // By hand: -0 * -0 + -0 = +0 + -0 = +0; max(-0, -0) = -0; sqrt(-0) = -0.
  EXPECT_FALSE(std::signbit(values(got[0])[0]));
  EXPECT_TRUE(std::signbit(values(got[2])[0]));
}

TEST_P(CaptureTest, EachSignatureGetsItsOwnRecording) {
  CapturedFunction f = capture([](const std::vector<Array>& in) { return std::vector<Array>{add(in[0], in[1])}; },
                               {.max_signatures = 2});
  Array x = vec({1, 2, 3, 4, 5, 6}, {2, 3}), y = vec({10, 20, 30, 40, 50, 60}, {2, 3});
  EXPECT_EQ(values(f({x, y})[0]), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  // A transposed view: another layout, another recording (a replay of the first would read it
  // with the wrong strides).
  Array xt = transpose(vec({1, 4, 2, 5, 3, 6}, {3, 2}), 0, 1);
  EXPECT_EQ(values(f({xt, y})[0]), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  // The same array twice (one buffer), then two arrays: neither may replay the other's recording.
  EXPECT_EQ(values(f({x, x})[0]), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(values(f({x, y})[0]), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  EXPECT_EQ(values(f({y, y})[0]), (std::vector<float>{20, 40, 60, 80, 100, 120}));
  // Another shape and dtype.
  EXPECT_EQ(values(f({vec({1}, {1}), vec({2}, {1})})[0]), (std::vector<float>{3}));
  Array xi = from_vector<int32_t>({7, 8}, {2}, dev()), yi = from_vector<int32_t>({1, 1}, {2}, dev());
  EXPECT_EQ(f({xi, yi})[0].to_vector<int32_t>(), (std::vector<int32_t>{8, 9}));
  CaptureStats s = f.stats();
  EXPECT_EQ(s.recordings + s.replays + s.eager_calls, 7);
  EXPECT_GE(s.recordings, 5) << s.last_refusal;  // (x,y), (xt,y), (x,x), [1], int; (x,y) and (y,y) were evicted or replayed
}

// Outputs that are constants, the input itself, or views of it: the replay's outputs are leaves
// that later ops use like any array (a constant output is not folded into them by its op).
TEST_P(CaptureTest, ConstantInputAndViewOutputs) {
  CapturedFunction f = capture([&](const std::vector<Array>& in) {
    return std::vector<Array>{full({2}, 3.0, {.device = dev()}), in[0], transpose(in[0], 0, 1), reshape(in[0], {4})};
  });
  for (float base : {1.0f, 10.0f}) {
    Array x = vec({base, base + 1, base + 2, base + 3}, {2, 2});
    std::vector<Array> out = f({x});
    EXPECT_EQ(values(add(out[0], 1.0)), (std::vector<float>{4, 4}));
    EXPECT_EQ(values(out[1]), values(x));
    EXPECT_EQ(values(out[2]), (std::vector<float>{base, base + 2, base + 1, base + 3}));
    EXPECT_EQ(values(mul(out[3], 2.0)), (std::vector<float>{2 * base, 2 * base + 2, 2 * base + 4, 2 * base + 6}));
  }
  EXPECT_EQ(f.stats().replays, 1) << f.stats().last_refusal;
}

TEST_P(CaptureTest, OffsetInputsReplayAtTheirOwnOffset) {
  CapturedFunction f = capture([](const std::vector<Array>& in) { return std::vector<Array>{mul(in[0], 10.0)}; });
  Array base = vec({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  EXPECT_EQ(values(f({slice(base, 0, 0, 4)})[0]), (std::vector<float>{10, 20, 30, 40}));
  EXPECT_EQ(values(f({slice(base, 0, 4, 8)})[0]), (std::vector<float>{50, 60, 70, 80}));
  EXPECT_EQ(f.stats().replays, 1) << f.stats().last_refusal;
}

TEST_P(CaptureTest, HostReadsRunEagerly) {
  // A branch on a value: recording refused, every call eager (and right).
  CapturedFunction branchy = capture([](const std::vector<Array>& in) {
    return std::vector<Array>{in[0].item<float>() > 0 ? mul(in[0], 2.0) : mul(in[0], -1.0)};
  });
  EXPECT_EQ(values(branchy({vec({3}, {1})})[0]), (std::vector<float>{6}));
  EXPECT_EQ(values(branchy({vec({-3}, {1})})[0]), (std::vector<float>{3}));
  EXPECT_EQ(branchy.stats().recordings, 0);
  EXPECT_EQ(branchy.stats().eager_calls, 2);
  EXPECT_NE(branchy.stats().last_refusal.find("reads device data on the host"), std::string::npos)
      << branchy.stats().last_refusal;
}

// One recording served `replays` calls; or, where the device has no 64-bit integers for Philox
// (SwiftShader, lavapipe without them), the random kernel ran on the host fallback, which is
// never recorded: the values were still compared, and the test says why it stops there.
void expect_replayed(const CapturedFunction& f, int64_t replays) {
  if (f.stats().recordings == 0 && f.stats().last_refusal.find("host fallback") != std::string::npos)
    GTEST_SKIP() << "not recordable on this device: " << f.stats().last_refusal;
  EXPECT_EQ(f.stats().recordings, 1) << f.stats().last_refusal;
  EXPECT_EQ(f.stats().replays, replays);
}

// Random ops drawn from the global sequence are replayed with fresh keys: each call gives what
// the eager function gives after the same manual_seed, call for call, and leaves the sequence
// where the eager calls leave it (a draw that is never computed counts too).
TEST_P(CaptureTest, RandomOpsDrawWhatTheEagerCallsWouldDraw) {
  auto noisy = [&](const std::vector<Array>& in) {
    Array unused = uniform({3}, 0, 1, {.device = dev()});  // drawn, never computed
    Array u = uniform({4}, -1, 1, {.device = dev()});
    Array n = normal({4}, 0, 2, {.device = dev()});
    Array kept = nn::dropout(in[0], 0.5, /*training=*/true);
    return std::vector<Array>{add(mul(in[0], u), n), kept};
  };
  const std::vector<std::vector<float>> xs = {{1, 2, 3, 4}, {-1, 0.5f, 0, 8}, {1, 1, 1, 1}};
  auto run = [&](const CapturedFunction::Fn& f) {
    manual_seed(1234);
    std::vector<std::vector<float>> got;
    for (const auto& x : xs)
      for (const Array& a : f({vec(x, {4})})) got.push_back(values(a));
    got.push_back(values(uniform({2}, 0, 1, {.device = dev()})));  // the sequence's next draw
    return got;
  };
  const std::vector<std::vector<float>> eager = run(noisy);
  CapturedFunction captured = capture(noisy);
  const std::vector<std::vector<float>> replayed = run(captured);
  ASSERT_EQ(replayed.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(same_bits(replayed[i], eager[i])) << "output " << i;
  // Fresh numbers on every call: the third call's inputs equal, its noise not the first's.
  EXPECT_NE(eager[0], eager[4]);
  // The dropout mask differs between calls: x = [1, 1, 1, 1] keeps 2 or 0 at each element.
  for (float v : eager[5]) EXPECT_TRUE(v == 0 || v == 2) << v;
  expect_replayed(captured, 2);
}

TEST_P(CaptureTest, RandomOpsWithAFixedSeedOrAReseedRunEagerly) {
  // A fixed seed: a replay could not tell it from a host value the function baked in.
  CapturedFunction fixed = capture([&](const std::vector<Array>& in) {
    return std::vector<Array>{add(in[0], uniform({4}, 0, 1, {.seed = 5, .device = dev()}))};
  });
  Array z = vec({0, 0, 0, 0}, {4});
  const std::vector<float> want = values(uniform({4}, 0, 1, {.seed = 5, .device = dev()}));
  EXPECT_EQ(values(fixed({z})[0]), want);
  EXPECT_EQ(values(fixed({z})[0]), want);
  EXPECT_EQ(fixed.stats().recordings, 0);
  EXPECT_NE(fixed.stats().last_refusal.find("fixed seed"), std::string::npos) << fixed.stats().last_refusal;
  // Restarting the sequence inside the function.
  CapturedFunction reseeds = capture([&](const std::vector<Array>& in) {
    manual_seed(9);
    return std::vector<Array>{add(in[0], uniform({4}, 0, 1, {.device = dev()}))};
  });
  const std::vector<float> first = values(reseeds({z})[0]);
  EXPECT_EQ(values(reseeds({z})[0]), first);
  EXPECT_EQ(reseeds.stats().recordings, 0);
  EXPECT_NE(reseeds.stats().last_refusal.find("manual_seed"), std::string::npos) << reseeds.stats().last_refusal;
}

// A training step with dropout, recorded with its backward: the gradient of sum(dropout(x w))
// follows each call's own mask, as eagerly.
TEST_P(CaptureTest, DropoutTrainingStepsAreReplayed) {
  auto step = [&](const std::vector<Array>& in) {
    Array w = in[1];
    Array loss = sum(nn::dropout(matmul(in[0], w), 0.3, true));
    return std::vector<Array>{loss, w.grad(loss.backward())};
  };
  Array x = vec({1, 2, 3, 4, 5, 6}, {3, 2});
  auto run = [&](const CapturedFunction::Fn& f) {
    manual_seed(77);
    std::vector<std::vector<float>> got;
    for (int call = 0; call < 4; ++call) {
      Array w = vec({1, -1, 0.5f, 2}, {2, 2}).require_grad();
      for (const Array& a : f({x, w})) got.push_back(values(a));
    }
    return got;
  };
  const std::vector<std::vector<float>> eager = run(step);
  CapturedFunction captured = capture(step, {.outputs_need_grad = false});
  const std::vector<std::vector<float>> replayed = run(captured);
  ASSERT_EQ(replayed.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(same_bits(replayed[i], eager[i])) << "output " << i;
  bool masks_differ = false;
  for (size_t call = 1; call < 4; ++call) masks_differ = masks_differ || eager[2 * call + 1] != eager[1];
  EXPECT_TRUE(masks_differ);
  expect_replayed(captured, 3);
}

TEST_P(CaptureTest, GradientsRunEagerly) {
  CapturedFunction f = capture([](const std::vector<Array>& in) { return std::vector<Array>{sum(mul(in[0], in[0]))}; });
  Array x = vec({1, 2, 3}, {3}).require_grad();
  Array y = f({x})[0];
  EXPECT_EQ(values(x.grad(y.backward())), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(f.stats().eager_calls, 1);
  NoGradGuard no_grad;
  EXPECT_EQ(values(f({x})[0]), (std::vector<float>{14}));
  EXPECT_EQ(f.stats().recordings, 1) << f.stats().last_refusal;
}

// A function that takes its own gradients (a training step's loss and gradient) is recorded with
// its backward and replayed: outputs_need_grad = false. d/dw sum((x w)^2) = 2 x^T (x w).
TEST_P(CaptureTest, GradientsTakenInsideAreReplayed) {
  CapturedFunction step = capture(
      [](const std::vector<Array>& in) {
        Array w = in[1];
        Array y = matmul(in[0], w);
        Array loss = sum(mul(y, y));
        return std::vector<Array>{loss, w.grad(loss.backward())};
      },
      {.outputs_need_grad = false});
  for (float s : {1.0f, 2.0f, -0.5f}) {
    Array x = vec({1, 2, 3, 4}, {2, 2});
    Array w = vec({s, 0, 1, -s}, {2, 2}).require_grad();  // a new leaf (an optimizer's update) each step
    std::vector<Array> out = step({x, w});
    EXPECT_FALSE(out[0].requires_grad());
    // x w = [[s + 2, -2s], [3s + 4, -4s]]
    const float y[2][2] = {{s + 2, -2 * s}, {3 * s + 4, -4 * s}};
    const float xv[2][2] = {{1, 2}, {3, 4}};
    float loss = 0;
    std::vector<double> grad(4, 0.0);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        loss += y[i][j] * y[i][j];
        for (int k = 0; k < 2; ++k) grad[size_t(k * 2 + j)] += 2.0 * xv[i][k] * y[i][j];
      }
    EXPECT_NEAR(out[0].item<float>(), loss, 1e-4 * std::abs(loss)) << "s = " << s;
    EXPECT_TRUE(testing::all_close(out[1], grad)) << "s = " << s;
  }
  EXPECT_EQ(step.stats().recordings, 1) << step.stats().last_refusal;
  EXPECT_EQ(step.stats().replays, 2);
}

TEST_P(CaptureTest, ClosedOverLazyValuesAreComputedBeforeRecording) {
  Array scale = mul(vec({1, 2}, {2}), 3.0);  // pending when the function first runs
  CapturedFunction f = capture([&](const std::vector<Array>& in) { return std::vector<Array>{mul(in[0], scale)}; });
  EXPECT_EQ(values(f({vec({1, 1}, {2})})[0]), (std::vector<float>{3, 6}));
  EXPECT_EQ(values(f({vec({2, -1}, {2})})[0]), (std::vector<float>{6, -6}));
  EXPECT_EQ(f.stats().replays, 1) << f.stats().last_refusal;
}

TEST_P(CaptureTest, ReplayErrorsNameTheOp) {
  CapturedFunction f = capture(
      [](const std::vector<Array>& in) { return std::vector<Array>{mul(index_select(in[0], 0, in[1]), 2.0)}; });
  Array table = vec({1, 2, 3}, {3});
  EXPECT_EQ(values(f({table, from_vector<int64_t>({2, 0}, {2}, dev())})[0]), (std::vector<float>{6, 2}));
  if (f.stats().recordings == 0) {  // SwiftShader lacks 64-bit integers: the gather runs on the host
    EXPECT_NE(f.stats().last_refusal.find("host fallback"), std::string::npos) << f.stats().last_refusal;
    GTEST_SKIP() << "not recordable on this device: " << f.stats().last_refusal;
  }
  Array bad = f({table, from_vector<int64_t>({1, 7}, {2}, dev())})[0];
  EXPECT_EQ(f.stats().replays, 1) << f.stats().last_refusal;
  std::string e = error_of([&] { values(bad); });
  EXPECT_NE(e.find("index_select"), std::string::npos) << e;
  EXPECT_NE(e.find("7"), std::string::npos) << e;
  // The recording still serves good inputs.
  EXPECT_EQ(values(f({table, from_vector<int64_t>({1, 1}, {2}, dev())})[0]), (std::vector<float>{4, 4}));
}

TEST_P(CaptureTest, ModuleCaptureSeesNewWeightsAndRunsEagerlyWhileTraining) {
  nn::Linear lin({.in = 2, .out = 1, .seed = 1, .device = dev()});
  lin.weight.set(vec({1, 2}, {1, 2}));
  lin.bias.set(vec({0.5f}, {1}));
  lin.eval();
  CapturedFunction f = capture_module(lin, [&](const std::vector<Array>& in) { return std::vector<Array>{lin.forward(in[0])}; });
  NoGradGuard no_grad;
  Array x = vec({3, 4}, {1, 2});
  EXPECT_EQ(values(f({x})[0]), (std::vector<float>{11.5f}));
  lin.weight.set(vec({-1, 0}, {1, 2}));  // new weights (an optimizer step, a loaded checkpoint)
  EXPECT_EQ(values(f({x})[0]), (std::vector<float>{-2.5f}));
  EXPECT_EQ(f.stats().replays, 1) << f.stats().last_refusal;
  lin.train();
  EXPECT_EQ(values(f({x})[0]), (std::vector<float>{-2.5f}));
  EXPECT_EQ(f.stats().eager_calls, 1);
}

TEST_P(CaptureTest, ConcurrentReplaysOfOneRecording) {
  CapturedFunction f = capture([](const std::vector<Array>& in) {
    return std::vector<Array>{sum(add(mul(exp(in[0]), 0.5), in[0]), {0})};
  });
  f({vec({0, 0, 0, 0}, {4})});
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        float v = float(t) + 0.01f * float(i);
        float got = f({from_vector<float>({v, v, v, v}, {4}, dev())})[0].item<float>();
        float want = 4 * (std::exp(v) * 0.5f + v);
        if (std::abs(got - want) > 1e-4f * std::abs(want)) ++wrong[size_t(t)];
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(f.stats().replays, 200) << f.stats().last_refusal;
}

// Whether replays on this device can compare parameters in place (the plugin gives its buffers a
// host address: cpu and reference; Vulkan and CUDA do not), so that they skip work that depends
// only on unchanged parameters.
bool reuses_parameter_work(Device d) { return d.kind == DeviceKind::Cpu || d.kind == DeviceKind::Reference; }

// y = x @ (exp(p) + 1): exp(p) + 1 depends only on the parameter p (an implicit input) and is its
// own kernel (it feeds a matmul), so a replay computes it once and reuses it while p holds the
// same bytes. What changes p does not matter (new arrays here; a buffer written in place, or one
// at a reused address, compare the same way): the replay compares the bytes, not the buffers.
TEST_P(CaptureTest, ParameterOnlyWorkIsReusedUntilTheParametersChange) {
  Array p = vec({0, 1, -1, 0.5f}, {2, 2});
  CapturedFunction f = capture([&](const std::vector<Array>& in) { return std::vector<Array>{matmul(in[0], add(exp(p), 1.0))}; },
                               {.implicit_inputs = [&] { return std::vector<Array>{p}; }});
  auto check = [&](const std::vector<float>& x, const std::vector<float>& pv) {
    const std::vector<float> got = values(f({vec(x, {1, 2})})[0]);
    ASSERT_EQ(got.size(), 2u);
    for (size_t j = 0; j < 2; ++j) {
      const double want = double(x[0]) * (std::exp(double(pv[j])) + 1) + double(x[1]) * (std::exp(double(pv[2 + j])) + 1);
      EXPECT_NEAR(got[j], want, 1e-5 * std::abs(want)) << j;
    }
  };
  check({1, 2}, {0, 1, -1, 0.5f});  // records
  check({3, 4}, {0, 1, -1, 0.5f});  // replays, computes exp(p) + 1
  check({5, 6}, {0, 1, -1, 0.5f});  // reuses it
  const int64_t reused = reuses_parameter_work(dev()) ? 1 : 0;
  EXPECT_EQ(f.stats().parameter_work_reused, reused);
  p = vec({2, -1, 0, 1}, {2, 2});  // a new array
  check({1, 1}, {2, -1, 0, 1});
  EXPECT_EQ(f.stats().parameter_work_reused, reused);
  p = mul(p, 2.0);  // computed on the device (the old buffer may come back from the cache)
  p.eval();
  check({1, 1}, {4, -2, 0, 2});
  check({2, 1}, {4, -2, 0, 2});
  EXPECT_EQ(f.stats().parameter_work_reused, 2 * reused);
  EXPECT_EQ(f.stats().replays, 5) << f.stats().last_refusal;
}

// An inference batch norm under capture_module: its scale and shift come from the parameters and
// running statistics only. New running statistics (a loaded checkpoint) and new NaN / inf weights
// are seen by the next replay; the values are computed here in double.
TEST_P(CaptureTest, BatchNormScaleAndShiftFollowNewStatistics) {
  nn::BatchNorm1d bn({.features = 2, .device = dev()});
  bn.eval();
  // Statistics and weights with data, as after training or loading (full() values are folded into
  // kernels, so those make a recording of their own: ConstantFilledInputsAreRecordedByValue).
  bn.weight.set(vec({1, 1}, {2}));
  bn.bias.set(vec({0, 0}, {2}));
  bn.running_mean.set(vec({0, 0}, {2}));
  bn.running_var.set(vec({1, 1}, {2}));
  CapturedFunction f = capture_module(bn, [&](const std::vector<Array>& in) { return std::vector<Array>{bn.forward(in[0])}; });
  NoGradGuard no_grad;
  auto check = [&](const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                   const std::vector<float>& mean, const std::vector<float>& var) {
    const std::vector<float> got = values(f({vec(x, {2, 2})})[0]);
    for (size_t i = 0; i < 4; ++i) {
      const size_t c = i % 2;
      const double a = double(w[c]) / std::sqrt(double(var[c]) + 1e-5);
      const double want = double(x[i]) * a + (double(b[c]) - double(mean[c]) * a);
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(got[i])) << i;
      else EXPECT_NEAR(got[i], want, 1e-5 * std::max(1.0, std::abs(want))) << i;
    }
  };
  for (int call = 0; call < 3; ++call) check({1, 2, 3, 4}, {1, 1}, {0, 0}, {0, 0}, {1, 1});
  bn.running_mean.set(vec({1, -1}, {2}));
  bn.running_var.set(vec({4, 0.25f}, {2}));
  for (int call = 0; call < 3; ++call) check({1, 2, 3, 4}, {1, 1}, {0, 0}, {1, -1}, {4, 0.25f});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  bn.weight.set(vec({inf, nan}, {2}));
  bn.bias.set(vec({0.5f, 1}, {2}));
  for (int call = 0; call < 2; ++call) check({1, 2, 3, 4}, {inf, nan}, {0.5f, 1}, {1, -1}, {4, 0.25f});
  EXPECT_EQ(f.stats().recordings, 1) << f.stats().last_refusal;
  EXPECT_EQ(f.stats().replays, 7);
}

// An input made by full() is folded into the kernels that read it, not read from its buffer: a
// recording is made per fill value, and an input with data of the same shape gets its own.
TEST_P(CaptureTest, ConstantFilledInputsAreRecordedByValue) {
  CapturedFunction f = capture([](const std::vector<Array>& in) { return std::vector<Array>{add(in[0], in[1])}; });
  const Array x = vec({1, 2}, {2});
  EXPECT_EQ(values(f({x, zeros({2}, {.device = dev()})})[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(values(f({x, ones({2}, {.device = dev()})})[0]), (std::vector<float>{2, 3}));
  EXPECT_EQ(values(f({x, vec({5, -5}, {2})})[0]), (std::vector<float>{6, -3}));
  EXPECT_EQ(values(f({x, zeros({2}, {.device = dev()})})[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(values(f({x, vec({-1, 1}, {2})})[0]), (std::vector<float>{0, 3}));
  EXPECT_EQ(f.stats().recordings, 3);
  EXPECT_EQ(f.stats().replays, 2);
}

// A function whose output depends only on parameters returns the kept result on every replay;
// earlier outputs stay as they were when the parameters change.
TEST_P(CaptureTest, ParameterOnlyOutputsStayCorrect) {
  Array p = vec({0, 1}, {2});
  CapturedFunction f = capture([&](const std::vector<Array>& in) { return std::vector<Array>{exp(p), add(in[0], 1.0)}; },
                               {.implicit_inputs = [&] { return std::vector<Array>{p}; }});
  std::vector<std::vector<Array>> outs;
  for (int call = 0; call < 3; ++call) outs.push_back(f({vec({float(call), 0}, {2})}));
  p = vec({1, 2}, {2});
  outs.push_back(f({vec({9, 9}, {2})}));
  auto expect_exp = [](const Array& got, std::vector<double> of) {  // a device's exp: within 2 ulps
    const std::vector<float> g = values(got);
    ASSERT_EQ(g.size(), of.size());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], std::exp(of[i]), 3e-7 * std::exp(of[i])) << i;
  };
  for (int call = 0; call < 3; ++call) {
    SCOPED_TRACE(call);
    expect_exp(outs[size_t(call)][0], {0, 1});
    EXPECT_EQ(values(outs[size_t(call)][1]), (std::vector<float>{float(call) + 1, 1}));
  }
  expect_exp(outs[3][0], {1, 2});
  EXPECT_EQ(values(outs[3][1]), (std::vector<float>{10, 10}));
}

INSTANTIATE_TEST_SUITE_P(Devices, CaptureTest, ::testing::ValuesIn(testing::test_devices()), testing::device_test_name);

}  // namespace
}  // namespace ember
