// Vulkan queues, buffers and events of the plugin (queue.h).
#include "backend/vulkan/queue.h"

#include <algorithm>
#include <cstring>

#include "backend/vulkan/access_ranges.h"
#include "backend/vulkan/kernels.h"

namespace ember::vk {

namespace {

constexpr uint32_t kCommandsPerBatch = 64;
constexpr uint32_t kSetsPerBatch = 64;
constexpr uint32_t kDescriptorsPerBatch = 4096;
constexpr VkDeviceSize kChunkBytes = 4u << 20;

int32_t vk_fail(ember_status* st, VkResult r, const char* what) {
  const bool memory = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY;
  return set_status(st, memory ? EMBER_ERR_OUT_OF_MEMORY : EMBER_ERR_INTERNAL, "vulkan: %s: %s", what, result_name(r));
}

uint64_t completed(ember_queue q) {
  uint64_t v = 0;
  vkGetSemaphoreCounterValue(q->device->device, q->timeline, &v);
  return v;
}

int32_t wait_value(DeviceContext* d, VkSemaphore s, uint64_t value, ember_status* st) {
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &s;
  wi.pValues = &value;
  VkResult r = vkWaitSemaphores(d->device, &wi, UINT64_MAX);
  return r == VK_SUCCESS ? EMBER_OK : vk_fail(st, r, "waiting for the device");
}

void release_buffer(ember_buffer b) {
  if (b->slice.slab) small_buffer_pool(*b->device).give_back(*b->device, b->slice);
  else b->device->destroy(b->block);
  delete b;
}

// The message of an error word (kErrWords uints) written by launch `launch` of this queue.
ember_status error_status(ember_queue q, const uint32_t* e) {
  auto it = q->checked.find(e[1]);
  const std::string name = it != q->checked.end() ? it->second.name : "a kernel";
  ember_status s{};
  s.tag = it != q->checked.end() ? it->second.tag : 0;
  set_status(&s, EMBER_ERR_INVALID, "%s: %s", name.c_str(), emit::gpu_error_message(e).c_str());
  return s;
}

// Takes the errors of finished batch `b` when it retires: each checked launch's own error word,
// then the queue's shared word (library shaders). A shader takes a word with an atomic
// compare-and-swap on word 0 and then writes the details (launch id, values), so an error in the
// shared word from a batch that is still running may be only half written: it is left for that
// batch's own retirement. (While word 0 is set, no other shader can take the shared word: a
// second library shader's error in flight at once is dropped. Library calls carry no check.)
void collect_errors(ember_queue q, const Batch& b) {
  for (const Batch::ErrorSlot& slot : b.error_slots) {
    const auto* e = reinterpret_cast<const uint32_t*>(static_cast<const char*>(slot.chunk->block.mapped) + slot.offset);
    if (e[0] != emit::kErrNone) q->deferred.add(error_status(q, e));
  }
  auto* e = static_cast<uint32_t*>(q->error_word.mapped);
  if (e[0] == emit::kErrNone) return;
  const bool from_b = std::any_of(b.error_slots.begin(), b.error_slots.end(),
                                  [&](const Batch::ErrorSlot& slot) { return slot.launch == e[1]; });
  if (!from_b && q->in_flight.size() > 1) return;
  q->deferred.add(error_status(q, e));
  std::memset(e, 0, sizeof(uint32_t) * emit::kErrWords);
}

// Releases what finished batches held, and frees whose work is done.
void retire(ember_queue q) {
  const uint64_t done = completed(q);
  while (!q->in_flight.empty() && q->in_flight.front().value <= done) {
    Batch& b = q->in_flight.front();
    vkResetCommandBuffer(b.cb, 0);
    q->spare_cbs.push_back(b.cb);
    vkResetDescriptorPool(q->device->device, b.pool, 0);
    q->spare_pools.push_back(b.pool);
    collect_errors(q, b);  // before its chunks are reused and its launch ids forgotten
    for (Chunk* c : b.chunks) {
      c->used = 0;
      if (c->block.size == kChunkBytes) q->spare_chunks.push_back(c);
      else {
        q->device->destroy(c->block);
        delete c;
      }
    }
    for (const Batch::ErrorSlot& slot : b.error_slots) q->checked.erase(slot.launch);
    q->in_flight.pop_front();
  }
  while (!q->frees.empty() && q->frees.front().first <= done) {
    release_buffer(q->frees.front().second);
    q->frees.pop_front();
  }
}

bool idle(ember_queue q) { return q->open.commands == 0 && q->in_flight.empty(); }

int32_t wait_all(ember_queue q, ember_status* st) {
  int32_t rc = flush(q, st);
  if (rc != EMBER_OK) return rc;
  rc = wait_value(q->device, q->timeline, q->submitted, st);
  retire(q);
  return rc;
}

constexpr VkPipelineStageFlags kWorkStages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kWorkAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                      VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;

// Everything recorded before it (dispatches and copies) happens before, and is visible to, what
// comes after it in `dst_stage` (one global memory barrier: cheaper to record than per-buffer
// ones, and the hazard tracker already decided that one is needed).
void barrier(VkCommandBuffer cb, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cb, kWorkStages, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

// The access of a transfer to bytes [offset, offset + n) of `b`.
BufferAccess transfer_access(ember_buffer b, size_t offset, size_t n, bool write) {
  const ByteRange r = word_range(b->base + offset, b->base + offset + n, b->base + b->extent);
  return BufferAccess{buffer_key(b->vk), r.begin, r.end, write};
}

}  // namespace

int32_t begin(ember_queue q, ember_status* st) {
  Batch& b = q->open;
  if (b.cb) return EMBER_OK;
  DeviceContext* d = q->device;
  if (!q->spare_cbs.empty()) {
    b.cb = q->spare_cbs.back();
    q->spare_cbs.pop_back();
  } else {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = q->command_pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkResult r = vkAllocateCommandBuffers(d->device, &ai, &b.cb);
    if (r != VK_SUCCESS) return vk_fail(st, r, "vkAllocateCommandBuffers");
  }
  if (!q->spare_pools.empty()) {
    b.pool = q->spare_pools.back();
    q->spare_pools.pop_back();
  } else {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kDescriptorsPerBatch};
    VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pi.maxSets = kSetsPerBatch;
    pi.poolSizeCount = 1;
    pi.pPoolSizes = &size;
    VkResult r = vkCreateDescriptorPool(d->device, &pi, nullptr, &b.pool);
    if (r != VK_SUCCESS) return vk_fail(st, r, "vkCreateDescriptorPool");
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vkBeginCommandBuffer(b.cb, &bi);
  return EMBER_OK;
}

int32_t scratch(ember_queue q, VkDeviceSize bytes, VkDeviceSize align, Chunk** chunk, VkDeviceSize* offset,
                ember_status* st) {
  Batch& b = q->open;
  if (!b.chunks.empty()) {
    Chunk* c = b.chunks.back();
    VkDeviceSize at = (c->used + align - 1) / align * align;
    if (at + bytes <= c->block.size) {
      c->used = at + bytes;
      *chunk = c;
      *offset = at;
      return EMBER_OK;
    }
  }
  Chunk* c = nullptr;
  if (bytes <= kChunkBytes && !q->spare_chunks.empty()) {
    c = q->spare_chunks.back();
    q->spare_chunks.pop_back();
  } else {
    c = new Chunk;
    std::string why;
    if (!q->device->create(bytes <= kChunkBytes ? kChunkBytes : bytes, true, c->block, &why)) {
      delete c;
      return set_status(st, EMBER_ERR_OUT_OF_MEMORY, "vulkan: staging memory of %zu bytes: %s", size_t(bytes), why.c_str());
    }
  }
  // Keep the partly used chunk last only if the new one is a one-off large block.
  b.chunks.push_back(c);
  c->used = bytes;
  *chunk = c;
  *offset = 0;
  return EMBER_OK;
}

uint64_t buffer_key(VkBuffer buffer) {
  static_assert(sizeof(VkBuffer) <= sizeof(uint64_t));
  uint64_t key = 0;
  std::memcpy(&key, &buffer, sizeof buffer);  // a pointer or a uint64_t, depending on the platform
  return key;
}

void order_accesses(ember_queue q, const BufferAccess* accesses, size_t n) {
  Batch& b = q->open;
  RecordingCounters& c = q->device->counters;
  if (q->barrier_every_command) {
    if (b.commands == 0) return;  // the previous batch's last barrier covers it
    barrier(b.cb, kWorkStages, kWorkAccess);
    ++c.unconditional;
    return;
  }
  const Hazard h = b.hazards.conflict(accesses, n);
  if (h != Hazard::None) {
    barrier(b.cb, kWorkStages, kWorkAccess);
    b.hazards.clear();
    ++(h == Hazard::ReadAfterWrite ? c.read_after_write : h == Hazard::WriteAfterWrite ? c.write_after_write
                                                                                        : c.write_after_read);
  }
  b.hazards.record(accesses, n);
}

int32_t end_command(ember_queue q, ember_status* st) {
  ++q->open.commands;
  if (q->open.commands >= kCommandsPerBatch || q->open.sets >= kSetsPerBatch) return flush(q, st);
  return EMBER_OK;
}

int32_t open_launch(ember_queue q, VkDescriptorSetLayout layout, uint32_t descriptors, VkDescriptorSet* set,
                    ember_status* st) {
  if (descriptors > kDescriptorsPerBatch)
    return set_status(st, EMBER_ERR_UNSUPPORTED, "vulkan: a launch with %u bindings", descriptors);
  Batch& b = q->open;
  if (b.cb && (b.sets + 1 > kSetsPerBatch || b.descriptors + descriptors > kDescriptorsPerBatch))
    if (int32_t rc = flush(q, st); rc != EMBER_OK) return rc;
  if (int32_t rc = begin(q, st); rc != EMBER_OK) return rc;
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = q->open.pool;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  VkResult r = vkAllocateDescriptorSets(q->device->device, &ai, set);
  if (r != VK_SUCCESS) return vk_fail(st, r, "vkAllocateDescriptorSets");
  ++q->open.sets;
  q->open.descriptors += descriptors;
  return EMBER_OK;
}

int32_t flush(ember_queue q, ember_status* st) {
  Batch& b = q->open;
  if (b.commands == 0 && q->waits.empty()) return EMBER_OK;
  if (int32_t rc = begin(q, st); rc != EMBER_OK) return rc;
  // The batch's work before the host's reads and before the next batch's commands (a barrier's
  // scope spans submissions on the queue; the timeline semaphore orders nothing on its own queue).
  barrier(b.cb, kWorkStages | VK_PIPELINE_STAGE_HOST_BIT, kWorkAccess | VK_ACCESS_HOST_READ_BIT);
  vkEndCommandBuffer(b.cb);
  b.value = q->submitted + 1;
  std::vector<VkSemaphore> wait_sems;
  std::vector<uint64_t> wait_values;
  std::vector<VkPipelineStageFlags> wait_stages;
  for (auto& [s, v] : q->waits) {
    wait_sems.push_back(s);
    wait_values.push_back(v);
    wait_stages.push_back(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  }
  VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  ti.waitSemaphoreValueCount = uint32_t(wait_values.size());
  ti.pWaitSemaphoreValues = wait_values.data();
  ti.signalSemaphoreValueCount = 1;
  ti.pSignalSemaphoreValues = &b.value;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &ti;
  si.waitSemaphoreCount = uint32_t(wait_sems.size());
  si.pWaitSemaphores = wait_sems.data();
  si.pWaitDstStageMask = wait_stages.data();
  si.commandBufferCount = 1;
  si.pCommandBuffers = &b.cb;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &q->timeline;
  VkResult r;
  {
    std::lock_guard lock(q->device->submit_mutex);
    r = vkQueueSubmit(q->device->queue, 1, &si, VK_NULL_HANDLE);
  }
  if (r != VK_SUCCESS) return vk_fail(st, r, "vkQueueSubmit");
  ++q->device->counters.submissions;
  q->waits.clear();
  q->submitted = b.value;
  q->in_flight.push_back(std::move(b));
  q->open = Batch{};
  return EMBER_OK;
}

int32_t queue_create(int32_t device_index, ember_queue* out, ember_status* st) {
  DeviceContext* d = device(device_index);
  if (!d) return set_status(st, EMBER_ERR_INVALID, "vulkan: no device %d", device_index);
  auto q = std::make_unique<ember_queue_s>();
  q->device = d;
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = d->family;
  VkResult r = vkCreateCommandPool(d->device, &pi, nullptr, &q->command_pool);
  if (r != VK_SUCCESS) return vk_fail(st, r, "vkCreateCommandPool");
  VkSemaphoreTypeCreateInfo ti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  ti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  si.pNext = &ti;
  r = vkCreateSemaphore(d->device, &si, nullptr, &q->timeline);
  if (r != VK_SUCCESS) {
    vkDestroyCommandPool(d->device, q->command_pool, nullptr);
    return vk_fail(st, r, "vkCreateSemaphore");
  }
  std::string why;
  if (!d->create(sizeof(uint32_t) * emit::kErrWords, true, q->error_word, &why)) {
    vkDestroySemaphore(d->device, q->timeline, nullptr);
    vkDestroyCommandPool(d->device, q->command_pool, nullptr);
    return set_status(st, EMBER_ERR_OUT_OF_MEMORY, "vulkan: error word: %s", why.c_str());
  }
  std::memset(q->error_word.mapped, 0, sizeof(uint32_t) * emit::kErrWords);
  q->barrier_every_command = feature_disabled("overlap_barriers");
  *out = q.release();
  return EMBER_OK;
}

void queue_destroy(ember_queue q) {
  if (!q) return;
  {
    std::lock_guard lock(q->mutex);
    ember_status st{};
    wait_all(q, &st);
    for (auto& [v, b] : q->frees) release_buffer(b);
    q->frees.clear();
  }
  DeviceContext* d = q->device;
  if (q->open.cb) q->spare_cbs.push_back(q->open.cb);
  if (q->open.pool) q->spare_pools.push_back(q->open.pool);
  for (Chunk* c : q->open.chunks) q->spare_chunks.push_back(c);
  for (Chunk* c : q->spare_chunks) {
    d->destroy(c->block);
    delete c;
  }
  for (VkDescriptorPool p : q->spare_pools) vkDestroyDescriptorPool(d->device, p, nullptr);
  vkDestroyCommandPool(d->device, q->command_pool, nullptr);  // frees its command buffers
  vkDestroySemaphore(d->device, q->timeline, nullptr);
  d->destroy(q->error_word);
  destroy_timing(q);
  delete q;
}

int32_t queue_synchronize(ember_queue q, ember_status* st) {
  std::lock_guard lock(q->mutex);
  int32_t rc = wait_all(q, st);
  if (rc != EMBER_OK) return rc;
  if (std::string v = take_validation_error(); !v.empty())
    return set_status(st, EMBER_ERR_INTERNAL, "vulkan validation layer: %.400s", v.c_str());
  return q->deferred.take(st);
}

int32_t buffer_alloc(int32_t device_index, size_t bytes, ember_buffer* out, ember_status* st) {
  DeviceContext* d = device(device_index);
  if (!d) return set_status(st, EMBER_ERR_INVALID, "vulkan: no device %d", device_index);
  if (bytes > d->max_buffer)
    return set_status(st, EMBER_ERR_OUT_OF_MEMORY,
                      "vulkan:%d: a buffer of %zu bytes is larger than the device's largest buffer (%llu bytes)",
                      device_index, bytes, (unsigned long long)d->max_buffer);
  auto* b = new ember_buffer_s{d, {}, {}, bytes};
  std::string why;
  // Small buffers are slices of shared slabs (small_buffers.h), aligned for binding.
  const bool small = bytes <= SmallBufferPool::kLargest && !feature_disabled("small_buffers");
  if (small && small_buffer_pool(*d).take(*d, std::max<size_t>(bytes, 16), std::max<VkDeviceSize>(256, d->binding_alignment),
                                          &b->slice, &why)) {
    b->vk = b->slice.buffer;
    b->base = b->slice.offset;
    b->extent = b->slice.size;
    b->mapped = b->slice.mapped;
  } else if (d->create(bytes, false, b->block, &why)) {
    b->vk = b->block.buffer;
    b->extent = b->block.size;
    b->mapped = b->block.mapped;
  } else {
    delete b;
    return set_status(st, EMBER_ERR_OUT_OF_MEMORY, "vulkan:%d: allocating %zu bytes: %s", device_index, bytes, why.c_str());
  }
  *out = b;
  return EMBER_OK;
}

void buffer_free(ember_queue q, ember_buffer b) {
  if (!b) return;
  std::lock_guard lock(q->mutex);
  retire(q);
  if (idle(q)) {
    release_buffer(b);
    return;
  }
  q->frees.emplace_back(q->open.commands ? q->submitted + 1 : q->submitted, b);
}

int32_t buffer_write(ember_queue q, ember_buffer dst, size_t off, const void* src, size_t n, ember_status* st) {
  if (off + n > dst->bytes || off + n < off)
    return set_status(st, EMBER_ERR_INVALID, "vulkan: write of %zu bytes at %zu into a buffer of %zu", n, off, dst->bytes);
  if (n == 0) return EMBER_OK;
  std::lock_guard lock(q->mutex);
  retire(q);
  if (dst->mapped && idle(q)) {  // nothing enqueued can touch it: write in place
    std::memcpy(static_cast<char*>(dst->mapped) + off, src, n);
    return EMBER_OK;
  }
  if (int32_t rc = begin(q, st); rc != EMBER_OK) return rc;
  Chunk* c = nullptr;
  VkDeviceSize at = 0;
  if (int32_t rc = scratch(q, n, 16, &c, &at, st); rc != EMBER_OK) return rc;
  std::memcpy(static_cast<char*>(c->block.mapped) + at, src, n);
  const BufferAccess access = transfer_access(dst, off, n, true);  // staging memory is this copy's alone
  order_accesses(q, &access, 1);
  VkBufferCopy region{at, dst->base + off, n};
  vkCmdCopyBuffer(q->open.cb, c->block.buffer, dst->vk, 1, &region);
  ++q->device->counters.transfers;
  return end_command(q, st);
}

int32_t buffer_read(ember_queue q, ember_buffer src, size_t off, void* dst, size_t n, ember_status* st) {
  if (off + n > src->bytes || off + n < off)
    return set_status(st, EMBER_ERR_INVALID, "vulkan: read of %zu bytes at %zu from a buffer of %zu", n, off, src->bytes);
  if (n == 0) return EMBER_OK;
  std::lock_guard lock(q->mutex);
  if (src->mapped) {
    if (int32_t rc = wait_all(q, st); rc != EMBER_OK) return rc;
    std::memcpy(dst, static_cast<const char*>(src->mapped) + off, n);
    return EMBER_OK;
  }
  // Device-local memory: copy into staging memory, then wait for it.
  if (int32_t rc = begin(q, st); rc != EMBER_OK) return rc;
  Chunk* c = nullptr;
  VkDeviceSize at = 0;
  if (int32_t rc = scratch(q, n, 16, &c, &at, st); rc != EMBER_OK) return rc;
  const BufferAccess access = transfer_access(src, off, n, false);
  order_accesses(q, &access, 1);
  VkBufferCopy region{src->base + off, at, n};
  vkCmdCopyBuffer(q->open.cb, src->vk, c->block.buffer, 1, &region);
  ++q->device->counters.transfers;
  ++q->open.commands;
  if (int32_t rc = flush(q, st); rc != EMBER_OK) return rc;
  const uint64_t value = q->submitted;
  if (int32_t rc = wait_value(q->device, q->timeline, value, st); rc != EMBER_OK) return rc;
  std::memcpy(dst, static_cast<const char*>(c->block.mapped) + at, n);  // before retire reuses the chunk
  retire(q);
  return EMBER_OK;
}

int32_t buffer_copy(ember_queue q, ember_buffer dst, size_t dst_off, ember_buffer src, size_t src_off, size_t n,
                    ember_status* st) {
  if (dst_off + n > dst->bytes || src_off + n > src->bytes)
    return set_status(st, EMBER_ERR_INVALID, "vulkan: copy of %zu bytes out of range", n);
  if (n == 0) return EMBER_OK;
  if (dst->device != src->device) {
    // Two VkDevices share no memory: through the host, finished before returning (so the
    // destination's later work, ordered after this call by the core, sees it).
    std::vector<unsigned char> staged(n);
    if (int32_t rc = buffer_read(q, src, src_off, staged.data(), n, st); rc != EMBER_OK) return rc;
    ember_queue tq = nullptr;
    if (int32_t rc = queue_create(dst->device->index, &tq, st); rc != EMBER_OK) return rc;
    int32_t rc = buffer_write(tq, dst, dst_off, staged.data(), n, st);
    if (rc == EMBER_OK) rc = queue_synchronize(tq, st);
    queue_destroy(tq);
    return rc;
  }
  std::lock_guard lock(q->mutex);
  if (int32_t rc = begin(q, st); rc != EMBER_OK) return rc;
  const BufferAccess accesses[2] = {transfer_access(src, src_off, n, false), transfer_access(dst, dst_off, n, true)};
  order_accesses(q, accesses, 2);
  VkBufferCopy region{src->base + src_off, dst->base + dst_off, n};
  vkCmdCopyBuffer(q->open.cb, src->vk, dst->vk, 1, &region);
  ++q->device->counters.transfers;
  return end_command(q, st);
}

int32_t event_create(int32_t device_index, ember_event* out, ember_status* st) {
  DeviceContext* d = device(device_index);
  if (!d) return set_status(st, EMBER_ERR_INVALID, "vulkan: no device %d", device_index);
  *out = new ember_event_s{d, nullptr, VK_NULL_HANDLE, 0};
  return EMBER_OK;
}

void event_destroy(ember_event e) { delete e; }

int32_t event_record(ember_event e, ember_queue q, ember_status* st) {
  std::lock_guard lock(q->mutex);
  if (int32_t rc = flush(q, st); rc != EMBER_OK) return rc;
  e->queue = q;
  e->device = q->device;
  e->semaphore = q->timeline;
  e->value = q->submitted;
  return EMBER_OK;
}

int32_t queue_wait_event(ember_queue q, ember_event e, ember_status* st) {
  if (!e->semaphore || e->queue == q) return EMBER_OK;  // never recorded, or the same in-order queue
  if (e->device != q->device) return wait_value(e->device, e->semaphore, e->value, st);  // another VkDevice
  std::lock_guard lock(q->mutex);
  q->waits.emplace_back(e->semaphore, e->value);
  return EMBER_OK;
}

int32_t event_synchronize(ember_event e, ember_status* st) {
  if (!e->semaphore) return EMBER_OK;
  if (int32_t rc = wait_value(e->device, e->semaphore, e->value, st); rc != EMBER_OK) return rc;
  ember_queue q = e->queue;
  std::lock_guard lock(q->mutex);
  retire(q);
  return q->deferred.take(st);
}

int32_t event_query(ember_event e) {
  if (!e->semaphore) return 1;
  uint64_t v = 0;
  vkGetSemaphoreCounterValue(e->device->device, e->semaphore, &v);
  return v >= e->value ? 1 : 0;
}

}  // namespace ember::vk
