// Adadelta (Zeiler 2012; torch.optim.Adadelta's rule): a per-coordinate step size from the ratio
// of two running averages, of squared updates and of squared gradients:
//   v = rho v + (1 - rho) g^2;  d = sqrt(u + eps) / sqrt(v + eps) * g;
//   u = rho u + (1 - rho) d^2;  p -= lr d.
// lr only scales the update (PyTorch's default is 1.0, the paper's rule).
#pragma once

#include "ember/optim/optimizer.h"

namespace ember::optim {

struct AdadeltaOptions {
  double lr = 1.0;
  double rho = 0.9;
  double eps = 1e-6;
  double weight_decay = 0;  // added to the gradient
  bool maximize = false;
  ClipOptions clip{};
};

class Adadelta : public Optimizer {
 public:
  Adadelta(nn::Module& model, AdadeltaOptions opts = {});
  Adadelta(std::vector<nn::NamedParam> params, AdadeltaOptions opts = {});
  Adadelta(std::vector<ParamGroup> groups, AdadeltaOptions opts = {});
  AdadeltaOptions options;
  std::string type_name() const override { return "Adadelta"; }

 protected:
  // PyTorch's names: the running average of g^2 and of the squared updates.
  std::vector<std::string> state_names() const override { return {"square_avg", "acc_delta"}; }
  Array update(Group& group, const Array& params, const Array& grads, int64_t step) override;
};

}  // namespace ember::optim
