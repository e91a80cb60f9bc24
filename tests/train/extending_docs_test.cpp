// The examples of docs/extending.md (a custom module, a custom op with its backward, a custom
// optimizer, a custom dataset, a custom metric), run with their values checked. Each ```cpp block
// of the page is copied here line for line (ExtendingDocsTest.PageExamplesAreTheseTests checks
// that), so the page cannot drift from code that compiles.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "docs_snippets.h"
#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

// ---- a custom module ---------------------------------------------------------------------------

// y = x + gate * fc2(relu(fc1(x))): a residual block whose branch starts switched off.
struct GatedResidual : nn::Module {
  nn::Linear fc1, fc2;
  nn::Param<1> gate;  // one learnable number
  EMBER_MODULE(fc1, fc2, gate)

  explicit GatedResidual(int64_t features)
      : fc1({.in = features, .out = 4 * features}),
        fc2({.in = 4 * features, .out = features}),
        gate(Tensor<1>::zeros({1})) {}

  Tensor<2> forward(const Tensor<2>& x) { return x + *gate * fc2(relu(fc1(x))); }
};

TEST(ExtendingDocsTest, CustomModule) {
  GatedResidual block(3);
  auto x = Tensor<2>::randn({2, 3}, {.seed = 5});
  Tensor<2> y = block(x);  // the call operator from EMBER_MODULE: block.forward(x)
  for (const auto& [name, param] : block.named_parameters())
    std::cout << name << " " << param.array().shape() << "\n";  // fc1.weight [12, 3] ... gate [1]
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());  // the gate starts at zero
  std::vector<std::string> names;
  for (const auto& p : block.named_parameters()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "gate"}));
  EXPECT_EQ(block.num_params(), 3 * 12 + 12 + 12 * 3 + 3 + 1);
  // The gate gets a gradient: the branch's output summed.
  auto [dgate] = grad(block(x).sum(), *block.gate);
  Tensor<2> branch = block.fc2(relu(block.fc1(x)));
  EXPECT_NEAR(dgate.item<double>(), branch.sum().item<double>(), 1e-5);
}

// ---- a custom op with its backward ---------------------------------------------------------------

// round(x) forward, the identity backward: the straight-through estimator that lets
// quantization-aware training pass gradients through a rounding step.
template <int D>
Tensor<D> round_straight_through(const Tensor<D>& x) {
  static const CustomFunction fn{
      .forward = [](const std::vector<Array>& in) { return round(in[0]); },
      .backward = [](const std::vector<Array>& /*in*/, const Array& /*out*/, const Array& grad_out)
          -> std::vector<Array> { return {grad_out}; },
      .name = "round_straight_through"};
  return Tensor<D>(apply(fn, {x.array()}));
}

TEST(ExtendingDocsTest, CustomOpWithBackward) {
  auto x = Tensor<1>::from_data({0.2, 1.7, -2.6}, {.dtype = DType::F64}).require_grad();
  Tensor<1> q = round_straight_through(x);  // [0, 2, -3]
  auto [dx] = grad((q * q).sum(), x);       // 2 q, as if q were x: [0, 4, -6]
  EXPECT_TRUE(all_close(q.array(), {0, 2, -3}, 0, 0));
  EXPECT_TRUE(all_close(dx.array(), {0, 4, -6}, 0, 1e-12));
  // Plain round passes a zero gradient (as in PyTorch): the estimator is what lets a rounding
  // step train.
  auto [dr] = grad((x.round() * x).sum(), x);  // d/dx (round(x) x) = round(x) + 0
  EXPECT_TRUE(all_close(dr.array(), {0, 2, -3}, 0, 0));
  EXPECT_TRUE(q.requires_grad());
}

// ---- a custom optimizer ---------------------------------------------------------------------------

// signSGD: p -= lr * sign(g). No state; the rate goes through step_scalar so that one compiled
// update serves every step whatever a scheduler sets.
class SignSgd : public optim::Optimizer {
 public:
  SignSgd(nn::Module& model, double lr) : Optimizer(model, lr, /*clip=*/{}) {}
  std::string type_name() const override { return "SignSgd"; }

 protected:
  std::vector<std::string> state_names() const override { return {}; }
  Array update(Group& group, const Array& p, const Array& g, int64_t /*step*/) override {
    return sub(p, mul(sign(g), step_scalar(group_lr(group), p)));
  }
};

struct Weights : nn::Module {
  nn::Param<1> w{Tensor<1>::from_data({1.0f, 2.0f, 3.0f})};
  EMBER_MODULE(w)
};

TEST(ExtendingDocsTest, CustomOptimizer) {
  Weights model;
  SignSgd opt(model, 0.1);
  auto c = Tensor<1>::from_data({1.0f, -2.0f, 0.0f});
  Tensor<1> loss = (*model.w * c).sum();  // gradient c: signs +, -, 0
  opt.step(loss.backward());              // w = [0.9, 2.1, 3.0]
  EXPECT_TRUE(all_close(model.w.value().array(), {0.9, 2.1, 3.0}, 0, 1e-6));
  opt.set_lr(0.5);  // what a scheduler does
  opt.step((*model.w * c).sum().backward());
  EXPECT_TRUE(all_close(model.w.value().array(), {0.4, 2.6, 3.0}, 0, 1e-6));
  EXPECT_EQ(opt.steps(), 2);
}

