// Group and instance normalization (include/ember/nn/group_norm.h).
#include "ember/nn/group_norm.h"
#include "nn/layer_error.h"
#include "ember/autocast.h"

#include "nn/json_util.h"

namespace ember::nn {

static Shape channel_shape(const Array& x) {
  std::vector<int64_t> s(static_cast<size_t>(x.rank()), 1);
  s[1] = x.size(1);
  return Shape(s);
}

static Array affine(Array y, const Array& x, const Array& weight, const Array& bias) {
  if (weight.defined()) y = mul(y, reshape(weight, channel_shape(x)));
  if (bias.defined()) y = add(y, reshape(bias, channel_shape(x)));
  return y;
}

Array group_norm(const Array& x_in, int64_t groups, const Array& weight, const Array& bias, double eps, Loc loc) {
  UserCall call("group_norm", loc);
  const Array x = autocast_f32(x_in);  // statistics in f32 under autocast (autocast_policy.def)
  if (x.rank() < 2 || groups <= 0 || x.size(1) % groups)
    throw nn_error(fmt::format("group_norm: expected [N, C, *] with C a multiple of {} groups, got {}", groups,
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
  if (x.rank() < 3) throw nn_error(fmt::format("instance_norm: expected [N, C, *spatial], got {}", x.shape().str()));
  std::vector<int> dims;
  for (int d = 2; d < x.rank(); ++d) dims.push_back(d);
  Array mu = mean(x, dims, true);
  Array centered = sub(x, mu);
  Array var = mean(mul(centered, centered), dims, true);
  return affine(div(centered, sqrt(add(var, eps))), x, weight, bias);
}

GroupNorm::GroupNorm(GroupNormOptions opts) : options(opts) {
  if (opts.groups <= 0 || opts.channels <= 0 || opts.channels % opts.groups)
    throw nn_error(fmt::format("GroupNorm: channels ({}) must be a positive multiple of groups ({})", opts.channels,
                            opts.groups));
  TensorOptions to{.dtype = opts.dtype, .device = opts.device};
  if (opts.affine) {
    weight = Param<1>(Tensor<1>(ones({opts.channels}, to)));
    bias = Param<1>(Tensor<1>(zeros({opts.channels}, to)));
  }
}

Array GroupNorm::forward(const Array& x, Loc loc) {
  UserCall call("GroupNorm", loc);
  if (x.rank() < 2 || x.size(1) != options.channels)
    throw call.error(fmt::format("expected input [N, {}, *], got {}", options.channels, x.shape().str()));
  check_input_dtype("GroupNorm", x, weight);
  return group_norm(x, options.groups, weight.defined() ? weight.array() : Array(),
                    bias.defined() ? bias.array() : Array(), options.eps);
}

std::string GroupNormOptions::to_json() const {
  return json{{"groups", groups}, {"channels", channels}, {"eps", eps}, {"affine", affine},
              {"dtype", std::string(dtype_name(dtype))}, {"device", device.str()}}
      .dump();
}

GroupNormOptions GroupNormOptions::from_json(const std::string& text) {
  json j = parse_json(text, "GroupNormOptions");
  GroupNormOptions o;
  read_field(j, "groups", o.groups);
  read_field(j, "channels", o.channels);
  read_field(j, "eps", o.eps);
  read_field(j, "affine", o.affine);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "GroupNormOptions");
  return o;
}

InstanceNorm::InstanceNorm(InstanceNormOptions opts, int rank, const char* name)
    : options(opts), rank_(rank), name_(name) {
  if (opts.features <= 0) throw nn_error(fmt::format("{}: features must be positive, got {}", name, opts.features));
  TensorOptions to{.dtype = opts.dtype, .device = opts.device};
  if (opts.affine) {
    weight = Param<1>(Tensor<1>(ones({opts.features}, to)));
    bias = Param<1>(Tensor<1>(zeros({opts.features}, to)));
  }
}

Array InstanceNorm::forward(const Array& x, Loc loc) {
  UserCall call(name_, loc);
  if (x.rank() != rank_ || x.size(1) != options.features)
    throw call.error(fmt::format("expected input [N, {}, {}], got {}", options.features,
                            rank_ == 4 ? "H, W" : "L", x.shape().str()));
  check_input_dtype(name_, x, weight);
  return instance_norm(x, weight.defined() ? weight.array() : Array(), bias.defined() ? bias.array() : Array(),
                       options.eps);
}

std::string InstanceNormOptions::to_json() const {
  return json{{"features", features}, {"eps", eps}, {"affine", affine},
              {"dtype", std::string(dtype_name(dtype))}, {"device", device.str()}}
      .dump();
}

InstanceNormOptions InstanceNormOptions::from_json(const std::string& text) {
  json j = parse_json(text, "InstanceNormOptions");
  InstanceNormOptions o;
  read_field(j, "features", o.features);
  read_field(j, "eps", o.eps);
  read_field(j, "affine", o.affine);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "InstanceNormOptions");
  return o;
}

}  // namespace ember::nn
