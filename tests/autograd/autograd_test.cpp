// The autograd API: leaves and Gradients, accumulation, retain_graph, detach, grad mode (thread
// local), custom functions, checkpointing (same gradients, fewer live bytes), second derivatives
// against closed forms, threads, and flat memory over many training-like iterations.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

Device dev() { return Device::cpu().available() ? Device::cpu() : Device::reference(); }
Array vec(std::vector<double> v, Device d = dev()) {
  int64_t n = int64_t(v.size());
  return from_vector(v, {n}, d);
}

TEST(AutogradTest, LeavesAndGradients) {
  Array x = vec({1, 2, 3}).require_grad();
  Array y = vec({4, 5, 6});  // no gradient wanted
  EXPECT_TRUE(x.requires_grad());
  EXPECT_FALSE(y.requires_grad());
  Array loss = sum(mul(mul(x, x), y));  // d/dx = 2 x y
  Gradients g = loss.backward();
  EXPECT_EQ(g.size(), 1u);
  EXPECT_TRUE(g.contains(x));
  EXPECT_FALSE(g.contains(y));
  EXPECT_EQ(x.grad(g).to_vector<double>(), (std::vector<double>{8, 20, 36}));
  Array removed = g.remove(x);
  EXPECT_TRUE(removed.defined());
  EXPECT_FALSE(g.contains(x));
  EXPECT_FALSE(x.grad(g).defined());
}

TEST(AutogradTest, ErrorsAreClear) {
  Array i = from_vector<int64_t>({1, 2}, {2}, dev());
  EXPECT_THROW(i.require_grad(), Error);
  Array x = vec({1, 2}).require_grad();
  try {
    mul(x, 2.0).backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(vec({1}).backward(), Error);  // nothing requires grad
  // A vector-Jacobian product with an explicit output gradient.
  Gradients g = mul(x, 3.0).backward(vec({1, 10}));
  EXPECT_EQ(x.grad(g).to_vector<double>(), (std::vector<double>{3, 30}));
}

TEST(AutogradTest, AccumulationOverSeveralBackwardCalls) {
  Array x = vec({1, 2}).require_grad();
  Gradients g;
  sum(mul(x, x)).backward_into(g);      // 2x
  sum(mul(x, 3.0)).backward_into(g);    // + 3
  EXPECT_EQ(x.grad(g).to_vector<double>(), (std::vector<double>{5, 7}));
  Gradients h = sum(x).backward();
  h += g;
  EXPECT_EQ(x.grad(h).to_vector<double>(), (std::vector<double>{6, 8}));
}

TEST(AutogradTest, RetainGraph) {
  Array x = vec({2}).require_grad();
  Array y = sum(exp(x));
  Gradients a = y.backward({.retain_graph = true});
  Gradients b = y.backward();  // the graph was retained
  EXPECT_EQ(x.grad(a).item<double>(), x.grad(b).item<double>());
  try {
    y.backward();
    FAIL() << "a released graph ran backward again";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(AutogradTest, DetachAndNoGrad) {
  Array x = vec({1, 2}).require_grad();
  Array d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  Array y = sum(add(mul(x, d), x));  // d/dx = d + 1 (d is a constant)
  EXPECT_EQ(x.grad(y.backward()).to_vector<double>(), (std::vector<double>{2, 3}));
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_enabled());
    EXPECT_FALSE(mul(x, 2.0).requires_grad());
  }
  EXPECT_TRUE(grad_enabled());
  EXPECT_FALSE(no_grad([&] { return exp(x); }).requires_grad());
}

TEST(AutogradTest, GradModeIsPerThread) {
  Array x = vec({1}).require_grad();
  NoGradGuard guard;  // off in this thread only
  bool other = false;
  std::thread t([&] { other = exp(x).requires_grad(); });
  t.join();
  EXPECT_TRUE(other);
  EXPECT_FALSE(exp(x).requires_grad());
}

TEST(AutogradTest, CustomFunction) {
  // y = x^2 with a hand-written backward 2 x g.
  CustomFunction square{
      .forward = [](const std::vector<Array>& in) { return mul(in[0], in[0]); },
      .backward = [](const std::vector<Array>& in, const Array&, const Array& g) -> std::vector<Array> {
        return {mul(mul(in[0], 2.0), g)};
      },
      .name = "square"};
  Array x = vec({1, -2, 3}).require_grad();
  Array y = apply(square, {x});
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 4, 9}));
  Gradients g = sum(mul(y, vec({1, 2, 3}))).backward();
  EXPECT_EQ(x.grad(g).to_vector<double>(), (std::vector<double>{2, -8, 18}));

  CustomFunction broken{.forward = square.forward,
                        .backward = [](const std::vector<Array>&, const Array&, const Array&) {
                          return std::vector<Array>{};
                        },
                        .name = "broken"};
  EXPECT_THROW(sum(apply(broken, {x})).backward(), Error);
}

