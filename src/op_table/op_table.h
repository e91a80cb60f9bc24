// The op enum, kinds and KIR expressions generated from op_table/ops.def.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/dtype.h"
#include "kir/builder.h"
#include "op_table/op_attrs.h"

namespace ember {

enum class Op : uint16_t {
#define EMBER_UNARY(Name, fn, rule, expr, ...) Name,
#define EMBER_BINARY(Name, fn, rule, expr, ...) Name,
#define EMBER_TERNARY(Name, fn, rule, expr, ...) Name,
#define EMBER_GENERATOR(Name, fn, expr) Name,
#define EMBER_REDUCE(Name, fn, rule, accumulate, finish, ...) Name,
#define EMBER_OTHER(Name, fn, kind, ...) Name,
#include "op_table/ops.def"
  NumOps
};

// Projection: OutputOf, which reads another output of a multi-output node (graph/node.h).
enum class OpKind : uint8_t {
  Elementwise, Generator, Reduce, Leaf, Movement, Opaque, Gather, Scatter, Contraction, Library, Projection
};

enum class DTypeRule : uint8_t {
  Numeric, Float, Logical, Promote, PromoteFloat, Compare, Where, Cast,  // elementwise
  Predicate, Bitwise, Shift,                                              // elementwise
  Sum, FloatOnly, SameNonEmpty, IndexNonEmpty,                            // reductions
  None
};

// Attributes of a node. `params` holds the op's structural attributes as their named struct
// (op_table/op_attrs.h); the scalars are constants its kernel embeds.
struct OpAttrs {
  OpParams params;
  double f0 = 0, f1 = 0;                   // arange start/step, random bounds, activation parameters
  kir::Builder::Scalar2 value{0, 0};       // full: the fill value
  uint64_t seed = 0;                       // random ops
  DType dtype = DType::F32;                // cast target

  // The params as `T`, which the node's op must hold (an internal error otherwise).
  template <class T>
  const T& get() const {
    if (const T* p = std::get_if<T>(&params)) [[likely]]
      return *p;
    wrong_params(params, params_name(OpParams(std::in_place_type<T>)));
  }
};

struct OpInfo {
  const char* name;
  OpKind kind;
  int arity;  // for elementwise ops; -1 otherwise
  DTypeRule rule;
  uint8_t params;  // the OpParams alternative its nodes hold (kParamsIndex of the table's struct)
  int16_t library_call;  // kind Library: the EMBER_LIB_* code of backend/abi.h it is lowered to; else 0
};

const OpInfo& op_info(Op op);
inline const char* op_name(Op op) { return op_info(op).name; }

// KIR expression of an elementwise op: operands are already in the compute dtype `dt`.
kir::Val elementwise_expr(Op op, kir::Builder& b, const OpAttrs& a, DType dt, kir::Val x,
                          kir::Val y, kir::Val z);
// KIR expression of a generator at linear index `i` (i64), producing dtype `dt`.
kir::Val generator_expr(Op op, kir::Builder& b, const OpAttrs& a, DType dt, kir::Val i);
// Accumulation (phase 0 operand -> phase 1 value) and finishing expression of a reduction.
kir::Val reduce_accumulate(Op op, kir::Builder& b, kir::Val x);
kir::Val reduce_finish(Op op, kir::Builder& b, kir::Val acc, int64_t n);

}  // namespace ember
