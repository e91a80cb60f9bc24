// nn::MultiheadAttention (include/ember/nn/attention.h): projections around
// scaled_dot_product_attention (src/ops/nn_attention.cpp).
#include "ember/nn/attention.h"
#include "nn/layer_error.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "ember/autograd.h"
#include "ember/nn/dropout.h"
#include "ember/nn/init.h"
#include "nn/json_util.h"

namespace ember::nn {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

// ---- MultiheadAttention --------------------------------------------------------------------------

MultiheadAttention::MultiheadAttention(MultiheadAttentionOptions opts) : options(opts) {
  const int64_t E = opts.embed_dim;
  if (E <= 0 || opts.num_heads <= 0 || E % opts.num_heads)
    throw nn_error(fmt::format("MultiheadAttention: embed_dim ({}) must be a positive multiple of num_heads ({})", E,
                            opts.num_heads));
  if (opts.dropout < 0 || opts.dropout > 1)
    throw nn_error(fmt::format("MultiheadAttention: dropout must be in [0, 1], got {}", opts.dropout));
  const int64_t kdim = opts.kdim.value_or(E), vdim = opts.vdim.value_or(E);
  if (kdim <= 0 || vdim <= 0)
    throw nn_error(fmt::format("MultiheadAttention: kdim and vdim must be positive, got {} and {}", kdim, vdim));
  init::InitOptions io{.seed = opts.seed, .dtype = opts.dtype, .device = opts.device};
  auto next = [&io] {
    init::InitOptions r = io;
    if (io.seed) io.seed = *io.seed + 1;
    return r;
  };
  if (kdim == E && vdim == E) {
    in_proj_weight = make_param(init::xavier_uniform({3 * E, E}, 1.0, next()));
  } else {
    q_proj_weight = make_param(init::xavier_uniform({E, E}, 1.0, next()));
    k_proj_weight = make_param(init::xavier_uniform({E, kdim}, 1.0, next()));
    v_proj_weight = make_param(init::xavier_uniform({E, vdim}, 1.0, next()));
  }
  if (opts.bias) in_proj_bias = make_param(init::zeros({3 * E}, next()));
  init::InitOptions lo = next();
  out_proj = Linear({.in = E, .out = E, .bias = opts.bias, .seed = lo.seed, .dtype = opts.dtype, .device = opts.device});
  if (opts.bias) out_proj.bias.set(zeros({E}, {.dtype = opts.dtype, .device = opts.device}));
}

namespace {

// A bool (true = masked out) or floating mask as an additive float mask.
Array additive(const Array& m, DType dtype, const char* what) {
  if (m.dtype() == DType::Bool) return where(m, -kInf, zeros_like(m, dtype));
  if (!is_floating(m.dtype()))
    throw nn_error(fmt::format("MultiheadAttention: {} must be bool or floating, got {}", what, dtype_name(m.dtype())));
  return cast(m, dtype);
}

}  // namespace

MhaOutput MultiheadAttention::forward(const Array& query, const Array& key, const Array& value,
                                      const MhaForwardOptions& f, Loc loc) {
  UserCall call("MultiheadAttention", loc);
  const int64_t E = options.embed_dim, H = options.num_heads, hd = E / H;
  const int64_t kdim = options.kdim.value_or(E), vdim = options.vdim.value_or(E);
  const int rank = query.rank();
  if ((rank != 2 && rank != 3) || key.rank() != rank || value.rank() != rank)
    throw call.error(fmt::format("query, key and value must all be batched (rank 3) or unbatched "
                            "(rank 2), got {}, {}, {}",
                            query.shape().str(), key.shape().str(), value.shape().str()));
  if (query.size(-1) != E || key.size(-1) != kdim || value.size(-1) != vdim)
    throw call.error(fmt::format("expected query [..., {}], key [..., {}], value [..., {}], got {}, {}, {}",
                            E, kdim, vdim, query.shape().str(), key.shape().str(), value.shape().str()));
  const bool batched = rank == 3;
  // To [N, L, E].
  auto to_nle = [&](const Array& x) {
    if (!batched) return unsqueeze(x, 0);
    return options.batch_first ? x : transpose(x, 0, 1);
  };
  Array q = to_nle(query), k = to_nle(key), v = to_nle(value);
  const int64_t N = q.size(0), L = q.size(1), S = k.size(1);
  if (k.size(0) != N || v.size(0) != N || v.size(1) != S)
    throw call.error(fmt::format("batch and source sizes of query {}, key {}, value {} disagree",
                            query.shape().str(), key.shape().str(), value.shape().str()));

  const bool packed = in_proj_weight.defined();
  check_input_dtype("MultiheadAttention", query, packed ? in_proj_weight : q_proj_weight, packed ? "in_proj_weight" : "q_proj_weight");
  check_input_dtype("MultiheadAttention", key, packed ? in_proj_weight : k_proj_weight, packed ? "in_proj_weight" : "k_proj_weight");
  check_input_dtype("MultiheadAttention", value, packed ? in_proj_weight : v_proj_weight, packed ? "in_proj_weight" : "v_proj_weight");
  Array wq, wk, wv;
  if (in_proj_weight.defined()) {
    wq = narrow(in_proj_weight.array(), 0, 0, E);
    wk = narrow(in_proj_weight.array(), 0, E, E);
    wv = narrow(in_proj_weight.array(), 0, 2 * E, E);
  } else {
    wq = q_proj_weight.array();
    wk = k_proj_weight.array();
    wv = v_proj_weight.array();
  }
  auto project = [&](const Array& x, const Array& w, int64_t part, int64_t len) {
    Array y = matmul(x, transpose(w, 0, 1));
    if (in_proj_bias.defined()) y = add(y, narrow(in_proj_bias.array(), 0, part * E, E));
    return transpose(reshape(y, {N, len, H, hd}), 1, 2);  // [N, H, len, hd]
  };
  Array qh = project(q, wq, 0, L), kh = project(k, wk, 1, S), vh = project(v, wv, 2, S);

  // One additive mask broadcasting to [N, H, L, S].
  Array mask;
  if (f.attn_mask.defined()) {
    const Array& m = f.attn_mask;
    Array am;
    if (m.rank() == 2 && m.size(0) == L && m.size(1) == S) am = m;
    else if (m.rank() == 3 && m.size(0) == N * H && m.size(1) == L && m.size(2) == S) am = reshape(m, {N, H, L, S});
    else
      throw call.error(fmt::format("attn_mask must be [L, S] = [{}, {}] or [N * num_heads, L, S] = "
                              "[{}, {}, {}], got {}",
                              L, S, N * H, L, S, m.shape().str()));
    mask = additive(am, q.dtype(), "attn_mask");
  }
  if (f.key_padding_mask.defined()) {
    const Array& m = f.key_padding_mask;
    bool ok = batched ? (m.rank() == 2 && m.size(0) == N && m.size(1) == S) : (m.rank() == 1 && m.size(0) == S);
    if (!ok)
      throw call.error(fmt::format("key_padding_mask must be {}, got {}",
                              batched ? fmt::format("[N, S] = [{}, {}]", N, S) : fmt::format("[S] = [{}]", S),
                              m.shape().str()));
    Array kpm = additive(reshape(m, {N, 1, 1, S}), q.dtype(), "key_padding_mask");
    mask = mask.defined() ? add(mask, kpm) : kpm;
  }

  std::optional<uint64_t> seed;
  if (options.seed) seed = *options.seed * 0x9E3779B97F4A7C15ull + calls_;
  if (is_training() && options.dropout > 0) ++calls_;
  SdpaOptions so{.attn_mask = mask, .dropout_p = options.dropout, .training = is_training(), .seed = seed};
  MhaOutput out;
  Array heads;  // [N, H, L, hd]
  if (f.need_weights) {
    SdpaResult r = scaled_dot_product_attention_with_weights(qh, kh, vh, so);
    heads = r.output;
    out.weights = f.average_attn_weights ? mean(r.weights, {1}) : r.weights;
    if (!batched) out.weights = squeeze(out.weights, 0);
  } else {
    heads = scaled_dot_product_attention(qh, kh, vh, so);
  }
  Array y = out_proj.forward(reshape(transpose(heads, 1, 2), {N, L, E}));
  if (!batched) y = squeeze(y, 0);
  else if (!options.batch_first) y = transpose(y, 0, 1);
  out.output = y;
  return out;
}

Array MultiheadAttention::forward(const Array& x, const MhaForwardOptions& f, Loc loc) {
  MhaForwardOptions g = f;
  g.need_weights = false;
  return forward(x, x, x, g, loc).output;
}

std::string MultiheadAttentionOptions::to_json() const {
  json j{{"embed_dim", embed_dim}, {"num_heads", num_heads}, {"dropout", dropout},
         {"bias", bias},           {"batch_first", batch_first}, {"dtype", std::string(dtype_name(dtype))},
         {"device", device.str()}};
  if (kdim) j["kdim"] = *kdim;
  if (vdim) j["vdim"] = *vdim;
  if (seed) j["seed"] = *seed;
  return j.dump();
}

MultiheadAttentionOptions MultiheadAttentionOptions::from_json(const std::string& text) {
  json j = parse_json(text, "MultiheadAttentionOptions");
  MultiheadAttentionOptions o;
  read_field(j, "embed_dim", o.embed_dim);
  read_field(j, "num_heads", o.num_heads);
  read_field(j, "dropout", o.dropout);
  read_field(j, "bias", o.bias);
  read_field(j, "batch_first", o.batch_first);
  read_optional(j, "kdim", o.kdim);
  read_optional(j, "vdim", o.vdim);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "MultiheadAttentionOptions");
  return o;
}

}  // namespace ember::nn
