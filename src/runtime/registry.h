// Loads backend plugins (shared libraries exporting ember_backend_entry) at run time and wraps
// their C tables: status codes become ember::Error, buffers become reference-counted DeviceBuffer
// objects that keep the device's memory statistics, and compiled programs are cached.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/abi.h"
#include "runtime/buffer_cache.h"
#include "runtime/device_timing.h"
#include "runtime/kernel_checks.h"
#include "ember/device.h"

namespace ember {

class Backend;

// Device memory owned by one backend; freed when the last reference goes.
struct DeviceBuffer {
  Backend* backend = nullptr;
  ember_buffer handle = nullptr;
  size_t bytes = 0;  // also the device cache's key when the buffer is freed
  Device device;
  // The deferred kernel checks the contents depend on (kernel_checks.h: checks_of, carry_checks).
  std::atomic<bool> has_checks{false};
  CheckSetPtr checks;
  ~DeviceBuffer();
};

// A program compiled by one backend for one device, shared by the backend's program cache and
// the launches using it: the last owner destroys it, so the cache can evict a program another
// thread is about to run.
struct CompiledProgram {
  const ember_backend_v2* table = nullptr;
  ember_program handle = nullptr;
  int device = 0;
  // The program has instructions that report errors while running (a gather's bounds, integer
  // division by zero, an integer power with a negative exponent).
  bool checked = false;
  std::string name;  // a checked program's, as the device's error messages start
  CompiledProgram(const ember_backend_v2* t, ember_program h, int d, bool c, std::string n = {})
      : table(t), handle(h), device(d), checked(c), name(std::move(n)) {}
  ~CompiledProgram() { table->program_destroy(handle); }
  CompiledProgram(const CompiledProgram&) = delete;
  CompiledProgram& operator=(const CompiledProgram&) = delete;
};

class Backend {
 public:
  // The backend serving `kind`; throws ember::Error naming the plugin if it cannot be loaded.
  static Backend& get(DeviceKind kind);
  // nullptr (and a reason) when the plugin is missing or refused.
  static Backend* try_get(DeviceKind kind, std::string* why = nullptr);
  // Loads a plugin file directly (tests use this to check ABI refusal); throws on failure.
  static std::unique_ptr<Backend> load_file(const std::string& path, const std::string& name);

  const std::string& name() const { return name_; }
  // The plugin's table; fields beyond the plugin's struct_size are null (optional features).
  const ember_backend_v2& table() const { return table_; }
  int device_count() const { return table_.device_count(); }
  // The device's properties, queried once.
  const ember_device_properties& properties(int device);
  // properties(device).max_binding_bytes without a lock (UINT64_MAX where the plugin gives none).
  uint64_t max_binding(int device);
  // Whether the device indexes in 32 bits (properties(device).index_bits == 32), without a lock.
  bool index32(int device);
  // Whether the device runs KIR instruction / library call `op` on `dtype` (abi.h supports_op).
  bool supports(int device, int32_t kind, int32_t op, int32_t dtype);
  // Why the device cannot run `program` (its first instruction the plugin lacks on that dtype)
  // or library call `op` on these tensors (its dtype, or a tensor spanning more bytes than one
  // binding of the device may address); "" when it can.
  std::string unsupported(int device, const ember_kir_program& program);
  std::string unsupported_library(int device, int32_t op, const ember_tensor_desc* inputs, int n_inputs,
                                  const ember_tensor_desc* outputs, int n_outputs);

  // The device's in-order queue (created on first use). Every call below is ordered on it.
  ember_queue queue(int device);