// A deep stack of tanh layers whose intermediates the backward pass needs.
Array deep(const std::vector<Array>& in) {
  Array h = in[0];
  for (int i = 0; i < 8; ++i) h = tanh(mul(h, in[1]));
  return h;
}

TEST(AutogradTest, CheckpointGivesTheSameGradientsWithFewerLiveBytes) {
  Device d = dev();
  Array x0 = uniform({256, 256}, -1, 1, {.seed = 1, .device = d}).eval();
  Array w0 = uniform({256}, 0.5, 1.5, {.seed = 2, .device = d}).eval();
  auto run = [&](bool use_checkpoint, int64_t* live_after_forward) {
    Array x = x0.require_grad(), w = w0.require_grad();
    Array h = use_checkpoint ? checkpoint(deep, {x, w}) : deep({x, w});
    Array loss = sum(h);
    loss.eval();
    *live_after_forward = memory_stats(d).live_bytes;
    Gradients g = loss.backward();
    return std::pair{x.grad(g).to_vector<float>(), w.grad(g).to_vector<float>()};
  };
  int64_t live_plain = 0, live_ckpt = 0;
  auto plain = run(false, &live_plain);
  auto ckpt = run(true, &live_ckpt);
  EXPECT_EQ(plain.first, ckpt.first);
  EXPECT_EQ(plain.second, ckpt.second);
  // Without checkpointing the 8 saved tanh outputs (256 KiB each) stay alive until backward.
  EXPECT_LT(live_ckpt + 6 * 256 * 256 * 4, live_plain) << "plain " << live_plain << " checkpoint " << live_ckpt;
}

TEST(AutogradTest, SecondDerivativesMatchClosedForms) {
  Array x = vec({-1.5, 0.3, 2.0}).require_grad();
  // f = x^3: f' = 3x^2, f'' = 6x.
  Array dx = grad(sum(mul(mul(x, x), x)), {x}, {.create_graph = true})[0];
  EXPECT_TRUE(all_close(dx, {6.75, 0.27, 12.0}, 1e-12));
  Array ddx = grad(sum(dx), {x})[0];
  EXPECT_TRUE(all_close(ddx, {-9.0, 1.8, 12.0}, 1e-12));
  // f = tanh(x): f'' = -2 tanh(x) (1 - tanh(x)^2).
  Array t1 = grad(sum(tanh(x)), {x}, {.create_graph = true})[0];
  Array t2 = grad(sum(t1), {x})[0];
  std::vector<double> want;
  for (double v : {-1.5, 0.3, 2.0}) want.push_back(-2 * std::tanh(v) * (1 - std::tanh(v) * std::tanh(v)));
  EXPECT_TRUE(all_close(t2, want, 1e-10));
  // f = exp(2x) / 2 + sum(x) * sum(x): f'' = 2 exp(2x) + 2 (off-diagonal 2 too, summed: + 4).
  Array y = vec({0.1, 0.2}).require_grad();
  Array f = add(sum(div(exp(mul(y, 2.0)), 2.0)), mul(sum(y), sum(y)));
  Array g1 = grad(f, {y}, {.create_graph = true})[0];
  Array g2 = grad(sum(g1), {y})[0];
  EXPECT_TRUE(all_close(g2, {2 * std::exp(0.2) + 4, 2 * std::exp(0.4) + 4}, 1e-10));
  // Mixed partial through matmul: d/dB of sum(d/dA sum(A B)) = d/dB sum(B^T rows) = ones * rows(A).
  Array A = from_vector<double>({1, 2, 3, 4}, {2, 2}, dev()).require_grad();
  Array B = from_vector<double>({5, 6, 7, 8}, {2, 2}, dev()).require_grad();
  Array gA = grad(sum(mul(matmul(A, B), matmul(A, B))), {A}, {.create_graph = true})[0];
  Array gAB = grad(sum(gA), {B})[0];
  // Checked against central differences of B -> sum(dL/dA) with L = sum((AB)^2).
  std::vector<double> gv = gAB.to_vector<double>();
  std::vector<double> b0 = {5, 6, 7, 8};
  for (size_t i = 0; i < 4; ++i) {
    auto value = [&](double delta) {
      std::vector<double> b = b0;
      b[i] += delta;
      Array Bv = from_vector(b, {2, 2}, dev()).require_grad();
      Array Ax = A.detach().require_grad();
      Array first = grad(sum(mul(matmul(Ax, Bv), matmul(Ax, Bv))), {Ax})[0];
      return sum(first).item<double>();
    };
    double numeric = (value(1e-5) - value(-1e-5)) / 2e-5;
    EXPECT_NEAR(gv[i], numeric, 1e-4 * (1 + std::fabs(numeric))) << i;
  }
}

