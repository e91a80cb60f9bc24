// Shape arithmetic that cannot overflow silently (src/core/shape.cpp, check_extent in every node
// made by src/graph/node.cpp): zeros({2^62, 4}) was accepted with numel 0 and
// expand(ones[1, 1], [2^62, 4]) summed to 0; a zero dim beside huge ones overflowed the strides.
#include <gtest/gtest.h>

#include <functional>
#include <string>

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

}  // namespace
}  // namespace ember
