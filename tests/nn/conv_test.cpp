// Conv2d and pooling layers against PyTorch (tools/reference/nn_reference.py, float64): stride,
// padding (symmetric, per-dim, "same" with odd and even kernels), dilation, groups (incl.
// depthwise), no bias; max/avg/adaptive/global average pooling; values and gradients.
#include <gtest/gtest.h>

#include "nn/nn_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::det;
using ember::testing::expected;
using ember::testing::weighted_sum;

Array conv_input() { return det({2, 4, 7, 6}, 0.37, 0.1); }

void check_conv(const std::string& name, Conv2dLayerOptions opts) {
  SCOPED_TRACE(name);
  opts.in = 4;
  opts.dtype = DType::F64;
  Conv2d conv(opts);
  const Shape& ws = conv.weight.array().shape();
  conv.weight.set(mul(det(ws, 0.53, 0.7), 0.5));
  if (opts.bias) conv.bias.set(det({opts.out}, 0.9, 0.4));
  Array x = conv_input().require_grad();
  Array y = conv.forward(x);
  Gradients g = weighted_sum(y).backward();
  std::string p = "conv." + name;
  EXPECT_TRUE(all_close(y, expected(p + ".y"), 1e-9, 1e-10));
  EXPECT_TRUE(all_close(x.grad(g), expected(p + ".d0"), 1e-9, 1e-10));
  EXPECT_TRUE(all_close(conv.weight.array().grad(g), expected(p + ".d1"), 1e-9, 1e-10));
  if (opts.bias) {
    EXPECT_TRUE(all_close(conv.bias.array().grad(g), expected(p + ".d2"), 1e-9, 1e-10));
  }
}

TEST(ConvTest, Conv2dMatchesTorch) {
  check_conv("basic", {.out = 6, .kernel = 3});
  check_conv("stride_pad", {.out = 6, .kernel = 3, .stride = 2, .padding = 1});
  check_conv("rect", {.out = 5, .kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 0}});
  check_conv("dilation_same", {.out = 6, .kernel = 3, .padding = Padding2d::same(), .dilation = 2});
  check_conv("same_even", {.out = 3, .kernel = {2, 4}, .padding = Padding2d::same()});
  check_conv("groups", {.out = 6, .kernel = 3, .padding = 1, .groups = 2, .bias = false});
  check_conv("depthwise", {.out = 4, .kernel = 3, .stride = 2, .groups = 4});
}

TEST(ConvTest, Conv2dChecksAndDefaults) {
  EXPECT_THROW(Conv2d({.in = 3, .out = 4, .kernel = 3, .groups = 2}), Error);
  Conv2d conv({.in = 2, .out = 3, .kernel = 3, .seed = 1});
  EXPECT_EQ(conv.weight.array().shape(), (Shape{3, 2, 3, 3}));
  EXPECT_THROW(conv.forward(ones({1, 3, 5, 5})), Error);
  double bound = 1 / std::sqrt(18.0);
  for (double v : conv.weight.array().to_vector<double>()) EXPECT_LE(std::fabs(v), bound);
  Tensor<4> y = conv(Tensor<4>::ones({1, 2, 5, 5}));
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 3}));
  EXPECT_NE(conv.config().find("\"kernel\":[3,3]"), std::string::npos) << conv.config();
}

void check_pool(const std::string& name, const std::function<Array(const Array&)>& fn) {
  SCOPED_TRACE(name);
  Array x = conv_input().require_grad();
  Array y = fn(x);
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, expected("pool." + name + ".y"), 1e-10, 1e-12));
  EXPECT_TRUE(all_close(x.grad(g), expected("pool." + name + ".d0"), 1e-10, 1e-12));
}

TEST(ConvTest, PoolingMatchesTorch) {
  MaxPool2d maxp({.kernel = 3, .stride = 2, .padding = 1});
  AvgPool2d avgp({.kernel = 2, .padding = 1, .count_include_pad = false});
  AvgPool2d avg_rect({.kernel = {3, 2}, .stride = {2, 2}});
  AdaptiveAvgPool2d adaptive({.output = {3, 2}});
  GlobalAvgPool2d global;
  check_pool("max", [&](const Array& x) { return maxp.forward(x); });
  check_pool("avg", [&](const Array& x) { return avgp.forward(x); });
  check_pool("avg_rect", [&](const Array& x) { return avg_rect.forward(x); });
  check_pool("adaptive", [&](const Array& x) { return adaptive.forward(x); });
  check_pool("global", [&](const Array& x) { return global.forward(x); });
  Tensor<2> pooled = global(Tensor<4>::ones({2, 3, 4, 4}));
  EXPECT_EQ(pooled.shape(), (Shape{2, 3}));
}

}  // namespace
}  // namespace ember
