// The CUDA plugin's devices, buffers, queues, events and programs, on the driver API (driver.h).
//
// - A device is a GPU the driver lists, used through its primary context (the one the CUDA
//   runtime and PyTorch share), made current on each calling thread before any driver call.
// - A buffer is device memory from the device's default memory pool, allocated stream-ordered
//   (cuMemAllocAsync on the device's allocation stream, waited for, so any queue may use it) and
//   freed stream-ordered on the queue that names it (cuMemFreeAsync: after that queue's earlier
//   work, as abi.h asks). The pool keeps freed memory (its release threshold is the maximum), so
//   the core's buffer cache and the pool together make allocation cheap.
// - A queue is a non-blocking stream. Each launch that can fail (gathers, integer division) gets
//   an error slot of its own, a kErrWords-word record in the queue's device-side error slab
//   that only that launch writes; a synchronize reads the used slots back after the stream is
//   done and turns each written one into a deferred error carrying its launch's tag. When the
//   slab is full, the queue synchronizes first.
// - An event is a CUDA event without timing; it remembers the queue it was recorded on, so that
//   event_synchronize can return that queue's deferred errors.
// - A program is a KIR program rendered as CUDA C (emit_cuda.h) in two index widths, each compiled
//   by NVRTC for the device's architecture (cubin for sm_XY; PTX for compute_90 that the driver
//   compiles where this NVRTC does not know the device) the first time a launch needs it, kept in
//   the core's on-disk cache of compiled programs and loaded as a module.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/abi.h"
#include "backend/common/deferred_errors.h"
#include "backend/common/emit_cuda.h"
#include "backend/common/emit_gpu.h"
#include "backend/cuda/driver.h"

namespace ember::cuda {

struct DeviceContext {
  int index = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
  std::string name;  // "NVIDIA H200 (sm_90, 132 SMs)"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 1;
  int block = 256;  // threads per block of every kernel: 256, or the device's maximum if lower
  size_t memory_total = 0;
  CUstream alloc_stream = nullptr;  // where buffers are allocated (then waited for)
  CUdeviceptr dummy_error = 0;      // the error word of launches that cannot fail (never written)
};

// Every device the driver lists; empty with the reason in *why when there are none.
const std::vector<std::unique_ptr<DeviceContext>>& devices(std::string* why = nullptr);
DeviceContext* device(int32_t index);

// Makes the device's context current on the calling thread (a thread-local check first).
void bind(const DeviceContext* d);

// Fills *st with `what: <CUDA error text>` and returns the ABI code for it (out of memory or
// internal).
int32_t cuda_fail(ember_status* st, CUresult rc, const char* what);

// What an error record (kErrWords words) written by launch `name` says, as a deferred error.
ember_status error_status(const uint32_t* word, const std::string& name, uint64_t tag);

}  // namespace ember::cuda

struct ember_buffer_s {
  ember::cuda::DeviceContext* device = nullptr;
  ember::cuda::CUdeviceptr ptr = 0;
  size_t bytes = 0;
};

struct ember_queue_s {
  static constexpr uint32_t kErrorSlots = 1024;
  struct Checked {
    uint64_t tag;
    std::string name;
  };
  ember::cuda::DeviceContext* device = nullptr;
  ember::cuda::CUstream stream = nullptr;
  ember::cuda::CUdeviceptr error_slab = 0;  // kErrorSlots records of kErrWords words, zero when free
  std::mutex mutex;                         // guards what follows
  std::vector<Checked> checked;             // the launch of each used slot, in order
  ember::plugin::DeferredErrors deferred;
};

struct ember_event_s {
  ember::cuda::DeviceContext* device = nullptr;
  ember::cuda::CUevent event = nullptr;
  std::atomic<ember_queue> recorded_on{nullptr};  // the last queue it was recorded on
};

struct ember_program_s {
  ember::cuda::DeviceContext* device = nullptr;
  std::string name;
  int32_t n_args = 0;
  bool reduce = false;
  bool can_fail = false;
  std::vector<uint8_t> arg_scalar;  // per argument: a launch-time scalar (its offset is a value)
  // The source and compiled function of each index width ([0] 32-bit, [1] 64-bit), compiled on
  // first use.
  std::string source[2];
  std::mutex mutex;
  ember::cuda::CUmodule module[2] = {nullptr, nullptr};
  ember::cuda::CUfunction function[2] = {nullptr, nullptr};
};

namespace ember::cuda {

// queue.cpp
int32_t queue_create(int32_t device, ember_queue* out, ember_status* st);
void queue_destroy(ember_queue q);
int32_t queue_synchronize(ember_queue q, ember_status* st);
int32_t buffer_alloc(int32_t device, size_t bytes, ember_buffer* out, ember_status* st);
void buffer_free(ember_queue q, ember_buffer b);
int32_t buffer_write(ember_queue q, ember_buffer dst, size_t offset, const void* src, size_t bytes, ember_status* st);
int32_t buffer_read(ember_queue q, ember_buffer src, size_t offset, void* dst, size_t bytes, ember_status* st);
int32_t buffer_copy(ember_queue q, ember_buffer dst, size_t dst_offset, ember_buffer src, size_t src_offset,
                    size_t bytes, ember_status* st);
int32_t event_create(int32_t device, ember_event* out, ember_status* st);
void event_destroy(ember_event e);
int32_t event_record(ember_event e, ember_queue q, ember_status* st);
int32_t queue_wait_event(ember_queue q, ember_event e, ember_status* st);
int32_t event_synchronize(ember_event e, ember_status* st);
int32_t event_query(ember_event e);
// An error slot for a launch that can fail (tag, name), in *slot (a device pointer); may
// synchronize the queue first when the slab is full. The caller holds q->mutex until the launch
// is enqueued, so that a synchronize on another thread cannot read (and recycle) the slot before
// the launch that writes it is on the stream.
int32_t take_error_slot(ember_queue q, uint64_t tag, const std::string& name, CUdeviceptr* slot, ember_status* st);

// kernels.cpp
int32_t program_create(int32_t device, const ember_kir_program* program, ember_program* out, ember_status* st);
void program_destroy(ember_program p);
int32_t program_run(ember_queue q, ember_program p, const ember_kir_launch* launch, uint64_t tag, ember_status* st);

// library.cpp
bool library_supported(int32_t op);
int32_t library_call(ember_queue q, int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                     int32_t n_out, const void* attrs, uint64_t tag, ember_status* st);

}  // namespace ember::cuda
