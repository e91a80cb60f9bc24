// More activations (include/ember/nn/activation_extra.h).
#include "ember/nn/activation_extra.h"
#include "nn/layer_error.h"

#include "nn/json_util.h"

namespace ember::nn {

Array selu(const Array& x, Loc loc) {
  UserCall call("selu", loc); return mul(ember::elu(x, kSeluAlpha), kSeluScale); }

Array softsign(const Array& x, Loc loc) {
  UserCall call("softsign", loc); return div(x, add(abs(x), 1.0)); }

Array swiglu(const Array& x, int dim, Loc loc) {
  UserCall call("swiglu", loc);
  int d = dim < 0 ? dim + x.rank() : dim;
  if (d < 0 || d >= x.rank() || x.size(d) % 2)
    throw nn_error(fmt::format("swiglu: dim {} of {} must exist and have an even size", dim, x.shape().str()));
  int64_t h = x.size(d) / 2;
  return mul(ember::silu(slice(x, d, 0, h)), slice(x, d, h, 2 * h));
}

Array prelu(const Array& x, const Array& weight, Loc loc) {
  UserCall call("prelu", loc);
  if (weight.rank() != 1) throw nn_error(fmt::format("prelu: weight must be rank 1, got {}", weight.shape().str()));
  Array w = weight;
  if (weight.numel() != 1) {
    int cdim = x.rank() >= 2 ? 1 : 0;
    if (x.rank() == 0 || x.size(cdim) != weight.numel())
      throw nn_error(fmt::format("prelu: {} weights for input {} (expected 1 or the channels, dim {})", weight.numel(),
                              x.shape().str(), cdim));
    std::vector<int64_t> s(static_cast<size_t>(x.rank()), 1);
    s[static_cast<size_t>(cdim)] = weight.numel();
    w = reshape(weight, Shape(s));
  }
  return where(gt(x, 0.0), x, mul(w, x));
}

std::string SwiGLU::config() const { return json{{"dim", options.dim}}.dump(); }

PReLU::PReLU(PReLUOptions opts) : options(opts) {
  if (opts.num_parameters <= 0)
    throw nn_error(fmt::format("PReLU: num_parameters must be positive, got {}", opts.num_parameters));
  weight = Param<1>(Tensor<1>(full({opts.num_parameters}, opts.init, {.dtype = opts.dtype, .device = opts.device})));
}

std::string PReLUOptions::to_json() const {
  return json{{"num_parameters", num_parameters}, {"init", init}, {"dtype", std::string(dtype_name(dtype))},
              {"device", device.str()}}
      .dump();
}

PReLUOptions PReLUOptions::from_json(const std::string& text) {
  json j = parse_json(text, "PReLUOptions");
  PReLUOptions o;
  read_field(j, "num_parameters", o.num_parameters);
  read_field(j, "init", o.init);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "PReLUOptions");
  return o;
}

}  // namespace ember::nn
