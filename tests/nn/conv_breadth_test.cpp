// Convolution breadth against PyTorch (tools/reference/nn_conv_reference.py, float64): the
// transposed convolutions (conv_transpose1d/2d, ConvTranspose1d/2d), conv3d / Conv3d and
// interpolate / Upsample, values and gradients for every option, plus shapes, configs, default
// initialization, bad input and one float32 run of each.
#include <gtest/gtest.h>

#include "nn/nn_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::det;
using ember::testing::weighted_sum;

const std::vector<double>& conv_ref(const std::string& name) {
  static auto table = ember::testing::read_reference(ember::testing::tests_dir() + "/nn/data/nn_conv_reference.txt");
  auto it = table.find(name);
  if (it == table.end()) throw std::runtime_error("no reference value " + name);
  return it->second;
}

constexpr double kTol = 1e-9;

Shape ref_shape(const std::string& prefix) {
  std::vector<int64_t> dims;
  for (double v : conv_ref(prefix + ".shape")) dims.push_back(static_cast<int64_t>(v));
  return Shape(dims);
}

// Shape, value and gradients (of weighted_sum(y)) of `prefix` for the given leaves.
void check(const std::string& prefix, const Array& y, const std::vector<Array>& leaves, double tol = kTol) {
  SCOPED_TRACE(prefix);
  ASSERT_EQ(y.shape(), ref_shape(prefix));
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, conv_ref(prefix + ".y"), tol, tol));
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_TRUE(all_close(leaves[i].grad(g), conv_ref(prefix + ".d" + std::to_string(i)), tol, tol)) << "d" << i;
}

// The reference script's parameters: weight det(shape, 0.53, 0.7) * 0.5, bias det(out, 0.9, 0.4).
void set_params(const ParamRef& weight, const ParamRef& bias, DType dt = DType::F64) {
  weight.set(cast(mul(det(weight.array().shape(), 0.53, 0.7), 0.5), dt));
  if (bias.defined()) bias.set(det(bias.array().shape(), 0.9, 0.4, dt));
}

std::vector<Array> leaves_of(const Array& x, const ParamRef& weight, const ParamRef& bias) {
  std::vector<Array> leaves{x, weight.array()};
  if (bias.defined()) leaves.push_back(bias.array());
  return leaves;
}

// ---- transposed convolutions ----------------------------------------------------------------------

TEST(ConvBreadthTest, ConvTranspose2dMatchesTorch) {
  struct Case {
    const char* name;
    ConvTranspose2dLayerOptions opts;
  };
  std::vector<Case> cases{
      {"basic", {.in = 4, .out = 6, .kernel = 3}},
      {"stride_pad_outpad",
       {.in = 4, .out = 3, .kernel = {3, 2}, .stride = {2, 3}, .padding = {1, 0}, .output_padding = {1, 2}}},
      {"dil_groups",
       {.in = 4, .out = 6, .kernel = 3, .stride = 2, .padding = 1, .dilation = {2, 1}, .groups = 2, .bias = false}},
      {"outpad_dilation", {.in = 4, .out = 8, .kernel = {2, 3}, .output_padding = {2, 1}, .dilation = 3, .groups = 4}},
      {"big_padding", {.in = 4, .out = 2, .kernel = 3, .stride = 3, .padding = {2, 3}, .output_padding = 2}},
  };
  for (Case& c : cases) {
    c.opts.dtype = DType::F64;
    c.opts.device = ember::testing::nn_device();
    ConvTranspose2d conv(c.opts);
    set_params(conv.weight, conv.bias);
    Array x = det({2, 4, 5, 4}, 0.37, 0.1).require_grad();
    check(std::string("ct2.") + c.name, conv.forward(x), leaves_of(x, conv.weight, conv.bias));
  }
  // The free function, directly.
  Array x = det({2, 4, 5, 4}, 0.37, 0.1).require_grad();
  Array w = mul(det({4, 3, 3, 3}, 0.53, 0.7), 0.5).require_grad();
  check("ct2.dil_groups",
        conv_transpose2d(x, w, {.stride = 2, .padding = 1, .dilation = {2, 1}, .groups = 2}), {x, w});
}

