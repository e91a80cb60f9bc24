// ONNX Attention (opsets 23 and 24), written with plain ops so that it differentiates and runs on
// every device: 3-D inputs are split into heads (q_num_heads / kv_num_heads), past keys and
// values are prepended (present_key / present_value), grouped-query heads are repeated, then
// softmax(softcap(Q K^T * scale) + mask) V. A row that sees no key gives zeros (not NaN), as
// the reference's "nan robustness" tests expect. qk_matmul_output_mode picks which
// intermediate the fourth output is: 0 the scaled scores, 1 after softcap, 2 with the mask
// added, 3 after softmax.
#include <cmath>

#include "onnx/op_registry.h"

namespace ember::onnx::detail {
namespace {

// [B, S, heads * H] -> [B, heads, S, H]
Array split_heads(const OpContext& c, const Array& x, int64_t heads, const char* what) {
  if (heads <= 0 || x.shape()[2] % heads != 0)
    c.fail(std::string(what) + ": " + std::to_string(x.shape()[2]) + " features do not split into " + std::to_string(heads) + " heads");
  return transpose(reshape(x, Shape{x.shape()[0], x.shape()[1], heads, x.shape()[2] / heads}), 1, 2);
}

// Each of the kv heads repeated `groups` times in a row (head h of the queries uses kv head h / groups).
Array repeat_heads(const Array& x, int64_t groups) {
  if (groups == 1) return x;
  const Shape& s = x.shape();
  Array e = broadcast_to(unsqueeze(x, 2), Shape{s[0], s[1], groups, s[2], s[3]});
  return reshape(contiguous(e), Shape{s[0], s[1] * groups, s[2], s[3]});
}

std::vector<Array> op_attention(const OpContext& c) {
  Array q = c.input(0), k = c.input(1), v = c.input(2);
  const DType io = q.dtype();
  const bool three_d = q.rank() == 3;
  if (three_d) {
    q = split_heads(c, q, c.attr_int("q_num_heads", 0), "Q");
    k = split_heads(c, k, c.attr_int("kv_num_heads", 0), "K");
    v = split_heads(c, v, c.attr_int("kv_num_heads", 0), "V");
  } else if (q.rank() != 4) {
    c.fail("Q must be 3-D or 4-D, got " + q.shape().str());
  }
  if (c.has_input(4)) k = cat({c.input(4), k}, 2);
  if (c.has_input(5)) v = cat({c.input(5), v}, 2);
  Array present_k = k, present_v = v;
  const int64_t qh = q.shape()[1], kvh = k.shape()[1];
  if (qh % kvh != 0) c.fail(std::to_string(qh) + " query heads are not a multiple of " + std::to_string(kvh) + " kv heads");
  // Computed in f32 (or f64) whatever the io type, as softmax_precision asks for f16 / bf16.
  const DType work = io == DType::F64 ? DType::F64 : DType::F32;
  q = cast(q, work);
  k = cast(repeat_heads(k, qh / kvh), work);
  v = cast(repeat_heads(v, qh / kvh), work);
  const int64_t L = q.shape()[2], S = k.shape()[2], E = q.shape()[3];
  double scale = c.attr_float("scale", 1.0 / std::sqrt(double(E)));
  Array scores = mul(matmul(q, transpose(k, 2, 3)), scale);
  Array qk0 = scores;

  Array bias = zeros(Shape{L, S}, TensorOptions{.dtype = work, .device = q.device()});
  if (c.has_input(3)) {
    Array m = c.input(3);
    if (m.shape()[m.rank() - 1] < S) {  // a shorter mask leaves the remaining keys masked out
      std::vector<int64_t> pads = {0, S - m.shape()[m.rank() - 1]};
      m = m.dtype() == DType::Bool ? pad(m, pads, PadMode::Constant, 0) : pad(m, pads, PadMode::Constant, -INFINITY);
    }
    Array add_mask = m.dtype() == DType::Bool ? where(m, zeros_like(m, work), full_like(m, -INFINITY, work)) : cast(m, work);
    bias = add(bias, add_mask);
  }
  Array minus_inf = full(Shape{1}, -INFINITY, TensorOptions{.dtype = work, .device = q.device()});
  if (c.attr_int("is_causal", 0) != 0) {
    // Query i sees keys j <= i + offset: offset = the past's length (top-left aligned without a
    // past), or with nonpad_kv_seqlen (opset 24) that batch's valid length minus L.
    Array i = reshape(arange(0, L, 1, DType::I64, q.device()), Shape{L, 1});
    Array j = reshape(arange(0, S, 1, DType::I64, q.device()), Shape{1, S});
    Array offset = full(Shape{1}, c.has_input(4) ? c.input(4).shape()[2] : 0, TensorOptions{.dtype = DType::I64, .device = q.device()});
    if (c.has_input(6)) offset = reshape(sub(cast(c.input(6), DType::I64), L), Shape{-1, 1, 1, 1});
    bias = where(gt(j, add(i, offset)), minus_inf, bias);
  }
  if (c.has_input(6)) {  // opset 24: nonpad_kv_seqlen [B]: keys at or past it are padding
    Array n = reshape(cast(c.input(6), DType::I64), Shape{-1, 1, 1, 1});
    Array j = reshape(arange(0, S, 1, DType::I64, q.device()), Shape{1, 1, 1, S});
    bias = where(ge(j, n), minus_inf, bias);
  }
  // The order, as the corpus' reference outputs fix it: softcap bounds the scaled scores (mode 1),
  // then the mask is added (mode 2; masked keys stay at -inf).
  double softcap = c.attr_float("softcap", 0.0);
  Array qk_capped = softcap > 0 ? mul(tanh(div(scores, softcap)), softcap) : scores;
  Array qk_masked = add(qk_capped, bias);
  scores = qk_masked;
  // Softmax that gives 0 for a row without any visible key.
  Array mx = max(scores, {3}, true);
  mx = where(is_finite(mx), mx, zeros_like(mx));
  Array e = exp(sub(scores, mx));
  Array denom = sum(e, {3}, true);
  Array p = where(gt(denom, 0), div(e, denom), zeros_like(e));
  Array y = matmul(p, v);
  if (three_d) y = reshape(transpose(y, 1, 2), Shape{y.shape()[0], L, qh * y.shape()[3]});
  std::vector<Array> outs = {cast(y, io), present_k, present_v};
  if (c.node().outputs.size() > 3) {
    int64_t mode = c.attr_int("qk_matmul_output_mode", 0);
    Array qk = mode == 0 ? qk0 : mode == 1 ? qk_capped : mode == 2 ? qk_masked : p;
    outs.push_back(cast(qk, io));
  }
  return outs;
}

const Registrar registrar({
    {"Attention", {op_attention, 23}},
});

}  // namespace
}  // namespace ember::onnx::detail
