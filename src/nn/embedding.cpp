// nn::Embedding (include/ember/nn/embedding.h).
#include "ember/nn/embedding.h"
#include "nn/layer_error.h"

#include "ember/nn/init.h"
#include "nn/json_util.h"
#include "ops/nn_embedding.h"

namespace ember::nn {

Embedding::Embedding(EmbeddingOptions opts) : options(opts) {
  if (opts.num <= 0 || opts.dim <= 0)
    throw nn_error(fmt::format("Embedding: num and dim must be positive, got {} and {}", opts.num, opts.dim));
  if (opts.padding_idx) {
    if (*opts.padding_idx < -opts.num || *opts.padding_idx >= opts.num)
      throw nn_error(fmt::format("Embedding: padding_idx {} out of range for {} entries", *opts.padding_idx, opts.num));
    if (*opts.padding_idx < 0) options.padding_idx = *opts.padding_idx + opts.num;
  }
  Array w = init::normal({opts.num, opts.dim}, 0, 1, {.seed = opts.seed, .dtype = opts.dtype, .device = opts.device});
  if (options.padding_idx) {
    Array row = reshape(eq(arange(0, opts.num, 1, DType::I64, opts.device), *options.padding_idx), {opts.num, 1});
    w = where(row, 0.0, w);
  }
  weight = Param<2>(Tensor<2>(w));
}

Array Embedding::forward(const Array& indices, Loc loc) {
  UserCall call("Embedding", loc);
  return embedding_lookup(call, indices, weight.array(), options.padding_idx);
}

std::string EmbeddingOptions::to_json() const {
  json j{{"num", num}, {"dim", dim}, {"dtype", std::string(dtype_name(dtype))}, {"device", device.str()}};
  if (padding_idx) j["padding_idx"] = *padding_idx;
  if (seed) j["seed"] = *seed;
  return j.dump();
}

EmbeddingOptions EmbeddingOptions::from_json(const std::string& text) {
  json j = parse_json(text, "EmbeddingOptions");
  EmbeddingOptions o;
  read_field(j, "num", o.num);
  read_field(j, "dim", o.dim);
  read_optional(j, "padding_idx", o.padding_idx);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "EmbeddingOptions");
  return o;
}

}  // namespace ember::nn
