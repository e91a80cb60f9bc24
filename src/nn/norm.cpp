// Normalization layers (include/ember/nn/norm.h) over the functions of src/ops/nn_norm.cpp.
#include "ember/nn/norm.h"
#include "nn/layer_error.h"
#include "ember/autocast.h"

#include <algorithm>
#include <limits>

#include "nn/json_util.h"

namespace ember::nn {

// ---- batch norm ----------------------------------------------------------------------------

BatchNorm::BatchNorm(BatchNormOptions opts, std::vector<int> ranks, const char* name)
    : options(opts), ranks_(std::move(ranks)), name_(name) {
  if (opts.features <= 0) throw nn_error(fmt::format("{}: features must be positive, got {}", name, opts.features));
  TensorOptions to{.dtype = opts.dtype, .device = opts.device};
  if (opts.affine) {
    weight = Param<1>(Tensor<1>(ones({opts.features}, to)));
    bias = Param<1>(Tensor<1>(zeros({opts.features}, to)));
  }
  if (opts.track_running_stats) {
    running_mean = Buffer<1>(Tensor<1>(zeros({opts.features}, to)));
    running_var = Buffer<1>(Tensor<1>(ones({opts.features}, to)));
    num_batches_tracked = make_buffer(zeros(Shape{}, {.dtype = DType::I64, .device = opts.device}));
  }
}

Array BatchNorm::forward(const Array& x_in, Loc loc) {
  UserCall call(name_, loc);
  const Array x = autocast_f32(x_in);  // statistics in f32 under autocast (autocast_policy.def)
  if (std::find(ranks_.begin(), ranks_.end(), x.rank()) == ranks_.end() || x.size(1) != options.features)
    throw call.error(fmt::format("expected input [N, {}{}], got {}", options.features,
                            ranks_.back() == 4 ? ", H, W" : "(, L)", x.shape().str()));
  if (weight.defined()) check_input_dtype(name_, x, weight);
  else check_input_dtype(name_, x, running_mean, "running_mean");
  // Batch statistics in training, and always without running statistics.
  const bool track = options.track_running_stats;
  BatchNormResult r = batch_norm(x, track ? running_mean.array() : Array(), track ? running_var.array() : Array(),
                                 weight.defined() ? weight.array() : Array(), bias.defined() ? bias.array() : Array(),
                                 {.training = is_training() || !track,
                                  .momentum = options.momentum,
                                  .eps = options.eps,
                                  .group_sum = is_training() ? group_sum : nullptr});
  if (is_training() && track) {
    running_mean.set(r.running_mean);
    running_var.set(r.running_var);
    NoGradGuard no_grad;
    num_batches_tracked.set(add(num_batches_tracked.array(), 1));
  }
  return r.output;
}

std::string BatchNormOptions::to_json() const {
  return json{{"features", features},
              {"eps", eps},
              {"momentum", momentum},
              {"affine", affine},
              {"track_running_stats", track_running_stats},
              {"dtype", std::string(dtype_name(dtype))},
              {"device", device.str()}}
      .dump();
}

BatchNormOptions BatchNormOptions::from_json(const std::string& text) {
  json j = parse_json(text, "BatchNormOptions");
  BatchNormOptions o;
  read_field(j, "features", o.features);
  read_field(j, "eps", o.eps);
  read_field(j, "momentum", o.momentum);
  read_field(j, "affine", o.affine);
  read_field(j, "track_running_stats", o.track_running_stats);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "BatchNormOptions");
  return o;
}

// ---- layer norm and RMS norm ---------------------------------------------------------------

static void check_trailing(const Array& x, const std::vector<int64_t>& shape, const UserCall& call) {
  int n = int(shape.size());
  bool ok = x.rank() >= n;
  for (int i = 0; ok && i < n; ++i) ok = x.size(x.rank() - n + i) == shape[size_t(i)];
  if (!ok) throw call.error(fmt::format("input {} does not end with {}", x.shape().str(), Shape(shape).str()));
}

LayerNorm::LayerNorm(LayerNormOptions opts) : options(std::move(opts)) {
  if (options.shape.empty()) throw nn_error("LayerNorm: shape is empty");
  TensorOptions to{.dtype = options.dtype, .device = options.device};
  if (options.affine) {
    weight = make_param(ones(Shape(options.shape), to));
    if (options.bias) bias = make_param(zeros(Shape(options.shape), to));
  }
}

Array LayerNorm::forward(const Array& x, Loc loc) {
  UserCall call("LayerNorm", loc);
  check_trailing(x, options.shape, call);
  check_input_dtype("LayerNorm", x, weight);
  return layer_norm(x, int(options.shape.size()), weight.defined() ? weight.array() : Array(),
                    bias.defined() ? bias.array() : Array(), options.eps);
}

std::string LayerNormOptions::to_json() const {
  return json{{"shape", shape}, {"eps", eps}, {"affine", affine}, {"bias", bias},
              {"dtype", std::string(dtype_name(dtype))}, {"device", device.str()}}
      .dump();
}

LayerNormOptions LayerNormOptions::from_json(const std::string& text) {
  json j = parse_json(text, "LayerNormOptions");
  LayerNormOptions o;
  read_field(j, "shape", o.shape);
  read_field(j, "eps", o.eps);
  read_field(j, "affine", o.affine);
  read_field(j, "bias", o.bias);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "LayerNormOptions");
  return o;
}

RMSNorm::RMSNorm(RMSNormOptions opts) : options(std::move(opts)) {
  if (options.shape.empty()) throw nn_error("RMSNorm: shape is empty");
  if (options.affine) weight = make_param(ones(Shape(options.shape), {.dtype = options.dtype, .device = options.device}));
}

Array RMSNorm::forward(const Array& x, Loc loc) {
  UserCall call("RMSNorm", loc);
  check_trailing(x, options.shape, call);
  check_input_dtype("RMSNorm", x, weight);
  double eps = options.eps ? *options.eps
               : x.dtype() == DType::F64 ? std::numeric_limits<double>::epsilon()
               : x.dtype() == DType::F16 ? 0.0009765625
               : x.dtype() == DType::BF16 ? 0.0078125
                                          : double(std::numeric_limits<float>::epsilon());
  return rms_norm(x, int(options.shape.size()), weight.defined() ? weight.array() : Array(), eps);
}

std::string RMSNormOptions::to_json() const {
  json j{{"shape", shape}, {"affine", affine}, {"dtype", std::string(dtype_name(dtype))}, {"device", device.str()}};
  if (eps) j["eps"] = *eps;
  return j.dump();
}

RMSNormOptions RMSNormOptions::from_json(const std::string& text) {
  json j = parse_json(text, "RMSNormOptions");
  RMSNormOptions o;
  read_field(j, "shape", o.shape);
  read_optional(j, "eps", o.eps);
  read_field(j, "affine", o.affine);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "RMSNormOptions");
  return o;
}

}  // namespace ember::nn
