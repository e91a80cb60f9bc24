// Front end of the elementwise ops: broadcasting, dtype rules and scalar operands.
#include <cmath>
#include <cstdint>

#include "ops/frontend.h"

namespace ember {

// The unary and binary ops of the table (ember/elementwise_ops.def); the forms Params and Cast
// are written by hand below.
#define EMBER_DEFINE_UNARY_Plain(Name, fn) \
  Array fn(const Array& x, Loc loc) { return elementwise(Op::Name, {x}, loc); }
// Rounding of integers is the identity (bool is rejected by the Numeric rule).
#define EMBER_DEFINE_UNARY_Rounding(Name, fn)                           \
  Array fn(const Array& x, Loc loc) {                                   \
    if (is_integral(node_of(x, #fn, loc)->dtype)) return x;             \
    return elementwise(Op::Name, {x}, loc);                             \
  }
#define EMBER_DEFINE_UNARY_Params(Name, fn)
#define EMBER_DEFINE_UNARY_Cast(Name, fn)
#define EMBER_UNARY_OP(Name, fn, rule, form, ...) EMBER_DEFINE_UNARY_##form(Name, fn)
#define EMBER_BINARY_OP(Name, fn, ...)                                                             \
  Array fn(const Array& a, const Array& b, Loc loc) { return elementwise(Op::Name, {a, b}, loc); } \
  Array fn(const Array& a, Scalar b, Loc loc) {                                                    \
    return elementwise(Op::Name, {a, scalar_like(b, a, loc)}, loc);                                \
  }                                                                                                \
  Array fn(Scalar a, const Array& b, Loc loc) {                                                    \
    return elementwise(Op::Name, {scalar_like(a, b, loc), b}, loc);                                \
  }
#include "ember/elementwise_ops.def"
#undef EMBER_DEFINE_UNARY_Plain
#undef EMBER_DEFINE_UNARY_Rounding
#undef EMBER_DEFINE_UNARY_Params
#undef EMBER_DEFINE_UNARY_Cast

static Array with_params(Op op, const Array& x, double f0, double f1, Loc loc) {
  OpAttrs attrs;
  attrs.f0 = f0;
  attrs.f1 = f1;
  return elementwise(op, {x}, loc, DType::F32, std::move(attrs));
}

Array softplus(const Array& x, double beta, double threshold, Loc loc) {
  if (!(beta > 0) || !std::isfinite(beta)) fail("softplus", fmt::format("beta must be positive and finite, got {}", beta), loc);
  return with_params(Op::Softplus, x, beta, threshold, loc);
}
Array leaky_relu(const Array& x, double slope, Loc loc) {
  if (!std::isfinite(slope)) fail("leaky_relu", fmt::format("slope must be finite, got {}", slope), loc);
  return with_params(Op::LeakyRelu, x, slope, 0, loc);
}
Array elu(const Array& x, double alpha, Loc loc) {
  if (!std::isfinite(alpha)) fail("elu", fmt::format("alpha must be finite, got {}", alpha), loc);
  return with_params(Op::Elu, x, alpha, 0, loc);
}

Array mask_fill(const Array& x, const Array& mask, Scalar value, Loc loc) {
  const NodePtr& n = node_of(x, "mask_fill", loc);
  const NodePtr& m = node_of(mask, "mask_fill", loc);
  if (m->dtype != DType::Bool)
    fail("mask_fill", fmt::format("mask must be bool, got {}", dtype_name(m->dtype)), loc);
  try {
    if (broadcast_shapes(n->shape, m->shape, "mask_fill") != n->shape) throw Error("");
  } catch (const Error&) {
    fail("mask_fill", fmt::format("mask shape {} does not broadcast to the input shape {}", m->shape.str(), n->shape.str()), loc);
  }
  return where(mask, scalar_array(value, n->dtype, n->device, loc), x, loc);
}

Array cast(const Array& x, DType dtype, Loc loc) {
  if (node_of(x, "cast", loc)->dtype == dtype) return x;
  return elementwise(Op::Cast, {x}, loc, dtype);
}

Array clamp(const Array& x, std::optional<Scalar> lo, std::optional<Scalar> hi, Loc loc) {
  const NodePtr& n = node_of(x, "clamp", loc);
  if (!lo && !hi) fail("clamp", "needs at least one of min and max", loc);
  if (lo && hi && lo->f > hi->f) fail("clamp", fmt::format("min {} is greater than max {}", lo->f, hi->f), loc);
  // A missing bound is the dtype's extreme: +-inf for floats, the i64 range for integers.
  auto bound = [&](std::optional<Scalar> s, bool upper) -> Array {
    if (s) return scalar_like(*s, x, loc);
    if (is_floating(n->dtype)) return scalar_like(upper ? HUGE_VAL : -HUGE_VAL, x, loc);
    switch (n->dtype) {
      case DType::U8: return scalar_like(upper ? 255 : 0, x, loc);
      case DType::I8: return scalar_like(upper ? INT8_MAX : INT8_MIN, x, loc);
      case DType::I16: return scalar_like(upper ? INT16_MAX : INT16_MIN, x, loc);
      case DType::U16: return scalar_like(upper ? UINT16_MAX : 0, x, loc);
      case DType::I32: return scalar_like(upper ? INT32_MAX : INT32_MIN, x, loc);
      case DType::U32: return scalar_like(upper ? UINT32_MAX : 0u, x, loc);
      case DType::U64: return scalar_like(upper ? UINT64_MAX : uint64_t(0), x, loc);
      default: return scalar_like(upper ? INT64_MAX : INT64_MIN, x, loc);
    }
  };
  return elementwise(Op::Clamp, {x, bound(lo, false), bound(hi, true)}, loc);
}

Array clamp(const Array& x, const Array& lo, const Array& hi, Loc loc) {
  return elementwise(Op::Clamp, {x, lo, hi}, loc);
}

Array where(const Array& cond, const Array& a, const Array& b, Loc loc) {
  return elementwise(Op::Where, {cond, a, b}, loc);
}
Array where(const Array& cond, const Array& a, Scalar b, Loc loc) {
  return elementwise(Op::Where, {cond, a, scalar_like(b, a, loc)}, loc);
}
Array where(const Array& cond, Scalar a, const Array& b, Loc loc) {
  return elementwise(Op::Where, {cond, scalar_like(a, b, loc), b}, loc);
}

}  // namespace ember