// ---- a custom dataset ---------------------------------------------------------------------------

// Points of the line y = 2 x + 1, made on demand. get() must be safe to call from several
// threads at once: the loader's workers share the dataset.
class LineDataset : public data::Dataset<data::Row> {
 public:
  explicit LineDataset(size_t n) : n_(n) {}
  size_t size() const override { return n_; }
  data::Row get(size_t i) const override {
    check_index(i, "LineDataset");  // an ember::Error past the end
    float x = float(i) / float(n_);
    return {.features = {x}, .targets = {2 * x + 1}};
  }

 private:
  size_t n_;
};

TEST(ExtendingDocsTest, CustomDataset) {
  auto points = std::make_shared<LineDataset>(8);
  data::DataLoader loader(points, {.batch_size = 4, .workers = 2});
  for (auto& [x, y] : loader) std::cout << x.shape() << " " << y.shape() << "\n";  // [4, 1] [4, 1]
  std::vector<float> xs, ys;
  for (auto& [x, y] : loader) {
    EXPECT_EQ(x.shape(), (Shape{4, 1}));
    for (float v : x.to_vector<float>()) xs.push_back(v);
    for (float v : y.to_vector<float>()) ys.push_back(v);
  }
  ASSERT_EQ(xs.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(xs[i], float(i) / 8);
    EXPECT_FLOAT_EQ(ys[i], 2 * float(i) / 8 + 1);
  }
  // The combinators of ember/data/dataset.h take it like any other.
  auto [train_part, valid_part] = data::split(points, 0.75, /*seed=*/1);
  EXPECT_EQ(train_part->size(), 6u);
  EXPECT_EQ(valid_part->size(), 2u);
  EXPECT_NE(ember::testing::error_of([&] { points->get(8); }).find("LineDataset: index 8 out of range"),
            std::string::npos);
}

// ---- a custom metric ------------------------------------------------------------------------------

// The mean absolute error over a phase; the Learner logs it as "train_mae" and "valid_mae".
struct MeanAbsError : train::Metric {
  double total = 0, count = 0;
  std::string name() const override { return "mae"; }
  bool higher_is_better() const override { return false; }
  void reset() override { total = count = 0; }
  void update(const train::StepData& s) override {
    total += sum(abs(sub(s.output, s.targets))).item<double>();
    count += double(s.output.numel());
  }
  double value() const override { return count > 0 ? total / count : 0; }
  train::MetricPtr clone() const override { return std::make_shared<MeanAbsError>(); }
};

struct LineModel : nn::Module {
  nn::Linear fc{{.in = 1, .out = 1, .seed = 3}};
  EMBER_MODULE(fc)
  Tensor<2> forward(const Tensor<2>& x) { return fc(x); }
};

TEST(ExtendingDocsTest, CustomMetric) {
  auto points = std::make_shared<LineDataset>(64);
  data::DataLoader train_loader(points, {.batch_size = 16, .shuffle = true});
  data::DataLoader valid_loader(points, {.batch_size = 64});
  LineModel model;
  optim::Sgd opt(model, {.lr = 0.2});
  std::ostringstream dashboard;
  train::Report report = train::Learner(model, opt)
                             .loss([](const Array& out, const Array& y) { return nn::mse_loss(out, y); })
                             .metrics({std::make_shared<MeanAbsError>()})
                             .dashboard(train::DashboardMode::Plain, dashboard)
                             .epochs(20)
                             .fit(train_loader, valid_loader);
  double mae = report.last("valid_mae");  // the last epoch's value
  // The metric's number is the mean |model(x) - y| over the validation set, computed here again.
  std::vector<float> xv(64), yv(64);
  for (size_t i = 0; i < 64; ++i) {
    data::Row r = points->get(i);
    xv[i] = r.features[0];
    yv[i] = r.targets[0];
  }
  std::vector<float> pred = no_grad([&] { return model(Tensor<2>(from_vector(xv, {64, 1}))); }).to_vector<float>();
  double want = 0;
  for (size_t i = 0; i < 64; ++i) want += std::fabs(double(pred[i]) - double(yv[i]));
  EXPECT_NEAR(mae, want / 64, 1e-5);
  EXPECT_LT(mae, 0.1);  // the line is learned
  EXPECT_GT(report.last("train_mae", -1), 0);
  EXPECT_NE(dashboard.str().find("mae"), std::string::npos);
}

TEST(ExtendingDocsTest, PageExamplesAreTheseTests) {
  std::string root = std::string(EMBER_TEST_SOURCE_DIR) + "/..";
  std::vector<std::string> missing =
      ember::testing::snippets_missing_from(root + "/docs/extending.md", root + "/tests/train/extending_docs_test.cpp");
  EXPECT_TRUE(missing.empty()) << "docs/extending.md blocks not in this file, first lines: "
                               << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace ember
