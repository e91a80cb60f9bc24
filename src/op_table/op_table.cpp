// Expands op_table/ops.def into the op info table and the KIR expression functions.
#include "op_table/op_table.h"

#include <cassert>

#include "backend/abi.h"
#include "op_table/kir_math.h"

namespace ember {

const OpInfo& op_info(Op op) {
  static const OpInfo table[] = {
#define EMBER_UNARY(Name, fn, rule, expr, ...) {#fn, OpKind::Elementwise, 1, DTypeRule::rule, kParamsIndex<NoAttrs>, 0},
#define EMBER_BINARY(Name, fn, rule, expr, ...) {#fn, OpKind::Elementwise, 2, DTypeRule::rule, kParamsIndex<NoAttrs>, 0},
#define EMBER_TERNARY(Name, fn, rule, expr, ...) {#fn, OpKind::Elementwise, 3, DTypeRule::rule, kParamsIndex<NoAttrs>, 0},
#define EMBER_GENERATOR(Name, fn, expr) {#fn, OpKind::Generator, 0, DTypeRule::None, kParamsIndex<NoAttrs>, 0},
#define EMBER_REDUCE(Name, fn, rule, accumulate, finish, ...) \
  {#fn, OpKind::Reduce, 1, DTypeRule::rule, kParamsIndex<ReduceAttrs>, 0},
#define EMBER_OTHER(Name, fn, kind, attrs, ...) {#fn, OpKind::kind, -1, DTypeRule::None, kParamsIndex<attrs>, 0},
#define EMBER_LIBRARY(Name, fn, attrs, saves, grad, call) \
  {#fn, OpKind::Library, -1, DTypeRule::None, kParamsIndex<attrs>, EMBER_LIB_##call},
#include "op_table/ops.def"
  };
  static_assert(sizeof(table) / sizeof(table[0]) == size_t(Op::NumOps));
  return table[size_t(op)];
}

// The expressions use kir's free functions (exp, max, select, ...) unqualified.
using namespace kir;  // NOLINT

Val elementwise_expr(Op op, Builder& b, const OpAttrs& a, DType dt, Val x, Val y, Val z) {
  (void)b, (void)a, (void)dt, (void)y, (void)z;
  switch (op) {
#define EMBER_UNARY(Name, fn, rule, expr, ...) \
  case Op::Name: return expr;
#define EMBER_BINARY(Name, fn, rule, expr, ...) \
  case Op::Name: return expr;
#define EMBER_TERNARY(Name, fn, rule, expr, ...) \
  case Op::Name: return expr;
#include "op_table/ops.def"
    default: assert(false && "not an elementwise op"); return x;
  }
}

Val generator_expr(Op op, Builder& b, const OpAttrs& a, DType dt, Val i) {
  (void)a, (void)i;
  switch (op) {
#define EMBER_GENERATOR(Name, fn, expr) \
  case Op::Name: return expr;
#include "op_table/ops.def"
    default: assert(false && "not a generator"); return b.constant(0, dt);
  }
}

Val reduce_accumulate(Op op, Builder& b, Val x) {
  switch (op) {
#define EMBER_REDUCE(Name, fn, rule, accumulate, finish, ...) \
  case Op::Name: return accumulate;
#include "op_table/ops.def"
    default: assert(false && "not a reduction"); return x;
  }
}

Val reduce_finish(Op op, Builder& b, Val acc, int64_t n) {
  (void)b, (void)n;
  switch (op) {
#define EMBER_REDUCE(Name, fn, rule, accumulate, finish, ...) \
  case Op::Name: return finish;
#include "op_table/ops.def"
    default: assert(false && "not a reduction"); return acc;
  }
}

}  // namespace ember
