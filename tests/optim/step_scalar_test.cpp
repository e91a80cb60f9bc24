// Optimizers read their per-step factors (Adam's bias corrections, a scheduled learning rate) from
// one-element device arrays (Optimizer::step_scalar, KIR LOAD_UNIFORM) instead of baking them into
// the update kernel: after the first steps a training loop creates no new programs (before, every
// step built, and on the CPU rendered and compiled, a new kernel). The values are unchanged: the
// PyTorch trajectories of optimizer_test.cpp and optimizer_breadth_test.cpp still hold.
#include <gtest/gtest.h>

#include "ember/debug.h"
#include "ember/optim/adadelta.h"
#include "ember/optim/adam.h"
#include "ember/optim/adam_family.h"
#include "ember/optim/lbfgs.h"
#include "ember/optim/lr_scheduler.h"
#include "ember/optim/sgd.h"
#include "optim/optimizer_test_util.h"

namespace ember::testing {
namespace {

// Programs created by the updates of steps 3..8 of `opt` (an optional scheduler steps after
// each). The loss and gradients are realized first: how much of the backward graph is already
// computed when a realization starts depends on timing (the device queue runs asynchronously), so
// their kernels are not part of this count.
template <class Opt>
int64_t programs_after_warm_up(Opt& opt, nn::Sequential& m, optim::LrScheduler* sched = nullptr) {
  int64_t created = 0;
  for (int step = 0; step < 8; ++step) {
    Gradients g = mlp_loss(m).backward();
    for (auto& np : m.named_parameters()) g.get(np.param.array()).eval();
    synchronize(Device::cpu());
    const int64_t before = execution_stats().programs_created;
    opt.step(g);
    for (auto& np : m.named_parameters()) np.param.array().eval();
    synchronize(Device::cpu());
    if (step >= 2) created += execution_stats().programs_created - before;
    if (sched) sched->step();
  }
  return created;
}

TEST(StepScalarTest, TrainingStepsCreateNoProgramsAfterWarmUp) {
  {
    nn::Sequential m = reference_mlp();
    optim::Adam opt(m, {.lr = 0.01});
    EXPECT_EQ(programs_after_warm_up(opt, m), 0) << "Adam";
  }
  {
    nn::Sequential m = reference_mlp();
    optim::AdamW opt(m, {.lr = 0.01, .weight_decay = 0.1});
    optim::StepLr sched(opt, {.step_size = 1, .gamma = 0.5});
    EXPECT_EQ(programs_after_warm_up(opt, m, &sched), 0) << "AdamW with a learning rate halved every step";
  }
  {
    nn::Sequential m = reference_mlp();
    optim::Sgd opt(m, {.lr = 0.1, .momentum = 0.9});
    optim::StepLr sched(opt, {.step_size = 1, .gamma = 0.9});
    EXPECT_EQ(programs_after_warm_up(opt, m, &sched), 0) << "SGD with a scheduled learning rate";
  }
}

// The same for the optimizers of adadelta.h and adam_family.h. RAdam with its default betas
// switches from momentum steps to rectified steps at step 6, inside the counted steps: the switch
// is a device scalar too, so it builds no program.
TEST(StepScalarTest, AdamVariantsAndAdadeltaCreateNoProgramsAfterWarmUp) {
  {
    nn::Sequential m = reference_mlp();
    optim::Radam opt(m, {.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true});
    optim::StepLr sched(opt, {.step_size = 1, .gamma = 0.9});
    EXPECT_EQ(programs_after_warm_up(opt, m, &sched), 0) << "RAdam";
  }
  {
    nn::Sequential m = reference_mlp();
    optim::Nadam opt(m, {.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true});
    optim::StepLr sched(opt, {.step_size = 1, .gamma = 0.9});
    EXPECT_EQ(programs_after_warm_up(opt, m, &sched), 0) << "NAdam";
  }
  {
    nn::Sequential m = reference_mlp();
    optim::Adamax opt(m, {.lr = 0.01});
    EXPECT_EQ(programs_after_warm_up(opt, m), 0) << "Adamax";
  }
  {
    nn::Sequential m = reference_mlp();
    optim::Adadelta opt(m, {.weight_decay = 0.01});
    optim::StepLr sched(opt, {.step_size = 1, .gamma = 0.9});
    EXPECT_EQ(programs_after_warm_up(opt, m, &sched), 0) << "Adadelta";
  }
}

// L-BFGS's step sizes and two-loop coefficients change every iteration; they are device scalars
// too, so once its history is full (3 pairs after the first step's 4 iterations) a step, closure
// evaluations included, builds no program. Strong Wolfe tries new step sizes the same way.
TEST(StepScalarTest, LbfgsCreatesNoProgramsAfterWarmUp) {
  for (optim::LineSearch search : {optim::LineSearch::None, optim::LineSearch::StrongWolfe}) {
    nn::Sequential m = reference_mlp();
    optim::Lbfgs opt(m, {.lr = 0.5, .max_iter = 4, .history_size = 3, .line_search = search});
    int64_t created = 0;
    for (int step = 0; step < 5; ++step) {
      synchronize(Device::cpu());
      const int64_t before = execution_stats().programs_created;
      opt.step([&] { return mlp_loss(m); });
      synchronize(Device::cpu());
      if (step >= 2) created += execution_stats().programs_created - before;
    }
    EXPECT_EQ(created, 0) << (search == optim::LineSearch::None ? "no line search" : "strong Wolfe");
  }
}

// The factor really is read at run time: an Adam step after the learning rate changes moves the
// parameters by the new rate (the first Adam step moves each parameter by lr * sign(g) up to eps).
TEST(StepScalarTest, ChangedLearningRateTakesEffect) {
  nn::Sequential a = reference_mlp(), b = reference_mlp();
  optim::Adam oa(a, {.lr = 0.01}), ob(b, {.lr = 0.01});
  ob.set_lr(0.03);
  Array wa0 = a.at<nn::Linear>(0).weight.array(), wb0 = b.at<nn::Linear>(0).weight.array();
  oa.step(mlp_loss(a).backward());
  ob.step(mlp_loss(b).backward());
  std::vector<double> da = sub(a.at<nn::Linear>(0).weight.array(), wa0).to_vector<double>();
  std::vector<double> db = sub(b.at<nn::Linear>(0).weight.array(), wb0).to_vector<double>();
  ASSERT_EQ(da.size(), db.size());
  for (size_t i = 0; i < da.size(); ++i) {
    EXPECT_NEAR(std::fabs(da[i]), 0.01, 1e-6) << i;
    EXPECT_NEAR(db[i], 3.0 * da[i], 1e-12) << i;
  }
}

}  // namespace
}  // namespace ember::testing
