// The CUDA plugin's C table (abi.h, v2), at its first stage: code generation without execution.
// KIR programs render as CUDA C (backend/common/emit_cuda.h) and compile with NVRTC
// (nvrtc.h); every kernel of the conformance suite is compiled for sm_90 in CI (ctest
// backend.cuda.nvrtc) and run under a host emulation of CUDA against the reference backend
// (tests/backend/cuda_emulation_test.cpp). Buffers, streams and launches through the driver API
// are not written yet, so the plugin reports no device and says why: which of the driver, NVRTC,
// cuBLASLt and cuDNN this machine has (`ember info`). Everything is loaded with dlopen, so Ember
// starts on machines without any of them.
#include <dlfcn.h>

#include <string>

#include "backend/abi.h"
#include "backend/common/plugin_status.h"
#include "backend/cuda/nvrtc.h"

namespace ember::cuda {
namespace {

// "name found (soname)" or "name missing (why)" for a library found by dlopen. Probed libraries
// stay loaded (the plugin's later stages call them; unloaded, what their initializers allocated
// would also look leaked to LeakSanitizer).
std::string probe_library(const char* what, std::initializer_list<const char*> sonames) {
  std::string why;
  for (const char* so : sonames) {
    if (dlopen(so, RTLD_LAZY | RTLD_LOCAL)) return std::string(what) + " found (" + so + ")";
    why = dlerror();
  }
  return std::string(what) + " missing (" + why + ")";
}

// The CUDA driver: whether libcuda.so.1 loads, initializes, and how many GPUs it sees.
std::string probe_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!lib) return std::string("no CUDA driver (libcuda.so.1: ") + dlerror() + ")";
  using InitFn = int (*)(unsigned);
  using IntFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto version = reinterpret_cast<IntFn>(dlsym(lib, "cuDriverGetVersion"));
  auto count = reinterpret_cast<IntFn>(dlsym(lib, "cuDeviceGetCount"));
  std::string s;
  int v = 0, n = 0;
  if (!init || !version || !count) s = "a CUDA driver without cuInit/cuDeviceGetCount";
  else if (int rc = init(0); rc != 0) s = "the CUDA driver fails to initialize (cuInit: error " + std::to_string(rc) + ")";
  else {
    version(&v);
    count(&n);
    s = "CUDA driver " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) + " with " + std::to_string(n) +
        " GPU(s), but this plugin does not run kernels yet (issue 19: code generation and NVRTC compile checks only)";
  }
  return s;  // the driver stays loaded, as the libraries above
}

const std::string& reason() {
  static const std::string text = [] {
    const Nvrtc& nvrtc = Nvrtc::get();
    return probe_driver() + "; NVRTC " + (nvrtc.available() ? nvrtc.version() + " found" : "missing (" + nvrtc.why() + ")") +
           "; " + probe_library("cuBLASLt", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) + "; " +
           probe_library("cuDNN", {"libcudnn.so.9", "libcudnn.so"});
  }();
  return text;
}

int32_t device_count() { return 0; }
const char* no_device_reason() { return reason().c_str(); }

// With no device the core calls none of these; each refuses, naming the plugin.
int32_t no_device(ember_status* st) { return plugin::set_status(st, EMBER_ERR_INVALID, "cuda: no device (%s)", reason().c_str()); }
int32_t device_properties(int32_t, ember_device_properties*, ember_status* st) { return no_device(st); }
int32_t supports_op(int32_t, int32_t, int32_t, int32_t) { return 0; }
int32_t queue_create(int32_t, ember_queue*, ember_status* st) { return no_device(st); }
void queue_destroy(ember_queue) {}
int32_t queue_synchronize(ember_queue, ember_status* st) { return no_device(st); }
int32_t buffer_alloc(int32_t, size_t, ember_buffer*, ember_status* st) { return no_device(st); }
void buffer_free(ember_queue, ember_buffer) {}
int32_t buffer_write(ember_queue, ember_buffer, size_t, const void*, size_t, ember_status* st) { return no_device(st); }
int32_t buffer_read(ember_queue, ember_buffer, size_t, void*, size_t, ember_status* st) { return no_device(st); }
int32_t program_create(int32_t, const ember_kir_program*, ember_program*, ember_status* st) { return no_device(st); }
void program_destroy(ember_program) {}
int32_t program_run(ember_queue, ember_program, const ember_kir_launch*, uint64_t, ember_status* st) { return no_device(st); }
int32_t library_call(ember_queue, int32_t, const ember_tensor_desc*, int32_t, const ember_tensor_desc*, int32_t,
                     const void*, uint64_t, ember_status* st) {
  return no_device(st);
}

const ember_backend_v2 table = {
    .abi_version = EMBER_BACKEND_ABI_VERSION,
    .struct_size = sizeof(ember_backend_v2),
    .name = "cuda",
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
    .program_run = program_run,
    .library_call = library_call,
    .no_device_reason = no_device_reason,
};

}  // namespace
}  // namespace ember::cuda

extern "C" __attribute__((visibility("default"))) const ember_backend_v2* ember_backend_entry(uint32_t abi) {
  return abi == EMBER_BACKEND_ABI_VERSION ? &ember::cuda::table : nullptr;
}
