// Adadelta, Adamax, NAdam and RAdam against PyTorch 2.x trajectories of the 4-5-3 tanh MLP of
// optimizer_test.cpp (tools/reference/optim_reference.py writes tests/optim/data/
// optim_reference.txt): weight decay, maximize, NAdam's and RAdam's decoupled weight decay,
// parameter groups, RAdam past its rectification threshold. Also: option validation (the error
// names the optimizer and the value), and a run saved and resumed in fresh objects continuing
// the uninterrupted run bit for bit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ember/optim/adadelta.h"
#include "ember/optim/adam_family.h"
#include "optim/optimizer_test_util.h"
#include "test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::error_of;
using ember::testing::mlp_loss;
using ember::testing::reference_mlp;
using ember::testing::run_steps;

const std::vector<double>& optim_ref(const std::string& name) {
  static auto table = ember::testing::read_reference(ember::testing::tests_dir() + "/optim/data/optim_reference.txt");
  auto it = table.find(name);
  if (it == table.end()) throw std::runtime_error("no reference value " + name);
  return it->second;
}

template <class Opt, class Options>
void check_trajectory(const std::string& name, Options opts, int steps = 5) {
  ember::testing::check_trajectory<Opt>(name, opts, optim_ref, steps);
}

// The MLP's parameters in two groups: the first layer with its own rate and weight decay (as
// optim_reference.py's groups()).
std::vector<optim::ParamGroup> two_groups(Sequential& m) {
  std::vector<optim::ParamGroup> groups(2);
  for (auto& np : m.named_parameters()) groups[np.name.starts_with("0.") ? 0 : 1].params.push_back(np);
  groups[0].lr = 0.01;
  groups[0].weight_decay = 0.2;
  return groups;
}

TEST(OptimizerVariantsTest, AdadeltaMatchesTorch) {
  EXPECT_EQ(optim::AdadeltaOptions{}.lr, 1.0);  // PyTorch's default: the paper's rule
  check_trajectory<optim::Adadelta>("adadelta", optim::AdadeltaOptions{.weight_decay = 0.01});
  check_trajectory<optim::Adadelta>("adadelta_max",
                                    optim::AdadeltaOptions{.lr = 0.5, .rho = 0.95, .eps = 1e-4, .maximize = true});
  Sequential m = reference_mlp();
  optim::Adadelta opt(m);
  EXPECT_EQ(opt.state_dict().count("0.weight.square_avg"), 1u);
  EXPECT_EQ(opt.state_dict().count("0.weight.acc_delta"), 1u);
}

TEST(OptimizerVariantsTest, AdamaxMatchesTorch) {
  check_trajectory<optim::Adamax>("adamax",
                                  optim::AdamaxOptions{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.01});
  Sequential m = reference_mlp();
  optim::Adamax opt(m);
  EXPECT_EQ(opt.state_dict().count("2.bias.exp_inf"), 1u);
}

TEST(OptimizerVariantsTest, NadamMatchesTorch) {
  check_trajectory<optim::Nadam>("nadam", optim::NadamOptions{.lr = 0.05, .weight_decay = 0.01});
  check_trajectory<optim::Nadam>("nadam_decoupled",
                                 optim::NadamOptions{.lr = 0.05, .beta1 = 0.85, .beta2 = 0.99, .weight_decay = 0.1,
                                                     .momentum_decay = 0.01, .decoupled_weight_decay = true});
  // Parameter groups: the decoupled decay uses each group's own rate and weight decay.
  Sequential m = reference_mlp();
  optim::Nadam opt(two_groups(m), {.lr = 0.05, .decoupled_weight_decay = true});
  std::vector<double> losses = run_steps(opt, m);
  EXPECT_TRUE(all_close(losses, optim_ref("opt.nadam_groups.losses"), 1e-9, 1e-12));
  for (auto& np : m.named_parameters())
    EXPECT_TRUE(all_close(np.param.array(), optim_ref("opt.nadam_groups." + np.name), 1e-9, 1e-12)) << np.name;
}

TEST(OptimizerVariantsTest, RadamMatchesTorch) {
  // 8 steps: with beta2 = 0.9 (0.95) the variance is rectified from step 6 on.
  check_trajectory<optim::Radam>(
      "radam", optim::RadamOptions{.lr = 0.05, .beta1 = 0.9, .beta2 = 0.9, .weight_decay = 0.01}, 8);
  check_trajectory<optim::Radam>("radam_decoupled",
                                 optim::RadamOptions{.lr = 0.05, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = 0.1,
                                                     .decoupled_weight_decay = true},
                                 8);
  // The first step is a momentum step with a bias-corrected average: exactly p -= lr g.
  Sequential m = reference_mlp();
  optim::Radam opt(m, {.lr = 0.1});
  Array before = m.at<Linear>(2).bias.array().detach();
  Gradients g = mlp_loss(m).backward();
  Array grad = g.get(m.at<Linear>(2).bias.array());
  opt.step(g);
  EXPECT_TRUE(all_close(m.at<Linear>(2).bias.array(), sub(before, mul(grad, 0.1)).to_vector<double>(), 1e-12, 1e-15));
}

