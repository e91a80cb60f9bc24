// Loads backend plugins (shared libraries exporting ember_backend_entry) at run time and wraps
// their C tables: status codes become ember::Error, buffers become reference-counted Buffer
// objects that keep the device's memory statistics, and compiled programs are cached.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/abi.h"
#include "backend/buffer_cache.h"
#include "ember/device.h"

namespace ember {

class Backend;

// Device memory owned by one backend; freed when the last reference goes.
struct Buffer {
  Backend* backend = nullptr;
  ember_buffer handle = nullptr;
  size_t bytes = 0;  // also the device cache's key when the buffer is freed
  Device device;
  ~Buffer();
};

// A program compiled by one backend, shared by the backend's program cache and the launches
// using it: the last owner destroys it, so the cache can evict a program another thread is
// about to run.
struct CompiledProgram {
  const ember_backend_v1* table = nullptr;
  ember_program handle = nullptr;
  CompiledProgram(const ember_backend_v1* t, ember_program h) : table(t), handle(h) {}
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
  const ember_backend_v1& table() const { return *table_; }
  int device_count() const { return table_->device_count(); }

  // Memory from the device's cache when a freed buffer of the same size is there (buffer_cache.h).
  std::shared_ptr<Buffer> alloc(Device device, size_t bytes);
  // Called by ~Buffer: keeps the memory in the cache or gives it back to the plugin.
  void release(int device, ember_buffer handle, size_t bytes);
  // Gives every cached buffer of `device` back to the plugin.
  void empty_cache(int device);
  void write(Buffer& dst, size_t offset_bytes, const void* src, size_t bytes);
  void read(const Buffer& src, size_t offset_bytes, void* dst, size_t bytes);

  // Compiled program for a KIR program, cached by structure hash. The cache keeps the most
  // recently used `program_capacity` programs (EMBER_PROGRAM_CACHE, default 4096): a program
  // whose structure keeps changing (a baked-in constant) cannot grow it without bound.
  std::shared_ptr<const CompiledProgram> program(const ember_kir_program& program, uint64_t structure_hash);
  void run(const CompiledProgram& program, const ember_kir_launch& launch);
  void set_program_capacity(size_t n);  // evicts down to n at once (tests)
  size_t program_capacity();
  size_t program_count();
  void library_call(int32_t op, const ember_tensor_desc* inputs, int n_inputs,
                    const ember_tensor_desc* outputs, int n_outputs, const void* attrs);
  void synchronize(int device);

  ~Backend();

  // Per-device memory accounting (updated by Buffer).
  void account(int device, int64_t delta_bytes, int delta_buffers);
  MemoryStats stats(int device);
  void reset_peak(int device);

 private:
  Backend() = default;
  void check(int32_t code, const ember_status& st, const char* what);

  std::string name_;
  void* library_ = nullptr;
  const ember_backend_v1* table_ = nullptr;
  std::mutex mutex_;
  struct CachedProgram {
    std::shared_ptr<const CompiledProgram> program;
    std::list<uint64_t>::iterator recency;  // its place in recency_
  };
  std::unordered_map<uint64_t, CachedProgram> programs_;
  std::list<uint64_t> recency_;  // structure hashes, most recently used first
  size_t program_capacity_ = 4096;
  void evict_programs();  // under mutex_
  struct Counters { int64_t live = 0, peak = 0, buffers = 0; };
  std::unordered_map<int, Counters> counters_;
  std::mutex cache_mutex_;
  std::unordered_map<int, std::unique_ptr<BufferCache>> caches_;
  BufferCache& cache(int device);
};

// Plugin file name for a device kind ("libember_backend_cpu.so").
std::string plugin_file_name(DeviceKind kind);

}  // namespace ember
