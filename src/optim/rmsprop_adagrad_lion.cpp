// RMSprop, AdaGrad and Lion (include/ember/optim/rmsprop_adagrad_lion.h) over flat tensors.
#include "ember/optim/rmsprop_adagrad_lion.h"

#include <fmt/format.h>

namespace ember::optim {

// ---- RMSprop ---------------------------------------------------------------------------------

static void check(const RmspropOptions& o) {
  if (o.alpha < 0 || o.alpha >= 1) throw Error(fmt::format("RMSprop: alpha must be in [0, 1), got {}", o.alpha));
  if (o.eps < 0 || o.momentum < 0)
    throw Error(fmt::format("RMSprop: eps ({}) and momentum ({}) must be >= 0", o.eps, o.momentum));
}

Rmsprop::Rmsprop(nn::Module& model, RmspropOptions opts) : Optimizer(model, opts.lr, opts.clip), options(opts) {
  check(opts);
}
Rmsprop::Rmsprop(std::vector<ParamGroup> groups, RmspropOptions opts)
    : Optimizer(std::move(groups), opts.lr, opts.clip), options(opts) {
  check(opts);
}
Rmsprop::Rmsprop(std::vector<nn::NamedParam> params, RmspropOptions opts)
    : Optimizer(std::move(params), opts.lr, opts.clip), options(opts) {
  check(opts);
}

std::vector<std::string> Rmsprop::state_names() const {
  std::vector<std::string> s{"square_avg"};
  if (options.momentum > 0) s.push_back("momentum_buffer");
  if (options.centered) s.push_back("grad_avg");
  return s;
}

Array Rmsprop::update(Group& group, const Array& p, const Array& grad, int64_t) {
  const RmspropOptions& o = options;
  Array g = o.maximize ? neg(grad) : grad;
  double wd = group_weight_decay(group, o.weight_decay);
  if (wd != 0) g = add(g, mul(p, wd));
  Array& v = group.state.at("square_avg");
  v = add(mul(v, o.alpha), mul(mul(g, g), 1.0 - o.alpha));
  Array second = v;
  if (o.centered) {
    Array& m = group.state.at("grad_avg");
    m = add(mul(m, o.alpha), mul(g, 1.0 - o.alpha));
    second = sub(v, mul(m, m));
  }
  Array denom = add(sqrt(second), o.eps);
  if (o.momentum > 0) {
    Array& buf = group.state.at("momentum_buffer");
    buf = add(mul(buf, o.momentum), div(g, denom));
    return sub(p, mul(buf, step_scalar(group_lr(group), p)));
  }
  return sub(p, mul(div(g, denom), step_scalar(group_lr(group), p)));
}

// ---- AdaGrad ---------------------------------------------------------------------------------

static void check(const AdagradOptions& o) {
  if (o.lr_decay < 0 || o.eps < 0 || o.initial_accumulator_value < 0)
    throw Error(fmt::format("Adagrad: lr_decay ({}), eps ({}) and initial_accumulator_value ({}) must be >= 0",
                            o.lr_decay, o.eps, o.initial_accumulator_value));
}

Adagrad::Adagrad(nn::Module& model, AdagradOptions opts) : Optimizer(model, opts.lr, opts.clip), options(opts) {
  check(opts);
}
Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions opts)
    : Optimizer(std::move(groups), opts.lr, opts.clip), options(opts) {
  check(opts);
}
Adagrad::Adagrad(std::vector<nn::NamedParam> params, AdagradOptions opts)
    : Optimizer(std::move(params), opts.lr, opts.clip), options(opts) {
  check(opts);
}

std::vector<std::string> Adagrad::state_names() const { return {"sum"}; }
double Adagrad::state_initial_value(const std::string&) const { return options.initial_accumulator_value; }

Array Adagrad::update(Group& group, const Array& p, const Array& grad, int64_t step) {
  const AdagradOptions& o = options;
  Array g = o.maximize ? neg(grad) : grad;
  double wd = group_weight_decay(group, o.weight_decay);
  if (wd != 0) g = add(g, mul(p, wd));
  Array& s = group.state.at("sum");
  s = add(s, mul(g, g));
  double clr = group_lr(group) / (1.0 + double(step - 1) * o.lr_decay);
  return sub(p, mul(div(g, add(sqrt(s), o.eps)), step_scalar(clr, p)));
}

// ---- Lion ------------------------------------------------------------------------------------

static void check(const LionOptions& o) {
  if (o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1)
    throw Error(fmt::format("Lion: betas must be in [0, 1), got ({}, {})", o.beta1, o.beta2));
}

Lion::Lion(nn::Module& model, LionOptions opts) : Optimizer(model, opts.lr, opts.clip), options(opts) { check(opts); }
Lion::Lion(std::vector<ParamGroup> groups, LionOptions opts)
    : Optimizer(std::move(groups), opts.lr, opts.clip), options(opts) {
  check(opts);
}
Lion::Lion(std::vector<nn::NamedParam> params, LionOptions opts)
    : Optimizer(std::move(params), opts.lr, opts.clip), options(opts) {
  check(opts);
}

Array Lion::update(Group& group, const Array& p, const Array& grad, int64_t) {
  const LionOptions& o = options;
  Array g = o.maximize ? neg(grad) : grad;
  Array& m = group.state.at("exp_avg");
  Array c = add(mul(m, o.beta1), mul(g, 1.0 - o.beta1));
  double wd = group_weight_decay(group, o.weight_decay);
  Array param = wd != 0 ? mul(p, step_scalar(1.0 - group_lr(group) * wd, p)) : p;
  m = add(mul(m, o.beta2), mul(g, 1.0 - o.beta2));
  return sub(param, mul(sign(c), step_scalar(group_lr(group), p)));
}

}  // namespace ember::optim
