// The second batch of layers, activations, losses and initializers against PyTorch
// (tools/reference/nn_breadth_reference.py, float64): Conv1d, MaxPool1d, AvgPool1d,
// AdaptiveAvgPool1d, GroupNorm, InstanceNorm1d/2d, PReLU, SELU, Mish, HardSigmoid, HardSwish,
// Softsign, SwiGLU, KL divergence, cosine embedding and margin ranking losses; statistics of the
// orthogonal and truncated normal initializers.
#include <gtest/gtest.h>

#include "nn/nn_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::det;
using ember::testing::weighted_sum;

const std::vector<double>& breadth_ref(const std::string& name) {
  static auto table = ember::testing::read_reference(ember::testing::tests_dir() + "/nn/data/nn_breadth_reference.txt");
  auto it = table.find(name);
  if (it == table.end()) throw std::runtime_error("no reference value " + name);
  return it->second;
}

constexpr double kTol = 1e-9;

// Value and gradients (of weighted_sum(y)) of `prefix` for the given leaves.
void check(const std::string& prefix, const Array& y, const std::vector<Array>& leaves, double tol = kTol) {
  SCOPED_TRACE(prefix);
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, breadth_ref(prefix + ".y"), tol, tol));
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_TRUE(all_close(leaves[i].grad(g), breadth_ref(prefix + ".d" + std::to_string(i)), tol, tol)) << "d" << i;
}

// ---- Conv1d and 1-D pooling --------------------------------------------------------------------

TEST(BreadthLayersTest, Conv1dMatchesTorch) {
  struct Case {
    const char* name;
    Conv1dLayerOptions opts;
  };
  std::vector<Case> cases{
      {"basic", {.in = 4, .out = 6, .kernel = 3}},
      {"stride_pad_dil", {.in = 4, .out = 6, .kernel = 3, .stride = 2, .padding = 1, .dilation = 2}},
      {"groups", {.in = 4, .out = 6, .kernel = 3, .padding = 1, .groups = 2, .bias = false}},
      {"same", {.in = 4, .out = 5, .kernel = 4, .padding = Padding1d::same()}},
  };
  for (Case& c : cases) {
    c.opts.dtype = DType::F64;
    c.opts.device = ember::testing::nn_device();
    Conv1d conv(c.opts);
    conv.weight.set(mul(det(conv.weight.array().shape(), 0.53, 0.7), 0.5));
    if (c.opts.bias) conv.bias.set(det({c.opts.out}, 0.9, 0.4));
    Array x = det({2, 4, 9}, 0.37, 0.1).require_grad();
    std::vector<Array> leaves{x, conv.weight.array()};
    if (c.opts.bias) leaves.push_back(conv.bias.array());
    check(std::string("conv1d.") + c.name, conv.forward(x), leaves);
  }
  EXPECT_THROW(Conv1d({.in = 3, .out = 4, .groups = 2}), Error);
  Conv1d conv({.in = 4, .out = 2, .kernel = 3});
  EXPECT_THROW(conv.forward(ones({2, 3, 9})), Error);
  EXPECT_EQ(conv(Tensor<3>(ones({1, 4, 9}))).array().shape(), Shape({1, 2, 7}));
  // Default init: U(+-1/sqrt(fan_in)), fan_in = 4 * 3.
  for (double v : conv.weight.array().to_vector<double>()) EXPECT_LE(std::abs(v), 1 / std::sqrt(12.0));
  Conv1dLayerOptions o{.in = 4, .out = 2, .kernel = 3, .stride = 2, .padding = Padding1d(1, 2), .seed = 7};
  Conv1dLayerOptions back = Conv1dLayerOptions::from_json(o.to_json());
  EXPECT_EQ(back.to_json(), o.to_json());
  EXPECT_TRUE(Conv1dLayerOptions::from_json(R"({"padding": "same"})").padding.is_same);
}

