// RMSprop (plain with weight decay; momentum + centered), AdaGrad (lr decay, weight decay,
// initial accumulator) and Lion (decoupled weight decay) against PyTorch trajectories (5 steps of
// the 4-5-3 tanh MLP of optimizer_test.cpp), and the multi-step, exponential, linear, warm
// restarts, one-cycle, Noam and sequential schedules against PyTorch's
// (tools/reference/nn_breadth_reference.py); parameter groups with their own rate and weight
// decay (Adam, against PyTorch's param_groups).
#include <gtest/gtest.h>

#include "nn/nn_test_util.h"
#include "optim/optimizer_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::det;

const std::vector<double>& breadth_ref(const std::string& name) {
  static auto table = ember::testing::read_reference(ember::testing::tests_dir() + "/nn/data/nn_breadth_reference.txt");
  auto it = table.find(name);
  if (it == table.end()) throw std::runtime_error("no reference value " + name);
  return it->second;
}

using ember::testing::mlp_loss;
using ember::testing::reference_mlp;
using ember::testing::run_steps;

template <class Opt, class Options>
void check_trajectory(const std::string& name, Options opts) {
  ember::testing::check_trajectory<Opt>(name, opts, breadth_ref);
}

TEST(OptimizerBreadthTest, RmspropMatchesTorch) {
  check_trajectory<optim::Rmsprop>("rmsprop", optim::RmspropOptions{.lr = 0.01, .alpha = 0.9, .weight_decay = 0.01});
  check_trajectory<optim::Rmsprop>("rmsprop_centered",
                                   optim::RmspropOptions{.lr = 0.01, .momentum = 0.9, .centered = true});
  Sequential m = reference_mlp();
  optim::Rmsprop opt(m, {.momentum = 0.5, .centered = true});
  EXPECT_EQ(opt.state_dict().count("0.weight.grad_avg"), 1u);
  EXPECT_EQ(opt.state_dict().count("0.weight.momentum_buffer"), 1u);
  EXPECT_THROW(optim::Rmsprop(m, {.alpha = 1.0}), Error);
}

TEST(OptimizerBreadthTest, AdagradMatchesTorch) {
  check_trajectory<optim::Adagrad>(
      "adagrad", optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.01, .initial_accumulator_value = 0.1});
  Sequential m = reference_mlp();
  optim::Adagrad opt(m, {.initial_accumulator_value = 0.5});
  EXPECT_EQ(opt.state_dict().at("2.bias.sum").to_vector<double>(), std::vector<double>(3, 0.5));
}

TEST(OptimizerBreadthTest, LionMatchesPaperRule) {
  check_trajectory<optim::Lion>("lion", optim::LionOptions{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1});
  // Every coordinate with a gradient moves by exactly lr (no weight decay).
  Sequential m = reference_mlp();
  optim::Lion opt(m, {.lr = 0.01});
  auto before = m.at<Linear>(2).bias.array().to_vector<double>();
  opt.step(mlp_loss(m).backward());
  auto after = m.at<Linear>(2).bias.array().to_vector<double>();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(std::abs(after[i] - before[i]), 0.01, 1e-15);
  EXPECT_THROW(optim::Lion(m, {.beta2 = 1.0}), Error);
}