// A bad option is refused at construction with the optimizer's name and the value.
TEST(OptimizerVariantsTest, OptionsAreValidated) {
  Sequential m = reference_mlp();
  auto expect_error = [](const std::function<void()>& make, const std::string& want) {
    std::string msg = error_of(make);
    EXPECT_NE(msg.find(want), std::string::npos) << "message: " << msg << "\nwanted: " << want;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { optim::Adadelta(m, {.rho = 1.5}); }, "Adadelta: rho must be in [0, 1], got 1.5");
  expect_error([&] { optim::Adadelta(m, {.rho = -0.1}); }, "Adadelta: rho must be in [0, 1], got -0.1");
  expect_error([&] { optim::Adadelta(m, {.lr = -1}); }, "Adadelta: learning rate must be >= 0, got -1");
  expect_error([&] { optim::Adadelta(m, {.eps = -1e-6}); }, "Adadelta: eps must be >= 0, got -1e-06");
  expect_error([&] { optim::Adadelta(m, {.weight_decay = -0.5}); }, "Adadelta: weight_decay must be >= 0, got -0.5");
  expect_error([&] { optim::Adamax(m, {.beta1 = 1.0}); }, "Adamax: betas must be in [0, 1), got (1, 0.999)");
  expect_error([&] { optim::Adamax(m, {.lr = nan}); }, "Adamax: learning rate must be >= 0, got nan");
  expect_error([&] { optim::Nadam(m, {.beta2 = 1.2}); }, "NAdam: betas must be in [0, 1), got (0.9, 1.2)");
  expect_error([&] { optim::Nadam(m, {.momentum_decay = -0.1}); }, "NAdam: momentum_decay must be >= 0, got -0.1");
  expect_error([&] { optim::Radam(m, {.beta1 = -0.5}); }, "RAdam: betas must be in [0, 1), got (-0.5, 0.999)");
  expect_error([&] { optim::Radam(m, {.lr = -0.01}); }, "RAdam: learning rate must be >= 0, got -0.01");
  // The refused optimizer did not touch the model: a valid one still trains it as usual.
  optim::Radam ok(m, {.lr = 0.1});
  EXPECT_EQ(ok.num_groups(), 1u);
}

// Three steps, save model and optimizer, four more (RAdam crosses its rectification threshold
// at step 6 with its default betas); a fresh model and optimizer loaded from the files take the
// same four steps with the same losses and end with the same parameters, bit for bit.
template <class Opt, class Options>
void check_resume(const std::string& name, Options opts) {
  SCOPED_TRACE(name);
  const std::string dir = ::testing::TempDir();
  const std::string model_path = dir + "/variants_" + name + ".model.safetensors";
  const std::string opt_path = dir + "/variants_" + name + ".optim.safetensors";
  Sequential a = reference_mlp();
  Opt opt_a(a, opts);
  run_steps(opt_a, a, 3);
  save(a, model_path);
  save(opt_a, opt_path);
  std::vector<double> want = run_steps(opt_a, a, 4);

  Sequential b = reference_mlp();
  Opt opt_b(b, opts);
  load(b, model_path);
  load(opt_b, opt_path);
  EXPECT_EQ(opt_b.steps(), 3);
  EXPECT_EQ(run_steps(opt_b, b, 4), want);
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].param.array().to_vector<double>(), pb[i].param.array().to_vector<double>()) << pa[i].name;
}

TEST(OptimizerVariantsTest, StateDictRoundTripContinuesTheRun) {
  check_resume<optim::Adadelta>("adadelta", optim::AdadeltaOptions{.weight_decay = 0.01});
  check_resume<optim::Adamax>("adamax", optim::AdamaxOptions{.lr = 0.05});
  check_resume<optim::Nadam>("nadam", optim::NadamOptions{.lr = 0.05, .weight_decay = 0.1, .decoupled_weight_decay = true});
  check_resume<optim::Radam>("radam", optim::RadamOptions{.lr = 0.05});
  // Another optimizer's state is refused, naming this one.
  Sequential m = reference_mlp();
  optim::Adamax adamax(m);
  optim::Nadam nadam(m);
  std::string msg = error_of([&] { nadam.load_state_dict(adamax.state_dict()); });
  EXPECT_NE(msg.find("NAdam::load_state_dict"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unexpected key: 0.weight.exp_inf"), std::string::npos) << msg;
}

// The extension point of docs/training.md § Writing an optimizer, as written there: heavy-ball
// momentum follows SGD with momentum (no dampening: SGD's first step sets its buffer to g, and
// the zero-initialized velocity gives 0.9 * 0 + g = g), and its state saves by parameter name.
class HeavyBall : public optim::Optimizer {
 public:
  HeavyBall(nn::Module& model, double lr, double momentum)
      : Optimizer(model, lr, /*clip=*/{}), momentum_(momentum) {
    if (!(momentum >= 0 && momentum < 1)) throw Error(fmt::format("HeavyBall: momentum must be in [0, 1), got {}", momentum));
  }
  std::string type_name() const override { return "HeavyBall"; }

 protected:
  std::vector<std::string> state_names() const override { return {"velocity"}; }
  Array update(Group& group, const Array& p, const Array& g, int64_t /*step*/) override {
    Array& v = group.state.at("velocity");
    v = add(mul(v, momentum_), g);
    return sub(p, mul(v, step_scalar(group_lr(group), p)));
  }

 private:
  double momentum_;
};

TEST(OptimizerVariantsTest, CustomOptimizerSubclass) {
  Sequential a = reference_mlp(), b = reference_mlp();
  HeavyBall heavy(a, 0.1, 0.9);
  optim::Sgd sgd(b, {.lr = 0.1, .momentum = 0.9});
  std::vector<double> la = run_steps(heavy, a), lb = run_steps(sgd, b);
  EXPECT_TRUE(all_close(la, lb, 1e-14, 1e-15));
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(all_close(pa[i].param.array(), pb[i].param.array().to_vector<double>(), 1e-14, 1e-15)) << pa[i].name;
  EXPECT_EQ(heavy.state_dict().count("2.weight.velocity"), 1u);
  EXPECT_EQ(heavy.steps(), 5);
  EXPECT_NE(error_of([&] { HeavyBall(a, 0.1, 1.0); }).find("HeavyBall: momentum must be in [0, 1), got 1"),
            std::string::npos);
}

}  // namespace
}  // namespace ember