TEST(BreadthLayersTest, Pooling1dMatchesTorch) {
  MaxPool1d maxp({.kernel = 3, .stride = 2, .padding = 1});
  AvgPool1d avgp({.kernel = 2, .padding = 1, .count_include_pad = false});
  AdaptiveAvgPool1d adaptive({.output = 4});
  Array x = det({2, 4, 9}, 0.37, 0.1).require_grad();
  check("pool1d.max", maxp.forward(x), {x});
  check("pool1d.avg", avgp.forward(x), {x});
  check("pool1d.adaptive", adaptive.forward(x), {x});
  EXPECT_EQ(adaptive_avg_pool1d(ones({3, 10}), 3).shape(), Shape({3, 3}));
  EXPECT_THROW(adaptive_avg_pool1d(ones({3}), 3), Error);
}

// ---- GroupNorm and InstanceNorm ----------------------------------------------------------------

TEST(BreadthLayersTest, GroupNormMatchesTorch) {
  GroupNorm gn({.groups = 3, .channels = 6, .dtype = DType::F64, .device = ember::testing::nn_device()});
  gn.weight.set(det({6}, 0.8, 1.1));
  gn.bias.set(det({6}, 0.6, 0.9));
  Array x = mul(det({2, 6, 5}, 0.41, 0.5), 2.0).require_grad();
  check("groupnorm", gn.forward(x), {x, gn.weight.array(), gn.bias.array()});

  GroupNorm plain({.groups = 2, .channels = 4, .affine = false, .dtype = DType::F64});
  EXPECT_EQ(plain.num_params(), 0);
  Array x4 = add(det({2, 4, 3, 3}, 0.33, 0.2), 0.3).require_grad();
  check("groupnorm4d", plain.forward(x4), {x4});
  EXPECT_THROW(GroupNorm({.groups = 4, .channels = 6}), Error);
  EXPECT_THROW(plain.forward(ones({2, 3, 4})), Error);
  EXPECT_EQ(GroupNormOptions::from_json(GroupNormOptions{.groups = 2, .channels = 8}.to_json()).channels, 8);
}

TEST(BreadthLayersTest, InstanceNormMatchesTorch) {
  InstanceNorm1d in1({.features = 3, .affine = true, .dtype = DType::F64, .device = ember::testing::nn_device()});
  in1.weight.set(det({3}, 0.5, 1.0));
  in1.bias.set(det({3}, 0.8, 0.3));
  Array x = mul(det({2, 3, 7}, 0.47, 0.6), 2.0).require_grad();
  check("instancenorm1d", in1.forward(x), {x, in1.weight.array(), in1.bias.array()});
  InstanceNorm2d in2({.features = 3, .dtype = DType::F64});
  EXPECT_EQ(in2.num_params(), 0);
  Array x4 = det({2, 3, 4, 4}, 0.31, 0.9).require_grad();
  in2.eval();  // no running statistics: the same in eval
  check("instancenorm2d", in2.forward(x4), {x4});
  EXPECT_THROW(in2.forward(ones({2, 3, 4})), Error);
  EXPECT_EQ(in2.type_name(), "InstanceNorm2d");
  InstanceNormOptions o{.features = 5, .eps = 1e-3, .affine = true};
  EXPECT_EQ(InstanceNormOptions::from_json(o.to_json()).to_json(), o.to_json());
}

// ---- activations -------------------------------------------------------------------------------

