// The Conv3d layer (include/ember/nn/conv3d.h), which runs conv3d (src/ops/nn_conv.cpp).
#include "ember/nn/conv3d.h"

#include "ember/nn/init.h"
#include "nn/layer_error.h"
#include "nn/json_util.h"

namespace ember::nn {

namespace {
std::string triple_text(const IntTriple& t) { return fmt::format("({}, {}, {})", t.d, t.h, t.w); }
}  // namespace

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
