// Layers and activations against PyTorch (tools/reference/nn_reference.py, float64): values and
// gradients of Linear, every activation, BatchNorm1d/2d (training, running statistics, eval),
// LayerNorm, RMSNorm, Embedding with a padding index; Dropout and Flatten behaviour.
#include <gtest/gtest.h>

#include "nn/nn_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::det;
using ember::testing::expected;
using ember::testing::weighted_sum;

constexpr double kTol = 1e-9;

TEST(LayersTest, LinearMatchesTorch) {
  Linear fc({.in = 5, .out = 3, .dtype = DType::F64});
  fc.weight.set(det({3, 5}, 0.71, 0.3));
  fc.bias.set(det({3}, 1.3, 0.2));
  Array x = det({4, 5}, 0.37, 0.1).require_grad();
  Array y = fc.forward(x);
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, expected("linear.y"), kTol, kTol));
  EXPECT_TRUE(all_close(x.grad(g), expected("linear.d0"), kTol, kTol));
  EXPECT_TRUE(all_close(fc.weight.array().grad(g), expected("linear.d1"), kTol, kTol));
  EXPECT_TRUE(all_close(fc.bias.array().grad(g), expected("linear.d2"), kTol, kTol));

  Linear nobias({.in = 5, .out = 3, .bias = false, .dtype = DType::F64});
  nobias.weight.set(det({3, 5}, 0.71, 0.3));
  Array x3 = det({2, 3, 5}, 0.43, 0.2).require_grad();
  Array y3 = nobias.forward(x3);
  g = weighted_sum(y3).backward();
  EXPECT_TRUE(all_close(y3, expected("linear3d.y"), kTol, kTol));
  EXPECT_TRUE(all_close(nobias.weight.array().grad(g), expected("linear3d.d1"), kTol, kTol));
  EXPECT_THROW(nobias.forward(ones({2, 4})), Error);
}

TEST(LayersTest, DefaultInitBounds) {
  Linear fc({.in = 100, .out = 50, .seed = 3});
  auto w = fc.weight.value().to_vector<double>();
  double bound = 1.0 / std::sqrt(100.0), lo = 1, hi = -1;
  for (double v : w) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.9 * bound);  // the range is used
  EXPECT_GT(hi, 0.9 * bound);
}

void check_activation(const std::string& name, Module& m, const std::function<Array(const Array&)>& fn) {
  SCOPED_TRACE(name);
  Array x = mul(det({3, 7}, 0.61, 0.3), 3.0).require_grad();
  Array y = fn(x);
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, expected("act." + name + ".y"), 1e-7, 1e-9));
  EXPECT_TRUE(all_close(x.grad(g), expected("act." + name + ".d0"), 1e-7, 1e-9));
  (void)m;
}

TEST(LayersTest, ActivationsMatchTorch) {
  ReLU relu_m;
  LeakyReLU leaky({.negative_slope = 0.1});
  ELU elu_m({.alpha = 0.7});
  GELU gelu_m, gelu_t({.tanh_approximation = true});
  SiLU silu_m;
  Sigmoid sig;
  Tanh tanh_m;
  Softplus sp({.beta = 2, .threshold = 5});
  Softmax sm({.dim = 1});
  LogSoftmax lsm({.dim = 0});
  check_activation("relu", relu_m, [&](const Array& x) { return relu_m.forward(x); });
  check_activation("leaky_relu", leaky, [&](const Array& x) { return leaky.forward(x); });
  check_activation("elu", elu_m, [&](const Array& x) { return elu_m.forward(x); });
  check_activation("gelu", gelu_m, [&](const Array& x) { return gelu_m.forward(x); });
  check_activation("gelu_tanh", gelu_t, [&](const Array& x) { return gelu_t.forward(x); });
  check_activation("silu", silu_m, [&](const Array& x) { return silu_m.forward(x); });
  check_activation("sigmoid", sig, [&](const Array& x) { return sig.forward(x); });
  check_activation("tanh", tanh_m, [&](const Array& x) { return tanh_m.forward(x); });
  check_activation("softplus", sp, [&](const Array& x) { return sp.forward(x); });
  check_activation("softmax", sm, [&](const Array& x) { return sm.forward(x); });
  check_activation("log_softmax", lsm, [&](const Array& x) { return lsm.forward(x); });
  // The typed function forms.
  Tensor<2> t = Tensor<2>::ones({2, 2});
  EXPECT_EQ(nn::silu(t).shape(), (Shape{2, 2}));
  EXPECT_EQ(nn::softmax(t, 1).to_vector(), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
}

void check_batchnorm(const std::string& prefix, BatchNorm& bn, const Shape& shape) {
  SCOPED_TRACE(prefix);
  int64_t c = shape[1];
  bn.weight.set(det({c}, 0.5, 1.0));
  bn.bias.set(det({c}, 0.8, 0.3));
  Array x1 = mul(det(shape, 0.33, 0.1), 2.0).require_grad();
  Array x2 = add(det(shape, 0.47, 0.6), 0.5);
  Array y = bn.forward(x1);
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, expected(prefix + ".y"), 1e-8, 1e-9));
  EXPECT_TRUE(all_close(x1.grad(g), expected(prefix + ".dx"), 1e-7, 1e-8));
  EXPECT_TRUE(all_close(bn.weight.array().grad(g), expected(prefix + ".dweight"), 1e-8, 1e-9));
  EXPECT_TRUE(all_close(bn.bias.array().grad(g), expected(prefix + ".dbias"), 1e-8, 1e-9));
  bn.forward(x2);
  EXPECT_TRUE(all_close(bn.running_mean.array(), expected(prefix + ".running_mean"), 1e-9, 1e-9));
  EXPECT_TRUE(all_close(bn.running_var.array(), expected(prefix + ".running_var"), 1e-9, 1e-9));
  EXPECT_EQ(bn.num_batches_tracked.array().item<int64_t>(), 2);
  bn.eval();
  EXPECT_TRUE(all_close(bn.forward(x2), expected(prefix + ".eval_y"), 1e-8, 1e-9));
}

