// nn::Linear (include/ember/nn/linear.h).
#include "ember/nn/linear.h"
#include "nn/layer_error.h"
#include "ember/autocast.h"

#include <fmt/format.h>

#include "ember/nn/init.h"
#include "nn/json_util.h"

namespace ember::nn {

Linear::Linear(LinearOptions opts) : options(opts) {
  if (opts.in <= 0 || opts.out <= 0)
    throw nn_error(fmt::format("Linear: in and out must be positive, got in = {}, out = {}", opts.in, opts.out));
  init::InitOptions io{.seed = opts.seed, .dtype = opts.dtype, .device = opts.device};
  weight = Param<2>(Tensor<2>(init::default_weight({opts.out, opts.in}, io)));
  if (opts.bias) {
    if (io.seed) io.seed = *io.seed + 1;
    bias = Param<1>(Tensor<1>(init::default_bias(opts.out, opts.in, io)));
  }
}

Array Linear::forward(const Array& x, Loc loc) {
  UserCall call("Linear", loc);
  if (x.rank() < 1 || x.size(-1) != options.in)
    throw call.error(fmt::format("expected input [..., {}], got {}", options.in, x.shape().str()));
  check_input_dtype("Linear", x, weight);
  // Under autocast the weight is cast before the transpose: the cast writes a contiguous copy and
  // the matmul reads it transposed in place (a cast of the transposed view would write the copy
  // transposed, a strided pass), and the weight's gradient comes back contiguous.
  Array y = matmul(x, transpose(autocast_low(weight.array()), 0, 1));
  // Under autocast the bias joins the low-precision matmul (autocast_policy.def: nn::Linear).
  if (bias.defined()) y = add(y, autocast_low(bias.array()));
  return y;
}

std::string LinearOptions::to_json() const {
  json j{{"in", in}, {"out", out}, {"bias", bias}, {"dtype", std::string(dtype_name(dtype))}, {"device", device.str()}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

LinearOptions LinearOptions::from_json(const std::string& text) {
  json j = parse_json(text, "LinearOptions");
  LinearOptions o;
  read_field(j, "in", o.in);
  read_field(j, "out", o.out);
  read_field(j, "bias", o.bias);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "LinearOptions");
  return o;
}

}  // namespace ember::nn

namespace ember::nn {
std::string Flatten::config() const { return json{{"start_dim", options.start_dim}, {"end_dim", options.end_dim}}.dump(); }
}  // namespace ember::nn
