// Normalization layers (include/ember/nn/norm.h).
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
  std::vector<int> dims{0};
  for (int d = 2; d < x.rank(); ++d) dims.push_back(d);
  std::vector<int64_t> bshape(size_t(x.rank()), 1);
  bshape[1] = options.features;
  Shape channel_shape(bshape);

  Array mu, var;
  bool use_batch = is_training() || !options.track_running_stats;
  if (use_batch) {
    int64_t n = x.numel() / options.features;  // elements per channel in the statistics
    if (is_training() && group_sum) {
      // Two passes over the group, as the local formula below: the mean of every rank's rows,
      // then the mean squared deviation from it (numerically the same as one process's batch).
      Array counts = group_sum(full(Shape{}, n, {.dtype = DType::I64, .device = x.device()}));
      if (!counts.defined() || counts.numel() != 1)
        throw call.error("group_sum must return an array of the argument's shape");
      n = counts.item<int64_t>();
      if (n <= 0) throw call.error("the synchronized batch is empty on every rank");
      mu = div(group_sum(sum(x, dims, true)), double(n));
      Array centered = sub(x, mu);
      var = div(group_sum(sum(mul(centered, centered), dims, true)), double(n));
    } else {
      mu = mean(x, dims, true);
      Array centered = sub(x, mu);
      var = mean(mul(centered, centered), dims, true);
    }
    if (is_training() && options.track_running_stats) {
      NoGradGuard no_grad;
      double m = options.momentum;
      Array batch_mean = reshape(mu.detach(), {options.features});
      Array unbiased = mul(reshape(var.detach(), {options.features}), n > 1 ? double(n) / double(n - 1) : 1.0);
      running_mean.set(add(mul(running_mean.array(), 1 - m), mul(cast(batch_mean, running_mean.array().dtype()), m)));
      running_var.set(add(mul(running_var.array(), 1 - m), mul(cast(unbiased, running_var.array().dtype()), m)));
      num_batches_tracked.set(add(num_batches_tracked.array(), 1));
    }
  } else {
    return batch_norm_inference(x, reshape(running_mean.array(), channel_shape),
                                reshape(running_var.array(), channel_shape),
                                weight.defined() ? reshape(weight.array(), channel_shape) : Array(),
                                bias.defined() ? reshape(bias.array(), channel_shape) : Array(), options.eps);
  }
  Array y = div(sub(x, mu), sqrt(add(var, options.eps)));
  if (weight.defined()) y = mul(y, reshape(weight.array(), channel_shape));
  if (bias.defined()) y = add(y, reshape(bias.array(), channel_shape));
  return y;
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

static std::vector<int> trailing_dims(const Array& x, int n, const char* op) {
  if (n < 1 || n > x.rank())
    throw nn_error(fmt::format("{}: cannot normalize {} trailing dims of {}", op, n, x.shape().str()));
  std::vector<int> dims;
  for (int d = x.rank() - n; d < x.rank(); ++d) dims.push_back(d);
  return dims;
}

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
