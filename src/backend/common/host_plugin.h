// The C table (abi.h, v2) and device properties of a plugin whose memory is host RAM (cpu,
// reference): everything but the entries that differ comes from host_memory.h and host_queue.h,
// so that the plugins spell out only what is theirs:
//
//   constexpr ember_backend_v2 table = ember::host::host_plugin_table({
//       .name = "cpu", .device_count = device_count, .device_properties = device_properties,
//       .queue_create = queue_create, .buffer_alloc = buffer_alloc, ...});
#pragma once

#include <cstdint>

#include "backend/abi.h"
#include "backend/common/host_memory.h"
#include "backend/common/host_queue.h"

namespace ember::host {

// The entries of a host plugin's table that are its own. Every other entry is the shared one:
// queue_destroy, queue_synchronize, buffer_free/write/read, the events, buffer_copy and device
// timing (host_queue.h).
struct HostPluginEntries {
  const char* name = nullptr;
  // Smaller than the whole table: a table that ends before the optional fields (a plugin built
  // against an older v2 header), whose core reads them as absent.
  uint32_t struct_size = sizeof(ember_backend_v2);
  decltype(ember_backend_v2::device_count) device_count = nullptr;
  decltype(ember_backend_v2::device_properties) device_properties = nullptr;
  decltype(ember_backend_v2::supports_op) supports_op = supports_every_op;
  decltype(ember_backend_v2::queue_create) queue_create = nullptr;
  decltype(ember_backend_v2::buffer_alloc) buffer_alloc = nullptr;
  decltype(ember_backend_v2::program_create) program_create = nullptr;
  decltype(ember_backend_v2::program_destroy) program_destroy = nullptr;
  decltype(ember_backend_v2::program_run) program_run = nullptr;
  decltype(ember_backend_v2::library_call) library_call = nullptr;
  decltype(ember_backend_v2::attach_host) attach_host = nullptr;  // a plugin with compiled programs
};

constexpr ember_backend_v2 host_plugin_table(const HostPluginEntries& e) {
  return ember_backend_v2{
      .abi_version = EMBER_BACKEND_ABI_VERSION,
      .struct_size = e.struct_size,
      .name = e.name,
      .device_count = e.device_count,
      .device_properties = e.device_properties,
      .supports_op = e.supports_op,
      .queue_create = e.queue_create,
      .queue_destroy = queue_destroy,
      .queue_synchronize = queue_synchronize,
      .buffer_alloc = e.buffer_alloc,
      .buffer_free = queued_buffer_free,
      .buffer_write = queued_buffer_write,
      .buffer_read = queued_buffer_read,
      .program_create = e.program_create,
      .program_destroy = e.program_destroy,
      .program_run = e.program_run,
      .library_call = e.library_call,
      .event_create = event_create,
      .event_destroy = event_destroy,
      .event_record = event_record,
      .queue_wait_event = queue_wait_event,
      .event_synchronize = event_synchronize,
      .event_query = event_query,
      .buffer_copy = queued_buffer_copy,
      .no_device_reason = nullptr,
      .buffer_host_address = buffer_host_address,
      .attach_host = e.attach_host,
      .queue_set_timing = queue_set_timing,
      .queue_take_timings = queue_take_timings,
  };
}

// The properties the host plugins share: the machine's memory (all of it one buffer or binding),
// every dtype, 64-bit indexing, one work item per group, host-visible buffers, one host thread.
// The plugin writes the name and kind and changes what differs before copy_properties.
inline ember_device_properties host_device_properties(bool async) {
  ember_device_properties p{};
  p.struct_size = sizeof p;
  p.memory_total = physical_memory_bytes();
  p.memory_free = available_memory_bytes();
  for (int dt = 0; dt < EMBER_NUM_DTYPES; ++dt) p.dtypes |= EMBER_DTYPE_BIT(dt);
  p.index_bits = 64;
  p.max_buffer_bytes = p.memory_total;
  p.max_binding_bytes = p.memory_total;
  p.max_workgroup_size = 1;
  p.subgroup_size = 1;
  p.host_visible = 1;
  p.async = async ? 1 : 0;
  p.host_threads = 1;  // a plugin with a thread pool says how many
  return p;
}

}  // namespace ember::host
