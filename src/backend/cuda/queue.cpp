// CUDA queues (streams), buffers, events and deferred errors of the plugin (runtime.h).
#include <cstring>

#include "backend/common/plugin_status.h"
#include "backend/cuda/runtime.h"

namespace ember::cuda {

namespace {

using plugin::set_status;

const Driver& drv() { return Driver::get(); }

// After the stream is done (q->mutex held): reads the used error slots back, defers an error for
// each written one (in launch order), and zeroes them for reuse (ordered before later launches).
int32_t collect_errors(ember_queue q, ember_status* st) {
  if (q->checked.empty()) return EMBER_OK;
  const size_t n = q->checked.size();
  std::vector<uint32_t> words(n * emit::kErrWords);
  const size_t bytes = words.size() * sizeof(uint32_t);
  if (CUresult rc = drv().memcpy_dtoh_async(words.data(), q->error_slab, bytes, q->stream); rc != 0)
    return cuda_fail(st, rc, "reading the kernels' error words");
  if (CUresult rc = drv().stream_synchronize(q->stream); rc != 0) return cuda_fail(st, rc, "cuStreamSynchronize");
  for (size_t i = 0; i < n; ++i) {
    const uint32_t* word = words.data() + i * emit::kErrWords;
    if (word[0] != emit::kErrNone) q->deferred.add(error_status(word, q->checked[i].name, q->checked[i].tag));
  }
  q->checked.clear();
  if (CUresult rc = drv().memset_d32_async(q->error_slab, 0, words.size(), q->stream); rc != 0)
    return cuda_fail(st, rc, "clearing the kernels' error words");
  return EMBER_OK;
}

// Waits for the stream, then collects its launches' errors and returns the oldest deferred one.
int32_t finish(ember_queue q, ember_status* st) {
  bind(q->device);
  if (CUresult rc = drv().stream_synchronize(q->stream); rc != 0) return cuda_fail(st, rc, "cuStreamSynchronize");
  std::lock_guard lock(q->mutex);
  if (int32_t rc = collect_errors(q, st); rc != EMBER_OK) return rc;
  return q->deferred.take(st);
}

bool in_bounds(ember_buffer b, size_t offset, size_t bytes) { return offset <= b->bytes && bytes <= b->bytes - offset; }

}  // namespace

int32_t queue_create(int32_t index, ember_queue* out, ember_status* st) {
  DeviceContext* d = device(index);
  if (!d) return set_status(st, EMBER_ERR_INVALID, "cuda: no device %d", index);
  bind(d);
  auto q = std::make_unique<ember_queue_s>();
  q->device = d;
  if (CUresult rc = drv().stream_create(&q->stream, kStreamNonBlocking); rc != 0) return cuda_fail(st, rc, "cuStreamCreate");
  const size_t words = size_t(ember_queue_s::kErrorSlots) * emit::kErrWords;
  CUresult rc = drv().mem_alloc(&q->error_slab, words * sizeof(uint32_t));
  if (rc == 0) rc = drv().memset_d32_async(q->error_slab, 0, words, q->stream);
  if (rc != 0) {
    drv().stream_destroy(q->stream);
    return cuda_fail(st, rc, "allocating a queue's error words");
  }
  *out = q.release();
  return EMBER_OK;
}

void queue_destroy(ember_queue q) {
  if (!q) return;
  bind(q->device);
  drv().stream_synchronize(q->stream);
  drv().mem_free(q->error_slab);
  drv().stream_destroy(q->stream);
  delete q;
}

int32_t queue_synchronize(ember_queue q, ember_status* st) { return finish(q, st); }

int32_t take_error_slot(ember_queue q, uint64_t tag, const std::string& name, CUdeviceptr* slot, ember_status* st) {
  if (q->checked.size() == ember_queue_s::kErrorSlots) {
    if (CUresult rc = drv().stream_synchronize(q->stream); rc != 0) return cuda_fail(st, rc, "cuStreamSynchronize");
    if (int32_t rc = collect_errors(q, st); rc != EMBER_OK) return rc;
  }
  *slot = q->error_slab + q->checked.size() * emit::kErrWords * sizeof(uint32_t);
  q->checked.push_back({tag, name});
  return EMBER_OK;
}

int32_t buffer_alloc(int32_t index, size_t bytes, ember_buffer* out, ember_status* st) {
  DeviceContext* d = device(index);
  if (!d) return set_status(st, EMBER_ERR_INVALID, "cuda: no device %d", index);
  bind(d);
  auto b = std::make_unique<ember_buffer_s>();
  b->device = d;
  b->bytes = bytes;
  // Allocated in stream order on the allocation stream and waited for, so that every queue may
  // use it at once (the pool may first wait for a free enqueued on another queue).
  if (CUresult rc = drv().mem_alloc_async(&b->ptr, bytes ? bytes : 1, d->alloc_stream); rc != 0)
    return cuda_fail(st, rc, ("allocating " + std::to_string(bytes) + " bytes").c_str());
  if (CUresult rc = drv().stream_synchronize(d->alloc_stream); rc != 0) {
    drv().mem_free_async(b->ptr, d->alloc_stream);
    return cuda_fail(st, rc, ("allocating " + std::to_string(bytes) + " bytes").c_str());
  }
  *out = b.release();
  return EMBER_OK;
}

void buffer_free(ember_queue q, ember_buffer b) {
  if (!b) return;
  bind(q->device);
  drv().mem_free_async(b->ptr, q->stream);  // after the work enqueued before it on q
  delete b;
}

int32_t buffer_write(ember_queue q, ember_buffer dst, size_t offset, const void* src, size_t bytes, ember_status* st) {
  if (!in_bounds(dst, offset, bytes))
    return set_status(st, EMBER_ERR_INVALID, "cuda: write of %zu bytes at %zu into a buffer of %zu", bytes, offset,
                      dst->bytes);
  if (bytes == 0) return EMBER_OK;
  bind(q->device);
  // From pageable memory the driver has taken the bytes when the call returns (CUDA's API
  // synchronization rules), as abi.h's buffer_write promises.
  if (CUresult rc = drv().memcpy_htod_async(dst->ptr + offset, src, bytes, q->stream); rc != 0)
    return cuda_fail(st, rc, "cuMemcpyHtoDAsync");
  return EMBER_OK;
}

int32_t buffer_read(ember_queue q, ember_buffer src, size_t offset, void* dst, size_t bytes, ember_status* st) {
  if (!in_bounds(src, offset, bytes))
    return set_status(st, EMBER_ERR_INVALID, "cuda: read of %zu bytes at %zu from a buffer of %zu", bytes, offset,
                      src->bytes);
  bind(q->device);
  if (bytes > 0)
    if (CUresult rc = drv().memcpy_dtoh_async(dst, src->ptr + offset, bytes, q->stream); rc != 0)
      return cuda_fail(st, rc, "cuMemcpyDtoHAsync");
  return finish(q, st);
}

int32_t buffer_copy(ember_queue q, ember_buffer dst, size_t dst_offset, ember_buffer src, size_t src_offset,
                    size_t bytes, ember_status* st) {
  if (!in_bounds(dst, dst_offset, bytes) || !in_bounds(src, src_offset, bytes))
    return set_status(st, EMBER_ERR_INVALID, "cuda: copy of %zu bytes from %zu (of %zu) to %zu (of %zu)", bytes,
                      src_offset, src->bytes, dst_offset, dst->bytes);
  if (bytes == 0) return EMBER_OK;
  bind(q->device);
  CUresult rc = dst->device == src->device
                    ? drv().memcpy_dtod_async(dst->ptr + dst_offset, src->ptr + src_offset, bytes, q->stream)
                    : drv().memcpy_peer_async(dst->ptr + dst_offset, dst->device->context, src->ptr + src_offset,
                                              src->device->context, bytes, q->stream);
  return rc == 0 ? EMBER_OK : cuda_fail(st, rc, "copying between buffers");
}

int32_t event_create(int32_t index, ember_event* out, ember_status* st) {
  DeviceContext* d = device(index);
  if (!d) return set_status(st, EMBER_ERR_INVALID, "cuda: no device %d", index);
  bind(d);
  auto e = std::make_unique<ember_event_s>();
  e->device = d;
  if (CUresult rc = drv().event_create(&e->event, kEventDisableTiming); rc != 0) return cuda_fail(st, rc, "cuEventCreate");
  *out = e.release();
  return EMBER_OK;
}

// CUDA keeps what an enqueued wait needs after cuEventDestroy, as abi.h requires.
void event_destroy(ember_event e) {
  if (!e) return;
  bind(e->device);
  drv().event_destroy(e->event);
  delete e;
}

int32_t event_record(ember_event e, ember_queue q, ember_status* st) {
  bind(q->device);
  if (CUresult rc = drv().event_record(e->event, q->stream); rc != 0) return cuda_fail(st, rc, "cuEventRecord");
  e->recorded_on = q;
  return EMBER_OK;
}

int32_t queue_wait_event(ember_queue q, ember_event e, ember_status* st) {
  bind(q->device);
  if (CUresult rc = drv().stream_wait_event(q->stream, e->event, 0); rc != 0) return cuda_fail(st, rc, "cuStreamWaitEvent");
  return EMBER_OK;
}

int32_t event_synchronize(ember_event e, ember_status* st) {
  bind(e->device);
  if (CUresult rc = drv().event_synchronize(e->event); rc != 0) return cuda_fail(st, rc, "cuEventSynchronize");
  ember_queue q = e->recorded_on.load();
  if (!q) return EMBER_OK;
  // The launches before the recorded point are done; their errors are collected with the rest of
  // the queue's, which is why the queue is waited for (its later work as well).
  return finish(q, st);
}

int32_t event_query(ember_event e) {
  bind(e->device);
  return drv().event_query(e->event) == kCudaErrorNotReady ? 0 : 1;
}

}  // namespace ember::cuda
