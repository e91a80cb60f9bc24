// Transformer encoder/decoder layers and stacks (include/ember/nn/transformer.h).
#include "ember/nn/transformer.h"
#include "nn/layer_error.h"

#include <limits>

#include "ember/nn/activation_extra.h"
#include "nn/json_util.h"

namespace ember::nn {

namespace {

std::optional<uint64_t> offset(const std::optional<uint64_t>& seed, uint64_t k) {
  if (!seed) return std::nullopt;
  return *seed + k;
}

void check_layer_options(const TransformerLayerOptions& o, const char* who) {
  if (o.d_model <= 0 || o.nhead <= 0 || o.d_model % o.nhead)
    throw nn_error(fmt::format("{}: d_model ({}) must be a positive multiple of nhead ({})", who, o.d_model, o.nhead));
  if (o.dim_feedforward <= 0)
    throw nn_error(fmt::format("{}: dim_feedforward must be positive, got {}", who, o.dim_feedforward));
  if (o.dropout < 0 || o.dropout > 1) throw nn_error(fmt::format("{}: dropout must be in [0, 1], got {}", who, o.dropout));
}

MultiheadAttention make_attention(const TransformerLayerOptions& o, uint64_t k) {
  return MultiheadAttention({.embed_dim = o.d_model, .num_heads = o.nhead, .dropout = o.dropout,
                             .batch_first = o.batch_first, .seed = offset(o.seed, k), .dtype = o.dtype,
                             .device = o.device});
}

LayerNorm make_norm(const TransformerLayerOptions& o) {
  return LayerNorm({.shape = {o.d_model}, .eps = o.layer_norm_eps, .dtype = o.dtype, .device = o.device});
}

// linear1 / linear2 of the feed-forward block.
std::pair<Linear, Linear> make_ffn(const TransformerLayerOptions& o, uint64_t k) {
  int64_t hidden = o.activation == FfnActivation::Swiglu ? 2 * o.dim_feedforward : o.dim_feedforward;
  Linear l1({.in = o.d_model, .out = hidden, .seed = offset(o.seed, k), .dtype = o.dtype, .device = o.device});
  Linear l2({.in = o.dim_feedforward, .out = o.d_model, .seed = offset(o.seed, k + 2), .dtype = o.dtype,
             .device = o.device});
  return {l1, l2};
}

Array activate(const Array& x, FfnActivation a) {
  switch (a) {
    case FfnActivation::Relu: return relu(x);
    case FfnActivation::Gelu: return gelu(x);
    case FfnActivation::Swiglu: return swiglu(x, -1);
  }
  return x;
}

void check_input(const Array& x, int64_t d_model, const char* who, const char* what) {
  if ((x.rank() != 2 && x.rank() != 3) || x.size(-1) != d_model)
    throw nn_error(fmt::format("{}: expected {} [L, N, {}], [N, L, {}] or [L, {}], got {}", who, what, d_model, d_model,
                            d_model, x.shape().str()));
}

const char* activation_name(FfnActivation a) {
  switch (a) {
    case FfnActivation::Relu: return "relu";
    case FfnActivation::Gelu: return "gelu";
    case FfnActivation::Swiglu: return "swiglu";
  }
  return "relu";
}

}  // namespace

Array generate_square_subsequent_mask(int64_t sz, DType dtype, Device device) {
  if (sz <= 0) throw nn_error(fmt::format("generate_square_subsequent_mask: size must be positive, got {}", sz));
  Array allowed = causal_mask(sz, sz, device);
  return where(allowed, zeros({sz, sz}, {.dtype = dtype, .device = device}), -std::numeric_limits<double>::infinity());
}

// ---- encoder layer --------------------------------------------------------------------------------

TransformerEncoderLayer::TransformerEncoderLayer(TransformerLayerOptions opts) : options(opts) {
  check_layer_options(opts, "TransformerEncoderLayer");
  self_attn = make_attention(opts, 0);
  std::tie(linear1, linear2) = make_ffn(opts, 10);
  norm1 = make_norm(opts);
  norm2 = make_norm(opts);
  dropout = Dropout({.p = opts.dropout, .seed = offset(opts.seed, 20)});
  dropout1 = Dropout({.p = opts.dropout, .seed = offset(opts.seed, 21)});
  dropout2 = Dropout({.p = opts.dropout, .seed = offset(opts.seed, 22)});
}

Array TransformerEncoderLayer::forward(const Array& src, const EncoderMasks& m, Loc loc) {
  UserCall call("TransformerEncoderLayer", loc);
  check_input(src, options.d_model, "TransformerEncoderLayer", "src");
  auto sa = [&](const Array& x) {
    MhaForwardOptions f{.key_padding_mask = m.key_padding_mask, .attn_mask = m.mask, .need_weights = false};
    return dropout1.forward(self_attn.forward(x, x, x, f).output);
  };
  auto ff = [&](const Array& x) {
    return dropout2.forward(linear2.forward(dropout.forward(activate(linear1.forward(x), options.activation))));
  };
  Array x = src;
  if (options.norm_first) {
    x = add(x, sa(norm1.forward(x)));
    x = add(x, ff(norm2.forward(x)));
  } else {
    x = norm1.forward(add(x, sa(x)));
    x = norm2.forward(add(x, ff(x)));
  }
  return x;
}

// ---- decoder layer --------------------------------------------------------------------------------

TransformerDecoderLayer::TransformerDecoderLayer(TransformerLayerOptions opts) : options(opts) {
  check_layer_options(opts, "TransformerDecoderLayer");
  self_attn = make_attention(opts, 0);
  multihead_attn = make_attention(opts, 5);
  std::tie(linear1, linear2) = make_ffn(opts, 10);
  norm1 = make_norm(opts);
  norm2 = make_norm(opts);
  norm3 = make_norm(opts);
  dropout = Dropout({.p = opts.dropout, .seed = offset(opts.seed, 20)});
  dropout1 = Dropout({.p = opts.dropout, .seed = offset(opts.seed, 21)});
  dropout2 = Dropout({.p = opts.dropout, .seed = offset(opts.seed, 22)});
  dropout3 = Dropout({.p = opts.dropout, .seed = offset(opts.seed, 23)});
}

Array TransformerDecoderLayer::forward(const Array& tgt, const Array& memory, const DecoderMasks& m, Loc loc) {
  UserCall call("TransformerDecoderLayer", loc);
  check_input(tgt, options.d_model, "TransformerDecoderLayer", "tgt");
  check_input(memory, options.d_model, "TransformerDecoderLayer", "memory");
  if (memory.rank() != tgt.rank())
    throw nn_error(fmt::format("TransformerDecoderLayer: tgt {} and memory {} must have the same rank",
                            tgt.shape().str(), memory.shape().str()));
  auto sa = [&](const Array& x) {
    MhaForwardOptions f{.key_padding_mask = m.tgt_key_padding_mask, .attn_mask = m.tgt_mask, .need_weights = false};
    return dropout1.forward(self_attn.forward(x, x, x, f).output);
  };
  auto mha = [&](const Array& x) {
    MhaForwardOptions f{
        .key_padding_mask = m.memory_key_padding_mask, .attn_mask = m.memory_mask, .need_weights = false};
    return dropout2.forward(multihead_attn.forward(x, memory, memory, f).output);
  };
  auto ff = [&](const Array& x) {
    return dropout3.forward(linear2.forward(dropout.forward(activate(linear1.forward(x), options.activation))));
  };
  Array x = tgt;
  if (options.norm_first) {
    x = add(x, sa(norm1.forward(x)));
    x = add(x, mha(norm2.forward(x)));
    x = add(x, ff(norm3.forward(x)));
  } else {
    x = norm1.forward(add(x, sa(x)));
    x = norm2.forward(add(x, mha(x)));
    x = norm3.forward(add(x, ff(x)));
  }
  return x;
}

// ---- stacks ---------------------------------------------------------------------------------------

namespace {
TransformerLayerOptions layer_i(const TransformerStackOptions& o, int64_t i) {
  TransformerLayerOptions l = o.layer;
  l.seed = offset(o.layer.seed, uint64_t(1000 * i));
  return l;
}
void check_stack(const TransformerStackOptions& o, const char* who) {
  if (o.num_layers <= 0) throw nn_error(fmt::format("{}: num_layers must be positive, got {}", who, o.num_layers));
}
}  // namespace

TransformerEncoder::TransformerEncoder(TransformerStackOptions opts) : options(opts) {
  check_stack(opts, "TransformerEncoder");
  for (int64_t i = 0; i < opts.num_layers; ++i) layers.emplace_back(layer_i(opts, i));
  if (opts.norm) norm = make_norm(opts.layer);
}

void TransformerEncoder::visit(Visitor& v) {
  for (size_t i = 0; i < layers.size(); ++i) v.module("layers." + std::to_string(i), layers[i]);
  if (options.norm) v.module("norm", norm);
}

Array TransformerEncoder::forward(const Array& src, const EncoderMasks& masks, Loc loc) {
  UserCall call("TransformerEncoder", loc);
  Array x = src;
  for (auto& layer : layers) x = layer.forward(x, masks);
  return options.norm ? norm.forward(x) : x;
}

TransformerDecoder::TransformerDecoder(TransformerStackOptions opts) : options(opts) {
  check_stack(opts, "TransformerDecoder");
  for (int64_t i = 0; i < opts.num_layers; ++i) layers.emplace_back(layer_i(opts, i));
  if (opts.norm) norm = make_norm(opts.layer);
}

void TransformerDecoder::visit(Visitor& v) {
  for (size_t i = 0; i < layers.size(); ++i) v.module("layers." + std::to_string(i), layers[i]);
  if (options.norm) v.module("norm", norm);
}

Array TransformerDecoder::forward(const Array& tgt, const Array& memory, const DecoderMasks& masks, Loc loc) {
  UserCall call("TransformerDecoder", loc);
  Array x = tgt;
  for (auto& layer : layers) x = layer.forward(x, memory, masks);
  return options.norm ? norm.forward(x) : x;
}

// ---- JSON -----------------------------------------------------------------------------------------

std::string TransformerLayerOptions::to_json() const {
  json j{{"d_model", d_model},
         {"nhead", nhead},
         {"dim_feedforward", dim_feedforward},
         {"dropout", dropout},
         {"activation", activation_name(activation)},
         {"layer_norm_eps", layer_norm_eps},
         {"batch_first", batch_first},
         {"norm_first", norm_first},
         {"dtype", std::string(dtype_name(dtype))},
         {"device", device.str()}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

TransformerLayerOptions TransformerLayerOptions::from_json(const std::string& text) {
  json j = parse_json(text, "TransformerLayerOptions");
  TransformerLayerOptions o;
  read_field(j, "d_model", o.d_model);
  read_field(j, "nhead", o.nhead);
  read_field(j, "dim_feedforward", o.dim_feedforward);
  read_field(j, "dropout", o.dropout);
  if (j.contains("activation")) {
    std::string a;
    read_field(j, "activation", a);
    if (a == "relu") o.activation = FfnActivation::Relu;
    else if (a == "gelu") o.activation = FfnActivation::Gelu;
    else if (a == "swiglu") o.activation = FfnActivation::Swiglu;
    else throw nn_error(fmt::format("TransformerLayerOptions::from_json: unknown activation '{}' (relu, gelu, swiglu)", a));
  }
  read_field(j, "layer_norm_eps", o.layer_norm_eps);
  read_field(j, "batch_first", o.batch_first);
  read_field(j, "norm_first", o.norm_first);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "TransformerLayerOptions");
  return o;
}

std::string TransformerStackOptions::to_json() const {
  return json{{"layer", json::parse(layer.to_json())}, {"num_layers", num_layers}, {"norm", norm}}.dump();
}

TransformerStackOptions TransformerStackOptions::from_json(const std::string& text) {
  json j = parse_json(text, "TransformerStackOptions");
  TransformerStackOptions o;
  if (j.contains("layer")) o.layer = TransformerLayerOptions::from_json(j["layer"].dump());
  read_field(j, "num_layers", o.num_layers);
  read_field(j, "norm", o.norm);
  reject_unknown_keys(j, o.to_json(), "TransformerStackOptions");
  return o;
}

}  // namespace ember::nn