TEST(AutogradTest, ThreadsShareParametersAndHistories) {
  Device d = dev();
  Array w = uniform({8, 4}, -1, 1, {.seed = 5, .dtype = DType::F64, .device = d}).eval().require_grad();
  auto step = [&](int t) {
    Array x = uniform({3, 8}, -1, 1, {.seed = uint64_t(100 + t), .dtype = DType::F64, .device = d});
    return w.grad(sum(tanh(matmul(x, w))).backward()).to_vector<double>();
  };
  std::vector<std::vector<double>> single(4), threaded(4);
  for (int t = 0; t < 4; ++t) single[size_t(t)] = step(t);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { threaded[size_t(t)] = step(t); });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(single[size_t(t)], threaded[size_t(t)]) << t;

  // Built in one thread, differentiated in another.
  Array loss;
  std::thread builder([&] { loss = sum(mul(w, w)); });
  builder.join();
  Gradients g;
  std::thread differentiator([&] { g = loss.backward(); });
  differentiator.join();
  EXPECT_TRUE(all_close(w.grad(g), [&] {
    std::vector<double> v = w.to_vector<double>();
    for (double& e : v) e *= 2;
    return v;
  }()));
}

TEST(AutogradTest, TrainingLikeLoopKeepsLiveBytesFlat) {
  Device d = dev();
  Array w = zeros({64, 8}, {.device = d}).eval();
  Array x = uniform({32, 64}, -1, 1, {.seed = 9, .device = d}).eval();
  Array target = uniform({32, 8}, -1, 1, {.seed = 10, .device = d}).eval();
  int64_t live = 0;
  for (int i = 0; i < 10000; ++i) {
    Array p = w.require_grad();
    Array err = sub(matmul(x, p), target);
    Array loss = mean(mul(err, err));
    Array g = p.grad(loss.backward());
    w = sub(w, mul(g, 0.1)).eval();
    if (i == 10) live = memory_stats(d).live_bytes;
    if (i > 10) {
      ASSERT_EQ(memory_stats(d).live_bytes, live) << "iteration " << i;
    }
  }
}

// BackwardOptions::leaf_gradient_ready: called once per leaf reached, as soon as its gradient is
// final (here: the second layer's weight before the first's, which needs the whole chain), with
// the value the Gradients then hold; with backward_into, the running sum.
TEST(AutogradTest, LeafGradientReadyHookSeesEachFinalGradientOnce) {
  Array x = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Array w1 = from_vector<float>({0.5f, -1, 2, 0.25f}, {2, 2}).require_grad();
  Array w2 = from_vector<float>({1.5f, -0.5f}, {2, 1}).require_grad();
  Array unused = ones({3}).require_grad();
  Array loss = sum(mul(matmul(tanh(matmul(x, w1)), w2), sum(matmul(x, w1))));  // w1 reached twice
  std::vector<std::pair<const autograd::GradNode*, std::vector<float>>> seen;
  BackwardOptions opts{.retain_graph = true};
  opts.leaf_gradient_ready = [&](const autograd::GradNode* leaf, const Array& g) {
    seen.push_back({leaf, g.to_vector<float>()});
  };
  Gradients grads = loss.backward(opts);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first, w2.grad_node().get());
  EXPECT_EQ(seen[1].first, w1.grad_node().get());
  EXPECT_EQ(seen[0].second, w2.grad(grads).to_vector<float>());
  EXPECT_EQ(seen[1].second, w1.grad(grads).to_vector<float>());
  (void)unused;
  // Accumulating into the same Gradients: the hook gets the sum of both passes.
  seen.clear();
  loss.backward_into(grads, opts);
  ASSERT_EQ(seen.size(), 2u);
  std::vector<float> twice = w1.grad(grads).to_vector<float>();
  EXPECT_EQ(seen[1].second, twice);
  std::vector<float> once = w1.grad(loss.backward()).to_vector<float>();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
}

}  // namespace
}  // namespace ember
