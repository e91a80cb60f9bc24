// Scaled dot-product attention and nn::MultiheadAttention (include/ember/nn/attention.h),
// composed from ops (matmul, softmax, where); autograd comes from the ops. Long sequences without
// dropout or masks other than causal go to the fused op (ember::fused_attention).
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

void check_sdpa(const Array& q, const Array& k, const Array& v, const SdpaOptions& o) {
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
    throw nn_error(fmt::format("scaled_dot_product_attention: q, k and v need rank >= 2 ([..., L, E]), got {}, {}, {}",
                            q.shape().str(), k.shape().str(), v.shape().str()));
  if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw nn_error(fmt::format("scaled_dot_product_attention: q, k and v must share one floating dtype, got {}, {}, {}",
                            dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype())));
  if (k.size(-1) != q.size(-1))
    throw nn_error(fmt::format("scaled_dot_product_attention: q [..., L, E] and k [..., S, E] differ in E: {} vs {}",
                            q.shape().str(), k.shape().str()));
  if (v.size(-2) != k.size(-2))
    throw nn_error(fmt::format("scaled_dot_product_attention: k [..., S, E] and v [..., S, Ev] differ in S: {} vs {}",
                            k.shape().str(), v.shape().str()));
  if (o.dropout_p < 0 || o.dropout_p > 1)
    throw nn_error(fmt::format("scaled_dot_product_attention: dropout_p must be in [0, 1], got {}", o.dropout_p));
  if (o.is_causal && o.attn_mask.defined())
    throw nn_error("scaled_dot_product_attention: is_causal and attn_mask are exclusive (put the causal part in the mask)");
  if (o.scale && !std::isfinite(*o.scale))
    throw nn_error(fmt::format("scaled_dot_product_attention: scale must be finite, got {}", *o.scale));
  if (o.attn_mask.defined()) {
    const Array& m = o.attn_mask;
    if (m.dtype() != DType::Bool && !is_floating(m.dtype()))
      throw nn_error(fmt::format("scaled_dot_product_attention: attn_mask must be bool or floating, got {}",
                              dtype_name(m.dtype())));
    bool ok = m.rank() >= 1;
    for (int d = 1; d <= 2 && d <= m.rank() && ok; ++d) {
      int64_t want = d == 1 ? k.size(-2) : q.size(-2);
      ok = m.size(-d) == want || m.size(-d) == 1;
    }
    if (!ok)
      throw nn_error(fmt::format("scaled_dot_product_attention: attn_mask {} does not broadcast to [..., L = {}, S = {}]",
                              m.shape().str(), q.size(-2), k.size(-2)));
  }
}

// ember::fused_attention (tiled library calls, no L x S buffer) instead of the composition:
// without effective dropout, with no mask or only the causal one, q/k/v of one shape before the
// last two dims, on the backends that have the op, and from the lengths where it pays (measured,
// docs/performance.md "Fused attention"): L * S >= 128^2 without gradients (the fused forward is
// faster at every size), >= 256^2 causal with gradients (it skips the hidden key blocks), and
// >= 1024^2 otherwise (there its forward + backward is somewhat slower but holds no L x S
// buffers: 20 MiB against 650 MiB at B = 8, L = S = 2048). EMBER_SDPA=plain or =fused forces a
// path (where the fused op applies), for tests and measurements.
bool use_fused_attention(const Array& q, const Array& k, const Array& v, const SdpaOptions& o) {
  const char* env = std::getenv("EMBER_SDPA");
  const std::string force = env ? env : "";
  if (force == "plain") return false;
  if ((o.dropout_p > 0 && o.training) || o.attn_mask.defined()) return false;
  if (!fused_attention_available(q.device(), q.dtype())) return false;
  if (k.rank() != q.rank() || v.rank() != q.rank()) return false;
  for (int i = 0; i < q.rank() - 2; ++i)
    if (k.shape()[i] != q.shape()[i] || v.shape()[i] != q.shape()[i]) return false;
  const bool grads = grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  const int64_t from = !grads ? 128 * 128 : o.is_causal ? 256 * 256 : 1024 * 1024;
  return force == "fused" || q.size(-2) * k.size(-2) >= from;
}

}  // namespace

Array causal_mask(int64_t L, int64_t S, Device device) {
  Array i = reshape(arange(0, L, 1, DType::I64, device), {L, 1});
  Array j = reshape(arange(0, S, 1, DType::I64, device), {1, S});
  return ge(i, j);
}

SdpaResult scaled_dot_product_attention_with_weights(const Array& q, const Array& k, const Array& v,
                                                          const SdpaOptions& o, Loc loc) {
  UserCall call("scaled_dot_product_attention_with_weights", loc);
  check_sdpa(q, k, v, o);
  double scale = o.scale ? *o.scale : 1.0 / std::sqrt(double(q.size(-1)));
  Array scores = mul(matmul(q, transpose(k, -2, -1)), scale);
  if (o.is_causal) {
    scores = where(causal_mask(q.size(-2), k.size(-2), q.device()), scores, -kInf);
  } else if (o.attn_mask.defined()) {
    if (o.attn_mask.dtype() == DType::Bool) scores = where(o.attn_mask, scores, -kInf);
    else scores = add(scores, cast(o.attn_mask, q.dtype()));
  }
  Array weights = softmax(scores, -1);
  weights = dropout(weights, o.dropout_p, o.training, o.seed);
  return {matmul(weights, v), weights};
}

Array scaled_dot_product_attention(const Array& q, const Array& k, const Array& v, const SdpaOptions& o, Loc loc) {
  UserCall call("scaled_dot_product_attention", loc);
  check_sdpa(q, k, v, o);
  // fused path dispatch: a fused attention op may take over here for the inputs it supports;
  // it must give what the composed path below gives (values and gradients).
  if (use_fused_attention(q, k, v, o))
    return fused_attention(q, k, v, {.scale = o.scale, .causal = o.is_causal});
  return scaled_dot_product_attention_with_weights(q, k, v, o).output;
}

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
