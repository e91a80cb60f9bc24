// Scheduler entry points used by realization (scheduler/realize.cpp).
#pragma once

#include "graph/node.h"

namespace ember {

// Computes one pending node whose inputs are ready (or fold into it) and sets its view.
void execute_node(Node& node);
// True when `input` is not realized on its own but folded into `consumer`'s kernel.
bool folds_into_consumer(const Node& consumer, const Node& input);

}  // namespace ember