TEST(ConvBreadthTest, ConvTranspose1dMatchesTorch) {
  struct Case {
    const char* name;
    ConvTranspose1dLayerOptions opts;
  };
  std::vector<Case> cases{
      {"basic", {.in = 4, .out = 5, .kernel = 3}},
      {"all",
       {.in = 4, .out = 6, .kernel = 3, .stride = 3, .padding = 2, .output_padding = 1, .dilation = 2, .groups = 2}},
      {"outpad_dilation", {.in = 4, .out = 2, .kernel = 2, .output_padding = 1, .dilation = 2, .bias = false}},
  };
  for (Case& c : cases) {
    c.opts.dtype = DType::F64;
    c.opts.device = ember::testing::nn_device();
    ConvTranspose1d conv(c.opts);
    set_params(conv.weight, conv.bias);
    Array x = det({2, 4, 7}, 0.37, 0.1).require_grad();
    check(std::string("ct1.") + c.name, conv.forward(x), leaves_of(x, conv.weight, conv.bias));
  }
  Array x = det({2, 4, 7}, 0.37, 0.1).require_grad();
  Array w = mul(det({4, 5, 3}, 0.53, 0.7), 0.5).require_grad();
  Array b = det({5}, 0.9, 0.4).require_grad();
  check("ct1.basic", conv_transpose1d(x, w, b), {x, w, b});
}

TEST(ConvBreadthTest, ConvTransposeLayersInitAndConfig) {
  ConvTranspose2d conv({.in = 4, .out = 6, .kernel = {3, 2}, .groups = 2, .seed = 3});
  EXPECT_EQ(conv.weight.array().shape(), Shape({4, 3, 3, 2}));
  EXPECT_EQ(conv.bias.array().shape(), Shape({6}));
  EXPECT_EQ(conv.parameters().size(), 2u);
  // PyTorch's default: U(+-1/sqrt(fan_in)) with fan_in = weight dim 1 * kernel = 3 * 6.
  double bound = 1 / std::sqrt(18.0), wmax = 0, bmax = 0;
  for (double v : conv.weight.array().to_vector<double>()) wmax = std::max(wmax, std::abs(v));
  for (double v : conv.bias.array().to_vector<double>()) bmax = std::max(bmax, std::abs(v));
  EXPECT_LE(wmax, bound);
  EXPECT_GT(wmax, 0.7 * bound);  // 108 draws: the largest is near the bound
  EXPECT_LE(bmax, bound);
  EXPECT_EQ(conv(Tensor<4>(ones({1, 4, 3, 3}))).array().shape(), Shape({1, 6, 5, 4}));
  EXPECT_FALSE(ConvTranspose1d({.in = 2, .out = 2, .bias = false}).bias.defined());

  ConvTranspose2dLayerOptions o{.in = 4, .out = 2, .kernel = {3, 1}, .stride = 2, .padding = {1, 0},
                                .output_padding = {1, 0}, .dilation = {1, 2}, .bias = false, .seed = 9};
  ConvTranspose2dLayerOptions back = ConvTranspose2dLayerOptions::from_json(o.to_json());
  EXPECT_EQ(back.to_json(), o.to_json());
  EXPECT_EQ(back.output_padding.h, 1);
  EXPECT_EQ(ConvTranspose2dLayerOptions::from_json(R"({"kernel": 5})").kernel.w, 5);
  ConvTranspose1dLayerOptions o1{.in = 2, .out = 4, .kernel = 3, .stride = 2, .output_padding = 1, .groups = 2};
  EXPECT_EQ(ConvTranspose1dLayerOptions::from_json(o1.to_json()).to_json(), o1.to_json());
  EXPECT_EQ(conv.type_name(), "ConvTranspose2d");
}

TEST(ConvBreadthTest, ConvTransposeBadInput) {
  Array x = ones({2, 4, 5, 4}, {DType::F64});
  Array w = ones({4, 3, 3, 3}, {DType::F64});
  auto throws_with = [](auto fn, const std::string& text) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected one mentioning " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  throws_with([&] { conv_transpose2d(ones({4, 5, 4}), w); }, "conv_transpose2d: input must be 4-D");
  throws_with([&] { conv_transpose2d(x, ones({5, 3, 3, 3})); }, "weight [5, 3, 3, 3] expects 5");
  throws_with([&] { conv_transpose2d(x, w, {.groups = 3}); }, "groups 3 must divide the input channels 4");
  throws_with([&] { conv_transpose2d(x, w, {.stride = 2, .output_padding = 2}); }, "output_padding (2, 2)");
  throws_with([&] { conv_transpose2d(x, w, ones({5}, {DType::F64})); }, "bias must have shape [3]");
  throws_with([&] { conv_transpose2d(x, w, {.padding = 5}); }, "is not positive");
  throws_with([&] { conv_transpose2d(ones({2, 4, 5, 4}, {DType::I32}), w); }, "needs floating");
  throws_with([&] { conv_transpose1d(ones({2, 4, 5}), ones({4, 3})); }, "conv_transpose1d: weight must be 3-D");
  throws_with([&] { conv_transpose1d(ones({2, 4, 5}), ones({4, 3, 2}), {.stride = 2, .output_padding = 3}); },
              "conv_transpose1d: output_padding 3");
  throws_with([&] { ConvTranspose2d({.in = 3, .out = 4, .groups = 2}); }, "ConvTranspose2d: in (3)");
  throws_with([&] { ConvTranspose1d({.in = 4, .out = 2, .kernel = 0}); }, "ConvTranspose1d: kernel");
  ConvTranspose1d conv({.in = 4, .out = 2, .kernel = 3});
  throws_with([&] { conv.forward(ones({2, 3, 9})); }, "ConvTranspose1d: expected input [N, 4, L]");
}

