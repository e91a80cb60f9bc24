// Dtype rules of elementwise ops: the compute dtype of the operands and the result dtype, shared
// by the front end (which validates and types nodes) and the lowering (which inserts casts).
#pragma once

#include <vector>

#include "ember/dtype.h"
#include "ops/op_table.h"

namespace ember {

struct ElementwiseTypes {
  std::vector<DType> operands;  // dtype each operand is converted to before the expression
  DType compute;                // dtype the expression is evaluated in
  DType result;                 // dtype of the node
};

// Throws ember::Error (naming op) when the rule rejects the operand dtypes.
ElementwiseTypes elementwise_types(Op op, const std::vector<DType>& inputs, DType cast_to);

// Dtype a reduction accumulates in and the dtype of its result.
struct ReduceTypes {
  DType accumulate;
  DType result;
};
ReduceTypes reduce_types(Op op, DType input);

}  // namespace ember
