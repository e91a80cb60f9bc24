// Convolution and pooling layers (include/ember/nn/conv.h).
#include "ember/nn/conv.h"
#include "nn/layer_error.h"

#include "ember/nn/init.h"
#include "nn/json_util.h"

namespace ember::nn {

Conv2d::Conv2d(Conv2dLayerOptions opts) : options(opts) {
  if (opts.in <= 0 || opts.out <= 0 || opts.groups <= 0 || opts.in % opts.groups || opts.out % opts.groups)
    throw nn_error(fmt::format("Conv2d: in ({}) and out ({}) must be positive multiples of groups ({})", opts.in,
                            opts.out, opts.groups));
  if (opts.kernel.h <= 0 || opts.kernel.w <= 0)
    throw nn_error(fmt::format("Conv2d: kernel must be positive, got {}x{}", opts.kernel.h, opts.kernel.w));
  init::InitOptions io{.seed = opts.seed, .dtype = opts.dtype, .device = opts.device};
  Shape wshape{opts.out, opts.in / opts.groups, opts.kernel.h, opts.kernel.w};
  weight = Param<4>(Tensor<4>(init::default_weight(wshape, io)));
  if (opts.bias) {
    if (io.seed) io.seed = *io.seed + 1;
    bias = Param<1>(Tensor<1>(init::default_bias(opts.out, init::fans(wshape).first, io)));
  }
}

Array Conv2d::forward(const Array& x, Loc loc) {
  UserCall call("Conv2d", loc);
  if (x.rank() != 4 || x.size(1) != options.in)
    throw call.error(fmt::format("expected input [N, {}, H, W], got {}", options.in, x.shape().str()));
  check_input_dtype("Conv2d", x, weight);
  ember::Conv2dOptions op{.stride = options.stride, .padding = options.padding, .dilation = options.dilation,
                          .groups = options.groups};
  return bias.defined() ? conv2d(x, weight.array(), bias.array(), op) : conv2d(x, weight.array(), op);
}

std::string Conv2dLayerOptions::to_json() const {
  json pad = padding.is_same ? json("same") : json{padding.top, padding.bottom, padding.left, padding.right};
  json j{{"in", in},
         {"out", out},
         {"kernel", {kernel.h, kernel.w}},
         {"stride", {stride.h, stride.w}},
         {"padding", pad},
         {"dilation", {dilation.h, dilation.w}},
         {"groups", groups},
         {"bias", bias},
         {"dtype", std::string(dtype_name(dtype))},
         {"device", device.str()}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

// [h, w] or one number.
static void read_pair(const json& j, const char* key, IntPair& out) {
  if (!j.contains(key)) return;
  std::vector<int64_t> v;
  if (j[key].is_number()) v = {j[key].get<int64_t>()};
  else read_field(j, key, v);
  if (v.size() == 1) out = IntPair(v[0]);
  else if (v.size() == 2) out = IntPair(v[0], v[1]);
  else throw nn_error(fmt::format("config field '{}': expected [h, w] or one number", key));
}

Conv2dLayerOptions Conv2dLayerOptions::from_json(const std::string& text) {
  json j = parse_json(text, "Conv2dLayerOptions");
  Conv2dLayerOptions o;
  read_field(j, "in", o.in);
  read_field(j, "out", o.out);
  read_pair(j, "kernel", o.kernel);
  read_pair(j, "stride", o.stride);
  read_pair(j, "dilation", o.dilation);
  if (j.contains("padding")) {
    const json& p = j["padding"];
    std::vector<int64_t> v;
    if (p.is_string() && p.get<std::string>() == "same") o.padding = Padding2d::same();
    else if (p.is_number()) o.padding = Padding2d(p.get<int64_t>());
    else {
      read_field(j, "padding", v);
      if (v.size() == 2) o.padding = Padding2d(v[0], v[1]);
      else if (v.size() == 4) o.padding = Padding2d(v[0], v[1], v[2], v[3]);
      else throw nn_error("config field 'padding': expected \"same\", a number, [h, w] or [top, bottom, left, right]");
    }
  }
  read_field(j, "groups", o.groups);
  read_field(j, "bias", o.bias);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "Conv2dLayerOptions");
  return o;
}

static json pool_json(const Pool2dOptions& o) {
  return json{{"kernel", {o.kernel.h, o.kernel.w}},
              {"stride", {o.stride.h, o.stride.w}},
              {"padding", {o.padding.h, o.padding.w}},
              {"count_include_pad", o.count_include_pad}};
}
std::string MaxPool2d::config() const { return pool_json(options).dump(); }
std::string AvgPool2d::config() const { return pool_json(options).dump(); }
std::string AdaptiveAvgPool2d::config() const { return json{{"output", {options.output.h, options.output.w}}}.dump(); }

Array global_avg_pool2d(const Array& x, Loc loc) {
  UserCall call("global_avg_pool2d", loc);
  if (x.rank() != 4) throw nn_error(fmt::format("global_avg_pool2d: expected [N, C, H, W], got {}", x.shape().str()));
  return mean(x, {2, 3});
}

}  // namespace ember::nn
