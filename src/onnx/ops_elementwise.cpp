// ONNX elementwise operators: math, activations, comparisons and logic, Cast, Clip, Where and
// the variadic Sum/Mean/Max/Min. ONNX keeps the operand dtype (no promotion: Div of integers
// truncates, Pow's result has the base's type), so results are cast back where Ember's ops
// would promote.
#include <cmath>

#include "onnx/op_registry.h"

namespace ember::onnx::detail {
namespace {

using Unary = Array (*)(const Array&, Loc);

OpEntry unary(Unary f) {
  return {[f](const OpContext& c) -> std::vector<Array> { return {f(c.input(0), Loc::current())}; }};
}

// Float-only math of ONNX: integer inputs are refused by the op's type constraints anyway.
OpEntry float_unary(Unary f) {
  return {[f](const OpContext& c) -> std::vector<Array> {
    const Array& x = c.input(0);
    if (!is_floating(x.dtype())) c.unsupported("needs a floating input, got " + std::string(dtype_name(x.dtype())));
    return {f(x, Loc::current())};
  }};
}

using Binary = Array (*)(const Array&, const Array&, Loc);

// Same-type binary ops; the result keeps the operands' type (cast back after Ember's promotion).
OpEntry binary(Binary f, bool keep_type = true) {
  return {[f, keep_type](const OpContext& c) -> std::vector<Array> {
    const Array& a = c.input(0);
    const Array& b = c.input(1);
    Array y = f(a, b, Loc::current());
    if (keep_type && y.dtype() != a.dtype() && y.dtype() != DType::Bool) y = cast(y, a.dtype());
    return {y};
  }};
}

Array onnx_div(const Array& a, const Array& b, Loc) {
  if (is_floating(a.dtype())) return div(a, b);
  // Integer division truncates toward zero (C semantics, as ONNX's reference implementation).
  // a - fmod(a, b) is an exact multiple of b (fmod has the dividend's sign), so floor division of
  // it is the truncated quotient, exact for every int64 (a detour through f64 is not past 2^53).
  return floor_div(sub(a, fmod(a, b)), b);
}

std::vector<Array> op_mod(const OpContext& c) {
  const Array& a = c.input(0);
  const Array& b = c.input(1);
  int64_t use_fmod = c.attr_int("fmod", 0);
  if (is_floating(a.dtype()) && !use_fmod) c.fail("fmod must be 1 for floating inputs");
  return {use_fmod ? fmod(a, b) : rem(a, b)};
}

std::vector<Array> op_pow(const OpContext& c) {
  const Array& x = c.input(0);
  const Array& y = c.input(1);
  if (x.dtype() == y.dtype()) return {pow(x, y)};
  DType compute = is_floating(x.dtype()) || is_floating(y.dtype()) ? DType::F64 : DType::I64;
  return {cast(pow(cast(x, compute), cast(y, compute)), x.dtype())};
}

std::vector<Array> op_cast(const OpContext& c) {
  int64_t to = c.attr_int("to", 0);
  DType d;
  try {
    d = dtype_from_onnx(int32_t(to), "to");
  } catch (const Unsupported& e) {
    c.unsupported(e.what());
  }
  if (c.has_attr("saturate") && c.attr_int("saturate", 1) != 1) c.unsupported("saturate=0 (float8 only)");
  return {cast(c.input(0), d)};
}

std::vector<Array> op_cast_like(const OpContext& c) { return {cast(c.input(0), c.input(1).dtype())}; }

std::vector<Array> op_clip(const OpContext& c) {
  const Array& x = c.input(0);
  if (c.opset < 11) {
    double lo = c.attr_float("min", -INFINITY), hi = c.attr_float("max", INFINITY);
    return {clamp(x, Scalar(lo), Scalar(hi))};
  }
  Array y = x;
  // Not clamp(x, lo, hi): ONNX applies max then min, so lo > hi gives hi everywhere.
  if (c.has_input(1)) y = where(lt(y, c.input(1)), cast(broadcast_to(c.input(1), y.shape()), y.dtype()), y);
  if (c.has_input(2)) y = where(gt(y, c.input(2)), cast(broadcast_to(c.input(2), y.shape()), y.dtype()), y);
  return {y};
}

std::vector<Array> op_where(const OpContext& c) {
  const Array& cond = c.input(0);
  if (cond.dtype() != DType::Bool) c.fail("condition must be bool, got " + std::string(dtype_name(cond.dtype())));
  return {where(cond, c.input(1), c.input(2))};
}

// Sum / Mean / Max / Min over any number of broadcast operands.
OpEntry variadic(Binary f, bool mean) {
  return {[f, mean](const OpContext& c) -> std::vector<Array> {
    Array acc = c.input(0);
    for (int i = 1; i < c.num_inputs(); ++i) acc = f(acc, c.input(i), Loc::current());
    if (c.num_inputs() == 1) acc = mul(acc, 1);  // a fresh value, not an alias of the input
    if (mean) acc = div(acc, double(c.num_inputs()));
    if (acc.dtype() != c.input(0).dtype()) acc = cast(acc, c.input(0).dtype());
    return {acc};
  }};
}

Array keep_dtype(const Array& y, const Array& x) { return y.dtype() == x.dtype() ? y : cast(y, x.dtype()); }

std::vector<Array> op_relu(const OpContext& c) { return {relu(c.input(0))}; }
std::vector<Array> op_leaky_relu(const OpContext& c) {
  return {leaky_relu(c.input(0), c.attr_float("alpha", 0.01))};
}
std::vector<Array> op_elu(const OpContext& c) { return {elu(c.input(0), c.attr_float("alpha", 1.0))}; }
std::vector<Array> op_selu(const OpContext& c) {
  const Array& x = c.input(0);
  double alpha = c.attr_float("alpha", 1.67326319217681884765625);
  double gamma = c.attr_float("gamma", 1.05070102214813232421875);
  return {keep_dtype(mul(where(gt(x, 0), x, mul(sub(exp(x), 1), alpha)), gamma), x)};
}
std::vector<Array> op_celu(const OpContext& c) {
  const Array& x = c.input(0);
  double alpha = c.attr_float("alpha", 1.0);
  return {keep_dtype(add(relu(x), neg(relu(neg(mul(sub(exp(div(x, alpha)), 1), alpha))))), x)};
}
std::vector<Array> op_hard_sigmoid(const OpContext& c) {
  const Array& x = c.input(0);
  double alpha = c.attr_float("alpha", 0.2), beta = c.attr_float("beta", 0.5);
  return {keep_dtype(clamp(add(mul(x, alpha), beta), Scalar(0.0), Scalar(1.0)), x)};
}
std::vector<Array> op_hard_swish(const OpContext& c) {
  const Array& x = c.input(0);
  return {keep_dtype(mul(x, clamp(add(div(x, 6.0), 0.5), Scalar(0.0), Scalar(1.0))), x)};
}
std::vector<Array> op_softplus(const OpContext& c) {
  const Array& x = c.input(0);
  // log(1 + e^x) computed stably: max(x, 0) + log1p(e^-|x|).
  return {keep_dtype(add(relu(x), log1p(exp(neg(abs(x))))), x)};
}
std::vector<Array> op_softsign(const OpContext& c) {
  const Array& x = c.input(0);
  return {keep_dtype(div(x, add(abs(x), 1)), x)};
}
std::vector<Array> op_prelu(const OpContext& c) {
  const Array& x = c.input(0);
  return {keep_dtype(where(lt(x, 0), mul(x, c.input(1)), x), x)};
}
std::vector<Array> op_thresholded_relu(const OpContext& c) {
  const Array& x = c.input(0);
  return {where(gt(x, c.attr_float("alpha", 1.0)), x, zeros_like(x))};
}
std::vector<Array> op_gelu(const OpContext& c) {
  std::string approx = c.attr_string("approximate", "none");
  if (approx == "none") return {gelu(c.input(0))};
  if (approx == "tanh") return {gelu_tanh(c.input(0))};
  c.fail("approximate must be 'none' or 'tanh', got '" + approx + "'");
}
std::vector<Array> op_reciprocal(const OpContext& c) { return {keep_dtype(recip(c.input(0)), c.input(0))}; }
std::vector<Array> op_identity(const OpContext& c) { return {c.input(0)}; }
std::vector<Array> op_sign(const OpContext& c) { return {sign(c.input(0))}; }
std::vector<Array> op_not(const OpContext& c) { return {logical_not(c.input(0))}; }
std::vector<Array> op_isnan(const OpContext& c) { return {is_nan(c.input(0))}; }
std::vector<Array> op_isinf(const OpContext& c) {
  const Array& x = c.input(0);
  Array pos = logical_and(is_inf(x), gt(x, 0)), negative = logical_and(is_inf(x), lt(x, 0));
  bool p = c.attr_int("detect_positive", 1) != 0, n = c.attr_int("detect_negative", 1) != 0;
  if (p && n) return {is_inf(x)};
  if (p) return {pos};
  if (n) return {negative};
  return {zeros_like(x, DType::Bool)};
}

std::vector<Array> logical(const OpContext& c, Binary f) {
  if (c.input(0).dtype() != DType::Bool || c.input(1).dtype() != DType::Bool) c.fail("inputs must be bool");
  return {f(c.input(0), c.input(1), Loc::current())};
}

const Registrar registrar({
    {"Abs", unary(abs)},
    {"Neg", unary(neg)},
    {"Sign", {op_sign}},
    {"Floor", unary(floor)},
    {"Ceil", unary(ceil)},
    {"Round", unary(round)},
    {"Exp", float_unary(exp)},
    {"Log", float_unary(log)},
    {"Sqrt", float_unary(sqrt)},
    {"Erf", float_unary(erf)},
    {"Sin", float_unary(sin)},
    {"Cos", float_unary(cos)},
    {"Tan", float_unary(tan)},
    {"Asin", float_unary(asin)},
    {"Acos", float_unary(acos)},
    {"Atan", float_unary(atan)},
    {"Sinh", float_unary(sinh)},
    {"Cosh", float_unary(cosh)},
    {"Asinh", float_unary(asinh)},
    {"Acosh", float_unary(acosh)},
    {"Atanh", float_unary(atanh)},
    {"Tanh", float_unary(tanh)},
    {"Sigmoid", float_unary(sigmoid)},
    {"Reciprocal", {op_reciprocal}},
    {"Relu", {op_relu}},
    {"LeakyRelu", {op_leaky_relu}},
    {"Elu", {op_elu}},
    {"Selu", {op_selu}},
    {"Celu", {op_celu}},
    {"HardSigmoid", {op_hard_sigmoid}},
    {"HardSwish", {op_hard_swish}},
    {"Softplus", {op_softplus}},
    {"Softsign", {op_softsign}},
    {"PRelu", {op_prelu}},
    {"ThresholdedRelu", {op_thresholded_relu}},
    {"Gelu", {op_gelu}},
    {"Identity", {op_identity}},
    {"IsNaN", {op_isnan}},
    {"IsInf", {op_isinf}},
    {"Add", binary(add)},
    {"Sub", binary(sub)},
    {"Mul", binary(mul)},
    {"Div", binary(onnx_div)},
    {"Mod", {op_mod}},
    {"Pow", {op_pow}},
    {"Equal", binary(eq, false)},
    {"Less", binary(lt, false)},
    {"LessOrEqual", binary(le, false)},
    {"Greater", binary(gt, false)},
    {"GreaterOrEqual", binary(ge, false)},
    {"And", {[](const OpContext& c) { return logical(c, logical_and); }}},
    {"Or", {[](const OpContext& c) { return logical(c, logical_or); }}},
    {"Xor", {[](const OpContext& c) { return logical(c, logical_xor); }}},
    {"Not", {op_not}},
    {"Cast", {op_cast}},
    {"CastLike", {op_cast_like}},
    {"Clip", {op_clip}},
    {"Where", {op_where}},
    {"Sum", variadic(add, false)},
    {"Mean", variadic(add, true)},
    {"Max", variadic(maximum, false)},
    {"Min", variadic(minimum, false)},
});

}  // namespace
}  // namespace ember::onnx::detail