  // Memory from the device's cache when a freed buffer of the same size is there (buffer_cache.h).
  std::shared_ptr<DeviceBuffer> alloc(Device device, size_t bytes);
  // Called by ~DeviceBuffer: keeps the memory in the cache or gives it back to the plugin, ordered on
  // the device's queue (the plugin frees it after the work enqueued before).
  void release(int device, ember_buffer handle, size_t bytes);
  // Gives every cached buffer of `device` back to the plugin.
  void empty_cache(int device);
  void write(DeviceBuffer& dst, size_t offset_bytes, const void* src, size_t bytes);
  // Blocks until the work enqueued before on the buffer's device is done, then copies.
  void read(const DeviceBuffer& src, size_t offset_bytes, void* dst, size_t bytes);
  // The buffer's bytes in host memory, readable in place once the work enqueued before on its
  // device is done (this waits for it); null where the plugin has no host address for it.
  const unsigned char* host_bytes(const DeviceBuffer& src);
  // Copies between two buffers of this backend (possibly two of its devices): with the plugin's
  // buffer_copy, the source's queue waiting for the destination's work with an event (or a
  // queue synchronize without events); without it, staged through host memory.
  void copy(DeviceBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset, size_t bytes);

  // Compiled program for a KIR program on one device, cached per device by full structure
  // (instructions and argument dtypes; `structure_hash` only picks the bucket). The cache keeps
  // the most recently used `program_capacity` programs (EMBER_PROGRAM_CACHE, default 4096): a
  // program whose structure keeps changing (a baked-in constant) cannot grow it without bound.
  // A device lacking one of its instructions throws, or with `unsupported_out` returns null and
  // says why there (the caller runs it elsewhere: scheduler/host_fallback.h).
  std::shared_ptr<const CompiledProgram> program(int device, const ember_kir_program& program,
                                                 uint64_t structure_hash, std::string* unsupported_out = nullptr);
  void run(const CompiledProgram& program, const ember_kir_launch& launch, uint64_t tag = 0);
  void set_program_capacity(size_t n);  // evicts down to n at once (tests)
  size_t program_capacity();
  size_t program_count();
  void library_call(int device, int32_t op, const ember_tensor_desc* inputs, int n_inputs,
                    const ember_tensor_desc* outputs, int n_outputs, const void* attrs, uint64_t tag = 0);
  // Waits for the device's queue. A deferred error of a checked kernel fails its check (the reads
  // of buffers that depend on it throw it); any other deferred error becomes ember::Error.
  void synchronize(int device);
  // Deferred checks of `device` whose outcome is not known yet (tests).
  size_t pending_checks(int device);
  // Device timing (device_timing.h): turns the plugin's timing of the device's work on or off;
  // false (timing stays off) where the device runs its work inside the calls, or its plugin
  // cannot time it. take_timings moves out the records of timed calls that have finished.
  bool set_timing(int device, bool on);
  std::vector<ember_timing> take_timings(int device);

  // Test only: reads go through a second queue of the device that does not wait for the work
  // of the first (a deliberate ordering bug; the asynchronous test device must catch it).
  void set_unordered_reads_for_testing(bool on) { unordered_reads_for_testing_ = on; }

  ~Backend();

  // Per-device memory accounting (updated by DeviceBuffer).
  void account(int device, int64_t delta_bytes, int delta_buffers);
  MemoryStats stats(int device);
  void reset_peak(int device);

