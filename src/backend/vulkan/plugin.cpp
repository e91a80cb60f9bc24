// The Vulkan plugin's C table (abi.h, v2): every Vulkan 1.2 physical device with timeline
// semaphores is a device (vulkan:0, ...). Fused KIR programs become GLSL compute shaders
// (backend/common/emit_glsl.cpp) compiled at run time; library calls are library shaders
// (emit_glsl_library.cpp); what has none is refused by supports_op, and the core takes the host
// fallback naming the op.
//
//   EMBER_VULKAN_DISABLE=f64,int8,int16,int64  treat the device as lacking these features
//   EMBER_VULKAN_DISABLE=push_descriptors       bind through descriptor sets even where the
//                                        device has VK_KHR_push_descriptor
//   EMBER_VULKAN_DISABLE=overlap_barriers       a barrier between every two commands
//   EMBER_VULKAN_DISABLE=small_buffers          every buffer its own allocation (small_buffers.h)
//   EMBER_VULKAN_DISABLE=subgroups              reductions combine through shared memory only (no
//                                        subgroup butterfly: emit_glsl.h)
//   EMBER_VULKAN_VALIDATION=1            enable the Khronos validation layer
//   EMBER_VULKAN_DUMP=DIR                write every generated shader to DIR
//   EMBER_VULKAN_STATS=1                 print dispatch, barrier, submission and allocation counts
//                                        at exit
#include <cstdio>

#include "backend/common/host_services.h"
#include "backend/abi.h"
#include "backend/common/emit_glsl.h"
#include "backend/vulkan/context.h"
#include "backend/vulkan/kernels.h"
#include "backend/vulkan/queue.h"

namespace ember::vk {
namespace {

int32_t device_count() { return int32_t(context().devices.size()); }

const char* no_device_reason() {
  const Context& c = context();
  return c.devices.empty() ? c.why_none.c_str() : nullptr;
}

int32_t device_properties(int32_t index, ember_device_properties* out, ember_status* st) {
  DeviceContext* d = device(index);
  if (!d) return set_status(st, EMBER_ERR_INVALID, "vulkan: no device %d", index);
  ember_device_properties p{};
  p.struct_size = sizeof p;
  std::snprintf(p.name, sizeof p.name, "%s", d->name.c_str());
  std::snprintf(p.kind, sizeof p.kind, "%s", d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? "gpu (cpu)" : "gpu");
  p.memory_total = d->heap_bytes;
  for (int dt = 0; dt < EMBER_NUM_DTYPES; ++dt)
    if (emit::glsl_supports(d->target, EMBER_KIR_LOAD, uint8_t(dt))) p.dtypes |= EMBER_DTYPE_BIT(dt);
  p.index_bits = d->target.int64 ? 64 : 32;
  p.max_buffer_bytes = d->max_buffer;
  // A tensor is bound from an aligned start and to a whole 4-byte word: room for both.
  p.max_binding_bytes = d->max_binding - d->binding_alignment - 4;
  p.max_workgroup_size = d->props.limits.maxComputeWorkGroupInvocations;
  p.subgroup_size = d->subgroup_size;
  p.host_visible = d->device_memory_host_visible ? 1 : 0;
  p.async = 1;
  p.max_kernel_args = max_kernel_args(d);
  return plugin::copy_properties(p, out, st);
}

int32_t supports_op(int32_t index, int32_t kind, int32_t op, int32_t dtype) {
  DeviceContext* d = device(index);
  if (!d || dtype < 0 || dtype >= EMBER_NUM_DTYPES) return 0;
  if (kind == EMBER_SUPPORT_KIR) return emit::glsl_supports(d->target, uint16_t(op), uint8_t(dtype)) ? 1 : 0;
  if (kind == EMBER_SUPPORT_LIBRARY)
    return emit::glsl_library_supports(op, uint8_t(dtype), d->target) ? 1 : 0;
  return 0;
}

// A call the profiler times on the device (timing.cpp): its first timestamp before its commands,
// the last after them.
template <class Call>
int32_t timed(ember_queue q, uint64_t tag, Call&& call) {
  if (tag == 0 || !q->timing.load(std::memory_order_relaxed)) return call();
  int64_t query;
  {
    std::lock_guard lock(q->mutex);
    query = timing_begin(q, tag);
  }
  const int32_t rc = call();
  std::lock_guard lock(q->mutex);
  timing_end(q, query);
  return rc;
}

int32_t timed_program_run(ember_queue q, ember_program p, const ember_kir_launch* l, uint64_t tag, ember_status* st) {
  return timed(q, tag, [&] { return program_run(q, p, l, tag, st); });
}

int32_t timed_library_call(ember_queue q, int32_t op, const ember_tensor_desc* in, int32_t n_in,
                           const ember_tensor_desc* out, int32_t n_out, const void* attrs, uint64_t tag,
                           ember_status* st) {
  return timed(q, tag, [&] { return library_call(q, op, in, n_in, out, n_out, attrs, tag, st); });
}

const ember_backend_v2 table = {
    .abi_version = EMBER_BACKEND_ABI_VERSION,
    .struct_size = sizeof(ember_backend_v2),
    .name = "vulkan",
    .device_count = device_count,
    .device_properties = device_properties,
    .supports_op = supports_op,
    .queue_create = queue_create,
    .queue_destroy = queue_destroy,
    .queue_synchronize = queue_synchronize,
    .buffer_alloc = buffer_alloc,
    .buffer_free = buffer_free,
    .buffer_write = buffer_write,
    .buffer_read = buffer_read,
    .program_create = program_create,
    .program_destroy = program_destroy,
    .program_run = timed_program_run,
    .library_call = timed_library_call,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .queue_wait_event = queue_wait_event,
    .event_synchronize = event_synchronize,
    .event_query = event_query,
    .buffer_copy = buffer_copy,
    .no_device_reason = no_device_reason,
    .attach_host = plugin::attach_host,  // the compiled-program cache, for SPIR-V
    .queue_set_timing = queue_set_timing,
    .queue_take_timings = queue_take_timings,
};

}  // namespace
}  // namespace ember::vk

extern "C" __attribute__((visibility("default"))) const ember_backend_v2* ember_backend_entry(uint32_t abi) {
  return abi == EMBER_BACKEND_ABI_VERSION ? &ember::vk::table : nullptr;
}
