// Shared by the optimizer tests: the 4-5-3 tanh MLP whose five-step trajectories the PyTorch
// reference scripts (tools/reference/nn_reference.py, nn_breadth_reference.py) record, and the
// check that an optimizer follows one of them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nn/nn_test_util.h"

namespace ember::testing {

inline nn::Sequential reference_mlp() {
  using namespace ember::nn;
  Sequential m(Linear({.in = 4, .out = 5, .dtype = DType::F64}), Tanh(), Linear({.in = 5, .out = 3, .dtype = DType::F64}));
  m.at<Linear>(0).weight.set(mul(det({5, 4}, 0.71, 0.3), 0.5));
  m.at<Linear>(0).bias.set(mul(det({5}, 1.3, 0.2), 0.5));
  m.at<Linear>(2).weight.set(mul(det({3, 5}, 0.53, 0.7), 0.5));
  m.at<Linear>(2).bias.set(mul(det({3}, 0.9, 0.4), 0.5));
  return m;
}

inline Array mlp_loss(nn::Sequential& m) {
  return nn::mse_loss(m.forward(det({6, 4}, 0.37, 0.1)), det({6, 3}, 0.61, 0.5));
}

// `steps` steps of `opt` on m with mlp_loss; the loss before each step.
inline std::vector<double> run_steps(optim::Optimizer& opt, nn::Sequential& m, int steps = 5) {
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    Array loss = mlp_loss(m);
    Gradients g = loss.backward();
    losses.push_back(loss.item<double>());
    opt.step(g);
  }
  return losses;
}

// Five (or `steps`) steps of Opt on reference_mlp(); losses and final parameters against the
// reference values "opt.<name>.losses" and "opt.<name>.<parameter>" that `ref` looks up.
template <class Opt, class Options>
void check_trajectory(const std::string& name, Options opts,
                      const std::function<const std::vector<double>&(const std::string&)>& ref, int steps = 5) {
  SCOPED_TRACE(name);
  nn::Sequential m = reference_mlp();
  Opt opt(m, opts);
  std::vector<double> losses = run_steps(opt, m, steps);
  EXPECT_TRUE(all_close(losses, ref("opt." + name + ".losses"), 1e-9, 1e-12));
  for (auto& np : m.named_parameters())
    EXPECT_TRUE(all_close(np.param.array(), ref("opt." + name + "." + np.name), 1e-9, 1e-12)) << np.name;
}

}  // namespace ember::testing
