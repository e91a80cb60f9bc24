// Execution counters (kernels launched, library calls, realizations), read through
// ember::execution_stats() (ember/debug.h). Relaxed atomics: counts, not synchronization.
#pragma once

#include <atomic>
#include <cstdint>

namespace ember {

struct StatCounters {
  std::atomic<int64_t> kernels{0};
  std::atomic<int64_t> library_calls{0};
  std::atomic<int64_t> realizations{0};
  std::atomic<int64_t> plan_cache_hits{0};
  std::atomic<int64_t> plan_cache_misses{0};
  std::atomic<int64_t> programs_created{0};
  std::atomic<int64_t> auto_flushes{0};
  std::atomic<int64_t> buffers_donated{0};
};
StatCounters& stats();

}  // namespace ember
