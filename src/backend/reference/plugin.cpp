// The reference plugin's C table (abi.h, v2) and its test modes. The interpreter itself is in
// reference.cpp and library.cpp; this file decides how its work is scheduled and what the device
// claims to be, from the environment (read once, when the plugin is loaded):
//
//   EMBER_REFERENCE_DEVICES=N      N devices (reference:0 .. reference:N-1; default 1, at most 8)
//   EMBER_REFERENCE_ASYNC=1        the asynchronous test device: every operation is queued and run
//                                  by a worker thread per device after a random delay, new and
//                                  freed buffers are poisoned, kernel errors are deferred to the
//                                  next synchronize (host_queue.h). What a GPU does to the core's
//                                  ordering and lifetime rules, on any machine.
//   EMBER_REFERENCE_ASYNC_DELAY_US=D   the largest random delay (default 50 us)
//   EMBER_REFERENCE_ASYNC_MAX_ERRORS=N kernel errors a queue keeps until the next synchronize
//                                  (default 4096); later ones are lost and the last kept says so
//                                  (EMBER_STATUS_ERRORS_LOST), which the core must handle
//   EMBER_REFERENCE_WEAK=1         weak capabilities: no f64, 32-bit indexing, buffers of at most
//                                  EMBER_REFERENCE_MAX_BUFFER bytes (default 64 MiB), and a small
//                                  KIR table (no NEG, ABS, CEIL, MAX, MIN, GT, GE, NE, NOT, AND,
//                                  OR: the core decomposes them, kir/decompose.h)
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "backend/abi.h"
#include "backend/common/host_memory.h"
#include "backend/common/host_plugin.h"

namespace ember::ref {
int32_t create_program(const ember_kir_program* prog, ember_program* out, ember_status* st);
void destroy_program(ember_program p);
int32_t run_program(ember_program p, const ember_kir_launch* l, ember_status* st);
int32_t call_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                     int32_t n_out, const void* attrs, ember_status* st);
}  // namespace ember::ref

using ember::host::set_status;

// A compiled program shared by the table's handle and the launches queued with it, so that
// program_destroy never frees a program a queued launch will still run.
struct ember_program_s {
  std::shared_ptr<void> program;  // an interpreter program (reference.cpp), destroyed by its deleter
};

