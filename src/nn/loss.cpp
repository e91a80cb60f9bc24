// Losses (include/ember/nn/loss.h), written with ember ops so they differentiate and fuse.
#include "ember/nn/loss.h"
#include "nn/layer_error.h"

#include <fmt/format.h>

#include "ember/autocast.h"
#include "graph/node.h"

namespace ember::nn {

namespace {

Array reduce(const Array& loss, Reduction r) {
  switch (r) {
    case Reduction::None: return loss;
    case Reduction::Mean: return mean(loss);
    case Reduction::Sum: return sum(loss);
  }
  return loss;
}

void check_same_shape(const Array& a, const Array& b, const char* op) {
  if (a.shape() != b.shape())
    throw nn_error(fmt::format("{}: input {} and target {} must have the same shape", op, a.shape().str(), b.shape().str()));
}

// Checks [N, C, d...] scores against [N, d...] class indices; returns C.
int64_t check_class_target(const Array& scores, const Array& target, const char* op) {
  if (scores.rank() < 2)
    throw nn_error(fmt::format("{}: scores must be [N, C] or [N, C, d...], got {}", op, scores.shape().str()));
  std::vector<int64_t> want = scores.shape().dims();
  want.erase(want.begin() + 1);
  if (target.shape() != Shape(want))
    throw nn_error(fmt::format("{}: target {} does not match scores {} (expected {})", op, target.shape().str(),
                            scores.shape().str(), Shape(want).str()));
  return scores.size(1);
}

// [1, C, 1, ...] view of a per-class vector, for scores of rank r.
Array per_class(const Array& v, int64_t classes, int rank, const char* op) {
  if (v.rank() != 1 || v.size(0) != classes)
    throw nn_error(fmt::format("{}: weight must be [{}], got {}", op, classes, v.shape().str()));
  std::vector<int64_t> s(size_t(rank), 1);
  s[1] = classes;
  return reshape(v, Shape(s));
}

// One-hot mask [N, C, d...] of integer targets [N, d...].
Array one_hot_mask(const Array& target, int64_t classes, int rank, Device device) {
  std::vector<int64_t> s(size_t(rank), 1);
  s[1] = classes;
  Array classes_idx = reshape(arange(0, classes, 1, DType::I64, device), Shape(s));
  return eq(unsqueeze(target, 1), classes_idx);
}

// Weighted NLL with optional smoothing over log-probabilities with class-index targets.
Array indexed_nll(const Array& logp, const Array& target, const Array& weight, int64_t ignore_index,
                  double smoothing, Reduction reduction, const char* op, Loc loc) {
  int64_t c = check_class_target(logp, target, op);
  if (!is_integral(target.dtype()))
    throw nn_error(fmt::format("{}: class-index targets must be integers, got {}", op, dtype_name(target.dtype())));
  int rank = logp.rank();
  Array hot = one_hot_mask(target, c, rank, logp.device());
  Array valid = ne(target, ignore_index);
  Array w_class = weight.defined() ? per_class(cast(weight, logp.dtype()), c, rank, op) : Array();
  Array picked = neg(sum(where(hot, logp, 0.0), {1}));  // -logp[target]
  Array w_i = weight.defined() ? sum(where(hot, w_class, 0.0), {1}) : ones(target.shape(), {.dtype = logp.dtype(), .device = logp.device()});
  w_i = where(valid, w_i, 0.0);
  // A class index outside [0, C) must not count as a zero (the one-hot mask has no column for
  // it): a gather of each index from C zeros raises "index out of range (7 for a dimension of
  // size 3)" when the loss is computed, at the caller's line; it adds 0 to every weight.
  Array in_range;
  {
    NodeContext context(op);  // the error says "cross_entropy: gather (at ...)"
    in_range = gather(zeros({c}, {.dtype = logp.dtype(), .device = logp.device()}), 0,
                      reshape(where(valid, target, 0), {-1}), loc);
  }
  w_i = add(w_i, reshape(in_range, target.shape()));
  Array loss = mul(picked, w_i);
  Array smooth;
  if (smoothing > 0) {
    Array weighted = w_class.defined() ? mul(logp, w_class) : logp;
    smooth = where(valid, neg(sum(weighted, {1})), 0.0);
  }
  auto mix = [&](const Array& nll_part, const Array& smooth_part) {
    if (!smooth.defined()) return nll_part;
    return add(mul(nll_part, 1.0 - smoothing), mul(smooth_part, smoothing / double(c)));
  };
  switch (reduction) {
    case Reduction::None: return mix(loss, smooth);
    case Reduction::Sum: return mix(sum(loss), smooth.defined() ? sum(smooth) : Array());
    case Reduction::Mean: {
      Array denom = sum(w_i);
      return div(mix(sum(loss), smooth.defined() ? sum(smooth) : Array()), denom);
    }
  }
  return loss;
}

}  // namespace

Array cross_entropy(const Array& logits_in, const Array& target, const CrossEntropyOptions& opts, Loc loc) {
  UserCall call("cross_entropy", loc);
  const Array logits = autocast_f32(logits_in);  // F32 policy (autocast_policy.def)
  if (opts.label_smoothing < 0 || opts.label_smoothing > 1)
    throw nn_error(fmt::format("cross_entropy: label_smoothing must be in [0, 1], got {}", opts.label_smoothing));
  if (logits.rank() < 2)
    throw nn_error(fmt::format("cross_entropy: logits must be [N, C] or [N, C, d...], got {}", logits.shape().str()));
  Array logp = log_softmax(logits, 1);
  if (!is_floating(target.dtype()))
    return indexed_nll(logp, target, opts.weight, opts.ignore_index, opts.label_smoothing, opts.reduction,
                       "cross_entropy", loc);
  // Probability targets.
  check_same_shape(logits, target, "cross_entropy");
  int64_t c = logits.size(1);
  Array t = cast(target, logp.dtype());
  if (opts.label_smoothing > 0) t = add(mul(t, 1.0 - opts.label_smoothing), opts.label_smoothing / double(c));
  Array prod_ = mul(logp, t);
  if (opts.weight.defined()) prod_ = mul(prod_, per_class(cast(opts.weight, logp.dtype()), c, logits.rank(), "cross_entropy"));
  Array loss = neg(sum(prod_, {1}));
  return reduce(loss, opts.reduction);
}

Array nll_loss(const Array& log_probs_in, const Array& target, const NllOptions& opts, Loc loc) {
  UserCall call("nll_loss", loc);
  const Array log_probs = autocast_f32(log_probs_in);  // F32 policy (autocast_policy.def)
  return indexed_nll(log_probs, target, opts.weight, opts.ignore_index, 0.0, opts.reduction, "nll_loss", loc);
}

Array mse_loss(const Array& input_in, const Array& target, Reduction reduction, Loc loc) {
  UserCall call("mse_loss", loc);
  const Array input = autocast_f32(input_in);  // F32 policy (autocast_policy.def)
  check_same_shape(input, target, "mse_loss");
  Array d = sub(input, target);
  return reduce(mul(d, d), reduction);
}

Array l1_loss(const Array& input_in, const Array& target, Reduction reduction, Loc loc) {
  UserCall call("l1_loss", loc);
  const Array input = autocast_f32(input_in);  // F32 policy (autocast_policy.def)
  check_same_shape(input, target, "l1_loss");
  return reduce(abs(sub(input, target)), reduction);
}

Array smooth_l1_loss(const Array& input_in, const Array& target, double beta, Reduction reduction, Loc loc) {
  UserCall call("smooth_l1_loss", loc);
  const Array input = autocast_f32(input_in);  // F32 policy (autocast_policy.def)
  check_same_shape(input, target, "smooth_l1_loss");
  if (beta < 0) throw nn_error(fmt::format("smooth_l1_loss: beta must be >= 0, got {}", beta));
  Array d = abs(sub(input, target));
  if (beta == 0) return reduce(d, reduction);
  Array quad = div(mul(mul(d, d), 0.5), beta);
  return reduce(where(lt(d, beta), quad, sub(d, 0.5 * beta)), reduction);
}

Array huber_loss(const Array& input_in, const Array& target, double delta, Reduction reduction, Loc loc) {
  UserCall call("huber_loss", loc);
  const Array input = autocast_f32(input_in);  // F32 policy (autocast_policy.def)
  check_same_shape(input, target, "huber_loss");
  if (delta <= 0) throw nn_error(fmt::format("huber_loss: delta must be > 0, got {}", delta));
  Array d = abs(sub(input, target));
  Array quad = mul(mul(d, d), 0.5);
  return reduce(where(lt(d, delta), quad, mul(sub(d, 0.5 * delta), delta)), reduction);
}

Array binary_cross_entropy(const Array& probs_in, const Array& target, const BceOptions& opts, Loc loc) {
  UserCall call("binary_cross_entropy", loc);
  const Array probs = autocast_f32(probs_in);  // F32 policy (autocast_policy.def)
  check_same_shape(probs, target, "binary_cross_entropy");
  Array t = cast(target, probs.dtype());
  Array log_p = maximum(log(probs), -100.0);
  Array log_1mp = maximum(log(sub(1.0, probs)), -100.0);
  Array loss = neg(add(mul(t, log_p), mul(sub(1.0, t), log_1mp)));
  if (opts.weight.defined()) loss = mul(loss, opts.weight);
  return reduce(loss, opts.reduction);
}

Array binary_cross_entropy_with_logits(const Array& logits_in, const Array& target, const BceOptions& opts, Loc loc) {
  UserCall call("binary_cross_entropy_with_logits", loc);
  const Array logits = autocast_f32(logits_in);  // F32 policy (autocast_policy.def)
  check_same_shape(logits, target, "binary_cross_entropy_with_logits");
  Array x = logits;
  Array t = cast(target, x.dtype());
  // log(1 + exp(-x)) computed stably: max(-x, 0) + log(1 + exp(-|x|)).
  Array log_sig_neg = add(relu(neg(x)), log(add(exp(neg(abs(x))), 1.0)));  // = -log(sigmoid(x))
  Array loss;
  if (opts.pos_weight.defined()) {
    Array coef = add(mul(sub(opts.pos_weight, 1.0), t), 1.0);  // 1 + (pw - 1) t
    loss = add(mul(sub(1.0, t), x), mul(coef, log_sig_neg));
  } else {
    loss = add(mul(sub(1.0, t), x), log_sig_neg);
  }
  if (opts.weight.defined()) loss = mul(loss, opts.weight);
  return reduce(loss, opts.reduction);
}

}  // namespace ember::nn
