// Adam and AdamW (include/ember/optim/adam.h): torch.optim.Adam/AdamW's rules over flat tensors.
#include "ember/optim/adam.h"

#include <fmt/format.h>

#include <cmath>

namespace ember::optim {

static void check(const AdamOptions& o) {
  if (o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1)
    throw Error(fmt::format("Adam: betas must be in [0, 1), got ({}, {})", o.beta1, o.beta2));
  if (o.eps < 0) throw Error(fmt::format("Adam: eps must be >= 0, got {}", o.eps));
}

Adam::Adam(nn::Module& model, AdamOptions opts, bool decoupled)
    : Optimizer(model, opts.lr, opts.clip), options(opts), decoupled_(decoupled) {
  check(opts);
}
Adam::Adam(std::vector<ParamGroup> groups, AdamOptions opts, bool decoupled)
    : Optimizer(std::move(groups), opts.lr, opts.clip), options(opts), decoupled_(decoupled) {
  check(opts);
}
Adam::Adam(std::vector<nn::NamedParam> params, AdamOptions opts, bool decoupled)
    : Optimizer(std::move(params), opts.lr, opts.clip), options(opts), decoupled_(decoupled) {
  check(opts);
}

std::vector<std::string> Adam::state_names() const {
  if (options.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

Array Adam::update(Group& group, const Array& p, const Array& grad, int64_t step) {
  const AdamOptions& o = options;
  Array g = o.maximize ? neg(grad) : grad;
  Array param = p;
  double wd = group_weight_decay(group, o.weight_decay);
  if (wd != 0) {
    if (decoupled_) param = mul(param, step_scalar(1.0 - group_lr(group) * wd, p));
    else g = add(g, mul(param, wd));
  }
  Array& m = group.state.at("exp_avg");
  Array& v = group.state.at("exp_avg_sq");
  m = add(mul(m, o.beta1), mul(g, 1.0 - o.beta1));
  v = add(mul(v, o.beta2), mul(mul(g, g), 1.0 - o.beta2));
  double bc1 = 1.0 - std::pow(o.beta1, double(step));
  double bc2 = 1.0 - std::pow(o.beta2, double(step));
  Array second = v;
  if (o.amsgrad) {
    Array& vmax = group.state.at("max_exp_avg_sq");
    vmax = maximum(vmax, v);
    second = vmax;
  }
  Array denom = add(div(sqrt(second), step_scalar(std::sqrt(bc2), p)), o.eps);
  return sub(param, mul(div(m, denom), step_scalar(group_lr(group) / bc1, p)));
}

}  // namespace ember::optim