namespace {

struct Settings {
  int devices = 1;
  ember::host::AsyncSettings queue;
  bool weak = false;
  uint64_t max_buffer = 0;  // 0: unbounded (host memory)
};

long env_long(const char* name, long fallback) {
  const char* s = std::getenv(name);
  if (!s || !*s) return fallback;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  return end && *end == '\0' ? v : fallback;
}

const Settings& settings() {
  static const Settings s = [] {
    Settings r;
    r.devices = int(std::min(8L, std::max(1L, env_long("EMBER_REFERENCE_DEVICES", 1))));
    r.queue.async = env_long("EMBER_REFERENCE_ASYNC", 0) != 0;
    r.queue.max_delay_us = r.queue.async ? int(std::max(0L, env_long("EMBER_REFERENCE_ASYNC_DELAY_US", 50))) : 0;
    r.queue.poison = r.queue.async;
    r.queue.max_deferred = size_t(std::max(1L, env_long("EMBER_REFERENCE_ASYNC_MAX_ERRORS", 4096)));
    r.weak = env_long("EMBER_REFERENCE_WEAK", 0) != 0;
    if (r.weak) r.max_buffer = uint64_t(std::max(1L, env_long("EMBER_REFERENCE_MAX_BUFFER", 64L << 20)));
    return r;
  }();
  return s;
}

bool valid_device(int32_t d) { return d >= 0 && d < settings().devices; }

int32_t device_count() { return settings().devices; }

int32_t device_properties(int32_t device, ember_device_properties* out, ember_status* st) {
  if (!valid_device(device)) return set_status(st, EMBER_ERR_INVALID, "reference backend: no device %d", device);
  const Settings& s = settings();
  ember_device_properties p = ember::host::host_device_properties(s.queue.async);
  std::snprintf(p.name, sizeof p.name, "scalar reference interpreter%s%s",
                s.queue.async ? " (asynchronous test device)" : "", s.weak ? " (weak capabilities)" : "");
  std::snprintf(p.kind, sizeof p.kind, "%s", s.queue.async || s.weak ? "test" : "cpu");
  if (s.weak) {
    p.dtypes &= ~EMBER_DTYPE_BIT(EMBER_F64);
    p.index_bits = 32;
  }
  if (s.max_buffer) p.max_buffer_bytes = p.max_binding_bytes = s.max_buffer;
  return ember::host::copy_properties(p, out, st);
}

int32_t supports_op(int32_t device, int32_t kind, int32_t op, int32_t dtype) {
  if (!valid_device(device)) return 0;
  if (settings().weak) {
    if (dtype == EMBER_F64) return 0;
    if (kind == EMBER_SUPPORT_KIR) switch (op) {
        case EMBER_KIR_NEG: case EMBER_KIR_ABS: case EMBER_KIR_CEIL: case EMBER_KIR_MAX: case EMBER_KIR_MIN:
        case EMBER_KIR_GT: case EMBER_KIR_GE: case EMBER_KIR_NE: case EMBER_KIR_NOT: case EMBER_KIR_AND:
        case EMBER_KIR_OR:
          return 0;
        default: break;
      }
  }
  return ember::host::supports_every_op(device, kind, op, dtype);
}

int32_t queue_create(int32_t device, ember_queue* out, ember_status* st) {
  if (!valid_device(device) || !out) return set_status(st, EMBER_ERR_INVALID, "reference backend: no device %d", device);
  *out = new ember_queue_s(device, settings().queue);
  return EMBER_OK;
}

int32_t buffer_alloc(int32_t device, size_t bytes, ember_buffer* out, ember_status* st) {
  if (!valid_device(device)) return set_status(st, EMBER_ERR_INVALID, "reference backend: no device %d", device);
  const Settings& s = settings();
  if (s.max_buffer && bytes > s.max_buffer)
    return set_status(st, EMBER_ERR_OUT_OF_MEMORY,
                      "reference backend: a buffer of %zu bytes exceeds the device's largest buffer (%llu bytes)",
                      bytes, static_cast<unsigned long long>(s.max_buffer));
  return ember::host::queued_buffer_alloc(s.queue, bytes, out, st);
}

int32_t program_create(int32_t device, const ember_kir_program* prog, ember_program* out, ember_status* st) {
  if (!valid_device(device) || !prog || !out)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: program_create: bad arguments");
  ember_program raw = nullptr;
  if (int32_t rc = ember::ref::create_program(prog, &raw, st)) return rc;
  auto* handle = new ember_program_s;
  handle->program = std::shared_ptr<void>(raw, [](void* p) { ember::ref::destroy_program(static_cast<ember_program>(p)); });
  *out = handle;
  return EMBER_OK;
}
void program_destroy(ember_program p) { delete p; }

int32_t program_run(ember_queue q, ember_program p, const ember_kir_launch* l, uint64_t tag, ember_status* st) {
  if (!q || !p || !l) return set_status(st, EMBER_ERR_INVALID, "reference backend: program_run: bad arguments");
  if (!q->settings.async) return ember::ref::run_program(static_cast<ember_program>(p->program.get()), l, st);
  auto launch = std::make_shared<ember::host::QueuedLaunch>(*l);
  std::shared_ptr<void> program = p->program;
  return q->submit([launch, program](ember_status* s) {
    return ember::ref::run_program(static_cast<ember_program>(program.get()), &launch->launch, s);
  }, tag, st);
}

int32_t library_call(ember_queue q, int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                     int32_t n_out, const void* attrs, uint64_t tag, ember_status* st) {
  if (!q) return set_status(st, EMBER_ERR_INVALID, "reference backend: library_call without a queue");
  if (!q->settings.async) return ember::ref::call_library(op, in, n_in, out, n_out, attrs, st);
  if (op < EMBER_LIB_MATMUL || op >= EMBER_LIB_NUM_OPS)
    return set_status(st, EMBER_ERR_UNSUPPORTED, "reference backend: unknown library op %d", op);
  auto call = std::make_shared<ember::host::QueuedLibraryCall>(op, in, n_in, out, n_out, attrs);
  return q->submit([call](ember_status* s) {
    return ember::ref::call_library(call->op, call->inputs.data(), int32_t(call->inputs.size()), call->outputs.data(),
                                    int32_t(call->outputs.size()), call->attrs_ptr(), s);
  }, tag, st);
}

// EMBER_REFERENCE_MINIMAL_TABLE (a test build, tests/CMakeLists.txt): a table that ends before
// the optional fields, as a plugin built against an older v2 header would have.
#ifdef EMBER_REFERENCE_MINIMAL_TABLE
constexpr uint32_t kTableSize = offsetof(ember_backend_v2, event_create);
#else
constexpr uint32_t kTableSize = sizeof(ember_backend_v2);
#endif

constexpr ember_backend_v2 table = ember::host::host_plugin_table({
    .name = "reference",
    .struct_size = kTableSize,
    .device_count = device_count,
    .device_properties = device_properties,
    .supports_op = supports_op,
    .queue_create = queue_create,
    .buffer_alloc = buffer_alloc,
    .program_create = program_create,
    .program_destroy = program_destroy,
    .program_run = program_run,
    .library_call = library_call,
});

}  // namespace

extern "C" __attribute__((visibility("default"))) const ember_backend_v2* ember_backend_entry(uint32_t abi) {
  return abi == EMBER_BACKEND_ABI_VERSION ? &table : nullptr;
}