TEST(OptimizerBreadthTest, ParameterGroupsMatchTorch) {
  // The first layer with its own rate and weight decay, the second with Adam's defaults.
  Sequential m = reference_mlp();
  std::vector<optim::ParamGroup> groups(2);
  for (auto& np : m.named_parameters()) groups[np.name.starts_with("0.") ? 0 : 1].params.push_back(np);
  groups[0].lr = 0.01;
  groups[0].weight_decay = 0.1;
  optim::Adam opt(groups, {.lr = 0.05});
  EXPECT_EQ(opt.num_groups(), 2u);
  std::vector<double> losses = run_steps(opt, m);
  EXPECT_TRUE(all_close(losses, breadth_ref("opt.groups.losses"), 1e-9, 1e-12));
  for (auto& np : m.named_parameters())
    EXPECT_TRUE(all_close(np.param.array(), breadth_ref("opt.groups." + np.name), 1e-9, 1e-12)) << np.name;
  // State is saved by parameter name, as without groups.
  EXPECT_EQ(opt.state_dict().count("0.weight.exp_avg"), 1u);

  // A group's rate follows the optimizer's (schedulers): SGD moves p by group_lr * grad.
  Sequential s = reference_mlp();
  std::vector<optim::ParamGroup> sg(2);
  for (auto& np : s.named_parameters()) sg[np.name == "2.bias" ? 0 : 1].params.push_back(np);
  sg[0].lr = 0.4;
  optim::Sgd sgd(sg, {.lr = 0.1});
  sgd.set_lr(0.05);  // halves every group's rate: 2.bias moves with 0.2
  Array before = s.at<Linear>(2).bias.array().detach();
  Gradients g = mlp_loss(s).backward();
  Array grad = g.get(s.at<Linear>(2).bias.array());
  sgd.step(g);
  EXPECT_TRUE(all_close(s.at<Linear>(2).bias.array(), sub(before, mul(grad, 0.2)).to_vector<double>(), 1e-12, 1e-15));

  // A parameter in two groups, or two parameters with one name, is an error.
  Sequential t = reference_mlp();
  auto params = t.named_parameters();
  EXPECT_THROW(optim::Sgd(std::vector<optim::ParamGroup>{{.params = params}, {.params = {params[0]}}}, {}), Error);
  std::vector<NamedParam> same_names{{"w", params[0].param}, {"w", params[1].param}};
  EXPECT_THROW(optim::Sgd(std::vector<optim::ParamGroup>{{.params = same_names}}, {}), Error);
  EXPECT_THROW(optim::Sgd(std::vector<optim::ParamGroup>{{.params = params, .lr = -1.0}}, {}), Error);
}

// ---- schedulers ------------------------------------------------------------------------------

std::vector<double> run_schedule(optim::LrScheduler& s, optim::Optimizer& opt, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    s.step();
    out.push_back(opt.lr());
  }
  return out;
}

