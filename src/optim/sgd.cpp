// SGD (include/ember/optim/sgd.h): torch.optim.SGD's rule over flat tensors.
#include "ember/optim/sgd.h"

namespace ember::optim {

Sgd::Sgd(nn::Module& model, SgdOptions opts) : Optimizer(model, opts.lr, opts.clip), options(opts) {
  if (opts.nesterov && (opts.momentum <= 0 || opts.dampening != 0))
    throw Error("SGD: Nesterov momentum requires a momentum and zero dampening");
}
Sgd::Sgd(std::vector<ParamGroup> groups, SgdOptions opts)
    : Optimizer(std::move(groups), opts.lr, opts.clip), options(opts) {
  if (opts.nesterov && (opts.momentum <= 0 || opts.dampening != 0))
    throw Error("SGD: Nesterov momentum requires a momentum and zero dampening");
}
Sgd::Sgd(std::vector<nn::NamedParam> params, SgdOptions opts)
    : Optimizer(std::move(params), opts.lr, opts.clip), options(opts) {
  if (opts.nesterov && (opts.momentum <= 0 || opts.dampening != 0))
    throw Error("SGD: Nesterov momentum requires a momentum and zero dampening");
}

std::vector<std::string> Sgd::state_names() const {
  if (options.momentum != 0) return {"momentum_buffer"};
  return {};
}

Array Sgd::update(Group& group, const Array& p, const Array& grad, int64_t step) {
  Array g = options.maximize ? neg(grad) : grad;
  double wd = group_weight_decay(group, options.weight_decay);
  if (wd != 0) g = add(g, mul(p, wd));
  if (options.momentum != 0) {
    Array& buf = group.state.at("momentum_buffer");
    buf = step == 1 ? g : add(mul(buf, options.momentum), mul(g, 1.0 - options.dampening));
    g = options.nesterov ? add(g, mul(buf, options.momentum)) : buf;
  }
  return sub(p, mul(g, step_scalar(group_lr(group), p)));
}

}  // namespace ember::optim
