// Adamax, NAdam and RAdam (include/ember/optim/adam_family.h): torch.optim's rules over flat
// tensors. Everything that changes with the step count is computed here in double and handed to
// the update as a device scalar (step_scalar), as Adam's bias corrections are.
#include "ember/optim/adam_family.h"

#include <fmt/format.h>

#include <cmath>

namespace ember::optim {

// The checks shared by the three: NaN fails every comparison below, so it is refused too.
static void check_common(const char* name, double lr, double beta1, double beta2, double eps, double weight_decay) {
  if (!(lr >= 0)) throw Error(fmt::format("{}: learning rate must be >= 0, got {}", name, lr));
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
    throw Error(fmt::format("{}: betas must be in [0, 1), got ({}, {})", name, beta1, beta2));
  if (!(eps >= 0)) throw Error(fmt::format("{}: eps must be >= 0, got {}", name, eps));
  if (!(weight_decay >= 0)) throw Error(fmt::format("{}: weight_decay must be >= 0, got {}", name, weight_decay));
}

// The three constructors of each optimizer here (over a model's parameters and buffers, named
// parameters, or parameter groups): the options are checked (`checked`, per options type) before
// the base class sees them.
#define EMBER_OPTIONS_CONSTRUCTORS(Class, Options)                                                          \
  Class::Class(nn::Module& model, Options opts) : Optimizer(model, checked(opts).lr, opts.clip), options(opts) {} \
  Class::Class(std::vector<nn::NamedParam> params, Options opts)                                            \
      : Optimizer(std::move(params), checked(opts).lr, opts.clip), options(opts) {}                         \
  Class::Class(std::vector<ParamGroup> groups, Options opts)                                                \
      : Optimizer(std::move(groups), checked(opts).lr, opts.clip), options(opts) {}

// ---- Adamax ----------------------------------------------------------------------------------

static const AdamaxOptions& checked(const AdamaxOptions& o) {
  check_common("Adamax", o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  return o;
}

EMBER_OPTIONS_CONSTRUCTORS(Adamax, AdamaxOptions)

Array Adamax::update(Group& group, const Array& p, const Array& grad, int64_t step) {
  const AdamaxOptions& o = options;
  const Array g = decayed_gradient(group, p, grad, o.weight_decay, o.maximize, /*decoupled=*/false).grad;
  Array& m = group.state.at("exp_avg");
  Array& u = group.state.at("exp_inf");
  m = add(mul(m, o.beta1), mul(g, 1.0 - o.beta1));
  u = maximum(mul(u, o.beta2), add(abs(g), o.eps));
  double bc1 = 1.0 - std::pow(o.beta1, double(step));
  return sub(p, mul(div(m, u), step_scalar(group_lr(group) / bc1, p)));
}

// ---- NAdam -----------------------------------------------------------------------------------

static const NadamOptions& checked(const NadamOptions& o) {
  check_common("NAdam", o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  if (!(o.momentum_decay >= 0))
    throw Error(fmt::format("NAdam: momentum_decay must be >= 0, got {}", o.momentum_decay));
  return o;
}

EMBER_OPTIONS_CONSTRUCTORS(Nadam, NadamOptions)

Array Nadam::update(Group& group, const Array& p, const Array& grad, int64_t step) {
  const NadamOptions& o = options;
  const double lr = group_lr(group);
  const auto [g, param] = decayed_gradient(group, p, grad, o.weight_decay, o.maximize, o.decoupled_weight_decay);
  // mu_t and the running product prod_{i<=t} mu_i, recomputed from the step count (the loop is
  // over the steps taken: cheap next to the update, and exact to how PyTorch accumulates it).
  auto mu = [&](int64_t t) { return o.beta1 * (1.0 - 0.5 * std::pow(0.96, double(t) * o.momentum_decay)); };
  double mu_product = 1;
  for (int64_t t = 1; t <= step; ++t) mu_product *= mu(t);
  const double mu_t = mu(step), mu_next = mu(step + 1);
  const double mu_product_next = mu_product * mu_next;

  Array& m = group.state.at("exp_avg");
  Array& v = group.state.at("exp_avg_sq");
  m = add(mul(m, o.beta1), mul(g, 1.0 - o.beta1));
  v = add(mul(v, o.beta2), mul(mul(g, g), 1.0 - o.beta2));
  double bc2 = 1.0 - std::pow(o.beta2, double(step));
  Array denom = add(sqrt(div(v, step_scalar(bc2, p))), o.eps);
  Array grad_term = mul(div(g, denom), step_scalar(lr * (1.0 - mu_t) / (1.0 - mu_product), p));
  Array momentum_term = mul(div(m, denom), step_scalar(lr * mu_next / (1.0 - mu_product_next), p));
  return sub(sub(param, grad_term), momentum_term);
}

// ---- RAdam -----------------------------------------------------------------------------------

static const RadamOptions& checked(const RadamOptions& o) {
  check_common("RAdam", o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  return o;
}

EMBER_OPTIONS_CONSTRUCTORS(Radam, RadamOptions)

Array Radam::update(Group& group, const Array& p, const Array& grad, int64_t step) {
  const RadamOptions& o = options;
  const double lr = group_lr(group);
  const auto [g, param] = decayed_gradient(group, p, grad, o.weight_decay, o.maximize, o.decoupled_weight_decay);
  Array& m = group.state.at("exp_avg");
  Array& v = group.state.at("exp_avg_sq");
  m = add(mul(m, o.beta1), mul(g, 1.0 - o.beta1));
  v = add(mul(v, o.beta2), mul(mul(g, g), 1.0 - o.beta2));
  const double t = double(step);
  const double bc1 = 1.0 - std::pow(o.beta1, t);
  const double bc2 = 1.0 - std::pow(o.beta2, t);
  const double rho_inf = 2.0 / (1.0 - o.beta2) - 1.0;
  const double rho_t = rho_inf - 2.0 * t * std::pow(o.beta2, t) / bc2;
  // 0 while the variance estimate is too short (a momentum step), else r_t sqrt(1 - beta2^t).
  // The choice is a device scalar too, so the step that switches builds no new program.
  double rect = 0;
  if (rho_t > 5.0)
    rect = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) * std::sqrt(bc2);
  Array rect_scalar = step_scalar(rect, p);
  Array adaptive = where(gt(rect_scalar, 0.0), div(rect_scalar, add(sqrt(v), o.eps)), 1.0);
  return sub(param, mul(mul(m, step_scalar(lr / bc1, p)), adaptive));
}

#undef EMBER_OPTIONS_CONSTRUCTORS

}  // namespace ember::optim
