// Anomaly detection, the realization half (the switch is ember/anomaly.h): the check of a node
// just computed, and the first anomaly not yet reported, which the next read or eval throws.
#pragma once

#include <memory>
#include <string>

#include "graph/node.h"

namespace ember {

// Checks a floating node that has just been computed (its inputs still attached): when its output
// holds NaN or inf and none of its inputs does, returns the error that names it, and remembers it
// as the first unreported anomaly if there is none; otherwise null. Reads the values back to the
// host (a debug mode: slow is fine). Nodes that cannot make a NaN/inf of their own are skipped:
// integer and bool outputs, nodes without inputs (their values are the user's), views.
std::shared_ptr<const std::string> check_anomaly(const Node& n);

// Throws the first anomaly no read has reported yet, and forgets it (one relaxed atomic load
// when there is none: the cost with the mode off).
void throw_unreported_anomaly();

}  // namespace ember
