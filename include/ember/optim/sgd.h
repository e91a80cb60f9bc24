// Stochastic gradient descent with momentum, Nesterov momentum, dampening and weight decay
// (PyTorch's torch.optim.SGD update rule).
#pragma once

#include "ember/optim/optimizer.h"

namespace ember::optim {

struct SgdOptions {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  ClipOptions clip{};
};

class Sgd : public Optimizer {
 public:
  Sgd(nn::Module& model, SgdOptions opts);
  Sgd(std::vector<nn::NamedParam> params, SgdOptions opts);
  Sgd(std::vector<ParamGroup> groups, SgdOptions opts);
  SgdOptions options;
  std::string type_name() const override { return "SGD"; }

 protected:
  std::vector<std::string> state_names() const override;
  Array update(Group& group, const Array& params, const Array& grads, int64_t step) override;
};
using SGD = Sgd;

}  // namespace ember::optim
