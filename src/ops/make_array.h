// Making the node of an op call: what every op front end ends with. make_array creates the node,
// records its backward history when an input requires grad (autograd/grad_node.h), and applies
// the run-time policy (graph/node.h: eager mode, automatic evaluation). The graph layer below
// knows nodes only; this is where a node becomes an Array.
#pragma once

#include <vector>

#include "ember/array.h"
#include "graph/node.h"

namespace ember {

// Creates a node for an op whose inputs were checked by the caller, and records its backward
// history when an input requires grad. Applies the run-time policy: eager mode (EMBER_SYNC=1)
// realizes at once; when the nodes this thread created that are still pending pass the
// auto-eval count, they are realized (so a loop that never reads cannot grow a graph without
// bound); optionally, so is a node deeper than the auto-eval depth.
Array make_array(Op op, OpAttrs attrs, const std::vector<Array>& inputs, Shape shape, DType dtype,
                 Device device, Loc loc);
// A multi-output op: one node computing outputs.size() arrays (see Node::extra_outputs), returned
// in order; result i >= 1 is an OutputOf node reading output i. The op's backward rule receives
// one gradient per output (autograd/grad_node.h).
std::vector<Array> make_arrays(Op op, OpAttrs attrs, const std::vector<Array>& inputs, std::vector<OutputSpec> outputs,
                               Device device, Loc loc);
// Output `index` (>= 1) of the multi-output node of `primary` (one of make_arrays' results 0), as a
// new array with history: what backward rules use to read a sibling output.
Array output_of(const Array& primary, int index, Loc loc = Loc::current());
// A realized node that wraps an existing view (a leaf).
Array make_ready_array(Op op, View view, Shape shape, DType dtype, Device device,
                       Loc loc);

}  // namespace ember
