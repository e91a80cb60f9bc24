// The functional embedding (nn::embedding, PyTorch's F.embedding) and the Embedding module that
// calls it: the rows by hand, gradients counted by hand (none into the padding row, negative
// padding indices from the end), and the errors, each naming the function and the values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::error_of;

// weight[r][c] = 10 r + c
Array table() {
  std::vector<float> w;
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 3; ++c) w.push_back(float(10 * r + c));
  return from_vector(w, {5, 3});
}

TEST(EmbeddingTest, RowsAtTheIndicesKeepTheIndicesShape) {
  Array idx = from_vector<int64_t>({0, 4, 2, 0, 3, 3}, {3, 2});
  Array y = nn::embedding(idx, table());
  EXPECT_EQ(y.shape(), Shape({3, 2, 3}));
  std::vector<float> want;
  for (int64_t r : {0, 4, 2, 0, 3, 3})
    for (int c = 0; c < 3; ++c) want.push_back(float(10 * r + c));
  EXPECT_EQ(y.to_vector<float>(), want);
  // int32 indices, a scalar index
  EXPECT_EQ(nn::embedding(from_vector<int32_t>({1}, {1}), table()).to_vector<float>(), (std::vector<float>{10, 11, 12}));
  EXPECT_EQ(nn::embedding(full({}, 2, {.dtype = DType::I64}), table()).shape(), Shape({3}));
}

TEST(EmbeddingTest, GradientsCountEachRowsUsesAndSkipThePaddingRow) {
  Array idx = from_vector<int64_t>({0, 4, 2, 0, 4, 4}, {3, 2});
  for (int64_t pad : {0, -1}) {
    SCOPED_TRACE(pad);
    Array w = table().require_grad();
    Gradients g = sum(nn::embedding(idx, w, pad)).backward();
    // Uses: row 0 twice, row 2 once, row 4 three times; the padding row (0, or 4 for -1) none.
    std::vector<float> want;
    for (int r = 0; r < 5; ++r) {
      float uses = r == 0 ? 2.0f : r == 2 ? 1.0f : r == 4 ? 3.0f : 0.0f;
      if (r == (pad < 0 ? 5 + pad : pad)) uses = 0;
      for (int c = 0; c < 3; ++c) want.push_back(uses);
    }
    EXPECT_EQ(w.grad(g).to_vector<float>(), want);
    // The padding row's values are still looked up.
    EXPECT_EQ(nn::embedding(idx, w, pad).to_vector<float>(), nn::embedding(idx, w).to_vector<float>());
  }
}

TEST(EmbeddingTest, TheModuleIsTheFunction) {
  nn::Embedding emb({.num = 6, .dim = 4, .padding_idx = 2, .seed = 3});
  Array idx = from_vector<int64_t>({5, 2, 0, 2}, {2, 2});
  EXPECT_EQ(emb.forward(idx).to_vector<float>(), nn::embedding(idx, emb.weight.array(), 2).to_vector<float>());
}

TEST(EmbeddingTest, BadArgumentsNameTheFunctionAndTheValues) {
  EXPECT_NE(error_of([] { nn::embedding(from_vector<float>({1.0f}, {1}), table()); })
                .find("embedding: indices must be integers, got float32"),
            std::string::npos);
  EXPECT_NE(error_of([] { nn::embedding(from_vector<int64_t>({1}, {1}), table(), 5); })
                .find("embedding: padding_idx 5 out of range for 5 entries"),
            std::string::npos);
  EXPECT_NE(error_of([] { nn::embedding(from_vector<int64_t>({1}, {1}), from_vector<float>({1, 2}, {2})); })
                .find("embedding: weight must be [num, dim], got [2]"),
            std::string::npos);
  // An index out of range: at the read, naming the function and the index.
  Array y = nn::embedding(from_vector<int64_t>({1, 7}, {2}), table());
  const std::string m = error_of([&] { y.to_vector<float>(); });
  EXPECT_NE(m.find("embedding"), std::string::npos) << m;
  EXPECT_NE(m.find("7"), std::string::npos) << m;
}

}  // namespace
}  // namespace ember
