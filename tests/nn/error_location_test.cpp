// Errors name the user's line and the layer or op the user called (ember::UserCall): each of the
// mistakes a new user makes (a Linear of the wrong width, a kernel larger than the image, an
// embedding index out of range, a layer of the wrong dtype, a bad recurrent input, a loss target
// out of range) is run here and its message must point at this file's line, never at a line
// inside Ember (conv.cpp, embedding.cpp, array.cpp).
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "ember/ember.h"
#include "test_util.h"

namespace ember::nn {
namespace {

using ember::testing::error_of;

// The message names `line` of this file, and no other source line.
void expect_at_line(const std::string& message, int line) {
  SCOPED_TRACE(message);
  EXPECT_NE(message.find("(at error_location_test.cpp:" + std::to_string(line) + ")"), std::string::npos);
  std::regex any_location(R"(\(at ([A-Za-z0-9_.]+):\d+\))");
  for (auto it = std::sregex_iterator(message.begin(), message.end(), any_location); it != std::sregex_iterator(); ++it)
    EXPECT_EQ((*it)[1].str(), "error_location_test.cpp");
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TEST(ErrorLocationTest, LinearOfTheWrongWidthNamesTheCallersLine) {
  Linear fc({.in = 9216, .out = 128, .seed = 1});
  auto x = Tensor<2>::zeros({2, 10816});
  int line = __LINE__ + 1;
  std::string m = error_of([&] { fc(x); });
  EXPECT_EQ(m, "Linear: expected input [..., 9216], got [2, 10816] (at error_location_test.cpp:" +
                   std::to_string(line) + ")");
  // forward(Array) and the Array form take the caller's line too.
  line = __LINE__ + 1;
  m = error_of([&] { fc.forward(x.array()); });
  expect_at_line(m, line);
}

TEST(ErrorLocationTest, AKernelLargerThanTheImageNamesTheLayerTheOpAndTheLine) {
  Conv2d conv({.in = 1, .out = 2, .kernel = 5, .seed = 1});
  auto x = Tensor<4>::zeros({1, 1, 4, 4});
  int line = __LINE__ + 1;
  std::string m = error_of([&] { conv(x); });
  EXPECT_TRUE(starts_with(m, "Conv2d: conv2d: ")) << m;
  expect_at_line(m, line);
}

TEST(ErrorLocationTest, AnEmbeddingIndexOutOfRangeIsReportedAtTheEmbeddingsLineWhenRead) {
  Embedding emb({.num = 10, .dim = 4, .seed = 1});
  auto idx = Tensor<1, Int>::from_data({1, 12, 3});
  int line = __LINE__ + 1;
  auto rows = emb(idx);
  // The index is checked where the kernel runs: the error comes at the read, naming the layer,
  // the bad index and the embedding's line.
  std::string m = error_of([&] { rows.to_vector<float>(); });
  EXPECT_NE(m.find("Embedding"), std::string::npos) << m;
  EXPECT_NE(m.find("12"), std::string::npos) << m;
  expect_at_line(m, line);
}

TEST(ErrorLocationTest, AGatherReportsItselfAsGather) {
  auto x = Tensor<2>::zeros({2, 3});
  auto idx = Tensor<2, Int>::from_data({{0, 5}, {1, 2}});
  int line = __LINE__ + 1;
  auto g = x.gather(1, idx);
  std::string m = error_of([&] { g.to_vector<float>(); });
  EXPECT_NE(m.find("gather"), std::string::npos) << m;
  EXPECT_EQ(m.find("index_select"), std::string::npos) << m;
  expect_at_line(m, line);
}

TEST(ErrorLocationTest, ALayerOfAnotherDtypeNamesTheLine) {
  Linear fc({.in = 3, .out = 2, .seed = 1});
  auto x = Tensor<2>::ones({4, 3}).to_dtype(DType::F64);
  int line = __LINE__ + 1;
  std::string m = error_of([&] { fc(x); });
  EXPECT_TRUE(starts_with(m, "Linear: input dtype float64 does not match the layer's weight dtype float32")) << m;
  expect_at_line(m, line);
}

TEST(ErrorLocationTest, ALayerInsideABuiltInLayerNamesTheOuterLayerAndItsLine) {
  TransformerEncoderLayer enc({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0, .seed = 1});
  // d_model right, dtype wrong: the MultiheadAttention inside finds it.
  auto x = Tensor<3>::ones({2, 5, 8}).to_dtype(DType::F64);
  int line = __LINE__ + 1;
  std::string m = error_of([&] { enc.forward(x.array()); });
  EXPECT_TRUE(starts_with(m, "TransformerEncoderLayer: MultiheadAttention: input dtype float64")) << m;
  expect_at_line(m, line);
  // The encoder's own check names it once.
  line = __LINE__ + 1;
  m = error_of([&] { enc.forward(Tensor<3>::ones({2, 5, 6}).array()); });
  EXPECT_TRUE(starts_with(m, "TransformerEncoderLayer: expected src")) << m;
  expect_at_line(m, line);
}

TEST(ErrorLocationTest, ARecurrentInputOfTheWrongSizeNamesTheLine) {
  LSTM lstm({.input_size = 8, .hidden_size = 16});
  auto x = Tensor<3>::zeros({5, 2, 7});
  int line = __LINE__ + 1;
  std::string m = error_of([&] { lstm(x); });
  EXPECT_TRUE(starts_with(m, "LSTM: expected input")) << m;
  expect_at_line(m, line);
  LSTMCell cell({.input_size = 8, .hidden_size = 16});
  line = __LINE__ + 1;
  m = error_of([&] { cell(Tensor<2>::zeros({2, 7})); });
  EXPECT_TRUE(starts_with(m, "LSTMCell: expected input")) << m;
  expect_at_line(m, line);
}

TEST(ErrorLocationTest, LossesNameTheLine) {
  auto logits = Tensor<2>::zeros({2, 3});
  auto target = Tensor<1, Int>::from_data({0, 3});
  int line = __LINE__ + 1;
  auto loss = cross_entropy(logits.array(), target.array());
  std::string m = error_of([&] { loss.item<float>(); });
  EXPECT_NE(m.find("cross_entropy"), std::string::npos) << m;
  expect_at_line(m, line);
  line = __LINE__ + 1;
  m = error_of([&] { mse_loss(Tensor<2>::zeros({2, 3}).array(), Tensor<2>::zeros({3, 2}).array()); });
  EXPECT_TRUE(starts_with(m, "mse_loss: input [2, 3] and target [3, 2] must have the same shape")) << m;
  expect_at_line(m, line);
  line = __LINE__ + 1;
  m = error_of([&] { scaled_dot_product_attention(zeros({2}), zeros({2, 3}), zeros({2, 3})); });
  EXPECT_TRUE(starts_with(m, "scaled_dot_product_attention: q, k and v need rank >= 2")) << m;
  expect_at_line(m, line);
}

// A module written in the user's file: its own ops and layer calls keep their own lines, also
// when it runs inside a Sequential.
struct TwoLayers : Module {
  Linear fc1{{.in = 4, .out = 6, .seed = 1}};
  Linear fc2{{.in = 5, .out = 2, .seed = 2}};  // a mistake: fc1 gives 6 features
  EMBER_MODULE(fc1, fc2)
  static constexpr int kFc2Line = __LINE__ + 1;
  Array forward(const Array& x) { return fc2.forward(relu(fc1.forward(x))); }
};

TEST(ErrorLocationTest, AUserModuleReportsTheLineInsideItsForward) {
  TwoLayers model;
  std::string m = error_of([&] { model(ones({3, 4})); });
  EXPECT_TRUE(starts_with(m, "Linear: expected input [..., 5], got [3, 6]")) << m;
  expect_at_line(m, TwoLayers::kFc2Line);
  // Inside a Sequential, the user's module still names its own line; a built-in layer there
  // names the line that called the Sequential.
  Sequential seq(Linear({.in = 4, .out = 4, .seed = 3}), TwoLayers{});
  m = error_of([&] { seq(ones({3, 4})); });
  expect_at_line(m, TwoLayers::kFc2Line);
  Sequential bad(Linear({.in = 4, .out = 4, .seed = 3}), Linear({.in = 3, .out = 1, .seed = 4}));
  int line = __LINE__ + 1;
  m = error_of([&] { bad(ones({3, 4})); });
  EXPECT_TRUE(starts_with(m, "Sequential: Linear: expected input [..., 3], got [3, 4]")) << m;
  expect_at_line(m, line);
}

TEST(ErrorLocationTest, OpsAfterALayerKeepTheirOwnLines) {
  Linear fc({.in = 3, .out = 2, .seed = 1});
  error_of([&] { fc(Tensor<2>::zeros({1, 4})); });  // the layer's scope ends with the exception
  auto a = Tensor<2>::zeros({2, 3});
  auto b = Tensor<2>::zeros({4, 5});
  int line = __LINE__ + 1;
  std::string m = error_of([&] { a + b; });
  EXPECT_TRUE(starts_with(m, "add: ")) << m;
  expect_at_line(m, line);
  // A layer that succeeded leaves no scope behind either.
  auto y = fc(Tensor<2>::ones({1, 3}));
  line = __LINE__ + 1;
  m = error_of([&] { y.matmul(Tensor<2>::zeros({3, 3})); });
  expect_at_line(m, line);
}

TEST(ErrorLocationTest, ALayersOpsRecordTheUsersLineForDeferredErrorsAndAnomalies) {
  DetectAnomalyGuard anomaly;
  LayerNorm norm({.shape = {3}});
  // Finite inputs whose variance overflows f32: the normalization produces NaN/inf inside the
  // layer; the report names the layer's op at this line.
  auto x = Tensor<2>::from_data({{3e38f, -3e38f, 1.0f}});
  int line = __LINE__ + 1;
  auto y = norm(x);
  std::string m = error_of([&] { y.to_vector<float>(); });
  EXPECT_NE(m.find("detect_anomaly"), std::string::npos) << m;
  EXPECT_NE(m.find("LayerNorm"), std::string::npos) << m;
  expect_at_line(m, line);
}

}  // namespace
}  // namespace ember::nn
