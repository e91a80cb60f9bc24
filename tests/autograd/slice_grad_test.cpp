// Gradients of slices (src/autograd/engine.cpp, merge_pieces): the gradient pieces that step-1
// slices of one tensor send back are merged into one cat with zeros in the gaps (an LSTM's four
// gates chunked from one product), or padded and summed when they overlap or cut different dims.
// Every case against the gradient written out by hand.
#include <gtest/gtest.h>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

// x [3, 8] with x[i][j] = i * 8 + j; returns the gradient of loss(x) as a flat vector.
std::vector<double> grad_of(const std::function<Array(const Array&)>& loss) {
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
  Array x = from_vector(v, {3, 8}).require_grad();
  Gradients g = loss(x).backward();
  return x.grad(g).to_vector<double>();
}

// d/dx of sum over columns c of w(c) * x[:, c] (w = 0 where no slice covers c).
std::vector<double> weights_by_column(const std::vector<double>& w) {
  std::vector<double> out;
  for (int i = 0; i < 3; ++i) out.insert(out.end(), w.begin(), w.end());
  return out;
}

TEST(SliceGradTest, ChunksBecomeOneCat) {
  auto loss = [](const Array& x) {
    std::vector<Array> c = chunk(x, 4, 1);  // four [3, 2] pieces
    return sum(add(add(mul(c[0], 1.0), mul(c[1], 2.0)), add(mul(c[2], 3.0), mul(c[3], 4.0))));
  };
  EXPECT_EQ(grad_of(loss), weights_by_column({1, 1, 2, 2, 3, 3, 4, 4}));
}

TEST(SliceGradTest, GapsAreZeros) {
  auto loss = [](const Array& x) { return add(sum(mul(slice(x, 1, 1, 3), 5.0)), sum(slice(x, 1, 6, 7))); };
  EXPECT_EQ(grad_of(loss), weights_by_column({0, 5, 5, 0, 0, 0, 1, 0}));
}

TEST(SliceGradTest, OverlapsAndOtherDimsAreSummed) {
  auto overlap = [](const Array& x) { return add(sum(slice(x, 1, 0, 3)), sum(mul(slice(x, 1, 2, 5), 2.0))); };
  EXPECT_EQ(grad_of(overlap), weights_by_column({1, 1, 3, 2, 2, 0, 0, 0}));
  auto two_dims = [](const Array& x) { return add(sum(slice(x, 1, 0, 2)), sum(mul(slice(x, 0, 1, 2), 10.0))); };
  std::vector<double> want(24, 0.0);
  for (int i = 0; i < 3; ++i) want[size_t(i * 8)] = want[size_t(i * 8 + 1)] = 1;
  for (int j = 0; j < 8; ++j) want[size_t(8 + j)] += 10;
  EXPECT_EQ(grad_of(two_dims), want);
}

TEST(SliceGradTest, PiecesAddToOtherUsesOfTheInput) {
  auto loss = [](const Array& x) {
    std::vector<Array> c = chunk(x, 2, 1);
    return add(add(sum(mul(c[0], 3.0)), sum(mul(c[1], c[1]))), sum(x));
  };
  std::vector<double> want(24);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 8; ++j) want[size_t(i * 8 + j)] = 1 + (j < 4 ? 3.0 : 2.0 * double(i * 8 + j));
  EXPECT_EQ(grad_of(loss), want);
}

// Second order: the merged gradient (a cat) is itself differentiable.
TEST(SliceGradTest, MergedGradientIsDifferentiable) {
  Array x = from_vector(std::vector<double>{1, 2, 3, 4}, {4}).require_grad();
  std::vector<Array> c = chunk(x, 2, 0);
  Array y = add(sum(mul(mul(c[0], c[0]), c[0])), sum(mul(c[1], c[1])));  // a^3 + b^2
  Gradients g1 = y.backward({.create_graph = true});
  Array dx = x.grad(g1);                           // 3a^2 | 2b
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{3, 12, 6, 8}));
  Gradients g2 = sum(dx).backward();
  EXPECT_EQ(x.grad(g2).to_vector<double>(), (std::vector<double>{6, 12, 2, 2}));  // 6a | 2
}

}  // namespace
}  // namespace ember
