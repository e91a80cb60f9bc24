// The CUDA driver API through dlopen (driver.h).
#include "backend/cuda/driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

namespace ember::cuda {

const Driver& Driver::get() {
  static const Driver instance;
  return instance;
}

Driver::Driver() {
  const char* env = std::getenv("EMBER_CUDA_DRIVER");
  library = env && *env ? env : "libcuda.so.1";
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why = std::string("no CUDA driver (") + dlerror() + ")";
    return;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn && why.empty()) why = "the CUDA driver " + library + " lacks " + name;
  };
  sym(init, "cuInit");
  sym(driver_get_version, "cuDriverGetVersion");
  sym(device_get_count, "cuDeviceGetCount");
  sym(device_get, "cuDeviceGet");
  sym(device_get_name, "cuDeviceGetName");
  sym(device_get_attribute, "cuDeviceGetAttribute");
  sym(device_total_mem, "cuDeviceTotalMem_v2");
  sym(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  sym(ctx_set_current, "cuCtxSetCurrent");
  sym(ctx_synchronize, "cuCtxSynchronize");
  sym(mem_get_info, "cuMemGetInfo_v2");
  sym(mem_alloc, "cuMemAlloc_v2");
  sym(mem_free, "cuMemFree_v2");
  sym(mem_alloc_async, "cuMemAllocAsync");
  sym(mem_free_async, "cuMemFreeAsync");
  sym(device_get_default_mem_pool, "cuDeviceGetDefaultMemPool");
  sym(mem_pool_set_attribute, "cuMemPoolSetAttribute");
  sym(memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
  sym(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
  sym(memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
  sym(memcpy_peer_async, "cuMemcpyPeerAsync");
  sym(memset_d32_async, "cuMemsetD32Async");
  sym(stream_create, "cuStreamCreate");
  sym(stream_destroy, "cuStreamDestroy_v2");
  sym(stream_synchronize, "cuStreamSynchronize");
  sym(stream_wait_event, "cuStreamWaitEvent");
  sym(event_create, "cuEventCreate");
  sym(event_destroy, "cuEventDestroy_v2");
  sym(event_record, "cuEventRecord");
  sym(event_synchronize, "cuEventSynchronize");
  sym(event_query, "cuEventQuery");
  sym(module_load_data, "cuModuleLoadData");
  sym(module_unload, "cuModuleUnload");
  sym(module_get_function, "cuModuleGetFunction");
  sym(launch_kernel, "cuLaunchKernel");
  sym(get_error_string, "cuGetErrorString");
  if (!why.empty()) return;
  if (CUresult rc = init(0); rc != 0) {
    why = "the CUDA driver fails to initialize (cuInit: " + error_text(rc) + ")";
    return;
  }
  driver_get_version(&version);
  // The library stays loaded for the life of the process.
}

std::string Driver::error_text(CUresult rc) const {
  const char* s = nullptr;
  if (get_error_string) get_error_string(rc, &s);
  return "CUDA error " + std::to_string(rc) + (s ? std::string(" (") + s + ")" : "");
}

}  // namespace ember::cuda
