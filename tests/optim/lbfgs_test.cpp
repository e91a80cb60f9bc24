// L-BFGS (ember/optim/lbfgs.h) against PyTorch 2.x (tools/reference/optim_reference.py): without
// line search the iterations retrace torch.optim.LBFGS's (a truncated history carried across
// step() calls; the defaults); with the strong Wolfe line search (Ember's own, so the path
// differs) it reaches the least-squares solution as PyTorch's does. Also the state dict round
// trip, option checks and the closure's contract.
#include <gtest/gtest.h>

#include "ember/optim/lbfgs.h"
#include "optim/optimizer_test_util.h"
#include "test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::det;
using ember::testing::error_of;
using ember::testing::mlp_loss;
using ember::testing::reference_mlp;

const std::vector<double>& optim_ref(const std::string& name) {
  static auto table = ember::testing::read_reference(ember::testing::tests_dir() + "/optim/data/optim_reference.txt");
  auto it = table.find(name);
  if (it == table.end()) throw std::runtime_error("no reference value " + name);
  return it->second;
}

// `steps` step() calls on the reference MLP; the returned losses and, after each call, the
// iteration and evaluation counts.
std::pair<std::vector<double>, std::vector<double>> run(optim::Lbfgs& opt, Sequential& m, int steps) {
  std::vector<double> losses, counts;
  for (int i = 0; i < steps; ++i) {
    losses.push_back(opt.step([&] { return mlp_loss(m); }));
    counts.push_back(double(opt.iterations()));
    counts.push_back(double(opt.evaluations()));
  }
  return {losses, counts};
}

TEST(OptimizerLbfgsTest, MatchesTorchWithoutLineSearch) {
  for (auto [name, opts] : {std::pair{"lbfgs", optim::LbfgsOptions{.lr = 0.5, .max_iter = 4, .history_size = 3}},
                            std::pair{"lbfgs_default", optim::LbfgsOptions{}}}) {
    SCOPED_TRACE(name);
    const std::string prefix = std::string("opt.") + name + ".";
    Sequential m = reference_mlp();
    optim::Lbfgs opt(m, opts);
    auto [losses, counts] = run(opt, m, 3);
    EXPECT_TRUE(all_close(losses, optim_ref(prefix + "losses"), 1e-9, 1e-12));
    EXPECT_EQ(counts, optim_ref(prefix + "counts"));
    for (auto& np : m.named_parameters())
      EXPECT_TRUE(all_close(np.param.array(), optim_ref(prefix + np.name), 1e-9, 1e-12)) << np.name;
  }
}

TEST(OptimizerLbfgsTest, StrongWolfeReachesTheLeastSquaresSolution) {
  // The data of optim_reference.py: x = det^3 + det^2 (full column rank), y = det.
  Array x = add(pow(det({12, 4}, 0.37, 0.1), 3.0), pow(det({12, 4}, 1.91, 0.3), 2.0));
  Array y = det({12, 2}, 0.61, 0.5);
  Linear lin({.in = 4, .out = 2, .dtype = DType::F64});
  lin.weight.set(mul(det({2, 4}, 0.71, 0.3), 0.5));
  lin.bias.set(mul(det({2}, 1.3, 0.2), 0.5));
  optim::Lbfgs opt(lin, {.line_search = optim::LineSearch::StrongWolfe});
  auto closure = [&] { return mse_loss(lin.forward(x), y); };
  const double first = opt.step(closure);
  EXPECT_NEAR(first, optim_ref("opt.lbfgs_wolfe_lstsq.losses")[0], 1e-12);
  const double second = opt.step(closure);
  const double min_loss = optim_ref("opt.lbfgs_wolfe_lstsq.min_loss")[0];
  EXPECT_NEAR(second, min_loss, 1e-9 * min_loss);
  EXPECT_TRUE(all_close(lin.weight.array(), optim_ref("lstsq.weight"), 1e-5, 1e-6));
  EXPECT_TRUE(all_close(lin.bias.array(), optim_ref("lstsq.bias"), 1e-5, 1e-6));
  RecordProperty("evaluations", std::to_string(opt.evaluations()));

  // In float32 (the default dtype) it gets there too, to float32's precision.
  Linear lin32({.in = 4, .out = 2});
  lin32.weight.set(cast(mul(det({2, 4}, 0.71, 0.3), 0.5), DType::F32));
  lin32.bias.set(cast(mul(det({2}, 1.3, 0.2), 0.5), DType::F32));
  optim::Lbfgs opt32(lin32, {.line_search = optim::LineSearch::StrongWolfe});
  Array x32 = cast(x, DType::F32), y32 = cast(y, DType::F32);
  for (int i = 0; i < 3; ++i) opt32.step([&] { return mse_loss(lin32.forward(x32), y32); });
  EXPECT_TRUE(all_close(lin32.weight.array(), optim_ref("lstsq.weight"), 1e-3, 1e-3));
  EXPECT_TRUE(all_close(lin32.bias.array(), optim_ref("lstsq.bias"), 1e-3, 1e-3));

  // On the (non-convex) MLP every step lowers the loss.
  Sequential m = reference_mlp();
  optim::Lbfgs wolfe(m, {.max_iter = 5, .line_search = optim::LineSearch::StrongWolfe});
  std::vector<double> losses = run(wolfe, m, 4).first;
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << i;
  EXPECT_LT(losses.back(), 0.5 * losses.front());
}

