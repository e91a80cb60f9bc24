// Shared argument checking and node construction for the front-end ops.
#include "ops/frontend.h"

#include "ops/autocast.h"
#include "op_table/dtype_rules.h"

namespace ember {

void fail(const char* op, const std::string& message, Loc loc) {
  throw Error(with_location(fmt::format("{}: {}", op, message), loc));
}

const NodePtr& node_of(const Array& a, const char* op, Loc loc) {
  if (!a.defined()) fail(op, "argument is an empty (default-constructed) tensor", loc);
  return a.node();
}

int dim_arg(int dim, int rank, const char* op, Loc loc) {
  int lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  if (dim < lo || dim > hi)
    fail(op, fmt::format("dim {} is out of range for a tensor of rank {} (expected {} to {})", dim, rank, lo, hi), loc);
  return dim < 0 ? dim + (rank == 0 ? 1 : rank) : dim;
}

Device common_device(std::span<const Array* const> arrays, const char* op, Loc loc) {
  Device d = node_of(*arrays[0], op, loc)->device;
  for (const Array* a : arrays) {
    Device e = node_of(*a, op, loc)->device;
    if (!(e == d))
      fail(op, fmt::format("operands are on different devices ({} and {}); move one with to()", d.str(),
                           e.str()),
           loc);
  }
  return d;
}

Array scalar_array(Scalar s, DType dtype, Device device, Loc loc) {
  OpAttrs attrs;
  attrs.value = {s.f, s.i};
  if (s.category == DTypeCategory::Floating && !is_floating(dtype)) attrs.value.i = int64_t(s.f);
  return make_array(Op::Full, std::move(attrs), {}, Shape{}, dtype, device, loc);
}

Array scalar_like(Scalar s, const Array& other, Loc loc) {
  const NodePtr& n = node_of(other, "scalar operand", loc);
  return scalar_array(s, promote_with_scalar(n->dtype, s.category), n->device, loc);
}

Array elementwise(Op op, const std::vector<Array>& inputs, Loc loc, DType cast_to, OpAttrs attrs) {
  if (autocast_active()) [[unlikely]] {
    if (auto cast_inputs = autocast_operands(op, inputs, loc)) return elementwise(op, *cast_inputs, loc, cast_to, std::move(attrs));
  }
  const char* name = op_name(op);
  // Fixed arrays, not vectors: this runs for every lazy op (elementwise ops have 1 to 3 inputs).
  if (inputs.empty() || inputs.size() > 3)
    fail(name, fmt::format("takes 1 to 3 operands, got {}", inputs.size()), loc);
  const Array* ptrs[3];
  DType dtypes[3];
  for (size_t i = 0; i < inputs.size(); ++i) ptrs[i] = &inputs[i];
  Device device = common_device(std::span<const Array* const>(ptrs, inputs.size()), name, loc);
  Shape shape = inputs[0].shape();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) {
      try {
        shape = broadcast_shapes(shape, inputs[i].shape(), name);
      } catch (const Error& e) {
        throw Error(with_location(e.what(), loc));
      }
    }
    dtypes[i] = inputs[i].dtype();
  }
  ElementwiseTypes t;
  try {
    t = elementwise_types(op, std::span<const DType>(dtypes, inputs.size()), cast_to);
  } catch (const Error& e) {
    throw Error(with_location(e.what(), loc));
  }
  attrs.dtype = cast_to;
  return make_array(op, std::move(attrs), inputs, std::move(shape), t.result, device, loc);
}

}  // namespace ember
