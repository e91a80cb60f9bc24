// Gradient semantics that follow PyTorch: piecewise-constant ops (floor, ceil, round, trunc, sign,
// floor_div) are differentiable with zero gradients, so grad(sum(floor(x) * w), {x}) gives zeros
// instead of failing; ember::grad of an input the output does not depend on raises an error naming
// that input unless allow_unused (an undefined gradient, PyTorch's None) or materialize_grads
// (zeros). The expected values are those torch.autograd.grad gives (torch 2.15).
#include <gtest/gtest.h>

#include <map>

#include "autograd/grad_node.h"
#include "ember/nn/linear.h"
#include "ember/tensor.h"
#include "op_table/op_table.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;
using ember::testing::error_of;

Array leaf(std::vector<double> v) {
  int64_t n = int64_t(v.size());
  return from_vector(v, {n}).require_grad();
}

// Every piecewise-constant op of the table, applied to x (f64, [4]).
const std::map<Op, std::function<Array(const Array&)>>& piecewise_constant_ops() {
  static const std::map<Op, std::function<Array(const Array&)>> ops = {
      {Op::Floor, [](const Array& x) { return floor(x); }},
      {Op::Ceil, [](const Array& x) { return ceil(x); }},
      {Op::Round, [](const Array& x) { return round(x); }},
      {Op::Trunc, [](const Array& x) { return trunc(x); }},
      {Op::Sign, [](const Array& x) { return sign(x); }},
      {Op::FloorDiv, [](const Array& x) { return add(floor_div(x, 0.75), floor_div(3.0, x)); }},
  };
  return ops;
}

TEST(PyTorchGradSemantics, PiecewiseConstantOpsGiveZeroGradients) {
  for (const auto& [op, f] : piecewise_constant_ops()) {
    SCOPED_TRACE(op_name(op));
    Array x = leaf({1.5, -2.5, 0.3, 4});
    Array w = from_vector<double>({1, 2, 3, 4}, {4});  // no gradient of its own
    Array y = f(x);
    EXPECT_TRUE(y.requires_grad());
    std::vector<Array> g = grad(sum(mul(y, w)), {x});
    EXPECT_TRUE(all_close(g[0], {0, 0, 0, 0}, 0, 0));
  }
}

// The zero part joins the rest of the gradient: d/dx sum(floor(x) * x) = floor(x) (+ 0 * x).
TEST(PyTorchGradSemantics, ZeroGradientsAddToOtherPaths) {
  Array x = leaf({1.5, -2.5, 0.3, 4});
  std::vector<Array> g = grad(sum(mul(floor(x), x)), {x});
  EXPECT_TRUE(all_close(g[0], {1, -3, 0, 4}, 0, 0));
  // The typed form, as in the issue: grad(sum(round(x) * w)) with a constant w.
  auto t = Tensor<1>::from_data({0.5, 1.5, -2.7}, {.dtype = DType::F64}).require_grad();
  auto w = Tensor<1>::from_data({1, 2, 3}, {.dtype = DType::F64});
  auto [dt] = grad((round(t) * w).sum(), t);
  EXPECT_TRUE(all_close(dt.array(), {0, 0, 0}, 0, 0));
}

// The table and the test above agree: a new piecewise-constant op must be added there.
TEST(PyTorchGradSemantics, EveryZeroGradientOpIsChecked) {
  int found = 0;
  for (int i = 0; i < int(Op::NumOps); ++i) {
    Op op = Op(i);
    if (!autograd::has_zero_gradient(op)) continue;
    ++found;
    EXPECT_TRUE(autograd::is_differentiable(op)) << op_name(op);
    EXPECT_TRUE(piecewise_constant_ops().count(op)) << "op '" << op_name(op) << "' has a zero gradient but no test";
  }
  EXPECT_EQ(found, int(piecewise_constant_ops().size()));
  EXPECT_FALSE(autograd::has_zero_gradient(Op::Add));
  EXPECT_FALSE(autograd::has_zero_gradient(Op::Rem));
}

