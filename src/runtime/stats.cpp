// Execution counters behind ember/debug.h.
#include "runtime/stats.h"

#include "ember/debug.h"

namespace ember {

StatCounters& stats() {
  static StatCounters s;
  return s;
}

ExecutionStats execution_stats() {
  StatCounters& s = stats();
  return {s.kernels.load(std::memory_order_relaxed), s.library_calls.load(std::memory_order_relaxed),
          s.realizations.load(std::memory_order_relaxed), s.plan_cache_hits.load(std::memory_order_relaxed),
          s.plan_cache_misses.load(std::memory_order_relaxed), s.programs_created.load(std::memory_order_relaxed),
          s.auto_flushes.load(std::memory_order_relaxed), s.buffers_donated.load(std::memory_order_relaxed)};
}

void reset_execution_stats() {
  StatCounters& s = stats();
  s.kernels = 0;
  s.library_calls = 0;
  s.realizations = 0;
  s.plan_cache_hits = 0;
  s.plan_cache_misses = 0;
  s.programs_created = 0;
  s.auto_flushes = 0;
  s.buffers_donated = 0;
}

}  // namespace ember
