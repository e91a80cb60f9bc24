// Adamax, NAdam and RAdam: the Adam variants of torch.optim (Adamax, NAdam, RAdam, with
// PyTorch 2.x's decoupled_weight_decay for NAdam and RAdam). Like Adam (adam.h), each keeps
// "exp_avg" and a second moment per parameter, and its per-step factors (bias corrections,
// NAdam's momentum schedule, RAdam's rectification) are device scalars, so one compiled update
// kernel serves every step.
#pragma once

#include "ember/optim/optimizer.h"

namespace ember::optim {

// m = beta1 m + (1 - beta1) g; u = max(beta2 u, |g| + eps); p -= lr / (1 - beta1^t) * m / u.
// (Adam with the infinity norm in place of the L2 norm; Kingma & Ba 2015, section 7.)
struct AdamaxOptions {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // added to the gradient
  bool maximize = false;
  ClipOptions clip{};
};

class Adamax : public Optimizer {
 public:
  Adamax(nn::Module& model, AdamaxOptions opts = {});
  Adamax(std::vector<nn::NamedParam> params, AdamaxOptions opts = {});
  Adamax(std::vector<ParamGroup> groups, AdamaxOptions opts = {});
  AdamaxOptions options;
  std::string type_name() const override { return "Adamax"; }

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_inf"}; }
  Array update(Group& group, const Array& params, const Array& grads, int64_t step) override;
};

// Adam with Nesterov momentum (Dozat 2016) and PyTorch's momentum schedule
// mu_t = beta1 (1 - 0.5 * 0.96^(t momentum_decay)):
// p -= lr [mu_{t+1} m / (1 - prod_{i<=t+1} mu_i) + (1 - mu_t) g / (1 - prod_{i<=t} mu_i)]
//        / (sqrt(v / (1 - beta2^t)) + eps).
// PyTorch keeps the running product of mu as per-parameter state ("mu_product"); it depends on
// the step count only, so here it is computed from the optimizer's step.
struct NadamOptions {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum_decay = 4e-3;
  bool decoupled_weight_decay = false;  // true: decay the weights as AdamW does (NAdamW)
  bool maximize = false;
  ClipOptions clip{};
};

class Nadam : public Optimizer {
 public:
  Nadam(nn::Module& model, NadamOptions opts = {});
  Nadam(std::vector<nn::NamedParam> params, NadamOptions opts = {});
  Nadam(std::vector<ParamGroup> groups, NadamOptions opts = {});
  NadamOptions options;
  std::string type_name() const override { return "NAdam"; }

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  Array update(Group& group, const Array& params, const Array& grads, int64_t step) override;
};
using NAdam = Nadam;

// Rectified Adam (Liu et al. 2020): with rho_inf = 2 / (1 - beta2) - 1 and
// rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t), steps with rho_t <= 5 are plain momentum
// (p -= lr m / (1 - beta1^t)); later steps are Adam's scaled by the variance rectification
// r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t)).
// With the default beta2 the first 5 steps are momentum steps.
struct RadamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;  // true: decay the weights as AdamW does
  bool maximize = false;
  ClipOptions clip{};
};

class Radam : public Optimizer {
 public:
  Radam(nn::Module& model, RadamOptions opts = {});
  Radam(std::vector<nn::NamedParam> params, RadamOptions opts = {});
  Radam(std::vector<ParamGroup> groups, RadamOptions opts = {});
  RadamOptions options;
  std::string type_name() const override { return "RAdam"; }

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  Array update(Group& group, const Array& params, const Array& grads, int64_t step) override;
};
using RAdam = Radam;

}  // namespace ember::optim
