// nn::Embedding (include/ember/nn/embedding.h).
#include "ember/nn/embedding.h"
#include "nn/layer_error.h"

#include "ember/nn/init.h"
#include "nn/json_util.h"

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

namespace {

// What embedding() computes, inside the caller's UserCall (so errors name the layer or function).
Array lookup(const UserCall& call, const Array& indices, const Array& weight, std::optional<int64_t> padding_idx) {
  if (!is_integral(indices.dtype()))
    throw call.error(fmt::format("indices must be integers, got {}", dtype_name(indices.dtype())));
  if (weight.rank() != 2) throw call.error(fmt::format("weight must be [num, dim], got {}", weight.shape().str()));
  const int64_t num = weight.size(0);
  if (padding_idx) {
    if (*padding_idx < -num || *padding_idx >= num)
      throw call.error(fmt::format("padding_idx {} out of range for {} entries", *padding_idx, num));
    if (*padding_idx < 0) *padding_idx += num;
  }
  std::vector<int64_t> out_dims = indices.shape().dims();
  out_dims.push_back(weight.size(1));
  Array flat = reshape(indices, {-1});
  Array rows = index_select(weight, 0, flat);
  if (padding_idx) {
    // Same values, but no gradient flows into the padding row.
    Array is_pad = reshape(eq(flat, *padding_idx), {-1, 1});
    rows = where(is_pad, rows.detach(), rows);
  }
  return reshape(rows, Shape(out_dims));
}

}  // namespace

Array Embedding::forward(const Array& indices, Loc loc) {
  UserCall call("Embedding", loc);
  return lookup(call, indices, weight.array(), options.padding_idx);
}

Array embedding(const Array& indices, const Array& weight, std::optional<int64_t> padding_idx, Loc loc) {
  UserCall call("embedding", loc);
  return lookup(call, indices, weight, padding_idx);
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
