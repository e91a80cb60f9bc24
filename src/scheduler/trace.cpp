// The profiler behind ember/profiler.h: records kept in memory while recording, a Chrome trace
// writer, a summary table, and EMBER_TRACE=file.json (record the whole process, write at exit).
#include "scheduler/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "ember/device.h"
#include "ember/error.h"

namespace ember {
namespace trace {
namespace {

struct State {
  // The clock's origin never changes (threads read it without the lock); a recording starts at
  // `start` (ns since origin), set under the lock. Resetting the origin at profiler_start() raced
  // with spans being timed on other threads and gave them negative durations (found by
  // ThreadStressTest.ProfilerStartsAndStopsWhileWorkRuns).
  const std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  std::mutex m;
  int64_t start = 0;
  std::vector<KernelRecord> records;
  // For the records whose launches were timed on their device: (index in records, launches).
  std::vector<std::pair<size_t, std::vector<TimedCall>>> device_calls;
  std::map<std::thread::id, int> thread_numbers;
};
State& state() {
  static auto* s = new State;  // never destroyed: queue workers may record during exit
  return *s;
}
std::atomic<bool> recording{false};

std::string& env_path() {
  static std::string p;
  return p;
}

void write_env_trace() {
  std::vector<KernelRecord> records = profiler_stop();
  try {
    write_chrome_trace(env_path(), records);
    std::cerr << "[ember] EMBER_TRACE: " << records.size() << " records written to " << env_path()
              << "; where the time went:\n"
              << profile_summary(records, 15);
  } catch (const std::exception& e) {
    std::cerr << "[ember] EMBER_TRACE: " << e.what() << "\n";
  }
}

// EMBER_TRACE starts recording at the first realization (the first use of the profiler) and
// registers the writer then, before the device queues register their exit drains, so the writer
// runs after the queues have finished (exit handlers run in reverse order).
bool env_started = [] {
  const char* p = std::getenv("EMBER_TRACE");
  if (!p || !*p) return false;
  env_path() = p;
  start_device_timing();
  recording.store(true);
  std::atexit(write_env_trace);
  return true;
}();

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", int(c));
    else out += c;
  }
  return out;
}

}  // namespace

bool enabled() { return recording.load(std::memory_order_relaxed); }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - state().origin)
      .count();
}

void record(int64_t start_ns, int64_t end_ns, const std::function<void(KernelRecord&)>& describe,
            std::vector<TimedCall> device_calls) {
  KernelRecord r;
  describe(r);
  State& s = state();
  std::lock_guard lock(s.m);
  if (!recording.load(std::memory_order_relaxed)) return;
  if (start_ns < s.start) return;  // began before this recording (started on another thread)
  r.start_ns = start_ns - s.start;
  r.duration_ns = end_ns - start_ns;
  auto [it, inserted] = s.thread_numbers.try_emplace(std::this_thread::get_id(), int(s.thread_numbers.size()));
  r.thread = it->second;
  if (!device_calls.empty()) s.device_calls.emplace_back(s.records.size(), std::move(device_calls));
  s.records.push_back(std::move(r));
}

namespace {

// Gives the records whose launches a device timed the device's times (profiler_stop). A device's
// clock has its own epoch: it is placed on the host's timeline with the smallest shift that starts
// no record before the host enqueued it. A record whose launches span two devices, or whose
// timings are missing (more than the plugin keeps), keeps its host times.
void apply_device_times(std::vector<KernelRecord>& records,
                        const std::vector<std::pair<size_t, std::vector<TimedCall>>>& device_calls,
                        const std::vector<DeviceTimings>& timings) {
  std::map<std::pair<const Backend*, int>, std::map<uint64_t, const ember_timing*>> by_tag;
  for (const DeviceTimings& d : timings)
    for (const ember_timing& t : d.timings) by_tag[{d.backend, d.device}][t.tag] = &t;
  struct Span {
    size_t record;
    std::pair<const Backend*, int> device;
    int64_t start, end;
  };
  std::vector<Span> spans;
  std::map<std::pair<const Backend*, int>, int64_t> shift;
  for (const auto& [index, calls] : device_calls) {
    const std::pair<const Backend*, int> device{calls.front().backend, calls.front().device};
    auto of_device = by_tag.find(device);
    if (of_device == by_tag.end()) continue;
    Span span{index, device, INT64_MAX, INT64_MIN};
    bool complete = true;
    for (const TimedCall& c : calls) {
      auto t = of_device->second.find(c.tag);
      if (c.backend != device.first || c.device != device.second || t == of_device->second.end()) {
        complete = false;
        break;
      }
      span.start = std::min(span.start, t->second->start_ns);
      span.end = std::max(span.end, t->second->end_ns);
    }
    if (!complete) continue;
    const int64_t need = records[index].start_ns - span.start;  // host enqueue - device start
    auto [it, inserted] = shift.try_emplace(device, need);
    if (!inserted) it->second = std::max(it->second, need);
    spans.push_back(span);
  }
  for (const Span& span : spans) {
    KernelRecord& r = records[span.record];
    r.start_ns = span.start + shift[span.device];
    r.duration_ns = span.end - span.start;
    r.device_timed = true;
  }
}

}  // namespace

}  // namespace trace

