// Vulkan queues behind ABI v2's ember_queue: work is recorded into an open command buffer (a
// batch) and submitted when the batch is full or when the host needs a result; every submission
// signals the queue's timeline semaphore with the next value. Events are (semaphore, value)
// pairs; buffer frees, staging memory and descriptor sets are released when the timeline passes
// the batch that used them. Kernel-side errors land in the failing launch's own error word (the
// queue's shared word for library shaders) and are reported, every one with its launch's tag,
// by the next synchronizes (abi.h).
// Within a batch, a command is preceded by a pipeline barrier only when its buffer ranges
// overlap what the commands since the last barrier wrote (or, for its writes, read): hazards.h.
// Every batch ends with one barrier, which orders it before the next batch and the host.
#pragma once

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/common/deferred_errors.h"
#include "backend/vulkan/context.h"
#include "backend/vulkan/hazards.h"
#include "backend/vulkan/small_buffers.h"

struct ember_buffer_s {
  ember::vk::DeviceContext* device;
  ember::vk::MemoryBlock block;  // its own allocation (none for a small buffer)
  ember::vk::BufferSlice slice;  // a small buffer's range of a shared slab (small_buffers.h)
  size_t bytes;
  // Where byte 0 is: the VkBuffer to bind and copy, the offset in it, the bytes from there that
  // may be bound (at least 16), and its host address where the memory is host visible.
  VkBuffer vk = VK_NULL_HANDLE;
  VkDeviceSize base = 0, extent = 0;
  void* mapped = nullptr;
};

namespace ember::vk {

struct Pipeline;  // kernels.h

// Host-visible memory that a batch writes launch parameters and staged uploads into.
struct Chunk {
  MemoryBlock block;
  VkDeviceSize used = 0;
};

struct Batch {
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  uint32_t commands = 0, sets = 0, descriptors = 0;
  uint64_t value = 0;  // the timeline value its submission signals
  std::vector<Chunk*> chunks;
  std::vector<std::shared_ptr<const Pipeline>> pipelines;  // kept alive while it runs
  // The error word of each checked kernel launch (kErrWords uints in a chunk of this batch): a
  // launch of its own, so that no launch's error hides another's (abi.h: every deferred error
  // is kept). Library shaders share the queue's word.
  struct ErrorSlot {
    uint32_t launch;
    Chunk* chunk;
    VkDeviceSize offset;
  };
  std::vector<ErrorSlot> error_slots;
  HazardTracker hazards;  // buffer accesses since the last barrier in cb
  VkPipeline bound = VK_NULL_HANDLE;  // the pipeline last bound in cb
  // Host memory to fill from staging when the batch is done: (chunk, offset, dst, bytes).
};

// Where a recorded launch's descriptor writes point.
struct Binding {
  VkBuffer buffer;
  VkDeviceSize offset, range;
};

}  // namespace ember::vk

struct ember_queue_s {
  ember::vk::DeviceContext* device = nullptr;
  std::mutex mutex;
  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkSemaphore timeline = VK_NULL_HANDLE;
  uint64_t submitted = 0;  // the last value a submission signals
  ember::vk::Batch open;
  std::deque<ember::vk::Batch> in_flight;
  std::vector<VkCommandBuffer> spare_cbs;
  std::vector<VkDescriptorPool> spare_pools;
  std::vector<ember::vk::Chunk*> spare_chunks;
  std::deque<std::pair<uint64_t, ember_buffer>> frees;  // released once the timeline reaches .first
  std::vector<std::pair<VkSemaphore, uint64_t>> waits;  // for the next submission
  ember::vk::MemoryBlock error_word;                    // uint[kErrWords], host visible (library shaders)
  uint32_t next_launch = 1;
  struct Checked {
    uint64_t tag;
    std::string name;
  };
  std::unordered_map<uint32_t, Checked> checked;
  // Kernel errors found when batches retired, oldest first, until reported (abi.h).
  ember::plugin::DeferredErrors deferred;
  // Reused by each launch's descriptor writes (under mutex), so that a dispatch allocates nothing.
  std::vector<VkDescriptorBufferInfo> binding_infos;
  std::vector<VkWriteDescriptorSet> binding_writes;
  // EMBER_VULKAN_DISABLE=overlap_barriers (read when the queue is created): a barrier after every
  // command, as before barriers were placed by overlap (for comparisons and bisecting).
  bool barrier_every_command = false;
  // Device timing (timing.cpp): while `timing`, each tagged call is bracketed by two timestamp
  // queries of a ring (a pair per call); `timed` holds the calls whose times were not taken yet,
  // in the order they were enqueued.
  std::atomic<bool> timing{false};
  VkQueryPool timing_pool = VK_NULL_HANDLE;
  uint32_t timing_next = 0;  // the next pair's first query
  struct TimedCall {
    uint64_t tag;
    uint32_t query;
  };
  std::deque<TimedCall> timed;
};

