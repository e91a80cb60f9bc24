// Normalizations (include/ember/ops_nn.h) composed from reductions and elementwise ops: batch
// (training and inference), layer, RMS, group and instance norm. Statistics in f32 under autocast.
// Training batch norm has a closed-form first-order gradient (autograd/composite.h).
#include <fmt/format.h>

#include "ember/autocast.h"
#include "ember/autograd.h"
#include "ember/ops.h"
#include "ember/ops_nn.h"
#include "autograd/composite.h"
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
  // Times 1 / sqrt(var + eps), computed once per row, as PyTorch does: a division per element
  // made the fused kernel bound by the divider (8192 x 1024: 7.2 ms, the memory traffic 3).
  Array y = mul(centered, rsqrt(add(var, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

Array rms_norm(const Array& x_in, int normalized_dims, const Array& weight, double eps, Loc loc) {
  UserCall call("rms_norm", loc);
  const Array x = autocast_f32(x_in);
  std::vector<int> dims = trailing_dims(x, normalized_dims, "rms_norm");
  Array y = mul(x, rsqrt(add(mean(mul(x, x), dims, true), eps)));
  if (weight.defined()) y = mul(y, weight);
  return y;
}


namespace {

Shape channel_shape(const Array& x) {
  std::vector<int64_t> s(static_cast<size_t>(x.rank()), 1);
  s[1] = x.size(1);
  return Shape(s);
}

using GroupSum = std::function<Array(const Array&)>;

// Training batch norm's statistics over `dims` (kept), two passes: the mean, then the mean
// squared deviation from it; with group_sum, of the group's batch of `count` rows per channel.
struct BatchStatistics {
  Array mean, var;
};
BatchStatistics batch_statistics(const Array& x, const std::vector<int>& dims, double count, const GroupSum& group_sum) {
  if (!group_sum) {
    Array mu = mean(x, dims, true);
    Array centered = sub(x, mu);
    return {mu, mean(mul(centered, centered), dims, true)};
  }
  Array mu = div(group_sum(sum(x, dims, true)), count);
  Array centered = sub(x, mu);
  return {mu, div(group_sum(sum(mul(centered, centered), dims, true)), count)};
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
  Array y = reshape(mul(centered, rsqrt(add(var, eps))), x.shape());
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
  return affine(mul(centered, rsqrt(add(var, eps))), x, weight, bias);
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
  if (o.group_sum) {
    Array counts = o.group_sum(full(Shape{}, n, {.dtype = DType::I64, .device = x.device()}));
    if (!counts.defined() || counts.numel() != 1) throw call.error("group_sum must return an array of the argument's shape");
    n = counts.item<int64_t>();
    if (n <= 0) throw call.error("the synchronized batch is empty on every rank");
  }
  const double count = double(n);
  const double eps = o.eps;
  const GroupSum group_sum = o.group_sum;
  // The normalization computed without recording: statistics, then one pass (x - mean) * scale
  // (+ bias), which the scheduler fuses with what follows (a ReLU).
  Array mu, var, rstd, scale, y;
  {
    NoGradGuard no_grad;
    BatchStatistics st = batch_statistics(x, dims, count, group_sum);
    mu = st.mean;
    var = st.var;
    rstd = rsqrt(add(var, eps));
    scale = weight.defined() ? mul(rstd, per_channel(weight)) : rstd;
    y = mul(sub(x, mu), scale);
    if (bias.defined()) y = add(y, per_channel(bias));
  }
  // Its gradient in closed form (two passes: the per-channel sums of g and g * (x - mean), then
  // dx), or, under create_graph, the composition differentiated op by op (autograd/composite.h).
  autograd::CompositeRule rule;
  rule.first_order = [dims, count, group_sum, C](const std::vector<Array>& saved, const Array& g) {
    const Array &xs = saved[0], &mean = saved[1], &inv_std = saved[2], &scale = saved[3];
    // x - mean is written twice on purpose: one node read by both passes would be materialized
    // (a third pass over the activations), two are each fused into their pass.
    Array s1 = sum(g, dims, true), s2 = sum(mul(g, sub(xs, mean)), dims, true);
    Array t1 = s1, t2 = s2;  // the group's sums, which the statistics came from
    if (group_sum) {
      Array both = group_sum(cat({s1, s2}, 0));
      t1 = slice(both, 0, 0, 1);
      t2 = slice(both, 0, 1, 2);
    }
    // dx = scale * (g - sum(g) / n - (x - mean) * inv_std^2 * sum(g * (x - mean)) / n)
    Array k = mul(mul(inv_std, inv_std), div(t2, count));
    Array gx = mul(scale, sub(sub(g, div(t1, count)), mul(sub(xs, mean), k)));
    return std::vector<Array>{gx, reshape(mul(s2, inv_std), {C}), reshape(s1, {C})};
  };
  rule.composed = [dims, count, eps, group_sum, channel_shape](const std::vector<Array>& in) {
    BatchStatistics st = batch_statistics(in[0], dims, count, group_sum);
    Array out = mul(sub(in[0], st.mean), rsqrt(add(st.var, eps)));  // as the forward computes it
    if (in[1].defined()) out = mul(out, reshape(in[1], channel_shape));
    if (in[2].defined()) out = add(out, reshape(in[2], channel_shape));
    return out;
  };
  BatchNormResult r;
  r.output = autograd::attach_composite({x, weight, bias}, y,
                                        {x.detach(), mu, rstd, scale},
                                        std::move(rule), loc);
  if (running_mean.defined()) {
    NoGradGuard no_grad;
    const double m = o.momentum;
    Array batch_mean = reshape(mu, {C});
    // The running variance is unbiased, as PyTorch keeps it (n / (n - 1) times the batch's).
    Array unbiased = mul(reshape(var, {C}), n > 1 ? double(n) / double(n - 1) : 1.0);
    r.running_mean = add(mul(running_mean, 1 - m), mul(cast(batch_mean, running_mean.dtype()), m));
    r.running_var = add(mul(running_var, 1 - m), mul(cast(unbiased, running_var.dtype()), m));
  }
  return r;
}

}  // namespace ember
