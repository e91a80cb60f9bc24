// Adadelta (include/ember/optim/adadelta.h): torch.optim.Adadelta's rule over flat tensors.
#include "ember/optim/adadelta.h"

#include <fmt/format.h>

namespace ember::optim {

// Checked before the base class builds the arenas, so a bad option leaves the model untouched.
// The comparisons are written so that NaN fails them too.
static const AdadeltaOptions& checked(const AdadeltaOptions& o) {
  if (!(o.lr >= 0)) throw Error(fmt::format("Adadelta: learning rate must be >= 0, got {}", o.lr));
  if (!(o.rho >= 0 && o.rho <= 1)) throw Error(fmt::format("Adadelta: rho must be in [0, 1], got {}", o.rho));
  if (!(o.eps >= 0)) throw Error(fmt::format("Adadelta: eps must be >= 0, got {}", o.eps));
  if (!(o.weight_decay >= 0))
    throw Error(fmt::format("Adadelta: weight_decay must be >= 0, got {}", o.weight_decay));
  return o;
}

Adadelta::Adadelta(nn::Module& model, AdadeltaOptions opts)
    : Optimizer(model, checked(opts).lr, opts.clip), options(opts) {}
Adadelta::Adadelta(std::vector<nn::NamedParam> params, AdadeltaOptions opts)
    : Optimizer(std::move(params), checked(opts).lr, opts.clip), options(opts) {}
Adadelta::Adadelta(std::vector<ParamGroup> groups, AdadeltaOptions opts)
    : Optimizer(std::move(groups), checked(opts).lr, opts.clip), options(opts) {}

Array Adadelta::update(Group& group, const Array& p, const Array& grad, int64_t) {
  const AdadeltaOptions& o = options;
  Array g = o.maximize ? neg(grad) : grad;
  double wd = group_weight_decay(group, o.weight_decay);
  if (wd != 0) g = add(g, mul(p, wd));
  Array& v = group.state.at("square_avg");
  Array& u = group.state.at("acc_delta");
  v = add(mul(v, o.rho), mul(mul(g, g), 1.0 - o.rho));
  Array delta = mul(div(sqrt(add(u, o.eps)), sqrt(add(v, o.eps))), g);
  u = add(mul(u, o.rho), mul(mul(delta, delta), 1.0 - o.rho));
  return sub(p, mul(delta, step_scalar(group_lr(group), p)));
}

}  // namespace ember::optim