struct ember_event_s {
  ember::vk::DeviceContext* device = nullptr;
  ember_queue queue = nullptr;
  VkSemaphore semaphore = VK_NULL_HANDLE;
  uint64_t value = 0;
};

namespace ember::vk {

int32_t queue_create(int32_t device, ember_queue* out, ember_status* st);
void queue_destroy(ember_queue q);
int32_t queue_synchronize(ember_queue q, ember_status* st);

int32_t buffer_alloc(int32_t device, size_t bytes, ember_buffer* out, ember_status* st);
void buffer_free(ember_queue q, ember_buffer b);
int32_t buffer_write(ember_queue q, ember_buffer dst, size_t off, const void* src, size_t n, ember_status* st);
int32_t buffer_read(ember_queue q, ember_buffer src, size_t off, void* dst, size_t n, ember_status* st);
int32_t buffer_copy(ember_queue q, ember_buffer dst, size_t dst_off, ember_buffer src, size_t src_off, size_t n,
                    ember_status* st);

int32_t event_create(int32_t device, ember_event* out, ember_status* st);
void event_destroy(ember_event e);
int32_t event_record(ember_event e, ember_queue q, ember_status* st);
int32_t queue_wait_event(ember_queue q, ember_event e, ember_status* st);
int32_t event_synchronize(ember_event e, ember_status* st);
int32_t event_query(ember_event e);

// Device timing (timing.cpp; abi.h queue_set_timing). timing_begin, with q->mutex held, writes a
// tagged call's first timestamp and returns its query (-1: the call goes untimed); timing_end
// writes the last one after the call's commands.
int32_t queue_set_timing(ember_queue q, int32_t on, ember_status* st);
int32_t queue_take_timings(ember_queue q, ember_timing* out, int32_t capacity);
int64_t timing_begin(ember_queue q, uint64_t tag);
void timing_end(ember_queue q, int64_t query);
void destroy_timing(ember_queue q);

// For kernels.cpp, with q->mutex held: the open batch (started if needed), `bytes` of host-visible
// memory in it (aligned to `align`), and the end of a recorded command (barrier, flush when full).
int32_t begin(ember_queue q, ember_status* st);
// A descriptor set of `layout` (`descriptors` bindings) for one more launch in the open batch,
// which is submitted first when it has no room left, and started if needed.
int32_t open_launch(ember_queue q, VkDescriptorSetLayout layout, uint32_t descriptors, VkDescriptorSet* set,
                    ember_status* st);
int32_t scratch(ember_queue q, VkDeviceSize bytes, VkDeviceSize align, Chunk** chunk, VkDeviceSize* offset,
                ember_status* st);
// Before recording a command that makes `accesses` (after begin and scratch, which may flush): a
// barrier first when they conflict with the batch's accesses since its last barrier.
void order_accesses(ember_queue q, const BufferAccess* accesses, size_t n);
// The hazard key of a buffer.
uint64_t buffer_key(VkBuffer buffer);
int32_t end_command(ember_queue q, ember_status* st);
// Submits the open batch (if it has work or waits).
int32_t flush(ember_queue q, ember_status* st);

}  // namespace ember::vk
