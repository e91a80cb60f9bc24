// Front end of fused attention (include/ember/ops_library.h): argument checks, flattening of the
// leading dims to one batch dim B, and one FusedAttention library node with two outputs
// (ops/make_array.h make_arrays): the attention [B, L, Ev] in the operands' dtype and the per-query
// logsumexp [B, L] (f32 for f16 / bf16 operands; abi.h EMBER_LIB_FUSED_ATTENTION). Also the
// backward formulas its autograd rule uses
// (src/autograd/rules_library.cpp): a FusedAttentionBackward library node, or plain ops when the
// gradient must be differentiable again (create_graph) or the mask needs a gradient.
#include <cmath>
#include <limits>

#include "runtime/registry.h"
#include "ember/autograd.h"
#include "ops/autocast.h"
#include "ops/frontend.h"

namespace ember {

namespace {

std::string dims_str(const Shape& s, int keep_last) {
  std::vector<int64_t> d(s.begin(), s.end() - keep_last);
  return Shape(d).str();
}

}  // namespace

AttentionResult fused_attention_lse(const Array& q, const Array& k, const Array& v, FusedAttentionOptions opts,
                                    Loc loc) {
  const char* op = "fused_attention";
  if (autocast_active()) [[unlikely]] {
    if (auto c = autocast_operands(Op::FusedAttention, {q, k, v}, loc)) return fused_attention_lse((*c)[0], (*c)[1], (*c)[2], opts, loc);
  }
  const NodePtr& qn = node_of(q, op, loc);
  const NodePtr& kn = node_of(k, op, loc);
  const NodePtr& vn = node_of(v, op, loc);
  const Device dev = common_device(opts.mask.defined() ? std::vector<const Array*>{&q, &k, &v, &opts.mask}
                                                       : std::vector<const Array*>{&q, &k, &v},
                                   op, loc);
  const Shape &qs = qn->shape, &ks = kn->shape, &vs = vn->shape;
  const int r = qs.rank();
  if (r < 2) fail(op, fmt::format("q must have at least 2 dims [..., L, E], got shape {}", qs.str()), loc);
  if (ks.rank() != r || vs.rank() != r)
    fail(op, fmt::format("q, k and v must have the same rank, got shapes {}, {} and {}", qs.str(), ks.str(), vs.str()),
         loc);
  for (int i = 0; i < r - 2; ++i)
    if (ks[i] != qs[i] || vs[i] != qs[i])
      fail(op, fmt::format("q, k and v must have the same leading dims, got {}, {} and {} (shapes {}, {}, {})",
                           dims_str(qs, 2), dims_str(ks, 2), dims_str(vs, 2), qs.str(), ks.str(), vs.str()),
           loc);
  const int64_t L = qs[r - 2], E = qs[r - 1], S = ks[r - 2], Ev = vs[r - 1];
  if (ks[r - 1] != E)
    fail(op, fmt::format("k's last dim must match q's (E = {}), got k shape {} and q shape {}", E, ks.str(), qs.str()),
         loc);
  if (vs[r - 2] != S)
    fail(op, fmt::format("v must have as many rows as k (S = {}), got v shape {} and k shape {}", S, vs.str(), ks.str()),
         loc);
  DType dt = promote_types(promote_types(qn->dtype, kn->dtype), vn->dtype);
  if (!is_floating(dt))
    fail(op, fmt::format("needs floating q, k and v, got {}, {} and {}; cast them first (e.g. to f32)",
                         dtype_name(qn->dtype), dtype_name(kn->dtype), dtype_name(vn->dtype)),
         loc);
  const double scale = opts.scale ? *opts.scale : (E > 0 ? 1.0 / std::sqrt(double(E)) : 1.0);
  if (!std::isfinite(scale)) fail(op, fmt::format("scale must be finite, got {}", scale), loc);

  int64_t B = 1;
  for (int i = 0; i < r - 2; ++i) B *= qs[i];
  std::vector<Array> inputs{reshape(cast(q, dt, loc), Shape{B, L, E}, loc),
                            reshape(cast(k, dt, loc), Shape{B, S, E}, loc),
                            reshape(cast(v, dt, loc), Shape{B, S, Ev}, loc)};
  if (opts.mask.defined()) {
    const NodePtr& mn = node_of(opts.mask, op, loc);
    std::vector<int64_t> full(qs.begin(), qs.end() - 1);
    full.push_back(S);
    const Shape target(full);
    bool fits = mn->shape.rank() <= r;
    for (int i = 0; fits && i < mn->shape.rank(); ++i) {
      const int64_t m = mn->shape[mn->shape.rank() - 1 - i];
      fits = m == 1 || m == target[r - 1 - i];
    }
    if (!fits)
      fail(op, fmt::format("mask of shape {} does not broadcast to the scores' shape {} ([..., L, S])", mn->shape.str(),
                           target.str()),
           loc);
    Array m = opts.mask;
    if (mn->dtype == DType::Bool) {
      m = where(m, scalar_array(0.0, dt, dev, loc), scalar_array(-std::numeric_limits<double>::infinity(), dt, dev, loc),
                loc);
    } else if (is_floating(mn->dtype)) {
      m = cast(m, dt, loc);
    } else {
      fail(op, fmt::format("mask must be bool (true = attend) or floating (added to the scores), got {}",
                           dtype_name(mn->dtype)),
           loc);
    }
    inputs.push_back(reshape(expand(m, target, loc), Shape{B, L, S}, loc));
  }
  OpAttrs attrs{.params = AttentionAttrs{.scale = scale, .causal = opts.causal}};
  // f16 / bf16 compute in f32, and the node keeps both outputs in f32: the logsumexp that the
  // backward reads back (one bf16 rounding of an lse near 10 moves every probability by up to 4 %),
  // and o, which the backward's rowsum(do * o) reads (from a bf16 o the gradients' error grew from
  // 1.6e-3 to 5.7e-3 rms in FusedAttentionTest.HalfDtypesKeepTheSoftmaxStatisticsInF32); o is
  // rounded to the dtype once, after (a cast that fuses into its consumer).
  const DType stat = dt == DType::F16 || dt == DType::BF16 ? DType::F32 : dt;
  std::vector<Array> outs = make_arrays(Op::FusedAttention, std::move(attrs), inputs,
                                        {{Shape{B, L, Ev}, stat}, {Shape{B, L}, stat}}, dev, loc);
  std::vector<int64_t> out_shape(qs.begin(), qs.end() - 1), lse_shape = out_shape;
  out_shape.push_back(Ev);
  return {cast(reshape(outs[0], Shape(out_shape), loc), dt, loc), reshape(outs[1], Shape(lse_shape), loc)};
}

Array fused_attention(const Array& q, const Array& k, const Array& v, FusedAttentionOptions opts, Loc loc) {
  return fused_attention_lse(q, k, v, std::move(opts), loc).out;
}

// Gradients of the FusedAttention node (declared in rules_library.cpp). in = q [B, L, E],
// k [B, S, E], v [B, S, Ev][, mask [B, L, S]]; o [B, L, Ev] and lse [B, L] its outputs (both in f32
// for f16 / bf16 operands), go and glse their gradients (either may be undefined: zero). With s
// the masked scores and p = exp(s - lse): dv = p^T do, dp = do v^T,
// ds = p * (dp - rowsum(do * o) + dlse), dq = ds k * scale, dk = ds^T q * scale, dmask = ds.
std::vector<Array> fused_attention_backward(const std::vector<Array>& in, const Array& o, const Array& lse,
                                            const Array& go_in, const Array& glse, double scale, bool causal,
                                            const std::vector<bool>& needs) {
  const Loc loc = Loc::current();
  const Array &q = in[0], &k = in[1], &v = in[2];
  const DType dt = q.dtype();
  const int64_t B = q.shape()[0], L = q.shape()[1], S = k.shape()[1], Ev = v.shape()[2];
  const Array go = go_in.defined() ? go_in : zeros(o.shape(), {o.dtype(), o.device()});
  // Without create_graph and without a mask gradient: the fused backward op (no L x S buffer), with
  // d = rowsum(do * o) - dlse in lse's precision (f32 for f16 / bf16).
  if (!grad_enabled() && !(in.size() > 3 && needs[3])) {
    const int64_t E = q.shape()[2];
    const DType stat = lse.dtype();
    Array d = sum(mul(cast(go, stat, loc), cast(o, stat, loc)), {2});
    if (glse.defined()) d = sub(d, cast(glse, stat, loc));
    std::vector<Array> ins{q, k, v, lse, d, cast(go, dt, loc)};
    if (in.size() > 3) ins.push_back(in[3]);
    OpAttrs attrs{.params = AttentionAttrs{.scale = scale, .causal = causal}};
    std::vector<Array> outs =
        make_arrays(Op::FusedAttentionBackward, std::move(attrs), ins,
                    {{Shape{B, L, E}, dt}, {Shape{B, S, E}, dt}, {Shape{B, S, Ev}, dt}}, q.device(), loc);
    std::vector<Array> grads(in.size());
    for (size_t i = 0; i < 3; ++i)
      if (needs[i]) grads[i] = outs[i];
    return grads;
  }
  // Otherwise the same formulas with plain ops in the operands' dtype (differentiable again; holds
  // L x S).
  if (o.dtype() != dt)
    return fused_attention_backward(in, cast(o, dt, loc), lse, cast(go, dt, loc), glse, scale, causal, needs);
  const Array lse3 = reshape(cast(lse, dt, loc), Shape{B, L, 1});
  Array s = mul(matmul(q, transpose(k, 1, 2)), scalar_like(scale, q, loc));
  if (in.size() > 3) s = add(s, in[3]);
  if (causal) {
    const Array i = reshape(arange(0, L, 1, DType::I64, q.device()), Shape{L, 1});
    const Array j = reshape(arange(0, S, 1, DType::I64, q.device()), Shape{1, S});
    s = where(le(j, i), s, -std::numeric_limits<double>::infinity());
  }
  const Array p = exp(sub(s, lse3));
  std::vector<Array> grads(in.size());
  if (needs[2]) grads[2] = matmul(transpose(p, 1, 2), go);
  Array dp = sub(matmul(go, transpose(v, 1, 2)), sum(mul(go, o), {2}, true));
  if (glse.defined()) dp = add(dp, reshape(cast(glse, dt, loc), Shape{B, L, 1}));
  const Array ds = mul(p, dp);
  if (needs[0]) grads[0] = mul(matmul(ds, k), scalar_like(scale, q, loc));
  if (needs[1]) grads[1] = mul(matmul(transpose(ds, 1, 2), q), scalar_like(scale, q, loc));
  if (in.size() > 3 && needs[3]) grads[3] = ds;
  return grads;
}

bool fused_attention_available(Device device, DType dtype) {
  Backend* b = Backend::try_get(device.kind);
  if (!b || device.index < 0 || device.index >= b->device_count()) return false;
  return b->supports(device.index, EMBER_SUPPORT_LIBRARY, EMBER_LIB_FUSED_ATTENTION, int32_t(dtype)) &&
         b->supports(device.index, EMBER_SUPPORT_LIBRARY, EMBER_LIB_FUSED_ATTENTION_BACKWARD, int32_t(dtype));
}

}  // namespace ember
