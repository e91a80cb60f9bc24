// Mixed-rank broadcasting in the typed API: every binary elementwise op and comparison takes
// operands of different ranks in either order, with the result rank max(D1, D2) known at compile
// time; typed matmul broadcasts batch dims ([3, 4] x [2, 4, 5] is a Tensor<3>) and follows
// torch.matmul for 1-D operands. Values are written out by hand; static_asserts check the types
// and that mismatched kinds and in-place ops that would grow the rank do not compile.
#include <gtest/gtest.h>

#include <type_traits>

#include "ember/tensor.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

template <class A, class B>
concept Addable = requires(A a, B b) { a + b; };
template <class A, class B>
concept AddAssignable = requires(A a, B b) { a += b; };
template <class A, class B>
concept Matmulable = requires(A a, B b) { a.matmul(b); };

// a [2, 3] = [[0, 1, 2], [3, 4, 5]], b [2, 1, 3]: [[[10, 20, 30]], [[-1, -2, -3]]].
Tensor<2> a23() { return Tensor<2>::from_data({{0, 1, 2}, {3, 4, 5}}); }
Tensor<3> b213() { return Tensor<3>::from_data({{{10, 20, 30}}, {{-1, -2, -3}}}); }

TEST(TypedBroadcastTest, ArithmeticInEitherOrder) {
  auto lo_hi = a23() + b213();
  auto hi_lo = b213() + a23();
  static_assert(std::is_same_v<decltype(lo_hi), Tensor<3>>);
  static_assert(std::is_same_v<decltype(hi_lo), Tensor<3>>);
  ASSERT_EQ(lo_hi.shape(), Shape({2, 2, 3}));
  std::vector<double> sum{10, 21, 32, 13, 24, 35, -1, -1, -1, 2, 2, 2};
  EXPECT_TRUE(all_close(lo_hi.array(), sum, 0, 0));
  EXPECT_TRUE(all_close(hi_lo.array(), sum, 0, 0));
  EXPECT_TRUE(all_close((a23() - b213()).array(), {-10, -19, -28, -7, -16, -25, 1, 3, 5, 4, 6, 8}, 0, 0));
  EXPECT_TRUE(all_close((a23() * b213()).array(), {0, 20, 60, 30, 80, 150, 0, -2, -6, -3, -8, -15}, 0, 0));
  auto q = Tensor<1>::from_data({1, 2, 4}) / b213();  // [3] / [2, 1, 3] -> [2, 1, 3]
  static_assert(std::is_same_v<decltype(q), Tensor<3>>);
  EXPECT_TRUE(all_close(q.array(), {0.1, 0.1, 4.0 / 30, -1, -1, -4.0 / 3}, 1e-6, 0));
  // Rank 0 with rank 2, both orders.
  Tensor<0> s(full({}, 2.0));
  static_assert(std::is_same_v<decltype(s * a23()), Tensor<2>>);
  EXPECT_TRUE(all_close((s * a23()).array(), {0, 2, 4, 6, 8, 10}, 0, 0));
  EXPECT_TRUE(all_close((a23() - s).array(), {-2, -1, 0, 1, 2, 3}, 0, 0));
  // Int kind too.
  auto i = Tensor<1, Int>::from_data({1, 2}) + Tensor<2, Int>::from_data({{10}, {20}});
  static_assert(std::is_same_v<decltype(i), Tensor<2, Int>>);
  EXPECT_EQ(i.to_vector(), (std::vector<int64_t>{11, 12, 21, 22}));
}

