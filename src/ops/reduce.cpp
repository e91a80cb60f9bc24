// Front end of the reductions: dim lists, keepdim, dtype rules and empty-input checks.
#include <algorithm>

#include "ops/autocast.h"
#include "op_table/dtype_rules.h"
#include "ops/frontend.h"

namespace ember {

static Array reduce(Op op, const Array& x, std::vector<int> dims, bool keepdim, Loc loc) {
  const char* name = op_name(op);
  const NodePtr& n = node_of(x, name, loc);
  if (autocast_active()) [[unlikely]] {
    if (auto cast_x = autocast_operands(op, {x}, loc)) return reduce(op, (*cast_x)[0], std::move(dims), keepdim, loc);
  }
  int rank = n->shape.rank();
  std::vector<bool> reduced(size_t(rank), dims.empty());
  for (int d : dims) {
    int w = dim_arg(d, rank, name, loc);
    if (rank == 0) continue;  // dim 0 / -1 of a scalar reduces nothing
    if (reduced[size_t(w)]) fail(name, fmt::format("dim {} appears more than once", d), loc);
    reduced[size_t(w)] = true;
  }
  ReduceTypes t;
  try {
    t = reduce_types(op, n->dtype);
  } catch (const Error& e) {
    throw Error(with_location(e.what(), loc));
  }
  ReduceAttrs reduce;
  std::vector<int64_t> out;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    if (reduced[size_t(d)]) {
      reduce.dims.push_back(d);
      count *= n->shape[d];
      if (keepdim) out.push_back(1);
    } else {
      out.push_back(n->shape[d]);
    }
  }
  bool needs_elements = op_info(op).rule == DTypeRule::SameNonEmpty || op_info(op).rule == DTypeRule::IndexNonEmpty;
  if (needs_elements && count == 0)
    fail(name, fmt::format("cannot reduce over zero elements (input shape {})", n->shape.str()), loc);
  return make_array(op, {.params = std::move(reduce)}, {x}, Shape(std::move(out)), t.result, n->device, loc);
}

Array sum(const Array& x, Axes dims, bool keepdim, Loc loc) { return reduce(Op::Sum, x, std::move(dims).take(), keepdim, loc); }
Array mean(const Array& x, Axes dims, bool keepdim, Loc loc) { return reduce(Op::Mean, x, std::move(dims).take(), keepdim, loc); }
Array prod(const Array& x, Axes dims, bool keepdim, Loc loc) { return reduce(Op::Prod, x, std::move(dims).take(), keepdim, loc); }
Array max(const Array& x, Axes dims, bool keepdim, Loc loc) { return reduce(Op::Max, x, std::move(dims).take(), keepdim, loc); }
Array min(const Array& x, Axes dims, bool keepdim, Loc loc) { return reduce(Op::Min, x, std::move(dims).take(), keepdim, loc); }
Array argmax(const Array& x, int dim, bool keepdim, Loc loc) { return reduce(Op::Argmax, x, {dim}, keepdim, loc); }
Array argmin(const Array& x, int dim, bool keepdim, Loc loc) { return reduce(Op::Argmin, x, {dim}, keepdim, loc); }

}  // namespace ember
