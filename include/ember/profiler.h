// A profiler of the work the devices run: one record per kernel or library call (its name, the
// ops it computes, the user's line that created its root, start and duration), plus the host's
// planning passes. Recording costs nothing when off.
//
//   ember::profiler_start();
//   ... train a few steps ...
//   auto records = ember::profiler_stop();
//   std::cout << ember::profile_summary(records);          // table: where the time went
//   ember::write_chrome_trace("trace.json", records);      // chrome://tracing or ui.perfetto.dev
//
// EMBER_TRACE=trace.json records a whole process and writes the trace at exit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

struct KernelRecord {
  std::string name{};    // "fused kernel", an op name (a kernel of one op, a library call), "plan"
  std::string ops{};     // the ops a fused kernel computes, producers first
  std::string where{};   // the root op and the user's file:line that created it
  std::string device{};  // "cpu:0", ...; "host" for planning; "dist" for collectives (ember::dist):
                         // "dist all_reduce" etc. from start to result, and inside each the
                         // "dist input to host" wait for the input's values
  int64_t start_ns = 0;     // since the profiler started
  int64_t duration_ns = 0;
  int thread = 0;      // a small number per recording thread
  // On a device that computes apart from the host (a GPU): start and duration are the device's
  // own times for the work, placed on the host's timeline so that no record starts before it
  // was enqueued. Otherwise (false) the host's wall time around the call, which on such a device
  // is only the time to enqueue it (a device or plugin that cannot time its work).
  bool device_timed = false;
};

// Starts recording (clears what an earlier recording left).
void profiler_start();
// Stops recording, waits for queued work to finish, and returns the records in start order.
std::vector<KernelRecord> profiler_stop();
bool profiler_running();

// Chrome trace event format (JSON), one complete event per record; throws ember::Error naming
// the path when it cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<KernelRecord>& records);
// A table of the records grouped by (name, where): count, total and mean time, share of the
// total device time, sorted by total time; at most `top` rows.
std::string profile_summary(const std::vector<KernelRecord>& records, size_t top = 25);

}  // namespace ember
