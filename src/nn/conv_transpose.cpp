// The ConvTranspose1d/2d layers (include/ember/nn/conv_transpose.h), which run
// conv_transpose1d/2d (src/ops/nn_conv.cpp).
#include "ember/nn/conv_transpose.h"
#include "nn/layer_error.h"

#include <algorithm>

#include "ember/nn/init.h"
#include "nn/json_util.h"

namespace ember::nn {

namespace {
std::string pair_text(IntPair p) { return fmt::format("({}, {})", p.h, p.w); }
}  // namespace

// ---- layers -------------------------------------------------------------------------------------
namespace {

void check_layer(const char* layer, int64_t in, int64_t out, int64_t groups, bool kernel_ok, const std::string& kernel) {
  if (in <= 0 || out <= 0 || groups <= 0 || in % groups || out % groups)
    throw nn_error(fmt::format("{}: in ({}) and out ({}) must be positive multiples of groups ({})", layer, in, out,
                            groups));
  if (!kernel_ok) throw nn_error(fmt::format("{}: kernel must be positive, got {}", layer, kernel));
}

// [h, w] or one number.
void read_pair(const json& j, const char* key, IntPair& out) {
  if (!j.contains(key)) return;
  std::vector<int64_t> v;
  if (j[key].is_number()) v = {j[key].get<int64_t>()};
  else read_field(j, key, v);
  if (v.size() == 1) out = IntPair(v[0]);
  else if (v.size() == 2) out = IntPair(v[0], v[1]);
  else throw nn_error(fmt::format("config field '{}': expected [h, w] or one number", key));
}

json pair_json(IntPair p) { return json{p.h, p.w}; }

}  // namespace

ConvTranspose1d::ConvTranspose1d(ConvTranspose1dLayerOptions opts) : options(opts) {
  check_layer("ConvTranspose1d", opts.in, opts.out, opts.groups, opts.kernel > 0, std::to_string(opts.kernel));
  init::InitOptions io{.seed = opts.seed, .dtype = opts.dtype, .device = opts.device};
  Shape wshape{opts.in, opts.out / opts.groups, opts.kernel};
  weight = Param<3>(Tensor<3>(init::default_weight(wshape, io)));
  if (opts.bias) {
    if (io.seed) io.seed = *io.seed + 1;
    bias = Param<1>(Tensor<1>(init::default_bias(opts.out, init::fans(wshape).first, io)));
  }
}

Array ConvTranspose1d::forward(const Array& x, Loc loc) {
  UserCall call("ConvTranspose1d", loc);
  if (x.rank() != 3 || x.size(1) != options.in)
    throw call.error(fmt::format("expected input [N, {}, L], got {}", options.in, x.shape().str()));
  check_input_dtype("ConvTranspose1d", x, weight);
  ConvTranspose1dOptions o{.stride = options.stride, .padding = options.padding,
                           .output_padding = options.output_padding, .dilation = options.dilation,
                           .groups = options.groups};
  return bias.defined() ? conv_transpose1d(x, weight.array(), bias.array(), o) : conv_transpose1d(x, weight.array(), o);
}

ConvTranspose2d::ConvTranspose2d(ConvTranspose2dLayerOptions opts) : options(opts) {
  check_layer("ConvTranspose2d", opts.in, opts.out, opts.groups, opts.kernel.h > 0 && opts.kernel.w > 0,
              pair_text(opts.kernel));
  init::InitOptions io{.seed = opts.seed, .dtype = opts.dtype, .device = opts.device};
  Shape wshape{opts.in, opts.out / opts.groups, opts.kernel.h, opts.kernel.w};
  weight = Param<4>(Tensor<4>(init::default_weight(wshape, io)));
  if (opts.bias) {
    if (io.seed) io.seed = *io.seed + 1;
    bias = Param<1>(Tensor<1>(init::default_bias(opts.out, init::fans(wshape).first, io)));
  }
}

Array ConvTranspose2d::forward(const Array& x, Loc loc) {
  UserCall call("ConvTranspose2d", loc);
  if (x.rank() != 4 || x.size(1) != options.in)
    throw call.error(fmt::format("expected input [N, {}, H, W], got {}", options.in, x.shape().str()));
  check_input_dtype("ConvTranspose2d", x, weight);
  ConvTranspose2dOptions o{.stride = options.stride, .padding = options.padding,
                           .output_padding = options.output_padding, .dilation = options.dilation,
                           .groups = options.groups};
  return bias.defined() ? conv_transpose2d(x, weight.array(), bias.array(), o) : conv_transpose2d(x, weight.array(), o);
}

std::string ConvTranspose1dLayerOptions::to_json() const {
  json j{{"in", in},
         {"out", out},
         {"kernel", kernel},
         {"stride", stride},
         {"padding", padding},
         {"output_padding", output_padding},
         {"dilation", dilation},
         {"groups", groups},
         {"bias", bias},
         {"dtype", std::string(dtype_name(dtype))},
         {"device", device.str()}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

ConvTranspose1dLayerOptions ConvTranspose1dLayerOptions::from_json(const std::string& text) {
  json j = parse_json(text, "ConvTranspose1dLayerOptions");
  ConvTranspose1dLayerOptions o;
  read_field(j, "in", o.in);
  read_field(j, "out", o.out);
  read_field(j, "kernel", o.kernel);
  read_field(j, "stride", o.stride);
  read_field(j, "padding", o.padding);
  read_field(j, "output_padding", o.output_padding);
  read_field(j, "dilation", o.dilation);
  read_field(j, "groups", o.groups);
  read_field(j, "bias", o.bias);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "ConvTranspose1dLayerOptions");
  return o;
}

std::string ConvTranspose2dLayerOptions::to_json() const {
  json j{{"in", in},
         {"out", out},
         {"kernel", pair_json(kernel)},
         {"stride", pair_json(stride)},
         {"padding", pair_json(padding)},
         {"output_padding", pair_json(output_padding)},
         {"dilation", pair_json(dilation)},
         {"groups", groups},
         {"bias", bias},
         {"dtype", std::string(dtype_name(dtype))},
         {"device", device.str()}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

ConvTranspose2dLayerOptions ConvTranspose2dLayerOptions::from_json(const std::string& text) {
  json j = parse_json(text, "ConvTranspose2dLayerOptions");
  ConvTranspose2dLayerOptions o;
  read_field(j, "in", o.in);
  read_field(j, "out", o.out);
  read_pair(j, "kernel", o.kernel);
  read_pair(j, "stride", o.stride);
  read_pair(j, "padding", o.padding);
  read_pair(j, "output_padding", o.output_padding);
  read_pair(j, "dilation", o.dilation);
  read_field(j, "groups", o.groups);
  read_field(j, "bias", o.bias);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "ConvTranspose2dLayerOptions");
  return o;
}

}  // namespace ember::nn