// ---- conv3d -------------------------------------------------------------------------------------

TEST(ConvBreadthTest, Conv3dMatchesTorch) {
  struct Case {
    const char* name;
    Conv3dLayerOptions opts;
  };
  std::vector<Case> cases{
      {"basic", {.in = 4, .out = 6, .kernel = {3, 3, 2}}},
      {"stride_pad_dil",
       {.in = 4, .out = 6, .kernel = {3, 2, 3}, .stride = {2, 1, 2}, .padding = {1, 2, 0}, .dilation = {2, 1, 2}}},
      {"groups", {.in = 4, .out = 6, .kernel = {2, 3, 3}, .stride = {1, 2, 1}, .padding = 1, .groups = 2,
                  .bias = false}},
      {"same", {.in = 4, .out = 4, .kernel = {2, 3, 4}, .padding = Padding3d::same(), .dilation = {1, 2, 1}}},
      {"depthwise", {.in = 4, .out = 8, .kernel = {3, 1, 2}, .stride = 2, .padding = {2, 0, 1}, .groups = 4}},
  };
  for (Case& c : cases) {
    c.opts.dtype = DType::F64;
    c.opts.device = ember::testing::nn_device();
    Conv3d conv(c.opts);
    set_params(conv.weight, conv.bias);
    Array x = det({2, 4, 5, 6, 5}, 0.37, 0.1).require_grad();
    check(std::string("c3.") + c.name, conv.forward(x), leaves_of(x, conv.weight, conv.bias));
  }
  Array x = det({2, 4, 5, 6, 5}, 0.37, 0.1).require_grad();
  Array w = mul(det({6, 4, 3, 3, 2}, 0.53, 0.7), 0.5).require_grad();
  Array b = det({6}, 0.9, 0.4).require_grad();
  check("c3.basic", conv3d(x, w, b), {x, w, b});
}

TEST(ConvBreadthTest, Conv3dLayerInitConfigAndBadInput) {
  Conv3d conv({.in = 2, .out = 4, .kernel = {1, 2, 3}, .seed = 5});
  EXPECT_EQ(conv.weight.array().shape(), Shape({4, 2, 1, 2, 3}));
  double bound = 1 / std::sqrt(12.0);
  for (double v : conv.weight.array().to_vector<double>()) EXPECT_LE(std::abs(v), bound);
  for (double v : conv.bias.array().to_vector<double>()) EXPECT_LE(std::abs(v), bound);
  EXPECT_EQ(conv(Tensor<5>(ones({1, 2, 3, 4, 5}))).array().shape(), Shape({1, 4, 3, 3, 3}));
  Conv3dLayerOptions o{.in = 2, .out = 4, .kernel = {1, 2, 3}, .stride = {1, 2, 1}, .padding = {0, 1, 2},
                       .dilation = 2, .groups = 2, .bias = false, .seed = 1};
  EXPECT_EQ(Conv3dLayerOptions::from_json(o.to_json()).to_json(), o.to_json());
  EXPECT_TRUE(Conv3dLayerOptions::from_json(R"({"padding": "same"})").padding.is_same);
  EXPECT_EQ(Conv3dLayerOptions::from_json(R"({"kernel": 3})").kernel.d, 3);
  EXPECT_THROW(Conv3dLayerOptions::from_json(R"({"padding": "valid!"})"), Error);

  Array x = ones({1, 2, 3, 4, 5}, {DType::F64});
  Array w = ones({4, 2, 1, 2, 3}, {DType::F64});
  auto throws_with = [](auto fn, const std::string& text) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected one mentioning " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  throws_with([&] { conv3d(ones({2, 3, 4, 5}), w); }, "conv3d: input must be 5-D");
  throws_with([&] { conv3d(x, ones({4, 2, 2, 3})); }, "conv3d: weight must be 5-D");
  throws_with([&] { conv3d(x, ones({4, 3, 1, 2, 3})); }, "channel mismatch");
  throws_with([&] { conv3d(x, w, {.groups = 3}); }, "groups 3 must divide");
  throws_with([&] { conv3d(x, ones({4, 2, 4, 1, 1})); }, "larger than the padded input (3, 4, 5)");
  throws_with([&] { conv3d(x, w, {.stride = 2, .padding = Padding3d::same()}); }, "'same' needs stride 1");
  throws_with([&] { conv3d(x, w, {.padding = {0, -1, 0}}); }, "must not be negative");
  throws_with([&] { conv3d(x, w, ones({3})); }, "bias must have shape [4]");
  throws_with([&] { Conv3d({.in = 3, .out = 4, .groups = 2}); }, "Conv3d: in (3)");
  throws_with([&] { conv.forward(ones({1, 3, 3, 4, 5})); }, "Conv3d: expected input [N, 2, D, H, W]");
}

