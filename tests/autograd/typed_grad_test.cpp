// The typed ember::grad: gradients of a Tensor output with respect to typed inputs, each with its
// input's rank. Values by hand: loss = sum(x^2 * w) gives dloss/dx = 2 x w and dloss/dw = x^2 (w
// broadcast over x's rows, so its gradient sums them); second derivatives through create_graph;
// grad_output weighting; an input the output does not depend on (an error, or with allow_unused
// an undefined gradient, with materialize_grads zeros).
#include <gtest/gtest.h>

#include <tuple>
#include <type_traits>

#include "ember/tensor.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

// x [2, 2] = [[1, 2], [3, 4]], w [2] = [0.5, -1].
Tensor<2> x_leaf() { return Tensor<2>::from_data({{1, 2}, {3, 4}}, {.dtype = DType::F64}).require_grad(); }
Tensor<1> w_leaf() { return Tensor<1>::from_data({0.5, -1}, {.dtype = DType::F64}).require_grad(); }

TEST(TypedGradTest, GradientsHaveTheInputsRanks) {
  Tensor<2> x = x_leaf();
  Tensor<1> w = w_leaf();
  Tensor<1> loss = (x * x * w).sum();
  auto grads = grad(loss, x, w);
  static_assert(std::is_same_v<decltype(grads), std::tuple<Tensor<2>, Tensor<1>>>);
  auto [dx, dw] = grads;
  EXPECT_TRUE(all_close(dx.array(), {1, -4, 3, -8}, 0, 1e-12));  // 2 x w
  EXPECT_TRUE(all_close(dw.array(), {10, 20}, 0, 1e-12));        // column sums of x^2
  // One input: still a tuple, as torch.autograd.grad (a fresh graph: the first pass consumed its own).
  auto [only_w] = grad((x * x * w).sum(), w);
  EXPECT_TRUE(all_close(only_w.array(), {10, 20}, 0, 1e-12));
}

TEST(TypedGradTest, OptionsGradOutputAndSecondDerivatives) {
  Tensor<2> x = x_leaf();
  Tensor<1> w = w_leaf();
  Tensor<2> y = x * x * w;  // not one element: weighted by grad_output
  Tensor<2> dy = Tensor<2>::from_data({{1, 0}, {0, 2}}, {.dtype = DType::F64});
  auto [dx] = grad(y, std::tuple{x}, {.create_graph = true}, dy);
  EXPECT_TRUE(all_close(dx.array(), {1, 0, 0, -16}, 0, 1e-12));  // 2 x w dy
  // d/dx sum(2 x w dy) = 2 w dy; d/dw = sum over rows of 2 x dy.
  auto [ddx, ddw] = grad(dx.sum(), std::tie(x, w));
  EXPECT_TRUE(all_close(ddx.array(), {1, 0, 0, -4}, 0, 1e-12));
  EXPECT_TRUE(all_close(ddw.array(), {2, 16}, 0, 1e-12));
}

TEST(TypedGradTest, IntermediateAndUnreachedInputs) {
  Tensor<2> x = x_leaf();
  Tensor<1> w = w_leaf();
  Tensor<2> h = x * 3.0;          // an intermediate result
  Tensor<1> loss = (h * h).sum();  // dloss/dh = 2 h = 6 x
  // loss does not depend on w: an error naming input 1, as torch.autograd.grad.
  try {
    grad(loss, std::tie(h, w), {.retain_graph = true});
    ADD_FAILURE() << "grad of an unused input did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 1 (shape [2]) is not used"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allow_unused"), std::string::npos) << e.what();
  }
  auto [dh, dw] = grad(loss, std::tie(h, w), {.retain_graph = true, .allow_unused = true});
  EXPECT_TRUE(all_close(dh.array(), {6, 12, 18, 24}, 0, 1e-12));
  EXPECT_FALSE(dw.defined());  // PyTorch's None
  auto [dh2, dw2] = grad(loss, std::tie(h, w), {.materialize_grads = true});
  EXPECT_TRUE(all_close(dh2.array(), {6, 12, 18, 24}, 0, 1e-12));
  EXPECT_TRUE(all_close(dw2.array(), {0, 0}, 0, 0));  // zeros of w's shape
}

}  // namespace
}  // namespace ember
