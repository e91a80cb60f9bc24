// Introspection for tests and tuning: how much work realizations launched, and the graph an
// array is waiting on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/array.h"

namespace ember {

struct ExecutionStats {
  int64_t kernels = 0;        // KIR programs run on any backend
  int64_t library_calls = 0;  // matmul, convolution, ... calls
  int64_t realizations = 0;   // scheduling passes (eval, reads, automatic evaluation)
  int64_t plan_cache_hits = 0;    // realizations whose kernel partition came from the cache
  int64_t plan_cache_misses = 0;  // ... and those that were planned afresh
  int64_t programs_created = 0;   // KIR programs built by a backend (its program cache missed)
  int64_t auto_flushes = 0;       // automatic evaluations (too many pending nodes, see RuntimePolicy)
  int64_t buffers_donated = 0;    // kernel outputs written into a dying input's buffer
};
ExecutionStats execution_stats();
void reset_execution_stats();

// Kernel fusion is on by default; EMBER_FUSION=0 or this turns it off (every op its own kernel).
bool fusion_enabled();
void set_fusion_enabled(bool on);

// The pending graph behind `outputs`, one numbered line per node in the order they can run:
//   %2 = conv2d(%0, %1) f32[1, 8, 6, 6] {stride (1, 1), padding (top 1, ...), ...}  # net.cpp:12
// Computed arrays appear as `value` (they no longer hold their inputs); a node on a device other
// than the CPU names it. For reading and for tests; the format may grow.
std::string graph_text(const std::vector<Array>& outputs);
// The same as JSON, for tools: {"nodes": [{"id", "op", "inputs", "dtype", "shape", "device",
// "attrs": {"type": "Conv2dOptions", ...}, "loc"}, ...], "outputs": [ids]}.
std::string graph_json(const std::vector<Array>& outputs);

// Finding the op that first made a NaN/inf (runs unfused while on): ember/anomaly.h.

}  // namespace ember
