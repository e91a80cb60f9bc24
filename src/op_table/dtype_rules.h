// Dtype rules of elementwise ops: the compute dtype of the operands and the result dtype, shared
// by the front end (which validates and types nodes) and the lowering (which inserts casts).
#pragma once

#include <array>
#include <span>

#include "ember/dtype.h"
#include "op_table/op_table.h"

namespace ember {

struct ElementwiseTypes {
  std::array<DType, 3> operands{};  // dtype each operand is converted to before the expression
  DType compute;                // dtype the expression is evaluated in
  DType result;                 // dtype of the node
};

// Throws ember::Error (naming op) when the rule rejects the operand dtypes.
// (Spans and a fixed array: building a lazy op allocates nothing here.)
ElementwiseTypes elementwise_types(Op op, std::span<const DType> inputs, DType cast_to);

// Dtype a reduction accumulates in and the dtype of its result.
struct ReduceTypes {
  DType accumulate;
  DType result;
};
ReduceTypes reduce_types(Op op, DType input);

}  // namespace ember
