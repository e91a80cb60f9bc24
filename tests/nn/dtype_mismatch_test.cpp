// Layers do not promote: an input whose dtype differs from the layer's parameters is an error
// naming the layer, the input dtype and the parameter dtype (nn::check_input_dtype), as PyTorch
// raises for an f64 batch into an f32 layer. One test per layer family, plus the cases that must
// keep working (a model converted with to(DType), layers without parameters).
#include <gtest/gtest.h>

#include <string>

#include "ember/ember.h"
#include "test_util.h"

namespace ember::nn {
namespace {

using ember::testing::error_of;

Array f64_ones(Shape shape) { return ones(shape, {.dtype = DType::F64}); }

// The message names the layer, both dtypes and the parameter, and says how to fix it.
void expect_mismatch(const std::string& message, const std::string& layer, const std::string& input_dtype,
                     const std::string& param_dtype, const std::string& param_name = "weight") {
  SCOPED_TRACE(message);
  EXPECT_EQ(message.rfind(layer + ": input dtype " + input_dtype + " does not match the layer's " + param_name +
                              " dtype " + param_dtype,
                          0),
            0u);
  EXPECT_NE(message.find("layers do not promote"), std::string::npos);
}

TEST(DTypeMismatchTest, LinearRejectsAnF64InputWithF32Weights) {
  Linear fc({.in = 3, .out = 2, .seed = 1});
  std::string message = error_of([&] { fc.forward(f64_ones({4, 3})); });
  expect_mismatch(message, "Linear", "float64", "float32");
  EXPECT_NE(message.find("x.to_dtype(DType::F32)"), std::string::npos);
  EXPECT_NE(message.find("model.to(DType::F64)"), std::string::npos);
  // The typed call operator goes through the same check.
  EXPECT_NE(error_of([&] { fc(Tensor<2>::ones({4, 3}).to_dtype(DType::F64)); }).find("Linear: input dtype float64"),
            std::string::npos);
  // f16 into f32 is refused as well: no silent promotion in either direction.
  expect_mismatch(error_of([&] { fc.forward(ones({4, 3}, {.dtype = DType::F16})); }), "Linear", "float16", "float32");
}

TEST(DTypeMismatchTest, IntegerInputsGetOnlyTheInputConversionHint) {
  Linear fc({.in = 3, .out = 2, .seed = 1});
  std::string message = error_of([&] { fc.forward(ones({4, 3}, {.dtype = DType::I64})); });
  expect_mismatch(message, "Linear", "int64", "float32");
  EXPECT_NE(message.find("x.to_dtype(DType::F32)"), std::string::npos);
  EXPECT_EQ(message.find("model.to"), std::string::npos);
}

TEST(DTypeMismatchTest, AConvertedModelComputesInItsNewDType) {
  Linear fc({.in = 3, .out = 2, .seed = 1});
  Array x = from_vector(std::vector<float>{0.5f, -1.0f, 2.0f}, {1, 3});
  std::vector<double> in_f32 = fc.forward(x).to_vector<double>();
  fc.to(DType::F64);
  Array y = fc.forward(cast(x, DType::F64));
  EXPECT_EQ(y.dtype(), DType::F64);
  EXPECT_TRUE(ember::testing::all_close(y, in_f32, 1e-6, 1e-6));
  // ... and now refuses the f32 input it took before.
  expect_mismatch(error_of([&] { fc.forward(x); }), "Linear", "float32", "float64");
}

TEST(DTypeMismatchTest, UserModulesReportTheInnerLayer) {
  struct Mlp : Module {
    Linear fc1{{.in = 4, .out = 8, .seed = 2}};
    Linear fc2{{.in = 8, .out = 2, .seed = 3}};
    EMBER_MODULE_VISIT(fc1, fc2)
    Tensor<2> forward(const Tensor<2>& x) { return fc2(relu(fc1(x))); }
  } model;
  auto x = Tensor<2>::ones({5, 4}).to_dtype(DType::F64);
  expect_mismatch(error_of([&] { model.forward(x); }), "Linear", "float64", "float32");
  model.to(DType::F64);
  Tensor<2> y = model.forward(x);
  EXPECT_EQ(y.dtype(), DType::F64);
  EXPECT_EQ(y.shape(), (Shape{5, 2}));
}

TEST(DTypeMismatchTest, Convolutions) {
  Conv1d c1({.in = 2, .out = 3, .kernel = 3});
  expect_mismatch(error_of([&] { c1.forward(f64_ones({1, 2, 8})); }), "Conv1d", "float64", "float32");
  Conv2d c2({.in = 2, .out = 3, .kernel = 3});
  expect_mismatch(error_of([&] { c2.forward(f64_ones({1, 2, 8, 8})); }), "Conv2d", "float64", "float32");
  Conv3d c3({.in = 2, .out = 3, .kernel = 2});
  expect_mismatch(error_of([&] { c3.forward(f64_ones({1, 2, 4, 4, 4})); }), "Conv3d", "float64", "float32");
  ConvTranspose1d t1({.in = 2, .out = 3, .kernel = 3});
  expect_mismatch(error_of([&] { t1.forward(f64_ones({1, 2, 8})); }), "ConvTranspose1d", "float64", "float32");
  ConvTranspose2d t2({.in = 2, .out = 3, .kernel = 3});
  expect_mismatch(error_of([&] { t2.forward(f64_ones({1, 2, 8, 8})); }), "ConvTranspose2d", "float64", "float32");
  // Matching dtypes still compute: a 3x3 all-ones kernel over ones is 9 * w summed.
  Conv2d f64_conv({.in = 1, .out = 1, .kernel = 3, .bias = false, .dtype = DType::F64});
  f64_conv.weight.set(f64_ones({1, 1, 3, 3}));
  EXPECT_TRUE(ember::testing::all_close(f64_conv.forward(f64_ones({1, 1, 3, 3})), {9.0}));
}

TEST(DTypeMismatchTest, EmbeddingsTakeIntegerIndices) {
  Embedding emb({.num = 5, .dim = 2, .seed = 4});
  EXPECT_EQ(error_of([&] { emb.forward(ones({3}, {.dtype = DType::F32})); }),
            "Embedding: indices must be integers, got float32 (at dtype_mismatch_test.cpp:" + std::to_string(__LINE__ - 1) + ")");
  // Integer indices of either width work, whatever the table's dtype.
  Array rows = emb.forward(from_vector(std::vector<int32_t>{4, 0}, {2}));
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.dtype(), DType::F32);
}

TEST(DTypeMismatchTest, Norms) {
  BatchNorm2d bn({.features = 2});
  expect_mismatch(error_of([&] { bn.forward(f64_ones({2, 2, 3, 3})); }), "BatchNorm2d", "float64", "float32");
  // Without affine parameters the running statistics set the dtype.
  BatchNorm1d bn_plain({.features = 2, .affine = false});
  expect_mismatch(error_of([&] { bn_plain.forward(f64_ones({4, 2})); }), "BatchNorm1d", "float64", "float32",
                  "running_mean");
  LayerNorm ln({.shape = {4}});
  expect_mismatch(error_of([&] { ln.forward(f64_ones({2, 4})); }), "LayerNorm", "float64", "float32");
  RMSNorm rms({.shape = {4}});
  expect_mismatch(error_of([&] { rms.forward(f64_ones({2, 4})); }), "RMSNorm", "float64", "float32");
  GroupNorm gn({.groups = 2, .channels = 4});
  expect_mismatch(error_of([&] { gn.forward(f64_ones({1, 4, 3})); }), "GroupNorm", "float64", "float32");
  InstanceNorm2d in_affine({.features = 2, .affine = true});
  expect_mismatch(error_of([&] { in_affine.forward(f64_ones({1, 2, 3, 3})); }), "InstanceNorm2d", "float64",
                  "float32");
  // No parameters, no statistics: the layer computes in its input's dtype (PyTorch's default
  // InstanceNorm and LayerNorm without affine do the same).
  InstanceNorm1d in_plain({.features = 2});
  Array x = from_vector(std::vector<double>{1, 3, 2, 2}, {1, 2, 2});
  Array y = in_plain.forward(x);
  EXPECT_EQ(y.dtype(), DType::F64);
  EXPECT_TRUE(ember::testing::all_close(y, {-1, 1, 0, 0}, 1e-4, 1e-4));
}

TEST(DTypeMismatchTest, RecurrentLayers) {
  LSTM lstm({.input_size = 3, .hidden_size = 4, .batch_first = true});
  expect_mismatch(error_of([&] { lstm.forward(f64_ones({2, 5, 3})); }), "LSTM", "float64", "float32", "weight_ih_l0");
  GRU gru({.input_size = 3, .hidden_size = 4});
  expect_mismatch(error_of([&] { gru.forward(f64_ones({5, 2, 3})); }), "GRU", "float64", "float32", "weight_ih_l0");
  GRUCell cell({.input_size = 3, .hidden_size = 4});
  expect_mismatch(error_of([&] { cell.forward(f64_ones({2, 3})); }), "GRUCell", "float64", "float32", "weight_ih");
  LSTMCell lstm_cell({.input_size = 3, .hidden_size = 4});
  expect_mismatch(error_of([&] { lstm_cell.forward(f64_ones({2, 3})); }), "LSTMCell", "float64", "float32",
                  "weight_ih");
  // A state of another dtype than the input is named as such.
  EXPECT_EQ(error_of([&] { gru.forward(ones({5, 2, 3}), f64_ones({1, 2, 4})); }),
            "GRU: h0 dtype float64 does not match the input dtype float32 (at dtype_mismatch_test.cpp:" +
                std::to_string(__LINE__ - 2) + ")");
  EXPECT_EQ(error_of([&] { cell.forward(ones({2, 3}), f64_ones({2, 4})); }),
            "GRUCell: h dtype float64 does not match the input dtype float32 (at dtype_mismatch_test.cpp:" +
                std::to_string(__LINE__ - 2) + ")");
}

TEST(DTypeMismatchTest, AttentionAndActivationsWithParameters) {
  MultiheadAttention mha({.embed_dim = 4, .num_heads = 2, .batch_first = true});
  Array x = f64_ones({1, 3, 4});
  expect_mismatch(error_of([&] { mha.forward(x); }), "MultiheadAttention", "float64", "float32", "in_proj_weight");
  MultiheadAttention mha_kv({.embed_dim = 4, .num_heads = 2, .kdim = 2, .vdim = 2, .batch_first = true});
  expect_mismatch(error_of([&] { mha_kv.forward(ones({1, 3, 4}), f64_ones({1, 3, 2}), ones({1, 3, 2})); }),
                  "MultiheadAttention", "float64", "float32", "k_proj_weight");
  PReLU prelu_layer;
  expect_mismatch(error_of([&] { prelu_layer.forward(f64_ones({2, 3})); }), "PReLU", "float64", "float32");
  // Parameter-free layers still follow their input.
  ReLU relu_layer;
  EXPECT_EQ(relu_layer.forward(f64_ones({2})).dtype(), DType::F64);
}

}  // namespace
}  // namespace ember::nn
