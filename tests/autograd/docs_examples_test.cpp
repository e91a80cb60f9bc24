// The examples of docs/autograd.md, run with their values checked. Each ```cpp block of the page
// is copied here line for line (AutogradDocsTest.PageExamplesAreTheseTests checks that), so the
// page cannot drift from code that compiles and computes what it says.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "docs_snippets.h"
#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;
using ember::testing::error_of;

TEST(AutogradDocsTest, BackwardAndLeafGradients) {
  auto w = Tensor<1>::from_data({1.0, 2.0, 3.0}, {.dtype = DType::F64}).require_grad();
  auto x = Tensor<1>::from_data({0.5, -1.0, 2.0}, {.dtype = DType::F64});  // data: no gradient
  Tensor<1> loss = (w * w * x).sum();   // one element
  Gradients grads = loss.backward();    // the gradients of every leaf the loss depends on
  Tensor<1> dw = w.grad(grads);         // 2 w x = [1, -4, 12]
  EXPECT_TRUE(all_close(dw.array(), {1, -4, 12}, 0, 1e-12));
  EXPECT_FALSE(x.requires_grad());
}

TEST(AutogradDocsTest, GradOfChosenInputs) {
  auto w = Tensor<1>::from_data({1.0, 2.0, 3.0}, {.dtype = DType::F64}).require_grad();
  auto x = Tensor<1>::from_data({0.5, -1.0, 2.0}, {.dtype = DType::F64}).require_grad();
  Tensor<1> loss = (w * w * x).sum();
  auto [dw, dx] = grad(loss, w, x);     // torch.autograd.grad: a tuple, each with its input's rank
  // dw = 2 w x = [1, -4, 12], dx = w^2 = [1, 4, 9]
  EXPECT_TRUE(all_close(dw.array(), {1, -4, 12}, 0, 1e-12));
  EXPECT_TRUE(all_close(dx.array(), {1, 4, 9}, 0, 1e-12));
}

TEST(AutogradDocsTest, VectorJacobianProduct) {
  Array x = from_vector<double>({1, 2, 3}, {3}).require_grad();
  Array y = mul(x, x);                                      // not one element
  Gradients g = y.backward(from_vector<double>({1, 0, 2}, {3}));  // weights dL/dy
  Array dx = x.grad(g);                                     // 2 x dL/dy = [2, 0, 12]
  EXPECT_TRUE(all_close(dx, {2, 0, 12}, 0, 1e-12));
}

TEST(AutogradDocsTest, RetainGraphAndAccumulation) {
  auto x = Tensor<1>::from_data({1.0, 2.0}, {.dtype = DType::F64}).require_grad();
  Tensor<1> y = x.exp().sum();
  Gradients first = y.backward({.retain_graph = true});  // keeps what backward needs
  Gradients second = y.backward();                      // same gradients; the graph is released
  // y.backward() again throws ember::Error (the message says to pass retain_graph)
  EXPECT_TRUE(all_close(x.grad(second).array(), {std::exp(1.0), std::exp(2.0)}, 1e-12));
  EXPECT_EQ(x.grad(first).to_vector<double>(), x.grad(second).to_vector<double>());
  EXPECT_NE(error_of([&] { y.backward(); }).find("retain_graph"), std::string::npos);

  Gradients total;                                 // sums several passes (micro-batches)
  (x * x).sum().array().backward_into(total);      // 2 x
  (x * 3.0).sum().array().backward_into(total);    // + 3: x.grad(total) is [5, 7]
  EXPECT_TRUE(all_close(x.grad(total).array(), {5, 7}, 0, 1e-12));
}

TEST(AutogradDocsTest, HigherOrderGradients) {
  auto x = Tensor<1>::from_data({-1.5, 0.3, 2.0}, {.dtype = DType::F64}).require_grad();
  Tensor<1> y = (x * x * x).sum();                             // f = x^3
  auto [dx] = grad(y, std::tuple{x}, {.create_graph = true});  // 3 x^2, itself differentiable
  auto [ddx] = grad(dx.sum(), x);                              // 6 x
  EXPECT_TRUE(all_close(dx.array(), {6.75, 0.27, 12.0}, 1e-12));
  EXPECT_TRUE(all_close(ddx.array(), {-9.0, 1.8, 12.0}, 1e-12));
}