TEST(SchedulerBreadthTest, MatchTorch) {
  Linear fc({.in = 1, .out = 1});
  optim::Sgd opt(fc, {.lr = 0.1});
  auto curve = [&](auto make, int n) {
    opt.set_lr(0.1);
    auto sched = make();
    return run_schedule(sched, opt, n);
  };
  EXPECT_TRUE(all_close(curve([&] { return optim::MultiStepLr(opt, {.milestones = {2, 5, 7}, .gamma = 0.5}); }, 10),
                        breadth_ref("sched.multistep"), 1e-12, 1e-15));
  EXPECT_TRUE(all_close(curve([&] { return optim::ExponentialLr(opt, {.gamma = 0.9}); }, 10), breadth_ref("sched.exponential"),
                        1e-12, 1e-15));
  EXPECT_TRUE(all_close(curve([&] { return optim::LinearLr(opt, {.start_factor = 0.2, .end_factor = 0.9, .total_iters = 4}); }, 6),
                        breadth_ref("sched.linear"), 1e-12, 1e-15));
  EXPECT_TRUE(all_close(
      curve([&] { return optim::CosineWarmRestartsLr(opt, {.t_0 = 3, .t_mult = 2, .eta_min = 0.01}); }, 16),
      breadth_ref("sched.warm_restarts"), 1e-12, 1e-15));
  EXPECT_TRUE(all_close(curve([&] { return optim::CosineWarmRestartsLr(opt, {.t_0 = 4}); }, 10),
                        breadth_ref("sched.warm_restarts1"), 1e-12, 1e-15));
  EXPECT_TRUE(all_close(
      curve([&] { return optim::OneCycleLr(opt, {.max_lr = 0.5, .total_steps = 12, .pct_start = 0.3}); }, 11),
      breadth_ref("sched.one_cycle"), 1e-12, 1e-15));
  EXPECT_TRUE(all_close(curve([&] {
                          return optim::OneCycleLr(opt, {.max_lr = 0.5, .total_steps = 10, .pct_start = 0.25,
                                                         .cosine = false, .div_factor = 10, .final_div_factor = 100});
                        },
                              9),
                        breadth_ref("sched.one_cycle_linear"), 1e-12, 1e-15));
  EXPECT_TRUE(all_close(curve([&] { return optim::NoamLr(opt, {.d_model = 64, .warmup = 4}); }, 10), breadth_ref("sched.noam"),
                        1e-12, 1e-15));

  // Warmup, then exponential decay: SequentialLR.
  opt.set_lr(0.1);
  auto warm = std::make_shared<optim::LinearLr>(opt, optim::LinearLrOptions{.start_factor = 0.1, .total_iters = 3});
  auto decay = std::make_shared<optim::ExponentialLr>(opt, optim::ExponentialLrOptions{.gamma = 0.8});
  optim::SequentialLr seq(opt, {warm, decay}, {3});
  EXPECT_TRUE(all_close(run_schedule(seq, opt, 8), breadth_ref("sched.sequential"), 1e-12, 1e-15));

  EXPECT_THROW(optim::SequentialLr(opt, {warm, decay}, {}), Error);
  EXPECT_THROW(optim::MultiStepLr(opt, {.milestones = {5, 2}}), Error);
  EXPECT_THROW(optim::OneCycleLr(opt, {.total_steps = 10, .pct_start = 1.5}), Error);
  EXPECT_THROW(optim::CosineWarmRestartsLr(opt, {.t_0 = 0}), Error);
  // One-cycle past its last step stays at the final rate.
  optim::OneCycleLr oc(opt, {.max_lr = 1.0, .total_steps = 4});
  EXPECT_NEAR(oc.lr_at(10), oc.lr_at(3), 1e-15);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// Gradient accumulation over micro-batches: three micro-batches of 2 rows, each loss scaled by
// 2/6 and accumulated with backward_into, then one SGD step (momentum; SGD, unlike Adam, is not
// invariant to the gradient's scale), equal one step on the full batch of 6 rows (mean squared
// error), to rounding.
TEST(OptimizerBreadthTest, MicroBatchAccumulationEqualsTheFullBatch) {
  Array x = det({6, 4}, 0.37, 0.1), y = det({6, 3}, 0.61, 0.5);
  Sequential full = reference_mlp(), micro = reference_mlp();
  optim::Sgd opt_full(full, {.lr = 0.1, .momentum = 0.9}), opt_micro(micro, {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 3; ++step) {
    opt_full.step(mse_loss(full.forward(x), y).backward());
    Gradients acc;
    for (int64_t b = 0; b < 6; b += 2) {
      Array part = mse_loss(micro.forward(slice(x, 0, b, b + 2)), slice(y, 0, b, b + 2));
      mul(part, 2.0 / 6.0).backward_into(acc);
    }
    opt_micro.step(acc);
  }
  auto pf = full.named_parameters(), pm = micro.named_parameters();
  ASSERT_EQ(pf.size(), pm.size());
  for (size_t i = 0; i < pf.size(); ++i) {
    std::vector<double> want = pf[i].param.array().to_vector<double>();
    EXPECT_TRUE(all_close(pm[i].param.array(), want, 1e-12, 1e-13)) << pf[i].name;
    // The step moved the parameters (the comparison is not between untouched copies).
    EXPECT_FALSE(all_close(pm[i].param.array(), reference_mlp().named_parameters()[i].param.array().to_vector<double>(),
                           1e-6, 1e-6))
        << pf[i].name;
  }
}

}  // namespace
}  // namespace ember
