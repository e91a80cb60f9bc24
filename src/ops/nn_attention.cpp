// Scaled dot-product attention (include/ember/ops_nn.h), composed from ops (matmul, softmax,
// where); autograd comes from the ops. Long sequences without dropout or masks other than causal
// go to the fused op (ember::fused_attention).
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "ember/autograd.h"
#include "ember/ops.h"
#include "ember/ops_nn.h"
#include "ops/call_error.h"

namespace ember {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_sdpa(const Array& q, const Array& k, const Array& v, const SdpaOptions& o) {
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
    throw call_error(fmt::format("scaled_dot_product_attention: q, k and v need rank >= 2 ([..., L, E]), got {}, {}, {}",
                            q.shape().str(), k.shape().str(), v.shape().str()));
  if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw call_error(fmt::format("scaled_dot_product_attention: q, k and v must share one floating dtype, got {}, {}, {}",
                            dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype())));
  if (k.size(-1) != q.size(-1))
    throw call_error(fmt::format("scaled_dot_product_attention: q [..., L, E] and k [..., S, E] differ in E: {} vs {}",
                            q.shape().str(), k.shape().str()));
  if (v.size(-2) != k.size(-2))
    throw call_error(fmt::format("scaled_dot_product_attention: k [..., S, E] and v [..., S, Ev] differ in S: {} vs {}",
                            k.shape().str(), v.shape().str()));
  if (o.dropout_p < 0 || o.dropout_p > 1)
    throw call_error(fmt::format("scaled_dot_product_attention: dropout_p must be in [0, 1], got {}", o.dropout_p));
  if (o.is_causal && o.attn_mask.defined())
    throw call_error("scaled_dot_product_attention: is_causal and attn_mask are exclusive (put the causal part in the mask)");
  if (o.scale && !std::isfinite(*o.scale))
    throw call_error(fmt::format("scaled_dot_product_attention: scale must be finite, got {}", *o.scale));
  if (o.attn_mask.defined()) {
    const Array& m = o.attn_mask;
    if (m.dtype() != DType::Bool && !is_floating(m.dtype()))
      throw call_error(fmt::format("scaled_dot_product_attention: attn_mask must be bool or floating, got {}",
                              dtype_name(m.dtype())));
    bool ok = m.rank() >= 1;
    for (int d = 1; d <= 2 && d <= m.rank() && ok; ++d) {
      int64_t want = d == 1 ? k.size(-2) : q.size(-2);
      ok = m.size(-d) == want || m.size(-d) == 1;
    }
    if (!ok)
      throw call_error(fmt::format("scaled_dot_product_attention: attn_mask {} does not broadcast to [..., L = {}, S = {}]",
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

}  // namespace ember