TEST(BreadthLayersTest, ActivationsMatchTorch) {
  SELU selu_m;
  Mish mish_m;
  HardSigmoid hsig;
  HardSwish hswish;
  Softsign softsign_m;
  SwiGLU swiglu_m;
  std::vector<std::pair<std::string, std::function<Array(const Array&)>>> acts{
      {"selu", [&](const Array& x) { return selu_m.forward(x); }},
      {"mish", [&](const Array& x) { return mish_m.forward(x); }},
      {"hardsigmoid", [&](const Array& x) { return hsig.forward(x); }},
      {"hardswish", [&](const Array& x) { return hswish.forward(x); }},
      {"softsign", [&](const Array& x) { return softsign_m.forward(x); }},
      {"swiglu", [&](const Array& x) { return swiglu_m.forward(x); }},
  };
  for (auto& [name, fn] : acts) {
    Array x = mul(det({3, 8}, 0.61, 0.3), 3.0).require_grad();
    check("act." + name, fn(x), {x}, 1e-7);
  }
  // Typed forms.
  Tensor<2> t(mul(det({3, 8}, 0.61, 0.3), 3.0));
  EXPECT_TRUE(all_close(nn::selu(t).array(), breadth_ref("act.selu.y"), 1e-7, 1e-9));
  EXPECT_TRUE(all_close(nn::softsign(t).array(), breadth_ref("act.softsign.y"), 1e-7, 1e-9));
  EXPECT_TRUE(all_close(nn::swiglu(t).array(), breadth_ref("act.swiglu.y"), 1e-7, 1e-9));
  EXPECT_TRUE(all_close(nn::hard_swish(t).array(), breadth_ref("act.hardswish.y"), 1e-7, 1e-9));
  EXPECT_EQ(swiglu(ones({2, 6, 3}), 1).shape(), Shape({2, 3, 3}));
  EXPECT_THROW(swiglu(ones({2, 5})), Error);
}

TEST(BreadthLayersTest, PReLUMatchesTorch) {
  PReLU per_channel({.num_parameters = 3, .dtype = DType::F64, .device = ember::testing::nn_device()});
  EXPECT_EQ(per_channel.weight.array().to_vector<double>(), std::vector<double>(3, 0.25));
  per_channel.weight.set(mul(det({3}, 0.7, 0.2), 0.5));
  Array x = mul(det({2, 3, 5}, 0.61, 0.3), 3.0).require_grad();
  check("act.prelu", per_channel.forward(x), {x, per_channel.weight.array()});
  PReLU shared({.dtype = DType::F64, .device = ember::testing::nn_device()});
  Array x2 = mul(det({2, 3, 5}, 0.61, 0.3), 3.0).require_grad();
  check("act.prelu1", shared(Tensor<3>(x2)).array(), {x2, shared.weight.array()});
  EXPECT_EQ(shared.named_parameters()[0].name, "weight");
  EXPECT_THROW(per_channel.forward(ones({2, 4})), Error);
  EXPECT_EQ(PReLUOptions::from_json(PReLUOptions{.num_parameters = 4, .init = 0.1}.to_json()).num_parameters, 4);
}

// ---- losses ------------------------------------------------------------------------------------

TEST(BreadthLossTest, KlDivMatchesTorch) {
  Array lp0 = log_softmax(mul(det({4, 5}, 0.83, 0.2), 2.0), 1);
  Array tp = softmax(mul(det({4, 5}, 0.37, 0.9), 3.0), 1);
  std::vector<std::pair<std::string, KlReduction>> cases{{"mean", KlReduction::Mean},
                                                         {"sum", KlReduction::Sum},
                                                         {"batchmean", KlReduction::BatchMean},
                                                         {"none", KlReduction::None}};
  for (auto& [name, red] : cases) {
    Array lp = lp0.detach().require_grad();
    check("kl." + name, kl_div(lp, tp, {.reduction = red}), {lp});
  }
  Array lp = lp0.detach().require_grad();
  check("kl.log_target", kl_div(lp, log(tp), {.reduction = KlReduction::BatchMean, .log_target = true}), {lp});
  // Zero target probabilities add nothing (and no NaN).
  Array zero_target = from_vector<double>({0.0, 1.0}, {1, 2});
  Array in = from_vector<double>({-1.0, -0.5}, {1, 2});
  EXPECT_NEAR(kl_div(in, zero_target, {.reduction = KlReduction::Sum}).item<double>(), 0.5, 1e-12);
  EXPECT_THROW(kl_div(in, ones({2})), Error);
}

