// The GroupNorm and InstanceNorm layers (include/ember/nn/group_norm.h), which run group_norm and
// instance_norm (src/ops/nn_norm.cpp).
#include "ember/nn/group_norm.h"
#include "nn/layer_error.h"
#include "ember/autocast.h"

#include "nn/json_util.h"

namespace ember::nn {

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
