// The CUDA driver API, loaded with dlopen (libcuda.so.1, or the file EMBER_CUDA_DRIVER names:
// the tests' host emulation of a GPU, tests/backend/fake_cuda/), so that the plugin links nothing
// of CUDA and loads on any machine. The entry points are declared here by hand with the types of
// cuda.h (CUresult as int, handles as opaque pointers, CUdevice as int, CUdeviceptr as a 64-bit
// integer), under their versioned symbol names (cuMemAlloc_v2 ...). The names the plugin uses:
// docs/backends.md, "The CUDA backend".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;

// The attribute numbers of cuda.h's CUdevice_attribute the plugin reads.
enum : int {
  kAttrMaxThreadsPerBlock = 1,
  kAttrWarpSize = 10,
  kAttrMultiprocessorCount = 16,
  kAttrComputeCapabilityMajor = 75,
  kAttrComputeCapabilityMinor = 76,
  kAttrMemoryPoolsSupported = 115,
};
constexpr CUresult kCudaErrorNotReady = 600;
constexpr unsigned kStreamNonBlocking = 1;   // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING
constexpr int kMemPoolReleaseThreshold = 4;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD

struct Driver {
  // The process-wide table; loading and cuInit are tried once.
  static const Driver& get();

  bool available() const { return why.empty(); }
  // "CUDA error 700 (an illegal memory access was encountered)"
  std::string error_text(CUresult rc) const;

  std::string why;      // empty when loaded and initialized; else what failed
  std::string library;  // the file loaded
  int version = 0;      // cuDriverGetVersion: 13000 for 13.0

  CUresult (*init)(unsigned) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*device_get_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*device_total_mem)(size_t*, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*ctx_synchronize)() = nullptr;
  CUresult (*mem_get_info)(size_t*, size_t*) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*mem_alloc_async)(CUdeviceptr*, size_t, CUstream) = nullptr;
  CUresult (*mem_free_async)(CUdeviceptr, CUstream) = nullptr;
  CUresult (*device_get_default_mem_pool)(CUmemoryPool*, CUdevice) = nullptr;
  CUresult (*mem_pool_set_attribute)(CUmemoryPool, int, void*) = nullptr;
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*memcpy_peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream) = nullptr;
  CUresult (*memset_d32_async)(CUdeviceptr, unsigned, size_t, CUstream) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_destroy)(CUstream) = nullptr;
  CUresult (*stream_synchronize)(CUstream) = nullptr;
  CUresult (*stream_wait_event)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_synchronize)(CUevent) = nullptr;
  CUresult (*event_query)(CUevent) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;

 private:
  Driver();
};

}  // namespace ember::cuda
