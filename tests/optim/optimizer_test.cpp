// Optimizers against PyTorch's trajectories (5 steps of a 4-5-3 tanh MLP, float64, from
// tools/reference/nn_reference.py): SGD (plain, momentum + dampening + weight decay, Nesterov),
// Adam (weight decay, amsgrad), AdamW, clipping by global norm; the flat arena; frozen and unused
// parameters; state save/load; schedulers.
#include <gtest/gtest.h>

#include "ember/debug.h"
#include "nn/nn_test_util.h"
#include "optim/optimizer_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::det;
using ember::testing::expected;

using ember::testing::mlp_loss;
using ember::testing::reference_mlp;

template <class Opt, class Options>
void check_trajectory(const std::string& name, Options opts) {
  ember::testing::check_trajectory<Opt>(name, opts, expected);
}

TEST(OptimizerTest, SgdMatchesTorch) {
  check_trajectory<optim::Sgd>("sgd", optim::SgdOptions{.lr = 0.1});
  check_trajectory<optim::Sgd>("sgd_momentum",
                               optim::SgdOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  check_trajectory<optim::Sgd>("sgd_nesterov",
                               optim::SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  check_trajectory<optim::Sgd>("sgd_clip", optim::SgdOptions{.lr = 0.5, .clip = {.max_norm = 0.05}});
}

TEST(OptimizerTest, AdamMatchesTorch) {
  check_trajectory<optim::Adam>("adam", optim::AdamOptions{.lr = 0.05, .weight_decay = 0.01});
  check_trajectory<optim::Adam>("adam_amsgrad", optim::AdamOptions{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.9, .amsgrad = true});
  check_trajectory<optim::AdamW>("adamw", optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1});
}

TEST(OptimizerTest, ParametersAreViewsOfOneArena) {
  Sequential m = reference_mlp();
  optim::Adam opt(m, {.lr = 0.01});
  EXPECT_EQ(opt.num_groups(), 1u);
  EXPECT_EQ(opt.arena(0).numel(), m.num_params());
  // The first parameter's values are the arena's first elements.
  auto arena = opt.arena(0).to_vector<double>();
  auto w = m.at<Linear>(0).weight.array().to_vector<double>();
  EXPECT_TRUE(std::equal(w.begin(), w.end(), arena.begin()));
  // Mixed dtypes: one arena per dtype.
  Linear a({.in = 2, .out = 2}), b({.in = 2, .out = 2, .dtype = DType::F64});
  std::vector<NamedParam> params = a.named_parameters();
  for (auto& np : b.named_parameters()) params.push_back({"b." + np.name, np.param});
  optim::Sgd sgd(params, {.lr = 0.1});
  EXPECT_EQ(sgd.num_groups(), 2u);
}

TEST(OptimizerTest, FrozenAndUnusedParametersKeepTheirValues) {
  Sequential m = reference_mlp();
  optim::Adam opt(m, {.lr = 0.1});
  m.at<Linear>(0).freeze();
  auto w0 = m.at<Linear>(0).weight.array().to_vector<double>();
  auto w2 = m.at<Linear>(2).weight.array().to_vector<double>();
  for (int i = 0; i < 2; ++i) opt.step(mlp_loss(m).backward());
  EXPECT_EQ(m.at<Linear>(0).weight.array().to_vector<double>(), w0);
  EXPECT_NE(m.at<Linear>(2).weight.array().to_vector<double>(), w2);
  EXPECT_FALSE(m.at<Linear>(0).weight.array().requires_grad());
  EXPECT_TRUE(m.at<Linear>(2).weight.array().requires_grad());
  // A parameter replaced from outside (load_state_dict) is picked up by the next step.
  m.at<Linear>(0).unfreeze();
  m.at<Linear>(0).bias.set(zeros({5}, {.dtype = DType::F64}));
  opt.step(mlp_loss(m).backward());
  EXPECT_NE(m.at<Linear>(0).bias.array().to_vector<double>(), std::vector<double>(5, 0.0));
}

TEST(OptimizerTest, StateSavesAndLoads) {
  // Train 2 steps, save model + optimizer, train 3 more; reload into fresh objects and train the
  // same 3 steps: identical parameters.
  Sequential a = reference_mlp();
  optim::Adam opt_a(a, {.lr = 0.05});
  for (int i = 0; i < 2; ++i) opt_a.step(mlp_loss(a).backward());
  std::string dir = ::testing::TempDir();
  save(a, dir + "/opt_model.safetensors");
  save(opt_a, dir + "/opt_state.safetensors");
  for (int i = 0; i < 3; ++i) opt_a.step(mlp_loss(a).backward());

  Sequential b = reference_mlp();
  optim::Adam opt_b(b, {.lr = 0.05});
  load(b, dir + "/opt_model.safetensors");
  load(opt_b, dir + "/opt_state.safetensors");
  EXPECT_EQ(opt_b.steps(), 2);
  for (int i = 0; i < 3; ++i) opt_b.step(mlp_loss(b).backward());
  for (size_t i : {size_t(0), size_t(2)})
    EXPECT_EQ(a.at<Linear>(i).weight.array().to_vector<double>(), b.at<Linear>(i).weight.array().to_vector<double>());

  optim::Sgd sgd(b, {.lr = 0.1, .momentum = 0.9});
  EXPECT_THROW(load(sgd, dir + "/opt_state.safetensors"), Error);  // Adam state into SGD
  nn::StateDict s = opt_b.state_dict();
  s.erase("0.weight.exp_avg");
  EXPECT_THROW(opt_b.load_state_dict(s), Error);
}

TEST(OptimizerTest, ClipFunctions) {
  Array w = from_vector<double>({3, 4}, {2}).require_grad();
  ParamRef p = make_param(w);
  Gradients g = sum(mul(p.array(), p.array())).backward();  // grad 2w = (6, 8), norm 10
  Array norm = optim::clip_grad_norm(g, {p}, 5.0);
  EXPECT_NEAR(norm.item<double>(), 10.0, 1e-12);
  EXPECT_TRUE(all_close(g.get(p.array()), {3, 4}, 1e-6));
  optim::clip_grad_value(g, {p}, 3.5);
  EXPECT_TRUE(all_close(g.get(p.array()), {3, 3.5}, 1e-6));
}

TEST(OptimizerTest, UpdateIsAFewKernelsForTheWholeModel) {
  // The update runs over the flat arena: its kernel count does not grow with the number of
  // parameters. Gathering the gradients into one flat tensor costs at most one copy each.
  auto step_kernels = [](int layers) {
    Sequential m;
    for (int i = 0; i < layers; ++i) m.push_back(Linear({.in = 8, .out = 8, .seed = uint64_t(i)}));
    optim::Adam opt(m, {.lr = 0.01});
    Gradients g = sum(m.forward(ones({2, 8}))).backward();
    eval(g.arrays());
    synchronize();
    reset_execution_stats();
    opt.step(g);
    synchronize();
    return execution_stats().kernels;
  };
  int64_t small = step_kernels(1), large = step_kernels(10);  // 2 vs 20 parameters
  RecordProperty("kernels_2_params", std::to_string(small));
  RecordProperty("kernels_20_params", std::to_string(large));
  std::cout << "optimizer step kernels: " << small << " (2 parameters), " << large << " (20 parameters)\n";
  // 18 more parameters cost at most two copies each (a transposed gradient is made contiguous,
  // then copied into the flat tensor); the update itself does not grow.
  EXPECT_LE(large - small, 2 * 18);
  if (fusion_enabled()) {
    EXPECT_LE(small, 2 + 4);  // fused: the whole Adam update is a few kernels
  }
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

TEST(SchedulerTest, MatchTorch) {
  Linear fc({.in = 1, .out = 1});
  optim::Sgd opt(fc, {.lr = 0.1});
  optim::StepLr step(opt, {.step_size = 3, .gamma = 0.5});
  EXPECT_TRUE(all_close(run_schedule(step, opt, 10), expected("sched.step"), 1e-12, 1e-15));
  opt.set_lr(0.1);
  optim::CosineAnnealingLr cosine(opt, {.t_max = 10, .eta_min = 0.01});
  EXPECT_TRUE(all_close(run_schedule(cosine, opt, 10), expected("sched.cosine"), 1e-9, 1e-12));
  opt.set_lr(0.1);
  optim::WarmupDecayLr warm(opt, {.warmup = 3, .total = 10, .start_factor = 0, .final_factor = 0.1});
  EXPECT_TRUE(all_close(run_schedule(warm, opt, 12), expected("sched.warmup_cosine"), 1e-12, 1e-15));
  opt.set_lr(0.1);
  optim::ConstantLr constant(opt);
  EXPECT_EQ(run_schedule(constant, opt, 3), (std::vector<double>{0.1, 0.1, 0.1}));
  optim::WarmupDecayLr linear(opt, {.warmup = 2, .total = 4, .start_factor = 0.5, .cosine = false});
  EXPECT_TRUE(all_close(run_schedule(linear, opt, 5), {0.075, 0.1, 0.05, 0.0, 0.0}, 1e-12, 1e-15));
  EXPECT_THROW(optim::StepLr(opt, {.step_size = 0}), Error);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// An error in the forward pass (an index out of range in an embedding or gather) surfaces at the
// optimizer step, naming the op, and the parameters keep their values; training goes on after
// it. Before, backward's scatter dropped the bad index silently and the step moved the weights.
// On every device: on an asynchronous one (Vulkan, the test device of ctest's
// backend.async_device) the gather's error is known only once the device has run it.
class OptimizerFailureTest : public ::testing::TestWithParam<Device> {};

TEST_P(OptimizerFailureTest, FailedForwardLeavesParametersUnchanged) {
  const Device d = GetParam();
  nn::Embedding emb({.num = 4, .dim = 3, .device = d});
  optim::Adam opt(emb, {.lr = 0.1});
  const std::vector<float> before = emb.weight.value().to_vector<float>();
  Array loss = sum(emb.forward(from_vector<int64_t>({1, 9}, {2}, d)));
  Gradients g = loss.backward();
  try {
    opt.step(g);
    ADD_FAILURE() << "the step succeeded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of range (9 for a dimension of size 4)"), std::string::npos) << m;
    EXPECT_NE(m.find("parameters are unchanged"), std::string::npos) << m;
  }
  EXPECT_EQ(emb.weight.value().to_vector<float>(), before);
  // A good step afterwards moves exactly the rows it touches: Adam's first step is lr * sign(g).
  opt.step(sum(emb.forward(from_vector<int64_t>({1, 2}, {2}, d))).backward());
  const std::vector<float> after = emb.weight.value().to_vector<float>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) {
      const size_t i = size_t(r * 3 + c);
      const float want = (r == 1 || r == 2) ? before[i] - 0.1f : before[i];
      EXPECT_NEAR(after[i], want, 1e-6) << "row " << r;
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, OptimizerFailureTest, ::testing::ValuesIn(ember::testing::test_devices()),
                         ember::testing::device_test_name);

}  // namespace
}  // namespace ember
