// Host-memory buffers shared by the backends whose memory is ordinary RAM
// (cpu and reference). Plugins link no part of libember; they use only this and the C ABI.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "backend/abi.h"
#include "backend/common/plugin_status.h"

// `stamp`: the write stamp of the buffer's last write (its allocation counts as one); see
// mark_written below.
struct ember_buffer_s {
  void* data;
  size_t bytes;
  std::atomic<uint64_t> stamp;
};

namespace ember::host {

using plugin::copy_properties;
using plugin::set_status;

// Write stamps. Each write to a buffer through the plugin gives it a new stamp from one counter
// (per plugin), so a buffer seen twice with the same stamp holds the same bytes, also across a free
// and an allocation at the same address. The writers: allocation, buffer_write and buffer_copy
// (host_queue.h), and the cpu plugin's program runs (the arguments a STORE writes) and library
// calls (their outputs); the reference plugin, which reads no stamps, does not mark its own. The core writes a device's memory only through those entries (abi.h:
// buffer_host_address is for reads). The CPU's convolution uses them to tell that kept weights are
// still current without comparing their bytes (cpu/reordered_weights.h). A buffer that is not one
// of the plugin's (stamp 0) is never known to be unchanged.
inline uint64_t next_write_stamp() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}
inline void mark_written(ember_buffer b) {
  if (b) b->stamp.store(next_write_stamp(), std::memory_order_release);
}
inline uint64_t write_stamp(ember_buffer b) { return b ? b->stamp.load(std::memory_order_acquire) : 0; }

inline int32_t buffer_alloc(int32_t, size_t bytes, ember_buffer* out, ember_status* st) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p) return set_status(st, EMBER_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
  *out = new ember_buffer_s{p, bytes, next_write_stamp()};
  return EMBER_OK;
}

inline void buffer_free(ember_buffer b) {
  if (!b) return;
  std::free(b->data);
  delete b;
}

inline const void* buffer_host_address(ember_buffer b) { return b ? b->data : nullptr; }

inline int32_t buffer_write(ember_buffer dst, size_t off, const void* src, size_t n, ember_status* st) {
  if (off + n > dst->bytes)
    return set_status(st, EMBER_ERR_INVALID, "write of %zu bytes at %zu past the end of a %zu-byte buffer", n,
                      off, dst->bytes);
  mark_written(dst);
  if (n > 0) std::memcpy(static_cast<char*>(dst->data) + off, src, n);  // an empty write may pass null
  return EMBER_OK;
}

inline int32_t buffer_read(ember_buffer src, size_t off, void* dst, size_t n, ember_status* st) {
  if (off + n > src->bytes)
    return set_status(st, EMBER_ERR_INVALID, "read of %zu bytes at %zu past the end of a %zu-byte buffer", n,
                      off, src->bytes);
  if (n > 0) std::memcpy(dst, static_cast<const char*>(src->data) + off, n);
  return EMBER_OK;
}

// Every KIR instruction and every library call of this ABI version, on every dtype.
inline int32_t supports_every_op(int32_t, int32_t kind, int32_t op, int32_t) {
  if (kind == EMBER_SUPPORT_KIR) return op >= 0 && op < EMBER_KIR_NUM_OPS;
  if (kind == EMBER_SUPPORT_LIBRARY) return op >= EMBER_LIB_MATMUL && op < EMBER_LIB_NUM_OPS;
  return 0;
}

// Physical memory of this machine in bytes (0 if unknown), for device_properties.
inline uint64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}
inline uint64_t available_memory_bytes() {
  long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

}  // namespace ember::host
