// Composite ops with a hand-written first-order backward: the forward is written with other ops
// (and fused by the scheduler), but differentiating that composition op by op saves and re-reads
// many intermediates (batch norm in training: five kernels forward and eight backward against
// two and two with the closed-form gradient). The closed form serves plain backward passes; with
// create_graph the composition itself is recorded again and differentiated, so higher-order
// gradients stay exact without a second hand-written formula.
#pragma once

#include <functional>
#include <vector>

#include "ember/array.h"

namespace ember::autograd {

struct CompositeRule {
  // First-order gradients, one per input (undefined: none), from the values the forward saved
  // (no history) and the output's gradient. Runs with recording off.
  std::function<std::vector<Array>(const std::vector<Array>& saved, const Array& grad_output)> first_order;
  // The composition (output from the inputs), run on the inputs with their history under
  // create_graph and differentiated.
  std::function<Array(const std::vector<Array>& inputs)> composed;
};

// `output` (computed by the caller without recording) gets a history over `inputs` (undefined
// inputs allowed) with `rule` as its backward; returned as is when no gradient flows.
Array attach_composite(const std::vector<Array>& inputs, const Array& output, std::vector<Array> saved, CompositeRule rule,
                       Loc loc);

}  // namespace ember::autograd