// ---- interpolate --------------------------------------------------------------------------------

TEST(ConvBreadthTest, InterpolateMatchesTorch) {
  using M = InterpolateMode;
  struct Case {
    const char* name;
    int rank;
    InterpolateOptions opts;
  };
  std::vector<Case> cases{
      {"nearest1d_size_up", 3, {.size = {12}}},
      {"nearest1d_size_down", 3, {.size = {4}}},
      {"nearest1d_scale", 3, {.scale_factor = {1.7}}},
      {"nearest1d_double", 3, {.scale_factor = {2}}},
      {"nearest2d_size", 4, {.size = {8, 7}}},
      {"nearest2d_scale", 4, {.scale_factor = {2.0, 1.5}}},
      {"nearest2d_scale_down", 4, {.scale_factor = {0.6}}},
      {"nearest2d_recompute", 4, {.scale_factor = {1.3, 2.7}, .recompute_scale_factor = true}},
      {"nearest_exact2d_size", 4, {.size = {7, 3}, .mode = M::NearestExact}},
      {"nearest_exact1d_scale", 3, {.scale_factor = {1.6}, .mode = M::NearestExact}},
      {"linear_size", 3, {.size = {12}, .mode = M::Linear}},
      {"linear_size_ac", 3, {.size = {12}, .mode = M::Linear, .align_corners = true}},
      {"linear_scale", 3, {.scale_factor = {2.5}, .mode = M::Linear}},
      {"linear_scale_ac", 3, {.scale_factor = {1.5}, .mode = M::Linear, .align_corners = true}},
      {"linear_down", 3, {.scale_factor = {0.6}, .mode = M::Linear}},
      {"linear_one_ac", 3, {.size = {1}, .mode = M::Linear, .align_corners = true}},
      {"linear_recompute", 3, {.scale_factor = {1.7}, .mode = M::Linear, .recompute_scale_factor = true}},
      {"bilinear_size", 4, {.size = {8, 7}, .mode = M::Bilinear}},
      {"bilinear_size_ac", 4, {.size = {8, 7}, .mode = M::Bilinear, .align_corners = true}},
      {"bilinear_scale", 4, {.scale_factor = {1.5, 2.25}, .mode = M::Bilinear}},
      {"bilinear_scale_ac", 4, {.scale_factor = {1.7}, .mode = M::Bilinear, .align_corners = true}},
      {"bilinear_down", 4, {.size = {3, 2}, .mode = M::Bilinear}},
  };
  for (const Case& c : cases) {
    Array x = c.rank == 3 ? det({2, 3, 7}, 0.37, 0.1) : det({2, 3, 5, 4}, 0.41, 0.2);
    x = x.require_grad();
    check(std::string("interp.") + c.name, interpolate(x, c.opts), {x});
  }
  // The module is the function with stored options.
  Upsample up({.scale_factor = {1.5, 2.25}, .mode = M::Bilinear});
  Array x = det({2, 3, 5, 4}, 0.41, 0.2).require_grad();
  check("interp.bilinear_scale", up(Tensor<4>(x)).array(), {x});
}