TEST(AutogradDocsTest, GradientPenalty) {
  auto w = Tensor<1>::from_data({0.7, -1.2}, {.dtype = DType::F64}).require_grad();
  auto x = Tensor<1>::from_data({0.4, 0.9}, {.dtype = DType::F64}).require_grad();
  Tensor<1> out = (w * x).tanh().sum();
  auto [dout_dx] = grad(out, std::tuple{x}, {.create_graph = true});  // w (1 - tanh^2(w x))
  Tensor<1> penalty = (dout_dx * dout_dx).sum();  // a loss that contains a gradient
  Gradients g = penalty.backward();               // reaches w through dout_dx
  Tensor<1> dpenalty_dw = w.grad(g);
  // By hand: d = w (1 - t^2) with t = tanh(w x); dd/dw = (1 - t^2) - 2 w t (1 - t^2) x.
  std::vector<double> want;
  for (auto [wv, xv] : {std::pair{0.7, 0.4}, std::pair{-1.2, 0.9}}) {
    double t = std::tanh(wv * xv), d = wv * (1 - t * t);
    want.push_back(2 * d * ((1 - t * t) - 2 * wv * t * (1 - t * t) * xv));
  }
  EXPECT_TRUE(all_close(dpenalty_dw.array(), want, 1e-10, 1e-12));
}

TEST(AutogradDocsTest, GradMode) {
  auto w = Tensor<1>::from_data({1.0, 2.0}).require_grad();
  Tensor<1> y;
  {
    NoGradGuard no_grad_here;  // torch.no_grad(): nothing is recorded in this thread
    y = w * 2.0;               // y.requires_grad() is false
  }
  Tensor<1> z = no_grad([&] { return w * 2.0; });  // the same for one expression
  Tensor<1> frozen = w.detach();                   // the same values, no history
  set_grad_enabled(false);                         // torch.set_grad_enabled(False) ...
  set_grad_enabled(true);                          // ... and back on
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(z.requires_grad());
  EXPECT_FALSE(frozen.requires_grad());
  EXPECT_TRUE(grad_enabled());
  EXPECT_TRUE((w * 2.0).requires_grad());
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{2, 4}));
}

TEST(AutogradDocsTest, CustomFunction) {
  // y = x^3 with its derivative written by hand: backward gets the inputs, the output and dL/dy
  // and returns dL/dx for each input (an undefined Array for an input without one).
  CustomFunction cube{
      .forward = [](const std::vector<Array>& in) { return mul(mul(in[0], in[0]), in[0]); },
      .backward = [](const std::vector<Array>& in, const Array& /*out*/, const Array& grad_out) -> std::vector<Array> {
        return {mul(mul(mul(in[0], in[0]), 3.0), grad_out)};
      },
      .name = "cube"};
  auto x = Tensor<1>::from_data({1.0, -2.0}, {.dtype = DType::F64}).require_grad();
  Tensor<1> y(apply(cube, {x.array()}));  // [1, -8]
  auto [dx] = grad(y.sum(), x);           // 3 x^2 = [3, 12]
  EXPECT_TRUE(all_close(y.array(), {1, -8}, 0, 1e-12));
  EXPECT_TRUE(all_close(dx.array(), {3, 12}, 0, 1e-12));
  // A backward with the wrong number of gradients is an error naming the function.
  CustomFunction wrong = cube;
  wrong.backward = [](const std::vector<Array>&, const Array&, const Array&) { return std::vector<Array>{}; };
  EXPECT_NE(error_of([&] { grad(Tensor<1>(apply(wrong, {x.array()})).sum(), x); })
                .find("cube: backward returned 0 gradients for 1 inputs"),
            std::string::npos);
}

TEST(AutogradDocsTest, Checkpoint) {
  // The block's intermediates are not kept for backward; backward runs it again.
  auto block = [](const std::vector<Array>& in) {
    Array h = in[0];
    for (int i = 0; i < 4; ++i) h = tanh(mul(h, in[1]));
    return h;
  };
  auto x = Tensor<2>::randn({8, 4}, {.seed = 1}).require_grad();
  auto w = Tensor<1>::from_data({0.5f, 1.0f, 1.5f, -0.5f}).require_grad();
  Tensor<2> h(checkpoint(block, {x.array(), w.array()}));
  Gradients g = h.sum().backward();  // as without checkpoint, with less memory held in between
  Gradients plain = Tensor<2>(block({x.array(), w.array()})).sum().backward();
  EXPECT_EQ(x.grad(g).to_vector<float>(), x.grad(plain).to_vector<float>());
  EXPECT_EQ(w.grad(g).to_vector<float>(), w.grad(plain).to_vector<float>());
  EXPECT_NE(w.grad(g).to_vector<float>(), std::vector<float>(4, 0.0f));
}

TEST(AutogradDocsTest, PageExamplesAreTheseTests) {
  std::string root = std::string(EMBER_TEST_SOURCE_DIR) + "/..";
  std::vector<std::string> missing =
      ember::testing::snippets_missing_from(root + "/docs/autograd.md", root + "/tests/autograd/docs_examples_test.cpp");
  EXPECT_TRUE(missing.empty()) << "docs/autograd.md blocks not in this file, first lines: "
                               << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace ember
