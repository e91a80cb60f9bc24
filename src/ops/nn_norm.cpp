// Normalizations (include/ember/ops_nn.h) composed from reductions and elementwise ops: batch
// (training and inference), layer, RMS, group and instance norm. Statistics in f32 under autocast.
#include <fmt/format.h>

#include "ember/autocast.h"
#include "ember/autograd.h"
#include "ember/ops.h"
#include "ember/ops_nn.h"
#include "ops/call_error.h"

namespace ember {

namespace {

std::vector<int> trailing_dims(const Array& x, int n, const char* op) {
  if (n < 1 || n > x.rank())
    throw call_error(fmt::format("{}: cannot normalize {} trailing dims of {}", op, n, x.shape().str()));
  std::vector<int> dims;
  for (int d = x.rank() - n; d < x.rank(); ++d) dims.push_back(d);
  return dims;
}

}  // namespace

Array batch_norm_inference(const Array& x, const Array& mean, const Array& var, const Array& weight, const Array& bias,
                           double eps) {
  Array scale = rsqrt(add(var, eps));
  if (weight.defined()) scale = mul(scale, weight);
  Array shift = bias.defined() ? sub(bias, mul(mean, scale)) : neg(mul(mean, scale));
  return add(mul(x, scale), shift);
}

Array layer_norm(const Array& x_in, int normalized_dims, const Array& weight, const Array& bias, double eps, Loc loc) {
  UserCall call("layer_norm", loc);
  const Array x = autocast_f32(x_in);  // norms run in f32 under autocast (autocast_policy.def)
  std::vector<int> dims = trailing_dims(x, normalized_dims, "layer_norm");
  Array mu = mean(x, dims, true);
  Array centered = sub(x, mu);
  Array var = mean(mul(centered, centered), dims, true);
  Array y = div(centered, sqrt(add(var, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

Array rms_norm(const Array& x_in, int normalized_dims, const Array& weight, double eps, Loc loc) {
  UserCall call("rms_norm", loc);
  const Array x = autocast_f32(x_in);
  std::vector<int> dims = trailing_dims(x, normalized_dims, "rms_norm");
  Array y = div(x, sqrt(add(mean(mul(x, x), dims, true), eps)));
  if (weight.defined()) y = mul(y, weight);
  return y;
}


namespace {

Shape channel_shape(const Array& x) {
  std::vector<int64_t> s(static_cast<size_t>(x.rank()), 1);
  s[1] = x.size(1);
  return Shape(s);
}

Array affine(Array y, const Array& x, const Array& weight, const Array& bias) {
  if (weight.defined()) y = mul(y, reshape(weight, channel_shape(x)));
  if (bias.defined()) y = add(y, reshape(bias, channel_shape(x)));
  return y;
}

}  // namespace

Array group_norm(const Array& x_in, int64_t groups, const Array& weight, const Array& bias, double eps, Loc loc) {
  UserCall call("group_norm", loc);
  const Array x = autocast_f32(x_in);  // statistics in f32 under autocast (autocast_policy.def)
  if (x.rank() < 2 || groups <= 0 || x.size(1) % groups)
    throw call_error(fmt::format("group_norm: expected [N, C, *] with C a multiple of {} groups, got {}", groups,
                            x.shape().str()));
  Array g = reshape(x, {x.size(0), groups, -1});
  Array mu = mean(g, {2}, true);
  Array centered = sub(g, mu);
  Array var = mean(mul(centered, centered), {2}, true);
  Array y = reshape(div(centered, sqrt(add(var, eps))), x.shape());
  return affine(y, x, weight, bias);
}

Array instance_norm(const Array& x, const Array& weight, const Array& bias, double eps, Loc loc) {
  UserCall call("instance_norm", loc);
  if (x.rank() < 3) throw call_error(fmt::format("instance_norm: expected [N, C, *spatial], got {}", x.shape().str()));
  std::vector<int> dims;
  for (int d = 2; d < x.rank(); ++d) dims.push_back(d);
  Array mu = mean(x, dims, true);
  Array centered = sub(x, mu);
  Array var = mean(mul(centered, centered), dims, true);
  return affine(div(centered, sqrt(add(var, eps))), x, weight, bias);
}


BatchNormResult batch_norm(const Array& x_in, const Array& running_mean, const Array& running_var, const Array& weight,
                           const Array& bias, const BatchNormFunctionOptions& o, Loc loc) {
  UserCall call("batch_norm", loc);
  const Array x = autocast_f32(x_in);  // statistics in f32 under autocast (autocast_policy.def)
  if (!x.defined() || x.rank() < 2)
    throw call.error(fmt::format("expected input [N, C, *], got {}", x.defined() ? x.shape().str() : "none"));
  const int64_t C = x.size(1);
  auto check_channels = [&](const Array& a, const char* what) {
    if (a.defined() && (a.rank() != 1 || a.size(0) != C))
      throw call.error(fmt::format("{} must have shape [{}] (the channels of input {}), got {}", what, C,
                                   x.shape().str(), a.shape().str()));
  };
  check_channels(running_mean, "running_mean");
  check_channels(running_var, "running_var");
  check_channels(weight, "weight");
  check_channels(bias, "bias");
  if (running_mean.defined() != running_var.defined())
    throw call.error("running_mean and running_var must be given together");
  if (o.momentum < 0 || o.momentum > 1) throw call.error(fmt::format("momentum must be in [0, 1], got {}", o.momentum));
  if (o.group_sum && !o.training) throw call.error("group_sum applies in training only");
  std::vector<int64_t> bshape(size_t(x.rank()), 1);
  bshape[1] = C;
  const Shape channel_shape(bshape);
  auto per_channel = [&](const Array& a) { return a.defined() ? reshape(a, channel_shape) : Array(); };
  if (!o.training) {
    if (!running_mean.defined())
      throw call.error("out of training, batch_norm normalizes with the running statistics: give them");
    return {batch_norm_inference(x, per_channel(running_mean), per_channel(running_var), per_channel(weight),
                                 per_channel(bias), o.eps),
            Array(), Array()};
  }
  std::vector<int> dims{0};
  for (int d = 2; d < x.rank(); ++d) dims.push_back(d);
  int64_t n = C > 0 ? x.numel() / C : 0;  // elements per channel in the statistics
  Array mu, var;
  if (o.group_sum) {
    // Two passes over the group, as the local formula below: the mean of every rank's rows, then
    // the mean squared deviation from it (numerically the same as one process's batch).
    Array counts = o.group_sum(full(Shape{}, n, {.dtype = DType::I64, .device = x.device()}));
    if (!counts.defined() || counts.numel() != 1) throw call.error("group_sum must return an array of the argument's shape");
    n = counts.item<int64_t>();
    if (n <= 0) throw call.error("the synchronized batch is empty on every rank");
    mu = div(o.group_sum(sum(x, dims, true)), double(n));
    Array centered = sub(x, mu);
    var = div(o.group_sum(sum(mul(centered, centered), dims, true)), double(n));
  } else {
    mu = mean(x, dims, true);
    Array centered = sub(x, mu);
    var = mean(mul(centered, centered), dims, true);
  }
  BatchNormResult r;
  if (running_mean.defined()) {
    NoGradGuard no_grad;
    const double m = o.momentum;
    Array batch_mean = reshape(mu.detach(), {C});
    // The running variance is unbiased, as PyTorch keeps it (n / (n - 1) times the batch's).
    Array unbiased = mul(reshape(var.detach(), {C}), n > 1 ? double(n) / double(n - 1) : 1.0);
    r.running_mean = add(mul(running_mean, 1 - m), mul(cast(batch_mean, running_mean.dtype()), m));
    r.running_var = add(mul(running_var, 1 - m), mul(cast(unbiased, running_var.dtype()), m));
  }
  Array y = div(sub(x, mu), sqrt(add(var, o.eps)));
  if (weight.defined()) y = mul(y, per_channel(weight));
  if (bias.defined()) y = add(y, per_channel(bias));
  r.output = y;
  return r;
}

}  // namespace ember