TEST(OptimizerLbfgsTest, StateDictRoundTripContinuesTheRun) {
  // Two steps (history full: 8 iterations, 3 pairs kept), then the state into a fresh optimizer
  // over a fresh model with the same parameters: the next two steps are the same, bit for bit.
  const optim::LbfgsOptions opts{.lr = 0.5, .max_iter = 4, .history_size = 3};
  Sequential a = reference_mlp();
  optim::Lbfgs opt_a(a, opts);
  run(opt_a, a, 2);
  nn::StateDict model_state = a.state_dict(), opt_state = opt_a.state_dict();
  EXPECT_EQ(opt_state.at("num_pairs").item<int64_t>(), 3);
  EXPECT_EQ(opt_state.at("0.weight.old_dirs").shape(), (Shape{3, 5, 4}));
  EXPECT_EQ(opt_state.at("2.bias.d").shape(), (Shape{3}));
  auto want = run(opt_a, a, 2);

  Sequential b = reference_mlp();
  optim::Lbfgs opt_b(b, opts);
  b.load_state_dict(model_state);
  opt_b.load_state_dict(opt_state);
  EXPECT_EQ(opt_b.iterations(), 8);
  EXPECT_EQ(run(opt_b, b, 2), want);
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].param.array().to_vector<double>(), pb[i].param.array().to_vector<double>()) << pa[i].name;

  // A fresh optimizer's state loads too; a state with a missing key is refused, naming it.
  optim::Lbfgs fresh(b, opts);
  fresh.load_state_dict(optim::Lbfgs(b, opts).state_dict());
  opt_state.erase("2.weight.old_stps");
  std::string msg = error_of([&] { fresh.load_state_dict(opt_state); });
  EXPECT_NE(msg.find("LBFGS::load_state_dict"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing key: 2.weight.old_stps"), std::string::npos) << msg;
}

TEST(OptimizerLbfgsTest, OptionsAndClosureAreChecked) {
  Sequential m = reference_mlp();
  EXPECT_NE(error_of([&] { optim::Lbfgs(m, {.lr = 0}); }).find("LBFGS: learning rate must be > 0, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { optim::Lbfgs(m, {.history_size = 0}); }).find("LBFGS: history_size must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { optim::Lbfgs(m, {.max_iter = -2}); }).find("LBFGS: max_iter must be >= 1, got -2"),
            std::string::npos);
  // One flat vector: mixed dtypes are refused, naming the parameter.
  Linear f32({.in = 2, .out = 2});
  std::vector<NamedParam> mixed = m.named_parameters();
  mixed.push_back({"f32.weight", f32.weight});
  std::string mixed_msg = error_of([&] { optim::Lbfgs(mixed, {}); });
  EXPECT_NE(mixed_msg.find("LBFGS: parameter f32.weight is float32 on cpu, the first is float64"), std::string::npos) << mixed_msg;
  // The closure returns the loss: one element.
  optim::Lbfgs opt(m);
  std::string msg = error_of([&] { opt.step([&] { return m.forward(det({6, 4}, 0.37, 0.1)); }); });
  EXPECT_NE(msg.find("the closure must return the loss, one element"), std::string::npos) << msg;
  // At a stationary point (zero gradient) a step evaluates once and changes nothing.
  Linear zero({.in = 2, .out = 1, .dtype = DType::F64});
  zero.weight.set(zeros({1, 2}, {.dtype = DType::F64}));
  zero.bias.set(zeros({1}, {.dtype = DType::F64}));
  optim::Lbfgs still(zero);
  EXPECT_EQ(still.step([&] { return mse_loss(zero.forward(ones({3, 2}, {.dtype = DType::F64})), zeros({3, 1}, {.dtype = DType::F64})); }), 0.0);
  EXPECT_EQ(still.evaluations(), 1);
  EXPECT_EQ(still.iterations(), 0);
}

}  // namespace
}  // namespace ember
