// Front end of the elementwise ops: broadcasting, dtype rules and scalar operands.
#include <cmath>
#include <cstdint>

#include "ops/frontend.h"

namespace ember {

#define EMBER_DEFINE_BINARY(fn, Name)                                                      \
  Array fn(const Array& a, const Array& b, Loc loc) { return elementwise(Op::Name, {a, b}, loc); } \
  Array fn(const Array& a, Scalar b, Loc loc) {                                            \
    return elementwise(Op::Name, {a, scalar_like(b, a, loc)}, loc);                        \
  }                                                                                        \
  Array fn(Scalar a, const Array& b, Loc loc) {                                            \
    return elementwise(Op::Name, {scalar_like(a, b, loc), b}, loc);                        \
  }
EMBER_DEFINE_BINARY(add, Add)
EMBER_DEFINE_BINARY(sub, Sub)
EMBER_DEFINE_BINARY(mul, Mul)
EMBER_DEFINE_BINARY(div, Div)
EMBER_DEFINE_BINARY(floor_div, FloorDiv)
EMBER_DEFINE_BINARY(rem, Rem)
EMBER_DEFINE_BINARY(pow, Pow)
EMBER_DEFINE_BINARY(maximum, Maximum)
EMBER_DEFINE_BINARY(minimum, Minimum)
EMBER_DEFINE_BINARY(eq, Eq)
EMBER_DEFINE_BINARY(ne, Ne)
EMBER_DEFINE_BINARY(lt, Lt)
EMBER_DEFINE_BINARY(le, Le)
EMBER_DEFINE_BINARY(gt, Gt)
EMBER_DEFINE_BINARY(ge, Ge)
EMBER_DEFINE_BINARY(logical_and, LogicalAnd)
EMBER_DEFINE_BINARY(logical_or, LogicalOr)
#undef EMBER_DEFINE_BINARY

#define EMBER_DEFINE_UNARY(fn, Name) \
  Array fn(const Array& x, Loc loc) { return elementwise(Op::Name, {x}, loc); }
EMBER_DEFINE_UNARY(neg, Neg)
EMBER_DEFINE_UNARY(abs, Abs)
EMBER_DEFINE_UNARY(sign, Sign)
EMBER_DEFINE_UNARY(exp, Exp)
EMBER_DEFINE_UNARY(log, Log)
EMBER_DEFINE_UNARY(sqrt, Sqrt)
EMBER_DEFINE_UNARY(tanh, Tanh)
EMBER_DEFINE_UNARY(erf, Erf)
EMBER_DEFINE_UNARY(sigmoid, Sigmoid)
EMBER_DEFINE_UNARY(relu, Relu)
EMBER_DEFINE_UNARY(gelu, Gelu)
EMBER_DEFINE_UNARY(logical_not, LogicalNot)
#undef EMBER_DEFINE_UNARY

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
      case DType::I32: return scalar_like(upper ? INT32_MAX : INT32_MIN, x, loc);
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
