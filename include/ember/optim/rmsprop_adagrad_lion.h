// RMSprop, AdaGrad and Lion over flat arenas (see optimizer.h). RMSprop and AdaGrad follow
// torch.optim.RMSprop / Adagrad; Lion follows the paper (Chen et al. 2023, "Symbolic Discovery of
// Optimization Algorithms"; not in PyTorch 1.13).
#pragma once

#include "ember/optim/optimizer.h"

namespace ember::optim {

// v = alpha v + (1 - alpha) g^2; centered: v - (running mean of g)^2 instead of v;
// with momentum: buf = momentum buf + g / (sqrt(v) + eps), p -= lr buf; else p -= lr g / (sqrt(v) + eps).
struct RmspropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;  // added to the gradient
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
  ClipOptions clip{};
};

class Rmsprop : public Optimizer {
 public:
  Rmsprop(nn::Module& model, RmspropOptions opts = {});
  Rmsprop(std::vector<nn::NamedParam> params, RmspropOptions opts = {});
  Rmsprop(std::vector<ParamGroup> groups, RmspropOptions opts = {});
  RmspropOptions options;
  std::string type_name() const override { return "RMSprop"; }

 protected:
  std::vector<std::string> state_names() const override;
  Array update(Group& group, const Array& params, const Array& grads, int64_t step) override;
};
using RMSprop = Rmsprop;

// sum += g^2; p -= lr / (1 + (step - 1) lr_decay) * g / (sqrt(sum) + eps).
struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;  // the starting value of "sum"
  double eps = 1e-10;
  bool maximize = false;
  ClipOptions clip{};
};

class Adagrad : public Optimizer {
 public:
  Adagrad(nn::Module& model, AdagradOptions opts = {});
  Adagrad(std::vector<nn::NamedParam> params, AdagradOptions opts = {});
  Adagrad(std::vector<ParamGroup> groups, AdagradOptions opts = {});
  AdagradOptions options;
  std::string type_name() const override { return "Adagrad"; }

 protected:
  std::vector<std::string> state_names() const override;
  double state_initial_value(const std::string& name) const override;
  Array update(Group& group, const Array& params, const Array& grads, int64_t step) override;
};
using AdaGrad = Adagrad;

// c = beta1 m + (1 - beta1) g; p = p (1 - lr wd) - lr sign(c); m = beta2 m + (1 - beta2) g.
// The sign makes every step lr in size: use a rate 3-10x smaller than AdamW's and a larger
// weight decay.
struct LionOptions {
  double lr = 1e-4;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double weight_decay = 0;  // decoupled, as AdamW
  bool maximize = false;
  ClipOptions clip{};
};

class Lion : public Optimizer {
 public:
  Lion(nn::Module& model, LionOptions opts = {});
  Lion(std::vector<nn::NamedParam> params, LionOptions opts = {});
  Lion(std::vector<ParamGroup> groups, LionOptions opts = {});
  LionOptions options;
  std::string type_name() const override { return "Lion"; }

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg"}; }
  Array update(Group& group, const Array& params, const Array& grads, int64_t step) override;
};

}  // namespace ember::optim
