// nn::Dropout (include/ember/nn/dropout.h).
#include "ember/nn/dropout.h"
#include "nn/layer_error.h"

#include "nn/json_util.h"

namespace ember::nn {

Dropout::Dropout(DropoutOptions opts) : options(opts) {
  if (opts.p < 0 || opts.p > 1) throw nn_error(fmt::format("Dropout: p must be in [0, 1], got {}", opts.p));
}

Array Dropout::forward(const Array& x, Loc loc) {
  UserCall call("Dropout", loc);
  std::optional<uint64_t> seed;
  if (options.seed) seed = *options.seed * 0x9E3779B97F4A7C15ull + calls_;
  if (is_training()) ++calls_;
  return dropout(x, options.p, is_training(), seed);
}

std::string DropoutOptions::to_json() const {
  json j{{"p", p}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

DropoutOptions DropoutOptions::from_json(const std::string& text) {
  json j = parse_json(text, "DropoutOptions");
  DropoutOptions o;
  read_field(j, "p", o.p);
  read_optional(j, "seed", o.seed);
  reject_unknown_keys(j, o.to_json(), "DropoutOptions");
  return o;
}

}  // namespace ember::nn