TEST(PyTorchGradSemantics, UnusedInputIsAnErrorNamingIt) {
  Array x = leaf({1, 2, 3}), w = leaf({4, 5, 6}), v = leaf({7, 8, 9});
  Array y = sum(mul(x, 2.0));
  std::string msg = error_of([&] { grad(y, {x, w}, {.retain_graph = true}); });
  EXPECT_NE(msg.find("input 1 (shape [3]) is not used"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allow_unused"), std::string::npos) << msg;
  msg = error_of([&] { grad(y, {v, x}, {.retain_graph = true}); });
  EXPECT_NE(msg.find("input 0 "), std::string::npos) << msg;
  // An input reached only through an op without a gradient (a comparison) is unused too.
  Array z = add(sum(cast(gt(w, 4.5), DType::F64)), sum(x));
  msg = error_of([&] { grad(z, {x, w}, {.retain_graph = true}); });
  EXPECT_NE(msg.find("input 1"), std::string::npos) << msg;
  // An input that does not require grad is named too.
  Array plain = from_vector<double>({1, 2, 3}, {3});
  msg = error_of([&] { grad(y, {x, plain}, {.retain_graph = true}); });
  EXPECT_NE(msg.find("input 1 does not require grad"), std::string::npos) << msg;
}

TEST(PyTorchGradSemantics, AllowUnusedGivesUndefinedAndMaterializeGivesZeros) {
  Array x = leaf({1, 2, 3}), w = leaf({4, 5, 6});
  Array y = sum(mul(x, 2.0));
  std::vector<Array> g = grad(y, {x, w}, {.retain_graph = true, .allow_unused = true});
  EXPECT_TRUE(all_close(g[0], {2, 2, 2}, 0, 0));
  EXPECT_FALSE(g[1].defined());
  g = grad(y, {x, w}, {.materialize_grads = true});
  EXPECT_TRUE(all_close(g[0], {2, 2, 2}, 0, 0));
  ASSERT_TRUE(g[1].defined());
  EXPECT_EQ(g[1].shape(), Shape({3}));
  EXPECT_TRUE(all_close(g[1], {0, 0, 0}, 0, 0));
}

// Checkpointing differentiates its function again internally: an input the function ignores
// gets no gradient (and no error).
TEST(PyTorchGradSemantics, CheckpointWithAnIgnoredInput) {
  Array x = leaf({1, 2}), ignored = leaf({3, 4});
  Array h = checkpoint([](const std::vector<Array>& in) { return mul(in[0], in[0]); }, {x, ignored});
  Gradients gs = sum(h).backward();
  EXPECT_TRUE(all_close(x.grad(gs), {2, 4}, 0, 0));
  EXPECT_FALSE(ignored.grad(gs).defined());
}

}  // namespace
}  // namespace ember

// Assigning a parameter keeps identities, as assigning an nn.Parameter does in PyTorch: a leaf
// made with require_grad() becomes the parameter itself (its gradient is the parameter's, and
// the optimizer, keyed on the slot, keeps its state); a value with history is refused instead of
// being detached silently; plain data becomes a fresh leaf.
namespace ember {
namespace {
TEST(PyTorchGradSemantics, ParameterAssignmentKeepsTheCallersLeaf) {
  nn::Linear lin(nn::LinearOptions{.in = 2, .out = 1, .bias = false});
  const nn::Slot* slot = lin.weight.identity();
  Array w = from_vector(std::vector<float>{2, -3}, {1, 2}).require_grad();
  lin.weight.set(w);
  EXPECT_EQ(lin.weight.identity(), slot);
  EXPECT_EQ(lin.weight.array().node(), w.node());
  Array x = from_vector(std::vector<float>{5, 7}, {1, 2});
  Gradients g = sum(lin.forward(x)).backward();
  // d/dw sum(x @ w^T) = x.
  ASSERT_TRUE(w.grad(g).defined());
  EXPECT_EQ(w.grad(g).to_vector<float>(), (std::vector<float>{5, 7}));
  EXPECT_EQ(lin.weight.array().grad(g).to_vector<float>(), (std::vector<float>{5, 7}));

  // History: refused with a message that says what to do.
  std::string e = testing::error_of([&] { lin.weight.set(mul(w, 2.0)); });
  EXPECT_NE(e.find("Param::set"), std::string::npos) << e;
  EXPECT_NE(e.find("detach()"), std::string::npos) << e;
  EXPECT_EQ(lin.weight.array().node(), w.node());  // unchanged after the refusal

  // Plain data: a new leaf of the same slot, which gets gradients.
  lin.weight.set(from_vector(std::vector<float>{1, 1}, {1, 2}));
  EXPECT_EQ(lin.weight.identity(), slot);
  EXPECT_TRUE(lin.weight.array().requires_grad());
  Gradients g2 = sum(lin.forward(x)).backward();
  EXPECT_EQ(lin.weight.array().grad(g2).to_vector<float>(), (std::vector<float>{5, 7}));
  // A detached value with history is fine (the caller chose to cut it).
  lin.weight.set(mul(w, 2.0).detach());
  EXPECT_EQ(lin.weight.array().to_vector<float>(), (std::vector<float>{4, -6}));
}
}  // namespace
}  // namespace ember
