// Backward rules of the library-backed ops (ops/ops_library.def): convolution, pooling, sorting
// and scans. Each is written with front-end ops, usually the op's own backward library call.
#include <fmt/format.h>

#include "autograd/grad_math.h"
#include "autograd/grad_node.h"

namespace ember::autograd {

std::vector<Array> library_rule(GradNode& node, const Array& g) {
  (void)g;
  switch (node.op) {
    default:
      throw Error(fmt::format("backward: no gradient rule for op {} (created at {})", op_name(node.op),
                              format_location(node.loc)));
  }
}

}  // namespace ember::autograd
