// Autocast inside the op front ends: the thread's mode and the casting of an op's operands by
// its policy (src/ops/autocast_policy.def). Public API: include/ember/autocast.h.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ember/autocast.h"
#include "op_table/op_table.h"

namespace ember {

AutocastPolicy autocast_policy(Op op);

namespace detail {
// 0 outside autocast, else 1 + the low dtype. A plain load in every op's front end.
extern thread_local uint8_t t_autocast_state;
}  // namespace detail
inline bool autocast_active() { return detail::t_autocast_state != 0; }

// The operands cast as `op`'s policy asks, or nullopt when autocast is off or nothing changes
// (so a front end calls itself again with the result, and the second call finds nothing to do).
// Undefined arrays (an absent bias) pass through.
std::optional<std::vector<Array>> autocast_operands(Op op, const std::vector<Array>& operands, Loc loc);

}  // namespace ember
