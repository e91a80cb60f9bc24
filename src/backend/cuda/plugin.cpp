// The CUDA plugin's C table (abi.h, v2), at its first stage: code generation without execution.
// KIR programs render as CUDA C (backend/common/emit_cuda.h) and compile with NVRTC
// (nvrtc.h); every kernel of the conformance suite is compiled for sm_90 in CI (ctest
// backend.cuda.nvrtc) and run under a host emulation of CUDA against the reference backend
// (tests/backend/cuda_emulation_test.cpp). Buffers, streams and launches through the driver API
// are not written yet, so the plugin reports no device and says why: which of the driver, NVRTC,
// cuBLASLt and cuDNN this machine has (`ember info`). Nothing is linked: the driver is loaded with
// dlopen, the libraries only looked for, so Ember starts on machines without any of them.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "backend/abi.h"
#include "backend/common/plugin_status.h"

namespace ember::cuda {
namespace {

// Where the loader would find library `soname`, without loading it: LD_LIBRARY_PATH, then the
// loader's cache (/etc/ld.so.cache holds the full path of every library it knows, as a string),
// then the usual folders. Loading cuBLASLt or cuDNN only to say that they are there would map
// hundreds of MB, run their initializers and leave thread-specific data that LeakSanitizer reports.
std::string find_library_file(const std::string& soname) {
  std::error_code ec;
  if (const char* env = std::getenv("LD_LIBRARY_PATH"))
    for (std::string_view rest = env; !rest.empty();) {
      const size_t colon = rest.find(':');
      const std::filesystem::path file = std::filesystem::path(std::string(rest.substr(0, colon))) / soname;
      if (!file.parent_path().empty() && std::filesystem::exists(file, ec)) return file.string();
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  std::ifstream cache("/etc/ld.so.cache", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(cache)), std::istreambuf_iterator<char>());
  const std::string needle = "/" + soname + std::string(1, '\0');
  for (size_t at = bytes.find(needle); at != std::string::npos; at = bytes.find(needle, at + 1)) {
    const size_t start = bytes.rfind('\0', at) + 1;  // npos + 1 = 0: the file's first string
    const std::string path = bytes.substr(start, at + needle.size() - 1 - start);
    if (!path.empty() && path[0] == '/' && std::filesystem::exists(path, ec)) return path;
  }
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64", "/usr/local/lib"})
    if (std::filesystem::exists(std::filesystem::path(dir) / soname, ec)) return std::string(dir) + "/" + soname;
  return "";
}

// "name found (path)" or "name missing (sonames looked for)".
std::string probe_library(const char* what, std::initializer_list<const char*> sonames) {
  std::string tried;
  for (const char* so : sonames) {
    if (std::string path = find_library_file(so); !path.empty()) return std::string(what) + " found (" + path + ")";
    tried += tried.empty() ? so : std::string(", ") + so;
  }
  return std::string(what) + " missing (no " + tried + " where the loader looks)";
}

// The CUDA driver: whether libcuda.so.1 loads, initializes, and how many GPUs it sees.
std::string probe_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!lib) return std::string("no CUDA driver (") + dlerror() + ")";
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
    return probe_driver() + "; " + probe_library("NVRTC", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) + "; " +
           probe_library("cuBLASLt", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) + "; " +
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
