// The scheduler turns pending nodes into work for a backend. For now every compute node is its
// own kernel (fusion comes later, here, once for all backends); movement ops become views
// (strides and offsets) that later kernels read through, so they copy nothing unless a reshape
// cannot be expressed over the existing layout. The lowering of each kind of node lives in
// lower_*.cpp; launches in launch.cpp.
#include "scheduler/scheduler.h"

#include <fmt/format.h>

#include "ember/error.h"
#include "scheduler/launch.h"

namespace ember {

bool folds_into_consumer(const Node& consumer, const Node& input) {
  return op_info(consumer.op).kind == OpKind::Elementwise && input.op == Op::Full;
}

void execute_node(Node& n) {
  switch (op_info(n.op).kind) {
    case OpKind::Elementwise: run_elementwise(n); break;
    case OpKind::Generator: run_generator(n); break;
    case OpKind::Reduce: run_reduce(n); break;
    case OpKind::Movement: run_movement(n); break;
    case OpKind::Gather: run_gather(n); break;
    case OpKind::Scatter: run_scatter_add(n); break;
    case OpKind::Opaque: run_cat(n); break;
    case OpKind::Contraction: run_matmul(n); break;
    case OpKind::Library: run_library(n); break;
    case OpKind::Projection: {
      const Node& of = *n.inputs[0];
      n.view = of.extra_outputs.at(size_t(n.attrs.get<OutputAttrs>().index - 1)).view;
      break;
    }
    case OpKind::Leaf: throw Error(fmt::format("{}: leaf node has no data", n.where()));
  }
}

}  // namespace ember