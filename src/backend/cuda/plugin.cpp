// The CUDA plugin's C table (abi.h, v2). Every GPU the driver lists is a device (cuda:0, ...):
// KIR programs run as CUDA C kernels compiled by NVRTC (runtime.h, kernels.cpp), on streams with
// stream-ordered memory and events (queue.cpp). Of the library calls only matmul is on the GPU so
// far (library.cpp); supports_op refuses the others (convolution, pooling, attention, sorting,
// scans) and the core runs them through the host fallback (scheduler/host_fallback.h).
// Nothing is linked: the driver and NVRTC are loaded with dlopen, cuBLASLt and cuDNN only looked
// for, so Ember starts on machines without any of them, and without a device the plugin says
// which piece is missing (`ember info`).
//
//   EMBER_CUDA_DRIVER=FILE  the driver library to load instead of libcuda.so.1 (the tests' host
//                           emulation of a GPU: tests/backend/fake_cuda/)
//   EMBER_NVRTC=FILE        the NVRTC library to load instead of libnvrtc.so.13
//   EMBER_CUDA_DUMP=DIR     write every generated kernel's source to DIR
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "backend/abi.h"
#include "backend/common/host_services.h"
#include "backend/common/plugin_status.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/runtime.h"

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

// Why there is no device: the driver's state (loaded, initialized, GPUs listed), then NVRTC,
// cuBLASLt and cuDNN as files found or not. NVRTC is loaded only where the driver has a GPU.
std::string missing_pieces() {
  std::string why;
  const auto& list = devices(&why);
  const Driver& drv = Driver::get();
  std::string s = why;
  if (!list.empty()) {
    const Nvrtc& nvrtc = Nvrtc::get();
    s = "CUDA driver " + std::to_string(drv.version / 1000) + "." + std::to_string(drv.version % 1000 / 10) + " with " +
        std::to_string(list.size()) + " GPU(s), but NVRTC does not load (" + nvrtc.why() + ")";
  } else if (drv.available()) {
    s = "CUDA driver " + std::to_string(drv.version / 1000) + "." + std::to_string(drv.version % 1000 / 10) + ": " + why;
  }
  return s + "; " + probe_library("NVRTC", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) + "; " +
         probe_library("cuBLASLt", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) + "; " +
         probe_library("cuDNN", {"libcudnn.so.9", "libcudnn.so"});
}

bool usable() {
  static const bool ok = !devices().empty() && Nvrtc::get().available();
  return ok;
}

const std::string& reason() {
  static const std::string text = missing_pieces();
  return text;
}

int32_t device_count() { return usable() ? int32_t(devices().size()) : 0; }
const char* no_device_reason() { return usable() ? nullptr : reason().c_str(); }

int32_t device_properties(int32_t index, ember_device_properties* out, ember_status* st) {
  DeviceContext* d = usable() ? device(index) : nullptr;
  if (!d) return plugin::set_status(st, EMBER_ERR_INVALID, "cuda: no device %d", index);
  bind(d);
  ember_device_properties p{};
  p.struct_size = sizeof p;
  std::snprintf(p.name, sizeof p.name, "%s", d->name.c_str());
  std::snprintf(p.kind, sizeof p.kind, "gpu");
  size_t free = 0, total = 0;
  if (Driver::get().mem_get_info(&free, &total) == 0) p.memory_free = free;
  p.memory_total = d->memory_total;
  for (int dt = 0; dt < EMBER_NUM_DTYPES; ++dt) p.dtypes |= EMBER_DTYPE_BIT(dt);
  p.index_bits = 64;
  p.max_buffer_bytes = d->memory_total;
  p.max_binding_bytes = UINT64_MAX;  // pointers: no binding limit
  p.max_workgroup_size = uint32_t(d->block);
  p.subgroup_size = 32;
  p.host_visible = 0;
  p.async = 1;
  // Kernel parameters: the launch words, the error word and a pointer per argument within the
  // 4 KiB every CUDA device accepts.
  p.max_kernel_args = uint32_t((4096 - 8 * emit::GpuLaunchWords::words(0) - 8) / (8 * emit::GpuLaunchWords::kPerArg + 8));
  return plugin::copy_properties(p, out, st);
}

int32_t supports_op(int32_t index, int32_t kind, int32_t op, int32_t dtype) {
  if (!usable() || !device(index) || dtype < 0 || dtype >= EMBER_NUM_DTYPES) return 0;
  // Every KIR instruction in every dtype (emit_cuda.h); of the library calls, those library.cpp
  // has (the rest take the host fallback).
  if (kind == EMBER_SUPPORT_KIR) return op >= 0 && op < EMBER_KIR_NUM_OPS ? 1 : 0;
  return kind == EMBER_SUPPORT_LIBRARY && library_supported(op) ? 1 : 0;
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
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .queue_wait_event = queue_wait_event,
    .event_synchronize = event_synchronize,
    .event_query = event_query,
    .buffer_copy = buffer_copy,
    .no_device_reason = no_device_reason,
    .buffer_host_address = nullptr,
    .attach_host = plugin::attach_host,
};

}  // namespace
}  // namespace ember::cuda

extern "C" __attribute__((visibility("default"))) const ember_backend_v2* ember_backend_entry(uint32_t abi) {
  return abi == EMBER_BACKEND_ABI_VERSION ? &ember::cuda::table : nullptr;
}
