// 3-D convolution (include/ember/nn/conv3d.h) composed from existing ops: depth padding (pad),
// strided depth slices per kernel-depth tap (slice, stack), a permute/reshape that folds the taps
// into the channels (group-major, as the grouped weight expects) and the output depths into the
// batch, and one conv2d over (H, W). Autodiff comes from those ops.
#include "ember/nn/conv3d.h"

#include "ember/nn/init.h"
#include "nn/layer_error.h"
#include "nn/json_util.h"

namespace ember::nn {

namespace {

std::string triple_text(const IntTriple& t) { return fmt::format("({}, {}, {})", t.d, t.h, t.w); }

struct Pads {
  int64_t lo[3], hi[3];
};

}  // namespace

Array conv3d(const Array& x, const Array& weight, const Array& bias, Conv3dOptions o, Loc loc) {
  UserCall call("conv3d", loc);
  const char* op = "conv3d";
  if (!x.defined() || !weight.defined()) throw nn_error(fmt::format("{}: input and weight must be defined", op));
  if (x.rank() != 5) throw nn_error(fmt::format("{}: input must be 5-D [N, C, D, H, W], got {}", op, x.shape().str()));
  if (weight.rank() != 5)
    throw nn_error(fmt::format("{}: weight must be 5-D [O, C / groups, KD, KH, KW], got {}", op, weight.shape().str()));
  if (!is_floating(x.dtype()) || !is_floating(weight.dtype()))
    throw nn_error(fmt::format("{}: needs floating input and weight, got {} and {}", op, dtype_name(x.dtype()),
                            dtype_name(weight.dtype())));
  if (o.groups < 1) throw nn_error(fmt::format("{}: groups must be at least 1, got {}", op, o.groups));
  const int64_t stride[3] = {o.stride.d, o.stride.h, o.stride.w};
  const int64_t dil[3] = {o.dilation.d, o.dilation.h, o.dilation.w};
  for (int i = 0; i < 3; ++i)
    if (stride[i] < 1 || dil[i] < 1)
      throw nn_error(fmt::format("{}: stride {} and dilation {} must be at least 1", op, triple_text(o.stride),
                              triple_text(o.dilation)));
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  const int64_t N = xs[0], C = xs[1], O = ws[0], g = o.groups;
  if (C % g != 0 || O % g != 0)
    throw nn_error(fmt::format("{}: groups {} must divide the input channels {} and the output channels {}", op, g, C, O));
  if (ws[1] * g != C)
    throw nn_error(fmt::format("{}: channel mismatch: input {} has {} channels, weight {} expects {} ({} per group x {} "
                            "groups)",
                            op, xs.str(), C, ws.str(), ws[1] * g, ws[1], g));
  for (int i = 0; i < 3; ++i)
    if (ws[2 + i] < 1) throw nn_error(fmt::format("{}: weight {} has an empty kernel dim", op, ws.str()));

  Pads p{};
  const int64_t given[3] = {o.padding.size.d, o.padding.size.h, o.padding.size.w};
  if (o.padding.is_same && (stride[0] != 1 || stride[1] != 1 || stride[2] != 1))
    throw nn_error(fmt::format("{}: padding 'same' needs stride 1, got {}", op, triple_text(o.stride)));
  for (int i = 0; i < 3; ++i) {
    if (o.padding.is_same) {
      const int64_t total = dil[i] * (ws[2 + i] - 1);
      p.lo[i] = total / 2;
      p.hi[i] = total - p.lo[i];
    } else {
      if (given[i] < 0)
        throw nn_error(fmt::format("{}: padding must not be negative, got {}", op, triple_text(o.padding.size)));
      p.lo[i] = p.hi[i] = given[i];
    }
  }
  int64_t out[3];
  for (int i = 0; i < 3; ++i) {
    const int64_t span = xs[2 + i] + p.lo[i] + p.hi[i] - dil[i] * (ws[2 + i] - 1) - 1;
    out[i] = span < 0 ? 0 : span / stride[i] + 1;
    if (out[i] < 1)
      throw nn_error(fmt::format("{}: kernel ({}, {}, {}) with dilation {} is larger than the padded input ({}, {}, {})",
                              op, ws[2], ws[3], ws[4], triple_text(o.dilation), xs[2] + p.lo[0] + p.hi[0],
                              xs[3] + p.lo[1] + p.hi[1], xs[4] + p.lo[2] + p.hi[2]));
  }
  if (bias.defined() && (bias.rank() != 1 || bias.size(0) != O))
    throw nn_error(fmt::format("{}: bias must have shape [{}] (the output channels), got {}", op, O, bias.shape().str()));

  const int64_t KD = ws[2], OD = out[0], H = xs[3], W = xs[4];
  Array xp = (p.lo[0] || p.hi[0]) ? pad(x, {0, 0, 0, 0, p.lo[0], p.hi[0]}) : x;
  std::vector<Array> taps;
  taps.reserve(static_cast<size_t>(KD));
  for (int64_t kd = 0; kd < KD; ++kd) {
    const int64_t start = kd * dil[0];
    taps.push_back(slice(xp, 2, start, start + (OD - 1) * stride[0] + 1, stride[0]));  // [N, C, OD, H, W]
  }
  Array t = stack(taps, 2);                                 // [N, C, KD, OD, H, W]
  t = reshape(t, Shape{N, g, C / g, KD, OD, H, W});         // channels split into groups
  t = permute(t, {0, 4, 1, 3, 2, 5, 6});                    // [N, OD, g, KD, C / g, H, W]
  t = reshape(t, Shape{N * OD, C * KD, H, W});
  Array w2 = reshape(permute(weight, {0, 2, 1, 3, 4}), Shape{O, KD * (C / g), ws[3], ws[4]});
  Conv2dOptions o2{.stride = {stride[1], stride[2]},
                   .padding = Padding2d(p.lo[1], p.hi[1], p.lo[2], p.hi[2]),
                   .dilation = {dil[1], dil[2]},
                   .groups = g};
  Array y = conv2d(t, w2, bias, o2);  // [N * OD, O, OH, OW]
  y = reshape(y, Shape{N, OD, O, out[1], out[2]});
  return permute(y, {0, 2, 1, 3, 4});
}

Array conv3d(const Array& x, const Array& weight, Conv3dOptions opts, Loc loc) {
  UserCall call("conv3d", loc); return conv3d(x, weight, Array(), opts); }

// ---- layer --------------------------------------------------------------------------------------
Conv3d::Conv3d(Conv3dLayerOptions opts) : options(opts) {
  if (opts.in <= 0 || opts.out <= 0 || opts.groups <= 0 || opts.in % opts.groups || opts.out % opts.groups)
    throw nn_error(fmt::format("Conv3d: in ({}) and out ({}) must be positive multiples of groups ({})", opts.in,
                            opts.out, opts.groups));
  if (opts.kernel.d <= 0 || opts.kernel.h <= 0 || opts.kernel.w <= 0)
    throw nn_error(fmt::format("Conv3d: kernel must be positive, got {}", triple_text(opts.kernel)));
  init::InitOptions io{.seed = opts.seed, .dtype = opts.dtype, .device = opts.device};
  Shape wshape{opts.out, opts.in / opts.groups, opts.kernel.d, opts.kernel.h, opts.kernel.w};
  weight = Param<5>(Tensor<5>(init::default_weight(wshape, io)));
  if (opts.bias) {
    if (io.seed) io.seed = *io.seed + 1;
    bias = Param<1>(Tensor<1>(init::default_bias(opts.out, init::fans(wshape).first, io)));
  }
}

Array Conv3d::forward(const Array& x, Loc loc) {
  UserCall call("Conv3d", loc);
  if (x.rank() != 5 || x.size(1) != options.in)
    throw call.error(fmt::format("expected input [N, {}, D, H, W], got {}", options.in, x.shape().str()));
  check_input_dtype("Conv3d", x, weight);
  Conv3dOptions o{.stride = options.stride, .padding = options.padding, .dilation = options.dilation,
                  .groups = options.groups};
  return bias.defined() ? conv3d(x, weight.array(), bias.array(), o) : conv3d(x, weight.array(), o);
}

namespace {

json triple_json(const IntTriple& t) { return json{t.d, t.h, t.w}; }

// [d, h, w] or one number.
void read_triple(const json& j, const char* key, IntTriple& out) {
  if (!j.contains(key)) return;
  std::vector<int64_t> v;
  if (j[key].is_number()) v = {j[key].get<int64_t>()};
  else read_field(j, key, v);
  if (v.size() == 1) out = IntTriple(v[0]);
  else if (v.size() == 3) out = IntTriple(v[0], v[1], v[2]);
  else throw nn_error(fmt::format("config field '{}': expected [d, h, w] or one number", key));
}

}  // namespace

std::string Conv3dLayerOptions::to_json() const {
  json j{{"in", in},
         {"out", out},
         {"kernel", triple_json(kernel)},
         {"stride", triple_json(stride)},
         {"padding", padding.is_same ? json("same") : triple_json(padding.size)},
         {"dilation", triple_json(dilation)},
         {"groups", groups},
         {"bias", bias},
         {"dtype", std::string(dtype_name(dtype))},
         {"device", device.str()}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

Conv3dLayerOptions Conv3dLayerOptions::from_json(const std::string& text) {
  json j = parse_json(text, "Conv3dLayerOptions");
  Conv3dLayerOptions o;
  read_field(j, "in", o.in);
  read_field(j, "out", o.out);
  read_triple(j, "kernel", o.kernel);
  read_triple(j, "stride", o.stride);
  read_triple(j, "dilation", o.dilation);
  if (j.contains("padding")) {
    const json& p = j["padding"];
    if (p.is_string()) {
      if (p.get<std::string>() != "same")
        throw nn_error(fmt::format("config field 'padding': expected \"same\", a number or [d, h, w], got {}", p.dump()));
      o.padding = Padding3d::same();
    } else {
      read_triple(j, "padding", o.padding.size);
    }
  }
  read_field(j, "groups", o.groups);
  read_field(j, "bias", o.bias);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "Conv3dLayerOptions");
  return o;
}

}  // namespace ember::nn