 private:
  Backend() = default;
  void check(int32_t code, const ember_status& st, const char* what);
  // Deferred kernel checks (kernel_checks.h). A checked launch on an asynchronous device is
  // registered in pending_ before it is enqueued; whoever takes the device's deferred errors
  // (synchronize, read, host_bytes) holds sync_mutex_, so that no error is taken unseen.
  void enqueue_checked(int device, const std::string& kernel,
                       const std::function<int32_t(uint64_t tag, ember_status* st)>& enqueue);
  void resolve_checks_locked(int device, const char* what);  // synchronizes; under sync_mutex_
  // Under sync_mutex_: takes what a call that may return the device's deferred errors returned,
  // and the errors still queued behind it. An error naming a pending check fails that check; the
  // checks in `passed` (enqueued before the call) that did not fail passed. Returns false when an
  // error belonged to no check: the first such is in *other, for the caller to throw.
  bool settle(int device, int32_t code, ember_status st, const std::vector<uint64_t>& passed, ember_status* other);
  std::vector<uint64_t> enqueued_checks(int device);
  struct PendingCheck {
    std::shared_ptr<KernelCheck> check;
    int device = 0;
    bool enqueued = false;
  };
  std::mutex sync_mutex_;
  std::mutex checks_mutex_;  // guards pending_ and pending_count_
  std::unordered_map<uint64_t, PendingCheck> pending_;
  std::unordered_map<int, size_t> pending_count_;
  std::atomic<uint64_t> next_check_tag_{1};  // checks' tags; 0 is "no check"
  // The tag of a launch while the profiler times device work: `tag` (or a new timing tag) noted
  // in this thread's TimingScope. One relaxed load when the profiler is off.
  uint64_t timed_tag(int device, uint64_t tag) {
    return device_timing_wanted() ? timed_tag_slow(device, tag) : tag;
  }
  uint64_t timed_tag_slow(int device, uint64_t tag);
  // Timing-only tags have the top bit set: a deferred error carrying one is not a check's.
  static constexpr uint64_t kTimingTagBit = uint64_t(1) << 63;
  std::atomic<uint64_t> next_timing_tag_{1};
  std::string device_label(int device) const;  // "reference", "reference:1"

  std::string name_;
  void* library_ = nullptr;
  ember_backend_v2 table_{};
  std::mutex mutex_;
  // One cached program: its structure (compared in full on a lookup) and the compiled handle.
  struct CachedProgram {
    int device = 0;
    uint64_t hash = 0;
    std::vector<ember_kir_inst> insts;
    std::vector<uint8_t> arg_dtypes;
    // A program that can raise an error names its op in the message, so it is shared only
    // between launches of the same name (gather and index_select build the same KIR).
    std::string error_name;
    std::shared_ptr<const CompiledProgram> program;
  };
  std::list<CachedProgram> programs_;  // most recently used first
  std::unordered_multimap<uint64_t, std::list<CachedProgram>::iterator> program_index_;
  size_t program_capacity_ = 4096;
  void evict_programs();  // under mutex_
  struct Counters { int64_t live = 0, peak = 0, buffers = 0; };
  std::unordered_map<int, Counters> counters_;
  std::mutex cache_mutex_;
  std::unordered_map<int, std::unique_ptr<BufferCache>> caches_;
  BufferCache& cache(int device);
  // Per-device state of devices 0 .. device_count() - 1, sized once by load_file and never
  // resized, so the calls on the hot path (queue, run) read it without a lock: the queue is
  // created on first use under device_mutex_ and published with a release store; the limits are
  // read from the device's properties once, the first time a launch needs them.
  struct LaunchLimits {
    bool async = false;                // calls may return before their work is done
    bool index32 = false;              // 32-bit indexing
    uint64_t max_binding = UINT64_MAX;  // bytes one kernel argument may span
  };
  static constexpr int kTimingOff = 0, kTimingOn = 1, kTimingUnsupported = 2;
  struct DeviceState {
    std::atomic<ember_queue> queue{nullptr};
    std::atomic<int> timing{kTimingOff};  // set_timing's state, changed under device_mutex_
    std::once_flag limits_once;
    LaunchLimits limits;
  };
  LaunchLimits limits(int device);
  std::unique_ptr<DeviceState[]> devices_;
  int device_states_ = 0;
  ember_queue create_queue(int device);  // queue()'s first call for a device
  bool is_async(int device);
  // Queues of device indices outside 0 .. device_count() - 1 (which no plugin here accepts), the
  // test's second queues, and the properties, each created on first use under device_mutex_.
  std::mutex device_mutex_;
  std::unordered_map<int, ember_queue> queues_;
  std::unordered_map<int, ember_queue> test_read_queues_;  // set_unordered_reads_for_testing
  std::atomic<bool> unordered_reads_for_testing_{false};
  std::unordered_map<int, std::unique_ptr<ember_device_properties>> properties_;
};


}  // namespace ember
