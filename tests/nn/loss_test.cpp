// Losses against PyTorch (tools/reference/nn_reference.py, float64): cross-entropy with class
// indices and probabilities, class weights, ignore index, label smoothing, spatial targets and
// every reduction; NLL; MSE, L1, smooth L1, Huber; BCE and BCE with logits (weights, pos_weight).
#include <gtest/gtest.h>

#include "nn/nn_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::det;
using ember::testing::expected;
using ember::testing::weighted_sum;

void check(const std::string& name, const std::function<Array(const Array&)>& loss, const Array& input) {
  SCOPED_TRACE(name);
  Array x = input.require_grad();
  Array y = loss(x);
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, expected(name + ".y"), 1e-8, 1e-10));
  EXPECT_TRUE(all_close(x.grad(g), expected(name + ".d0"), 1e-8, 1e-10));
}

Array logits() { return mul(det({5, 4}, 0.83, 0.2), 2.0); }
Array target() { return from_vector<int64_t>({0, 3, 1, 1, 2}, {5}); }
Array class_weight() { return from_vector<double>({0.5, 1.0, 2.0, 1.5}, {4}); }

TEST(LossTest, CrossEntropyClassIndices) {
  auto ce = [](CrossEntropyOptions o) { return [o](const Array& z) { return cross_entropy(z, target(), o); }; };
  check("ce.plain", ce({}), logits());
  check("ce.weight", ce({.weight = class_weight()}), logits());
  check("ce.ignore", ce({.ignore_index = 1}), logits());
  check("ce.smooth", ce({.label_smoothing = 0.2}), logits());
  check("ce.all", ce({.weight = class_weight(), .ignore_index = 1, .label_smoothing = 0.3}), logits());
  check("ce.sum", ce({.weight = class_weight(), .label_smoothing = 0.1, .reduction = Reduction::Sum}), logits());
  check("ce.none",
        ce({.weight = class_weight(), .ignore_index = 3, .label_smoothing = 0.1, .reduction = Reduction::None}),
        logits());
  Array t3 = from_vector<int64_t>({0, 3, 1, 2, 2, 0}, {2, 3});
  check("ce.spatial", [&](const Array& z) { return cross_entropy(z, t3, {.weight = class_weight(), .label_smoothing = 0.1}); },
        mul(det({2, 4, 3}, 0.57, 0.1), 2.0));
}

TEST(LossTest, CrossEntropyProbabilities) {
  Array probs = softmax(mul(det({5, 4}, 0.37, 0.9), 3.0), 1);
  check("ce.probs", [&](const Array& z) { return cross_entropy(z, probs, {.label_smoothing = 0.1}); }, logits());
  check("ce.probs_weight",
        [&](const Array& z) { return cross_entropy(z, probs, {.weight = class_weight(), .reduction = Reduction::Sum}); },
        logits());
}

TEST(LossTest, NllLoss) {
  check("nll.weight",
        [](const Array& z) { return nll_loss(log_softmax(z, 1), target(), {.weight = class_weight(), .ignore_index = 2}); },
        logits());
}

// A class index outside [0, C) is an error naming the value and C, raised at the read, at
// backward and for every reduction; the ignore index still counts as nothing (before, the one-hot
// mask gave such a sample a loss of 0 and a zero gradient row, silently).
TEST(LossTest, OutOfRangeClassIndexIsAnError) {
  const Array z = from_vector<double>({1, 2, 3, 0.5, -1, 2}, {2, 3});
  for (int64_t bad : {7, -1, 200, 3}) {
    SCOPED_TRACE(bad);
    const Array t = from_vector<int64_t>({1, bad}, {2});
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      try {
        (void)sum(cross_entropy(z, t, {.reduction = r})).item<double>();
        ADD_FAILURE() << "cross_entropy accepted class " << bad << " of 3";
      } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("index out of range (" + std::to_string(bad) + " for a dimension of size 3)"), std::string::npos)
            << m;
        EXPECT_NE(m.find("loss_test.cpp"), std::string::npos) << "names the caller's line: " << m;
        EXPECT_NE(m.find("cross_entropy: gather"), std::string::npos) << "names the loss: " << m;
      }
    }
    EXPECT_THROW((void)nll_loss(log_softmax(z, 1), t).item<double>(), Error);
    Array x = z.require_grad();
    EXPECT_THROW((void)x.grad(cross_entropy(x, t).backward()).to_vector<double>(), Error);
  }
  // The ignore index (even one outside [0, C)) is not an error and contributes nothing:
  // mean over the one valid sample = logsumexp(1, 2, 3) - 2.
  const double want = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 2.0;
  const Array t = from_vector<int64_t>({1, -100}, {2});
  EXPECT_NEAR(cross_entropy(z, t).item<double>(), want, 1e-12);
  EXPECT_NEAR(cross_entropy(z, from_vector<int64_t>({1, 7}, {2}), {.ignore_index = 7}).item<double>(), want, 1e-12);
}

TEST(LossTest, TypedCrossEntropy) {
  Tensor<2> z(cast(logits(), DType::F32));
  Tensor<1, Int> t(target());
  Tensor<1> loss = cross_entropy(z, t);
  EXPECT_EQ(loss.shape(), (Shape{1}));
  EXPECT_NEAR(loss.item(), expected("ce.plain.y")[0], 1e-5);
}

TEST(LossTest, Regression) {
  Array a = mul(det({3, 5}, 0.71, 0.2), 2.0);
  Array b = mul(det({3, 5}, 0.37, 0.8), 2.0);
  check("mse.mean", [&](const Array& x) { return mse_loss(x, b); }, a);
  check("mse.sum", [&](const Array& x) { return mse_loss(x, b, Reduction::Sum); }, a);
  check("l1.mean", [&](const Array& x) { return l1_loss(x, b); }, a);
  check("smooth_l1", [&](const Array& x) { return smooth_l1_loss(x, b, 0.5); }, a);
  check("huber", [&](const Array& x) { return huber_loss(x, b, 0.7, Reduction::None); }, a);
}

TEST(LossTest, BinaryCrossEntropy) {
  Array a = mul(det({3, 5}, 0.71, 0.2), 2.0);
  Array y = cast(gt(det({3, 5}, 0.53, 0.1), 0.0), DType::F64);
  Array w = add(abs(det({3, 5}, 0.31, 0.2)), 0.5);
  Array pos = from_vector<double>({0.5, 1.0, 2.0, 3.0, 1.5}, {5});
  check("bce", [&](const Array& p) { return binary_cross_entropy(p, y, {.weight = w}); }, sigmoid(a).detach());
  check("bce_logits", [&](const Array& z) { return binary_cross_entropy_with_logits(z, y, {.pos_weight = pos}); }, a);
  check("bce_logits_none",
        [&](const Array& z) { return binary_cross_entropy_with_logits(z, y, {.reduction = Reduction::None}); }, a);
}

TEST(LossTest, ClearErrors) {
  EXPECT_THROW(cross_entropy(logits(), from_vector<int64_t>({0, 1}, {2})), Error);
  EXPECT_THROW(cross_entropy(logits(), target(), {.weight = ones({3}, {.dtype = DType::F64})}), Error);
  EXPECT_THROW(cross_entropy(logits(), target(), {.label_smoothing = 2}), Error);
  EXPECT_THROW(mse_loss(ones({2}), ones({3})), Error);
  EXPECT_THROW(huber_loss(ones({2}), ones({2}), 0.0), Error);
}

}  // namespace
}  // namespace ember