TEST(BreadthLossTest, CosineEmbeddingAndMarginRankingMatchTorch) {
  Array y = from_vector<double>({1, -1, 1, -1}, {4}, ember::testing::nn_device());
  Array a = det({4, 5}, 0.71, 0.2).require_grad(), b = det({4, 5}, 0.37, 0.8).require_grad();
  check("cosine_embedding.mean", cosine_embedding_loss(a, b, y, 0.2), {a, b});
  Array a2 = det({4, 5}, 0.71, 0.2).require_grad(), b2 = det({4, 5}, 0.37, 0.8).require_grad();
  check("cosine_embedding.none", cosine_embedding_loss(a2, b2, y, -0.3, Reduction::None), {a2, b2});
  EXPECT_THROW(cosine_embedding_loss(ones({4, 5}), ones({4, 5}), ones({3})), Error);

  Array my = from_vector<double>({1, -1, 1, 1, -1, -1}, {6}, ember::testing::nn_device());
  Array ma = det({6}, 0.71, 0.2).require_grad(), mb = det({6}, 0.37, 0.8).require_grad();
  check("margin_ranking.mean", margin_ranking_loss(ma, mb, my, 0.3), {ma, mb});
  Array ma2 = det({6}, 0.71, 0.2).require_grad(), mb2 = det({6}, 0.37, 0.8).require_grad();
  check("margin_ranking.sum", margin_ranking_loss(ma2, mb2, my, 0.0, Reduction::Sum), {ma2, mb2});
  Tensor<1> typed = margin_ranking_loss(Tensor<1>(det({6}, 0.71, 0.2)), Tensor<1>(det({6}, 0.37, 0.8)), Tensor<1>(my), 0.3);
  EXPECT_TRUE(all_close(typed.array(), breadth_ref("margin_ranking.mean.y"), kTol, kTol));
}

// ---- a small training run with the new pieces --------------------------------------------------

TEST(BreadthTrainingTest, Conv1dNetLearnsRampDirection) {
  // Rising vs falling noisy ramps of length 16: Conv1d, GroupNorm, PReLU, AdaptiveAvgPool1d,
  // Flatten, Linear; Lion with a one-cycle schedule, then RMSprop on a fresh net.
  const int64_t n = 64, len = 16;
  std::vector<double> xs(static_cast<size_t>(n * len));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[static_cast<size_t>(i)] = i % 2;
    double slope = (i % 2 ? 1.0 : -1.0) * (0.5 + 0.5 * std::abs(std::sin(0.7 * double(i))));
    for (int64_t t = 0; t < len; ++t)
      xs[static_cast<size_t>(i * len + t)] = slope * (double(t) / len - 0.5) + 0.3 * std::sin(1.9 * double(i * len + t));
  }
  Array x = from_vector(xs, {n, 1, len}, ember::testing::nn_device());
  Array y = from_vector(labels, {n}, ember::testing::nn_device());
  auto make_net = [](uint64_t seed) {
    return Sequential(Conv1d({.in = 1, .out = 4, .kernel = 3, .seed = seed}), GroupNorm({.groups = 2, .channels = 4}),
                      PReLU({.num_parameters = 4}), AdaptiveAvgPool1d({.output = 1}), Flatten(),
                      Linear({.in = 4, .out = 2, .seed = seed + 2}));
  };
  auto train = [&](Sequential& net, optim::Optimizer& opt, optim::LrScheduler* sched, int steps) {
    double last = 0;
    for (int s = 0; s < steps; ++s) {
      Array loss = cross_entropy(net.forward(cast(x, DType::F32)), y);
      Gradients g = loss.backward();
      last = loss.item<double>();
      opt.step(g);
      if (sched) sched->step();
    }
    return last;
  };
  Sequential a = make_net(11);
  optim::Lion lion(a, {.lr = 0.05, .weight_decay = 0.01});
  optim::OneCycleLr cycle(lion, {.max_lr = 0.05, .total_steps = 40});
  double lion_loss = train(a, lion, &cycle, 40);
  RecordProperty("lion_final_loss", std::to_string(lion_loss));
  EXPECT_LT(lion_loss, 0.2);
  Sequential b = make_net(21);
  optim::Rmsprop rms(b, {.lr = 0.02});
  double rms_loss = train(b, rms, nullptr, 40);
  RecordProperty("rmsprop_final_loss", std::to_string(rms_loss));
  EXPECT_LT(rms_loss, 0.2);
  std::cout << "ramp direction, final loss: Lion " << lion_loss << ", RMSprop " << rms_loss << "\n";
}

// ---- initializers ------------------------------------------------------------------------------

