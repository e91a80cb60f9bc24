// Shape arithmetic that cannot overflow silently (src/core/shape.cpp, check_extent in every node
// made by src/ops/make_array.cpp): zeros({2^62, 4}) was accepted with numel 0 and
// expand(ones[1, 1], [2^62, 4]) summed to 0; a zero dim beside huge ones overflowed the strides.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ember/ember.h"

namespace ember {
namespace {

constexpr int64_t kHuge = int64_t(1) << 62;

void expect_refused(const std::function<Array()>& make, const std::string& want, bool names_line = true) {
  try {
    Array a = make();
    ADD_FAILURE() << "accepted a shape of " << a.shape().str();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    if (names_line) {
      EXPECT_NE(std::string(e.what()).find("shape_test.cpp"), std::string::npos) << "names the line: " << e.what();
    }
  }
}

TEST(ShapeTest, ElementCountsThatOverflowAreErrors) {
  EXPECT_THROW((void)Shape({kHuge, 4}).numel(), Error);
  EXPECT_THROW((void)Shape({0, kHuge, kHuge}).contiguous_strides(), Error);
  EXPECT_EQ(Shape({0, kHuge}).numel(), 0);
  EXPECT_EQ(Shape({3, 4, 5}).numel(), 60);
  EXPECT_EQ(Shape({3, 4, 5}).contiguous_strides(), (std::vector<int64_t>{20, 5, 1}));
  expect_refused([] { return zeros({kHuge, 4}); }, "too many elements");
  expect_refused([] { return expand(ones({1, 1}), {kHuge, 4}); }, "too many elements");
  expect_refused([] { return zeros({0, kHuge, kHuge}); }, "too many elements");
  expect_refused([] { return zeros({kHuge / 2, 2}, {.dtype = DType::F64}); }, "more than 2^63 bytes");
  expect_refused([] { return reshape(ones({4}), {kHuge, 4}); }, "overflows 64 bits", false);
  // Large but countable shapes are fine while nothing is computed; an empty one computes.
  EXPECT_EQ(zeros({0, kHuge}).shape().numel(), 0);
  EXPECT_EQ(sum(zeros({0, 7})).item<double>(), 0.0);
}

// Dims are stored inline up to kMaxRank and on the heap above it (internal shapes may be longer):
// copies, moves and assignments between the two kinds keep every dim, and equality, iteration,
// broadcasting and strides read the same values.
TEST(ShapeTest, InlineAndHeapDimsCopyMoveAndCompare) {
  std::vector<int64_t> long_dims;
  for (int i = 0; i < kMaxRank + 3; ++i) long_dims.push_back(i + 2);
  const Shape small{2, 3, 4};
  const Shape big(long_dims);
  ASSERT_EQ(big.rank(), kMaxRank + 3);
  EXPECT_EQ(big.dims(), long_dims);
  EXPECT_EQ(std::vector<int64_t>(big.begin(), big.end()), long_dims);
  EXPECT_EQ(small.dims(), (std::vector<int64_t>{2, 3, 4}));

  Shape a = big;  // heap copy
  EXPECT_EQ(a, big);
  a[kMaxRank + 2] = 99;  // the copy owns its dims
  EXPECT_EQ(big[kMaxRank + 2], kMaxRank + 4);
  EXPECT_FALSE(a == big);
  a = small;  // heap -> inline
  EXPECT_EQ(a, small);
  EXPECT_EQ(a.rank(), 3);
  a = big;  // inline -> heap
  EXPECT_EQ(a, big);
  Shape moved = std::move(a);  // steals the heap dims
  EXPECT_EQ(moved, big);
  Shape b{7};
  b = std::move(moved);
  EXPECT_EQ(b, big);
  Shape c = small;
  c = Shape{5, 6};  // inline move
  EXPECT_EQ(c, (Shape{5, 6}));
  const Shape& alias = c;
  c = alias;  // self-assignment keeps the dims
  EXPECT_EQ(c, (Shape{5, 6}));
  EXPECT_FALSE(Shape({2, 3}) == Shape({2, 3, 1})) << "equal prefixes of other ranks differ";
  EXPECT_EQ(Shape{}, Shape(std::vector<int64_t>{}));

  // Values computed here independently: strides are suffix products, numel the product.
  std::vector<int64_t> strides(long_dims.size());
  int64_t acc = 1, numel = 1;
  for (size_t i = long_dims.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= long_dims[i];
  }
  for (int64_t d : long_dims) numel *= d;
  EXPECT_EQ(big.contiguous_strides(), strides);
  EXPECT_EQ(big.numel(), numel);

  // Broadcasting a long shape against a short one and against itself.
  std::vector<int64_t> ones_then_4(long_dims.size(), 1);
  ones_then_4.back() = long_dims.back();
  EXPECT_EQ(broadcast_shapes(big, Shape{long_dims.back()}, "test"), big);
  EXPECT_EQ(broadcast_shapes(Shape(ones_then_4), big, "test"), big);
  EXPECT_EQ(broadcast_shapes(Shape{3, 1}, Shape{1, 4}, "test"), (Shape{3, 4}));
  EXPECT_THROW((void)broadcast_shapes(Shape{3}, Shape{4}, "test"), Error);
}

}  // namespace
}  // namespace ember
