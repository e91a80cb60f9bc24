// 1-D convolution and pooling layers (include/ember/nn/conv1d.h).
#include "ember/nn/conv1d.h"

#include "ember/nn/init.h"
#include "nn/layer_error.h"
#include "nn/json_util.h"

namespace ember::nn {

Conv1d::Conv1d(Conv1dLayerOptions opts) : options(opts) {
  if (opts.in <= 0 || opts.out <= 0 || opts.groups <= 0 || opts.in % opts.groups || opts.out % opts.groups)
    throw nn_error(fmt::format("Conv1d: in ({}) and out ({}) must be positive multiples of groups ({})", opts.in,
                            opts.out, opts.groups));
  if (opts.kernel <= 0) throw nn_error(fmt::format("Conv1d: kernel must be positive, got {}", opts.kernel));
  init::InitOptions io{.seed = opts.seed, .dtype = opts.dtype, .device = opts.device};
  Shape wshape{opts.out, opts.in / opts.groups, opts.kernel};
  weight = Param<3>(Tensor<3>(init::default_weight(wshape, io)));
  if (opts.bias) {
    if (io.seed) io.seed = *io.seed + 1;
    bias = Param<1>(Tensor<1>(init::default_bias(opts.out, init::fans(wshape).first, io)));
  }
}

Array Conv1d::forward(const Array& x, Loc loc) {
  UserCall call("Conv1d", loc);
  if (x.rank() != 3 || x.size(1) != options.in)
    throw call.error(fmt::format("expected input [N, {}, L], got {}", options.in, x.shape().str()));
  check_input_dtype("Conv1d", x, weight);
  ember::Conv1dOptions op{.stride = options.stride, .padding = options.padding, .dilation = options.dilation,
                          .groups = options.groups};
  return bias.defined() ? conv1d(x, weight.array(), bias.array(), op) : conv1d(x, weight.array(), op);
}

std::string Conv1dLayerOptions::to_json() const {
  json pad = padding.is_same ? json("same") : json{padding.left, padding.right};
  json j{{"in", in},         {"out", out},       {"kernel", kernel}, {"stride", stride},
         {"padding", pad},   {"dilation", dilation}, {"groups", groups}, {"bias", bias},
         {"dtype", std::string(dtype_name(dtype))}, {"device", device.str()}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

Conv1dLayerOptions Conv1dLayerOptions::from_json(const std::string& text) {
  json j = parse_json(text, "Conv1dLayerOptions");
  Conv1dLayerOptions o;
  read_field(j, "in", o.in);
  read_field(j, "out", o.out);
  read_field(j, "kernel", o.kernel);
  read_field(j, "stride", o.stride);
  read_field(j, "dilation", o.dilation);
  if (j.contains("padding")) {
    const json& p = j["padding"];
    if (p.is_string() && p.get<std::string>() == "same") o.padding = Padding1d::same();
    else if (p.is_number()) o.padding = Padding1d(p.get<int64_t>());
    else {
      std::vector<int64_t> v;
      read_field(j, "padding", v);
      if (v.size() != 2) throw nn_error("config field 'padding': expected \"same\", a number or [left, right]");
      o.padding = Padding1d(v[0], v[1]);
    }
  }
  read_field(j, "groups", o.groups);
  read_field(j, "bias", o.bias);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "Conv1dLayerOptions");
  return o;
}

static json pool_json(const Pool1dOptions& o) {
  return json{{"kernel", o.kernel}, {"stride", o.stride}, {"padding", o.padding},
              {"count_include_pad", o.count_include_pad}};
}
std::string MaxPool1d::config() const { return pool_json(options).dump(); }
std::string AvgPool1d::config() const { return pool_json(options).dump(); }
std::string AdaptiveAvgPool1d::config() const { return json{{"output", options.output}}.dump(); }

// A matmul with an [L, OL] averaging matrix (built on the host), so it differentiates for free.
Array adaptive_avg_pool1d(const Array& x, int64_t output, Loc loc) {
  UserCall call("adaptive_avg_pool1d", loc);
  if (x.rank() != 2 && x.rank() != 3)
    throw nn_error(fmt::format("adaptive_avg_pool1d: expected [N, C, L] or [C, L], got {}", x.shape().str()));
  if (!is_floating(x.dtype()))
    throw nn_error(fmt::format("adaptive_avg_pool1d: expected a floating input, got {}", dtype_name(x.dtype())));
  int64_t len = x.size(x.rank() - 1);
  if (output <= 0 || len <= 0)
    throw nn_error(fmt::format("adaptive_avg_pool1d: output size {} for input {}", output, x.shape().str()));
  std::vector<double> m(static_cast<size_t>(len * output), 0.0);
  for (int64_t i = 0; i < output; ++i) {
    int64_t start = i * len / output, end = ((i + 1) * len + output - 1) / output;
    for (int64_t l = start; l < end; ++l) m[static_cast<size_t>(l * output + i)] = 1.0 / double(end - start);
  }
  Array avg = cast(from_vector(m, Shape{len, output}, x.device()), x.dtype());
  return matmul(x, avg);
}

}  // namespace ember::nn