// max |W W^T - gain^2 I| (rows orthonormal) or |W^T W - gain^2 I| (columns), over the smaller side.
double orthogonality_error(const Array& w2d, double gain) {
  Array w = cast(w2d, DType::F64);
  bool wide = w.size(0) <= w.size(1);
  Array gram = wide ? matmul(w, transpose(w, 0, 1)) : matmul(transpose(w, 0, 1), w);
  int64_t n = gram.size(0);
  Array err = abs(sub(gram, mul(eye(n, std::nullopt, {.dtype = DType::F64, .device = w.device()}), gain * gain)));
  return max(err).item<double>();
}

TEST(BreadthInitTest, OrthogonalIsOrthogonal) {
  using init::orthogonal;
  EXPECT_LT(orthogonality_error(orthogonal({64, 64}, 1.0, {.seed = 1, .dtype = DType::F64}), 1.0), 1e-12);
  EXPECT_LT(orthogonality_error(orthogonal({100, 30}, 1.0, {.seed = 2, .dtype = DType::F64}), 1.0), 1e-12);
  EXPECT_LT(orthogonality_error(orthogonal({20, 90}, 2.0, {.seed = 3, .dtype = DType::F64}), 2.0), 1e-12);
  // A conv weight [out, in, k]: viewed as [out, in * k].
  Array conv = orthogonal({8, 4, 3}, 1.0, {.seed = 4});
  EXPECT_EQ(conv.shape(), Shape({8, 4, 3}));
  EXPECT_EQ(conv.dtype(), DType::F32);
  EXPECT_LT(orthogonality_error(reshape(conv, {8, 12}), 1.0), 1e-6);
  // Seeded: reproducible; different seeds differ.
  EXPECT_EQ(orthogonal({5, 5}, 1.0, {.seed = 9}).to_vector<float>(), orthogonal({5, 5}, 1.0, {.seed = 9}).to_vector<float>());
  EXPECT_NE(orthogonal({5, 5}, 1.0, {.seed = 9}).to_vector<float>(), orthogonal({5, 5}, 1.0, {.seed = 10}).to_vector<float>());
  EXPECT_THROW(orthogonal({5}), Error);
}

double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

void check_truncated(double mean, double sd, double a, double b, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "N(" << mean << ", " << sd << ") on [" << a << ", " << b << "]");
  const int64_t n = 200000;
  auto v = init::truncated_normal({n}, mean, sd, a, b, {.seed = seed, .dtype = DType::F64}).to_vector<double>();
  double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  EXPECT_GE(lo, a);
  EXPECT_LE(hi, b);
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  double m = s / double(n);
  for (double x : v) s2 += (x - m) * (x - m);
  double sample_sd = std::sqrt(s2 / double(n - 1));
  // The truncated normal's moments.
  double alpha = (a - mean) / sd, beta = (b - mean) / sd, z = normal_cdf(beta) - normal_cdf(alpha);
  double ratio = (normal_pdf(alpha) - normal_pdf(beta)) / z;
  double want_mean = mean + sd * ratio;
  double want_sd = sd * std::sqrt(1 + (alpha * normal_pdf(alpha) - beta * normal_pdf(beta)) / z - ratio * ratio);
  EXPECT_NEAR(m, want_mean, 5 * want_sd / std::sqrt(double(n)));
  EXPECT_NEAR(sample_sd, want_sd, 0.01 * want_sd);
}

TEST(BreadthInitTest, TruncatedNormalStatistics) {
  check_truncated(0, 1, -2, 2, 1);
  check_truncated(0.5, 0.02, 0.46, 0.54, 2);  // the usual ViT-style init, in absolute bounds
  check_truncated(0, 1, 1, 3, 3);             // one-sided, in the tail
  check_truncated(0, 1, -4, -2.5, 4);         // left tail
  EXPECT_THROW(init::truncated_normal({3}, 0, 1, 1, -1), Error);
  EXPECT_EQ(init::truncated_normal({4, 4}, 0, 1, -2, 2, {.seed = 5}).dtype(), DType::F32);
}

}  // namespace
}  // namespace ember
