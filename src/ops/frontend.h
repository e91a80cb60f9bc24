// Helpers shared by the front-end op constructors (src/ops/*.cpp): argument checks that name the
// op and the caller's line, and node creation.
#pragma once

#include <fmt/format.h>

#include <initializer_list>
#include <span>
#include <vector>

#include "ember/ops.h"
#include "ops/make_array.h"

namespace ember {

// Throws ember::Error "op: message (at file.cpp:12)".
[[noreturn]] void fail(const char* op, const std::string& message, Loc loc);

// The node of a defined array; throws if the array is empty (default-constructed).
const NodePtr& node_of(const Array& a, const char* op, Loc loc);
// All arrays on one device; returns it.
Device common_device(std::span<const Array* const> arrays, const char* op, Loc loc);
inline Device common_device(std::initializer_list<const Array*> arrays, const char* op, Loc loc) {
  return common_device(std::span<const Array* const>(arrays.begin(), arrays.size()), op, loc);
}
// Wraps a possibly negative dim into [0, rank); the error names op, dim, rank and line.
int dim_arg(int dim, int rank, const char* op, Loc loc);
// A rank-0 constant of the given dtype (folds into consumer kernels).
Array scalar_array(Scalar s, DType dtype, Device device, Loc loc);
// Builds an elementwise node over broadcast inputs; dtype rules come from the op table.
Array elementwise(Op op, const std::vector<Array>& inputs, Loc loc, DType cast_to = DType::F32,
                  OpAttrs attrs = {});
// Scalar operands adopt the other operand's dtype unless their category is higher.
Array scalar_like(Scalar s, const Array& other, Loc loc);

}  // namespace ember
