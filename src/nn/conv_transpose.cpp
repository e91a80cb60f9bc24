// Transposed convolutions (include/ember/nn/conv_transpose.h): conv_transpose1d/2d as the
// data-gradient of a convolution (library op conv2d_backward_data), and their layers.
#include "ember/nn/conv_transpose.h"
#include "nn/layer_error.h"

#include <algorithm>

#include "ember/nn/init.h"
#include "nn/json_util.h"

namespace ember::nn {

namespace {

std::string pair_text(IntPair p) { return fmt::format("({}, {})", p.h, p.w); }

// The output size of one spatial dim, split into the part conv2d_backward_data produces (the
// largest size whose forward convolution has exactly `in` outputs) and the zero rows/columns
// past it (output_padding >= stride, allowed when output_padding < dilation).
struct DimPlan {
  int64_t direct = 0, extra = 0;
};
DimPlan plan_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t op, int64_t d) {
  const int64_t base = (in - 1) * s - 2 * p + d * (k - 1) + 1;
  const int64_t direct_op = std::min(op, s - 1);
  return {base + direct_op, op - direct_op};
}

}  // namespace

Array conv_transpose2d(const Array& x, const Array& weight, const Array& bias, ConvTranspose2dOptions o, Loc loc) {
  UserCall call("conv_transpose2d", loc);
  const char* op = "conv_transpose2d";
  if (!x.defined() || !weight.defined()) throw nn_error(fmt::format("{}: input and weight must be defined", op));
  if (x.rank() != 4) throw nn_error(fmt::format("{}: input must be 4-D [N, C, H, W], got {}", op, x.shape().str()));
  if (weight.rank() != 4)
    throw nn_error(fmt::format("{}: weight must be 4-D [in, out / groups, KH, KW], got {}", op, weight.shape().str()));
  if (!is_floating(x.dtype()) || !is_floating(weight.dtype()))
    throw nn_error(fmt::format("{}: needs floating input and weight, got {} and {}", op, dtype_name(x.dtype()),
                            dtype_name(weight.dtype())));
  if (o.groups < 1) throw nn_error(fmt::format("{}: groups must be at least 1, got {}", op, o.groups));
  if (o.stride.h < 1 || o.stride.w < 1 || o.dilation.h < 1 || o.dilation.w < 1)
    throw nn_error(fmt::format("{}: stride {} and dilation {} must be at least 1", op, pair_text(o.stride),
                            pair_text(o.dilation)));
  if (o.padding.h < 0 || o.padding.w < 0 || o.output_padding.h < 0 || o.output_padding.w < 0)
    throw nn_error(fmt::format("{}: padding {} and output_padding {} must not be negative", op, pair_text(o.padding),
                            pair_text(o.output_padding)));
  if (o.output_padding.h >= std::max(o.stride.h, o.dilation.h) ||
      o.output_padding.w >= std::max(o.stride.w, o.dilation.w))
    throw nn_error(fmt::format("{}: output_padding {} must be smaller than the stride {} or the dilation {}", op,
                            pair_text(o.output_padding), pair_text(o.stride), pair_text(o.dilation)));
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  const int64_t C = xs[1];
  if (ws[0] != C)
    throw nn_error(fmt::format("{}: input {} has {} channels, weight {} expects {} (dim 0)", op, xs.str(), C, ws.str(),
                            ws[0]));
  if (C % o.groups != 0)
    throw nn_error(fmt::format("{}: groups {} must divide the input channels {}", op, o.groups, C));
  const int64_t O = ws[1] * o.groups;
  const DimPlan ph = plan_dim(xs[2], ws[2], o.stride.h, o.padding.h, o.output_padding.h, o.dilation.h);
  const DimPlan pw = plan_dim(xs[3], ws[3], o.stride.w, o.padding.w, o.output_padding.w, o.dilation.w);
  if (ws[2] < 1 || ws[3] < 1 || xs[2] < 1 || xs[3] < 1 || ph.direct < 1 || pw.direct < 1)
    throw nn_error(fmt::format("{}: input {}, weight {}, padding {}: the output size ({}, {}) is not positive", op,
                            xs.str(), ws.str(), pair_text(o.padding), ph.direct + ph.extra, pw.direct + pw.extra));
  if (bias.defined() && (bias.rank() != 1 || bias.size(0) != O))
    throw nn_error(fmt::format("{}: bias must have shape [{}] (the output channels), got {}", op, O, bias.shape().str()));

  Conv2dOptions fwd{.stride = o.stride, .padding = Padding2d(o.padding.h, o.padding.w), .dilation = o.dilation,
                    .groups = o.groups};
  Array y = conv2d_backward_data(x, weight, Shape{xs[0], O, ph.direct, pw.direct}, fwd);
  if (ph.extra > 0 || pw.extra > 0) y = pad(y, {0, pw.extra, 0, ph.extra});
  if (bias.defined()) y = add(y, reshape(cast(bias, y.dtype()), Shape{1, O, 1, 1}));
  return y;
}

Array conv_transpose2d(const Array& x, const Array& weight, ConvTranspose2dOptions opts, Loc loc) {
  UserCall call("conv_transpose2d", loc);
  return conv_transpose2d(x, weight, Array(), opts);
}

Array conv_transpose1d(const Array& x, const Array& weight, const Array& bias, ConvTranspose1dOptions o, Loc loc) {
  UserCall call("conv_transpose1d", loc);
  const char* op = "conv_transpose1d";
  if (!x.defined() || !weight.defined()) throw nn_error(fmt::format("{}: input and weight must be defined", op));
  if (x.rank() != 3) throw nn_error(fmt::format("{}: input must be 3-D [N, C, L], got {}", op, x.shape().str()));
  if (weight.rank() != 3)
    throw nn_error(fmt::format("{}: weight must be 3-D [in, out / groups, K], got {}", op, weight.shape().str()));
  if (o.output_padding >= std::max(o.stride, o.dilation))
    throw nn_error(fmt::format("{}: output_padding {} must be smaller than the stride {} or the dilation {}", op,
                            o.output_padding, o.stride, o.dilation));
  ConvTranspose2dOptions o2{.stride = {1, o.stride}, .padding = {0, o.padding}, .output_padding = {0, o.output_padding},
                            .dilation = {1, o.dilation}, .groups = o.groups};
  try {
    return squeeze(conv_transpose2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, o2), 2);
  } catch (const Error& e) {
    // Name this op; the 2-D message's shapes carry the extra unit dim.
    throw Error(fmt::format("{} (as a 2-D transposed convolution over [N, C, 1, L]): {}", op, e.what()));
  }
}

Array conv_transpose1d(const Array& x, const Array& weight, ConvTranspose1dOptions opts, Loc loc) {
  UserCall call("conv_transpose1d", loc);
  return conv_transpose1d(x, weight, Array(), opts);
}

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
