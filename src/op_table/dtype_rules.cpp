// Dtype rules of the op table (see docs/semantics.md).
#include "op_table/dtype_rules.h"

#include <fmt/format.h>

#include "ember/error.h"

namespace ember {

static std::string dtype_list(std::span<const DType> ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + std::string(dtype_name(ts[i]));
  return s;
}

ElementwiseTypes elementwise_types(Op op, std::span<const DType> in, DType cast_to) {
  const OpInfo& info = op_info(op);
  auto reject = [&](const char* why) {
    throw Error(fmt::format("{}: {} (operand dtypes: {})", info.name, why, dtype_list(in)));
  };
  auto promoted = [&](size_t first) {
    DType t = in[first];
    for (size_t i = first + 1; i < in.size(); ++i) t = promote_types(t, in[i]);
    return t;
  };
  ElementwiseTypes r;
  switch (info.rule) {
    case DTypeRule::Numeric: {
      if (in[0] == DType::Bool) reject("not defined for bool; cast to a numeric dtype first");
      r.compute = r.result = in[0];
      break;
    }
    case DTypeRule::Float:
      r.compute = r.result = is_floating(in[0]) ? in[0] : kDefaultFloat;
      break;
    case DTypeRule::Logical:
      r.compute = r.result = DType::Bool;
      break;
    case DTypeRule::Promote: {
      DType t = promoted(0);
      if (t == DType::Bool) reject("not defined for bool operands; cast to a numeric dtype first");
      r.compute = r.result = t;
      break;
    }
    case DTypeRule::PromoteFloat: {
      DType t = promoted(0);
      r.compute = r.result = is_floating(t) ? t : kDefaultFloat;
      break;
    }
    case DTypeRule::Compare:
      r.compute = promoted(0);
      r.result = DType::Bool;
      break;
    case DTypeRule::Where:
      r.compute = r.result = promoted(1);
      r.operands = {DType::Bool, r.compute, r.compute};
      return r;
    case DTypeRule::Predicate:
      r.compute = in[0];
      r.result = DType::Bool;
      break;
    case DTypeRule::Bitwise: {
      DType t = promoted(0);
      if (is_floating(t)) reject("needs integer or bool operands");
      r.compute = r.result = t;
      break;
    }
    case DTypeRule::Shift: {
      DType t = promoted(0);
      if (!is_integral(t)) reject("needs integer operands");
      r.compute = r.result = t;
      break;
    }
    case DTypeRule::Cast:
      r.compute = in[0];
      r.result = cast_to;
      break;
    default:
      reject("is not an elementwise op");
  }
  r.operands.fill(r.compute);
  return r;
}

ReduceTypes reduce_types(Op op, DType input) {
  const OpInfo& info = op_info(op);
  switch (info.rule) {
    case DTypeRule::Sum:
      if (is_floating(input)) return {input, input};
      if (input == DType::U64) return {input, input};  // i64 cannot hold it: wraps modulo 2^64
      return {DType::I64, DType::I64};
    case DTypeRule::FloatOnly:
      if (!is_floating(input))
        throw Error(fmt::format("{}: needs a floating-point input, got {}; cast it first", info.name,
                                dtype_name(input)));
      return {input, input};
    case DTypeRule::SameNonEmpty: return {input, input};
    case DTypeRule::IndexNonEmpty: return {input, DType::I64};
    default: throw Error(fmt::format("{}: is not a reduction", info.name));
  }
}

}  // namespace ember