void profiler_start() {
  trace::State& s = trace::state();
  {
    std::lock_guard lock(s.m);
    s.records.clear();
    s.device_calls.clear();
    s.thread_numbers.clear();
    s.start = trace::now_ns();
  }
  start_device_timing();
  trace::recording.store(true);
}

bool profiler_running() { return trace::enabled(); }

std::vector<KernelRecord> profiler_stop() {
  synchronize();  // queued work belongs to this recording, and its device timings are ready
  trace::State& s = trace::state();
  std::vector<KernelRecord> out;
  std::vector<std::pair<size_t, std::vector<TimedCall>>> device_calls;
  {
    std::lock_guard lock(s.m);
    trace::recording.store(false);
    out = std::move(s.records);
    device_calls = std::move(s.device_calls);
    s.records.clear();
    s.device_calls.clear();
  }
  trace::apply_device_times(out, device_calls, stop_device_timing());
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  return out;
}

void write_chrome_trace(const std::string& path, const std::vector<KernelRecord>& records) {
  std::string text = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  // Host-timed records go on their thread's track (process 1); device-timed ones on their
  // device's track (process 2), named by metadata events after them, so that device work does
  // not appear nested in the host work that enqueued it.
  std::map<std::string, int> device_tracks;
  for (size_t i = 0; i < records.size(); ++i) {
    const KernelRecord& r = records[i];
    int pid = 1, tid = r.thread;
    if (r.device_timed) {
      pid = 2;
      tid = device_tracks.try_emplace(r.device, int(device_tracks.size())).first->second;
    }
    // Complete events ("ph": "X"); times in microseconds with ns precision.
    text += fmt::format(
        "{{\"name\": \"{}\", \"cat\": \"{}\", \"ph\": \"X\", \"ts\": {:.3f}, \"dur\": {:.3f}, \"pid\": {}, "
        "\"tid\": {}, \"args\": {{\"ops\": \"{}\", \"where\": \"{}\"}}}}{}\n",
        trace::json_escape(r.name), trace::json_escape(r.device), double(r.start_ns) / 1e3,
        double(r.duration_ns) / 1e3, pid, tid, trace::json_escape(r.ops), trace::json_escape(r.where),
        i + 1 < records.size() || !device_tracks.empty() ? "," : "");
  }
  if (!device_tracks.empty()) {
    text += "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"host\"}},\n";
    text += "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 2, \"args\": {\"name\": \"devices\"}}";
    for (const auto& [device, tid] : device_tracks)
      text += fmt::format(",\n{{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 2, \"tid\": {}, \"args\": "
                          "{{\"name\": \"{}\"}}}}",
                          tid, trace::json_escape(device));
    text += "\n";
  }
  text += "]}\n";
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(fmt::format("write_chrome_trace: cannot open '{}' for writing", tmp));
    f << text;
    if (!f.flush()) throw Error(fmt::format("write_chrome_trace: writing '{}' failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(fmt::format("write_chrome_trace: cannot rename '{}' to '{}'", tmp, path));
}

std::string profile_summary(const std::vector<KernelRecord>& records, size_t top) {
  struct Row {
    std::string name, where;
    int64_t count = 0, total = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  int64_t device_total = 0, host_total = 0, dist_total = 0;
  for (const KernelRecord& r : records) {
    Row& row = rows[{r.name, r.where}];
    row.name = r.name;
    row.where = r.where;
    row.count += 1;
    row.total += r.duration_ns;
    if (r.device == "host") host_total += r.duration_ns;
    else if (r.device == "dist") {
      if (r.name != "dist input to host") dist_total += r.duration_ns;  // nested in its collective
    } else device_total += r.duration_ns;
  }
  std::vector<Row> sorted;
  for (auto& [key, row] : rows) sorted.push_back(row);
  std::sort(sorted.begin(), sorted.end(), [](const Row& a, const Row& b) { return a.total > b.total; });
  std::string out = fmt::format("{:>9} {:>7} {:>10} {:>6}  {}\n", "total ms", "count", "mean us", "share", "kernel");
  for (size_t i = 0; i < sorted.size() && i < top; ++i) {
    const Row& r = sorted[i];
    bool on_device = r.name != "plan" && r.name.rfind("dist ", 0) != 0;
    double share = device_total > 0 && on_device ? 100.0 * double(r.total) / double(device_total) : 0.0;
    out += fmt::format("{:9.3f} {:7} {:10.2f} {:5.1f}%  {} ({})\n", double(r.total) / 1e6, r.count,
                       double(r.total) / 1e3 / double(r.count), share, r.name, r.where);
  }
  out += fmt::format("device time {:.3f} ms in {} records; host planning {:.3f} ms", double(device_total) / 1e6,
                     records.size(), double(host_total) / 1e6);
  if (dist_total > 0) out += fmt::format("; collectives {:.3f} ms", double(dist_total) / 1e6);
  out += "\n";
  return out;
}

}  // namespace ember