TEST(TypedBroadcastTest, NamedBinaryOpsAndComparisons) {
  auto x = Tensor<1>::from_data({1, 2, 3});
  auto y = Tensor<2>::from_data({{2}, {3}});  // [2, 1]
  auto p = x.pow(y);
  static_assert(std::is_same_v<decltype(p), Tensor<2>>);
  EXPECT_TRUE(all_close(p.array(), {1, 4, 9, 1, 8, 27}, 1e-6, 0));
  EXPECT_TRUE(all_close(x.max_pair(y).array(), {2, 2, 3, 3, 3, 3}, 0, 0));
  EXPECT_TRUE(all_close(y.min_pair(x).array(), {1, 2, 2, 1, 2, 3}, 0, 0));
  EXPECT_TRUE(all_close(x.rem(y).array(), {1, 0, 1, 1, 2, 0}, 0, 0));
  EXPECT_TRUE(all_close(y.floor_div(x).array(), {2, 1, 0, 3, 1, 1}, 0, 0));

  auto gt = x.greater(y);
  static_assert(std::is_same_v<decltype(gt), Tensor<2, Bool>>);
  EXPECT_EQ(gt.to_vector(), (std::vector<bool>{false, false, true, false, false, false}));
  EXPECT_EQ(y.equal(x).to_vector(), (std::vector<bool>{false, true, false, false, false, true}));
  EXPECT_EQ(x.lower_equal(y).to_vector(), (std::vector<bool>{true, true, false, true, true, true}));
  EXPECT_EQ(y.not_equal(x).to_vector(), (std::vector<bool>{true, false, true, true, true, false}));

  auto m = Tensor<1, Bool>::from_data({true, false});
  auto n = Tensor<2, Bool>::from_data({{true}, {false}});
  static_assert(std::is_same_v<decltype(m.logical_and(n)), Tensor<2, Bool>>);
  EXPECT_EQ(m.logical_and(n).to_vector(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(n.logical_xor(m).to_vector(), (std::vector<bool>{false, true, true, false}));
  auto bits = Tensor<1, Int>::from_data({1, 2}).bitwise_or(Tensor<2, Int>::from_data({{4}, {8}}));
  EXPECT_EQ(bits.to_vector(), (std::vector<int64_t>{5, 6, 9, 10}));

  // where: a [2, 1] condition with [3] and scalar-shaped [1, 1] branches.
  auto w = where(Tensor<2, Bool>::from_data({{true}, {false}}), x, Tensor<2>::from_data({{-1}}));
  static_assert(std::is_same_v<decltype(w), Tensor<2>>);
  EXPECT_TRUE(all_close(w.array(), {1, 2, 3, -1, -1, -1}, 0, 0));
}

TEST(TypedBroadcastTest, InPlaceOpsTakeLowerRanks) {
  Tensor<3> t = b213();
  t += Tensor<1>::from_data({1, 1, 1});
  t *= Tensor<3>::full({1, 1, 1}, 2.0);
  EXPECT_TRUE(all_close(t.array(), {22, 42, 62, 0, -2, -4}, 0, 0));
  static_assert(AddAssignable<Tensor<3>&, Tensor<2>>);
  static_assert(!AddAssignable<Tensor<2>&, Tensor<3>>);  // would change the rank of the left side
}

TEST(TypedBroadcastTest, MatmulBroadcastsBatchDims) {
  // a [3, 4] = arange(12) / 1, b [2, 4, 5]: b[k] = (k + 1) * ones; result[k][i][j] = (k + 1) * rowsum(a, i).
  Tensor<2> a(reshape(arange(0, 12, 1, DType::F32), {3, 4}));
  Tensor<3> b(stack({ones({4, 5}), full({4, 5}, 2.0)}, 0));
  auto c = a.matmul(b);
  static_assert(std::is_same_v<decltype(c), Tensor<3>>);
  ASSERT_EQ(c.shape(), Shape({2, 3, 5}));
  std::vector<double> want;
  for (int k = 0; k < 2; ++k)
    for (double rowsum : {6.0, 22.0, 38.0})
      for (int j = 0; j < 5; ++j) want.push_back((k + 1) * rowsum);
  EXPECT_TRUE(all_close(c.array(), want, 0, 0));
  auto c2 = matmul(b.transpose(), Tensor<2>(ones({4, 2})));  // [2, 5, 4] x [4, 2]: rank 3
  static_assert(std::is_same_v<decltype(c2), Tensor<3>>);
  EXPECT_EQ(c2.shape(), Shape({2, 5, 2}));

  // 1-D operands as torch.matmul.
  auto v = Tensor<1>::from_data({1, 0, 0, 1});
  static_assert(std::is_same_v<decltype(a.matmul(v)), Tensor<1>>);
  EXPECT_TRUE(all_close(a.matmul(v).array(), {3, 11, 19}, 0, 0));
  static_assert(std::is_same_v<decltype(v.matmul(b)), Tensor<2>>);  // [4] x [2, 4, 5] -> [2, 5]
  EXPECT_EQ(v.matmul(b).shape(), Shape({2, 5}));
  static_assert(std::is_same_v<decltype(v.matmul(v)), Tensor<0>>);
  EXPECT_EQ(v.matmul(v).item(), 2.0f);
  static_assert(!Matmulable<Tensor<2>, Tensor<0>>);
  static_assert(!Matmulable<Tensor<2, Bool>, Tensor<2, Bool>>);
}

TEST(TypedBroadcastTest, KindsMustAgree) {
  static_assert(Addable<Tensor<2>, Tensor<3>>);
  static_assert(Addable<Tensor<3>, Tensor<2>>);
  static_assert(!Addable<Tensor<2>, Tensor<3, Int>>);
  static_assert(!Addable<Tensor<2, Bool>, Tensor<3, Bool>>);
  // Shapes are still checked at run time, naming both.
  std::string e = ember::testing::error_of([] { (void)(Tensor<2>::ones({2, 3}) + Tensor<3>::ones({1, 2, 4})); });
  EXPECT_NE(e.find("[2, 3]"), std::string::npos) << e;
  EXPECT_NE(e.find("[1, 2, 4]"), std::string::npos) << e;
}

}  // namespace
}  // namespace ember
