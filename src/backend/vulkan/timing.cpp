// Device timing for the profiler (abi.h queue_set_timing): a tagged call is bracketed by two
// timestamps written into the queue's command buffers, the first before its commands (top of
// pipe: when the commands before it have started) and the last after them (bottom of pipe: when
// they and everything before have finished). Queries come from a ring of one pool per queue, two
// per call, and are read without waiting: a call's record is taken once both of its timestamps
// are available, in the order the calls were enqueued, and its queries are then reset from the
// host (hostQueryReset), so that a reused pair never shows a result from its previous call.
#include <cstring>

#include "backend/vulkan/queue.h"

namespace ember::vk {

namespace {
// Calls timed at once at most (abi.h: a queue keeps at most 65536 records; the ring is the
// queue's own bound, smaller: a call finding it full goes untimed until records are taken).
constexpr uint32_t kTimedCalls = 4096;
constexpr uint32_t kQueries = 2 * kTimedCalls;

int64_t to_ns(const DeviceContext* d, uint64_t ticks) {
  const uint64_t mask = d->timestamp_bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << d->timestamp_bits) - 1;
  return int64_t(double(ticks & mask) * double(d->props.limits.timestampPeriod));
}
}  // namespace

int32_t queue_set_timing(ember_queue q, int32_t on, ember_status* st) {
  DeviceContext* d = q->device;
  if (d->timestamp_bits == 0)
    return set_status(st, EMBER_ERR_UNSUPPORTED,
                      "vulkan:%d: the compute queue has no timestamps or the device no host query reset", d->index);
  std::lock_guard lock(q->mutex);
  if (on && !q->timing_pool) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = kQueries;
    VkResult r = vkCreateQueryPool(d->device, &qi, nullptr, &q->timing_pool);
    if (r != VK_SUCCESS) return set_status(st, EMBER_ERR_INTERNAL, "vulkan: vkCreateQueryPool: %s", result_name(r));
    vkResetQueryPool(d->device, q->timing_pool, 0, kQueries);
  }
  q->timing.store(on != 0, std::memory_order_relaxed);
  return EMBER_OK;
}

int64_t timing_begin(ember_queue q, uint64_t tag) {
  if (!q->timing.load(std::memory_order_relaxed) || tag == 0 || !q->timing_pool) return -1;
  if (q->timed.size() >= kTimedCalls) return -1;  // every pair in use: untimed
  ember_status st{};
  if (begin(q, &st) != EMBER_OK) return -1;
  const uint32_t query = q->timing_next;
  q->timing_next = (q->timing_next + 2) % kQueries;
  vkCmdWriteTimestamp(q->open.cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, q->timing_pool, query);
  q->timed.push_back({tag, query});
  // Counted as a command, so that a batch holding only timestamps is still submitted.
  end_command(q, &st);
  return query;
}

void timing_end(ember_queue q, int64_t query) {
  if (query < 0) return;
  ember_status st{};
  if (begin(q, &st) != EMBER_OK) return;  // the record stays incomplete: never taken, see below
  vkCmdWriteTimestamp(q->open.cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, q->timing_pool, uint32_t(query) + 1);
  end_command(q, &st);
}

int32_t queue_take_timings(ember_queue q, ember_timing* out, int32_t capacity) {
  std::lock_guard lock(q->mutex);
  DeviceContext* d = q->device;
  int32_t n = 0;
  while (n < capacity && !q->timed.empty()) {
    const ember_queue_s::TimedCall& call = q->timed.front();
    uint64_t ticks[2];
    const VkResult r = vkGetQueryPoolResults(d->device, q->timing_pool, call.query, 2, sizeof ticks, ticks,
                                             sizeof(uint64_t), VK_QUERY_RESULT_64_BIT);
    if (r == VK_NOT_READY) break;  // still running (or its end was never written: see timing_end)
    if (r == VK_SUCCESS) out[n++] = ember_timing{call.tag, to_ns(d, ticks[0]), to_ns(d, ticks[1])};
    vkResetQueryPool(d->device, q->timing_pool, call.query, 2);
    q->timed.pop_front();
  }
  return n;
}

void destroy_timing(ember_queue q) {
  if (q->timing_pool) vkDestroyQueryPool(q->device->device, q->timing_pool, nullptr);
  q->timing_pool = VK_NULL_HANDLE;
}

}  // namespace ember::vk
