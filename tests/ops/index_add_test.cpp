// index_add as the IndexAdd library call (backend/abi.h EMBER_LIB_INDEX_ADD) on every device that
// has it: values against sums written out by hand, duplicates summed in index order (so every
// such backend gives the same bits), NaN / inf / -0, 16-bit dtypes, strided sources, and the
// embedding gradient that motivated it (a GPT step spent 16 of 143 ms in the dense scatter).
#include <cmath>
#include <limits>

#include "ember/debug.h"
#include "ember/nn/embedding.h"
#include "graph/node.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

class IndexAddTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
  // Whether index_add of floats is the library call here (Vulkan keeps the dense scatter).
  bool library() const {
    Array r = index_add(zeros({2, 1}, {DType::F32, dev}), 0, i64({1}, {1}, dev), f32({1}, {1, 1}, dev));
    for (const NodePtr& in : r.node()->inputs)
      if (in->op == Op::IndexAdd) return true;
    return false;
  }
};

TEST_P(IndexAddTest, SumsRowsAtTheIndex) {
  // x [4, 3] plus rows (1 2 3), (10 20 30), (100 200 300), (-0 -0 -0) at 3, 0, 3, 1.
  Array x = f32({1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}, {4, 3}, dev);
  Array src = f32({1, 2, 3, 10, 20, 30, 100, 200, 300, -0.0, -0.0, -0.0}, {4, 3}, dev);
  EXPECT_TRUE(same(index_add(x, 0, i64({3, 0, 3, 1}, {4}, dev), src),
                   {11, 21, 31, 2, 2, 2, 3, 3, 3, 105, 206, 307}));
  // Along the last dim, with an i32 index: columns 0 and 2 of a [2, 4] source into [2, 3].
  Array y = index_add(zeros({2, 3}, {DType::F32, dev}), 1, i32({2, 0, 2, 2}, {4}, dev),
                      f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, dev));
  EXPECT_TRUE(same(y, {2, 0, 8, 6, 0, 20}));
  // An index entry that receives only -0 holds +0 (0 + -0), as the sum that starts from zero.
  std::vector<double> z = vals(index_add(zeros({2, 1}, {DType::F32, dev}), 0, i64({1}, {1}, dev),
                                         f32({-0.0}, {1, 1}, dev)));
  EXPECT_EQ(z[1], 0.0);
  EXPECT_FALSE(std::signbit(z[1]));
}

TEST_P(IndexAddTest, DuplicatesAreSummedInIndexOrder) {
  // In index order, (0 + 1) + 1e8 rounds to 1e8 in f32, then - 1e8 gives 0; in reverse order
  // (or with the 1 added last) the sum is 1.
  std::vector<double> r = vals(index_add(zeros({2, 2}, {DType::F32, dev}), 0, i64({1, 1, 1}, {3}, dev),
                                         f32({1, 3, 1e8, 4, -1e8, 5}, {3, 2}, dev)));
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], 0.0);
  EXPECT_EQ(r[1], 0.0);
  EXPECT_EQ(r[3], 12.0);
  if (library()) EXPECT_EQ(r[2], 0.0) << dev.str();
  else EXPECT_TRUE(r[2] == 0.0 || r[2] == 1.0) << dev.str() << ": the dense scatter sums in its own order, got " << r[2];
}

TEST_P(IndexAddTest, NanInfAndSixteenBitDtypes) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  // Row 0 gets NaN + 1 and inf + -inf (NaN); row 1 gets inf + 2.
  std::vector<double> r = vals(index_add(zeros({2, 2}, {DType::F32, dev}), 0, i64({0, 1, 0}, {3}, dev),
                                         f32({nan, inf, inf, 2, 1, -inf}, {3, 2}, dev)));
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_EQ(r[2], inf);
  EXPECT_EQ(r[3], 2.0);
  // bf16: 256 + 1 + 1 is 258 in f32, rounded once to bf16 (258); rounded at each step it would be
  // 256 (256 + 1 ties to even, twice).
  for (DType t : {DType::BF16, DType::F16, DType::F64}) {
    Array s = index_add(zeros({1, 1}, {t, dev}), 0, i64({0, 0, 0}, {3}, dev), make({256, 1, 1}, {3, 1}, t, dev));
    EXPECT_EQ(s.dtype(), t);
    if (library()) EXPECT_EQ(vals(s)[0], 258.0) << dtype_name(t) << " on " << dev.str();
    else EXPECT_NEAR(vals(s)[0], 258.0, 2.0) << dtype_name(t) << " on " << dev.str();
  }
}

TEST_P(IndexAddTest, EmptyIndexAndIntegerDtypes) {
  // No rows to add: x unchanged (through the library call where it exists).
  Array x = f32({1, 2, 3, 4}, {2, 2}, dev);
  EXPECT_TRUE(same(index_add(x, 0, i64({}, {0}, dev), f32({}, {0, 2}, dev)), {1, 2, 3, 4}));
  // Integers take the dense scatter on every device (the call is for floats), with the same sums.
  Array xi = i32({1, 2, 3, 4}, {2, 2}, dev);
  Array r = index_add(xi, 0, i64({1, 1, 0}, {3}, dev), i32({10, 20, 30, 40, 50, 60}, {3, 2}, dev));
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_TRUE(same(r, {51, 62, 43, 64}));
}

TEST_P(IndexAddTest, StridedSourceAndMiddleDim) {
  // src [2, 3, 2] = transpose of [3, 2, 2] values 0..11 (strided); rows along dim 1 at 1, 1, 0.
  Array base = f32(iota_d(12), {3, 2, 2}, dev);
  Array src = transpose(base, 0, 1);  // src[a][b][c] = base[b][a][c] = 4b + 2a + c
  Array r = index_add(zeros({2, 2, 2}, {DType::F32, dev}), 1, i64({1, 1, 0}, {3}, dev), src);
  // out[a][1][c] = src[a][0][c] + src[a][1][c], out[a][0][c] = src[a][2][c]
  EXPECT_TRUE(same(r, {8, 9, 4, 6, 10, 11, 8, 10}));
}

// nn::Embedding's gradient is one IndexAdd call where the device has it, and the sums are right.
TEST_P(IndexAddTest, EmbeddingGradient) {
  nn::Embedding e({.num = 5, .dim = 3, .device = dev});
  Array idx = i64({4, 1, 4, 0, 4}, {5}, dev);
  Array g = f32(iota_d(15), {5, 3}, dev);  // rows (0 1 2), (3 4 5), ..., (12 13 14)
  Array out = e.forward(idx);
  Gradients grads = out.backward(g);
  Array dw = e.weight.array().grad(grads);
  // row 4: rows 0, 2, 4 of g; row 1: row 1; row 0: row 3.
  EXPECT_TRUE(same(dw, {9, 10, 11, 3, 4, 5, 0, 0, 0, 0, 0, 0, 18, 21, 24}));
  if (library()) {
    const ExecutionStats before = execution_stats();
    e.weight.array().grad(e.forward(idx).backward(g)).eval();
    synchronize(dev);
    EXPECT_GE(execution_stats().library_calls - before.library_calls, 1);
  }
}

EMBER_OP_SUITE(IndexAddTest);

}  // namespace
}  // namespace ember::testing