TEST(ConvBreadthTest, UpsampleConfigAndBadInput) {
  InterpolateOptions o{.scale_factor = {2.0, 3.0}, .mode = InterpolateMode::Bilinear, .align_corners = true};
  Upsample up(o);
  EXPECT_EQ(up.type_name(), "Upsample");
  EXPECT_TRUE(up.parameters().empty());
  InterpolateOptions back = InterpolateOptions::from_json(up.config());
  EXPECT_EQ(back.to_json(), o.to_json());
  EXPECT_EQ(back.mode, InterpolateMode::Bilinear);
  EXPECT_EQ(InterpolateOptions::from_json(R"({"size": 4, "mode": "nearest-exact"})").size, std::vector<int64_t>{4});
  EXPECT_EQ(InterpolateOptions::from_json(R"({"mode": "bicubic"})").mode, InterpolateMode::Bicubic);
  EXPECT_THROW(InterpolateOptions::from_json(R"({"mode": "area"})"), Error);

  auto throws_with = [](auto fn, const std::string& text) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected one mentioning " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  using M = InterpolateMode;
  Array x3 = ones({1, 2, 5}), x4 = ones({1, 2, 3, 4});
  throws_with([&] { interpolate(x3, {}); }, "give exactly one of size ([]) and scale_factor ([])");
  throws_with([&] { interpolate(x3, {.size = {4}, .scale_factor = {2}}); }, "give exactly one");
  throws_with([&] { interpolate(x4, {.size = {4}, .mode = M::Linear}); }, "mode 'linear' needs a 3-D input");
  throws_with([&] { interpolate(x3, {.size = {4}, .mode = M::Bilinear}); }, "mode 'bilinear' needs a 4-D input");
  throws_with([&] { interpolate(x3, {.size = {4}, .align_corners = true}); }, "not 'nearest'");
  throws_with([&] { interpolate(x4, {.size = {4, 5, 6}}); }, "size has 3 entries");
  throws_with([&] { interpolate(x4, {.size = {0, 2}}); }, "size [0, 2] must be positive");
  throws_with([&] { interpolate(x4, {.scale_factor = {-1.0}}); }, "must be positive and finite");
  throws_with([&] { interpolate(x3, {.scale_factor = {0.1}}); }, "gives an empty output");
  throws_with([&] { interpolate(x3, {.size = {3}, .recompute_scale_factor = true}); }, "recompute_scale_factor");
  throws_with([&] { interpolate(ones({2, 5}), {.size = {3}}); }, "input must be 3-D [N, C, L] or 4-D");
  throws_with([&] { interpolate(ones({1, 2, 5}, {DType::I64}), {.size = {3}}); }, "needs a floating input");
  throws_with([&] { Upsample({}); }, "Upsample: give exactly one");
  throws_with([&] { Upsample({.size = {2}, .align_corners = true}); }, "Upsample: align_corners");
}

// ---- float32 ------------------------------------------------------------------------------------

TEST(ConvBreadthTest, Float32MatchesTorch) {
  constexpr double tol = 2e-5;
  {
    ConvTranspose2d conv({.in = 4, .out = 3, .kernel = {3, 2}, .stride = {2, 3}, .padding = {1, 0},
                          .output_padding = {1, 2}, .device = ember::testing::nn_device()});
    set_params(conv.weight, conv.bias, DType::F32);
    Array x = det({2, 4, 5, 4}, 0.37, 0.1, DType::F32).require_grad();
    Array y = conv.forward(x);
    EXPECT_EQ(y.dtype(), DType::F32);
    check("ct2.stride_pad_outpad", y, leaves_of(x, conv.weight, conv.bias), tol);
  }
  {
    Conv3d conv({.in = 4, .out = 6, .kernel = {3, 2, 3}, .stride = {2, 1, 2}, .padding = {1, 2, 0},
                 .dilation = {2, 1, 2}, .device = ember::testing::nn_device()});
    set_params(conv.weight, conv.bias, DType::F32);
    Array x = det({2, 4, 5, 6, 5}, 0.37, 0.1, DType::F32).require_grad();
    Array y = conv.forward(x);
    EXPECT_EQ(y.dtype(), DType::F32);
    check("c3.stride_pad_dil", y, leaves_of(x, conv.weight, conv.bias), tol);
  }
  {
    Array x = det({2, 3, 5, 4}, 0.41, 0.2, DType::F32).require_grad();
    Array y = interpolate(x, {.size = {8, 7}, .mode = InterpolateMode::Bilinear, .align_corners = true});
    EXPECT_EQ(y.dtype(), DType::F32);
    check("interp.bilinear_size_ac", y, {x}, tol);
    Array xn = det({2, 3, 5, 4}, 0.41, 0.2, DType::F32).require_grad();
    check("interp.nearest2d_scale", interpolate(xn, {.scale_factor = {2.0, 1.5}}), {xn}, tol);
  }
}

}  // namespace
}  // namespace ember