TEST(LayersTest, BatchNormMatchesTorch) {
  BatchNorm1d a({.features = 4, .momentum = 0.2, .dtype = DType::F64});
  check_batchnorm("bn1d", a, {6, 4});
  BatchNorm1d b({.features = 4, .momentum = 0.2, .dtype = DType::F64});
  check_batchnorm("bn1d3", b, {3, 4, 5});
  BatchNorm2d c({.features = 3, .momentum = 0.2, .dtype = DType::F64});
  check_batchnorm("bn2d", c, {2, 3, 4, 4});
  EXPECT_THROW(c.forward(ones({2, 3, 4})), Error);
  EXPECT_THROW(a.forward(ones({2, 5})), Error);
}

TEST(LayersTest, LayerNormAndRmsNormMatchTorch) {
  LayerNorm ln({.shape = {4, 5}, .dtype = DType::F64});
  ln.weight.set(det({4, 5}, 0.8, 1.1));
  ln.bias.set(det({4, 5}, 0.6, 0.9));
  Array x = det({3, 4, 5}, 0.41, 0.5).require_grad();
  Array y = ln.forward(x);
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, expected("layernorm.y"), 1e-8, 1e-9));
  EXPECT_TRUE(all_close(x.grad(g), expected("layernorm.d0"), 1e-7, 1e-8));
  EXPECT_TRUE(all_close(ln.weight.array().grad(g), expected("layernorm.d1"), 1e-8, 1e-9));
  EXPECT_TRUE(all_close(ln.bias.array().grad(g), expected("layernorm.d2"), 1e-8, 1e-9));
  EXPECT_THROW(ln.forward(ones({3, 5, 4})), Error);

  RMSNorm rms({.shape = {5}, .eps = 1e-6, .dtype = DType::F64});
  rms.weight.set(det({5}, 0.8, 1.1));
  Array xr = det({3, 4, 5}, 0.41, 0.5).require_grad();
  Array yr = rms.forward(xr);
  g = weighted_sum(yr).backward();
  EXPECT_TRUE(all_close(yr, expected("rmsnorm.y"), 1e-8, 1e-9));
  EXPECT_TRUE(all_close(xr.grad(g), expected("rmsnorm.d0"), 1e-7, 1e-8));
  EXPECT_TRUE(all_close(rms.weight.array().grad(g), expected("rmsnorm.d1"), 1e-8, 1e-9));
}

TEST(LayersTest, EmbeddingWithPaddingMatchesTorch) {
  Embedding emb({.num = 6, .dim = 3, .padding_idx = 0, .dtype = DType::F64});
  // The padding row starts at zero.
  auto w0 = emb.weight.value().to_vector<double>();
  EXPECT_EQ(w0[0], 0.0);
  EXPECT_EQ(w0[2], 0.0);
  Array w = det({6, 3}, 0.9, 0.2);
  w = where(reshape(eq(arange(0, 6), 0), {6, 1}), 0.0, w);
  emb.weight.set(w);
  Tensor<2, Int> idx = Tensor<2, Int>::from_data({{1, 0, 2}, {5, 0, 1}});
  Tensor<3> y = emb(idx);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 3}));
  Gradients g = weighted_sum(y.array()).backward();
  EXPECT_TRUE(all_close(y.array(), expected("embedding.y"), kTol, kTol));
  EXPECT_TRUE(all_close(emb.weight.array().grad(g), expected("embedding.d0"), kTol, kTol));
  EXPECT_THROW(emb.forward(ones({2})), Error);
}

TEST(LayersTest, DropoutIsSeededAndScaled) {
  Dropout a({.p = 0.25, .seed = 5}), b({.p = 0.25, .seed = 5});
  Array x = ones({1000});
  auto ya = a.forward(x).to_vector<float>();
  EXPECT_EQ(ya, b.forward(x).to_vector<float>());       // same seed, same first mask
  EXPECT_NE(ya, a.forward(x).to_vector<float>());       // the next call draws a new mask
  int kept = 0;
  for (float v : ya) {
    EXPECT_TRUE(v == 0.0f || std::fabs(v - 1 / 0.75f) < 1e-6);
    kept += v != 0;
  }
  EXPECT_NEAR(kept / 1000.0, 0.75, 0.05);
  a.eval();
  EXPECT_EQ(a.forward(x).to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW(Dropout({.p = 1.5}), Error);
  // Gradient: the same mask and scale.
  Array xg = ones({8}).require_grad();
  Dropout c({.p = 0.5, .seed = 1});
  Array y = c.forward(xg);
  EXPECT_EQ(xg.grad(sum(y).backward()).to_vector<float>(), y.to_vector<float>());
}

TEST(LayersTest, Flatten) {
  Flatten flat;
  Tensor<4> x = Tensor<4>::ones({2, 3, 4, 5});
  Tensor<2> y = flat(x);
  EXPECT_EQ(y.shape(), (Shape{2, 60}));
  Flatten mid({.start_dim = 1, .end_dim = 2});
  EXPECT_EQ((mid.to<3>(x).shape()), (Shape{2, 12, 5}));
}

}  // namespace
}  // namespace ember
