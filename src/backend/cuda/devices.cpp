// The GPUs the CUDA driver lists, each with its primary context (runtime.h).
#include <algorithm>
#include <cstdint>

#include "backend/common/plugin_status.h"
#include "backend/cuda/runtime.h"

namespace ember::cuda {

namespace {

struct DeviceList {
  std::vector<std::unique_ptr<DeviceContext>> devices;
  std::string why;  // when there are none
};

// Opens device `ordinal`; false and *why if a driver call fails.
bool open_device(const Driver& drv, int ordinal, DeviceContext& d, std::string* why) {
  auto fail = [&](CUresult rc, const char* what) {
    *why = "device " + std::to_string(ordinal) + ": " + what + ": " + drv.error_text(rc);
    return false;
  };
  d.index = ordinal;
  if (CUresult rc = drv.device_get(&d.device, ordinal); rc != 0) return fail(rc, "cuDeviceGet");
  char name[256] = {};
  if (CUresult rc = drv.device_get_name(name, int(sizeof name) - 1, d.device); rc != 0) return fail(rc, "cuDeviceGetName");
  int max_threads = 0, pools = 0;
  if (CUresult rc = drv.device_get_attribute(&d.cc_major, kAttrComputeCapabilityMajor, d.device); rc != 0)
    return fail(rc, "cuDeviceGetAttribute");
  drv.device_get_attribute(&d.cc_minor, kAttrComputeCapabilityMinor, d.device);
  drv.device_get_attribute(&d.sm_count, kAttrMultiprocessorCount, d.device);
  drv.device_get_attribute(&max_threads, kAttrMaxThreadsPerBlock, d.device);
  drv.device_get_attribute(&pools, kAttrMemoryPoolsSupported, d.device);
  if (!pools) {
    *why = "device " + std::to_string(ordinal) + " (" + name +
           ") has no stream-ordered memory pools (CUDA 11.2 and a Pascal or newer GPU are needed)";
    return false;
  }
  // Kernels need a block of a power of two, at least a warp (emit_cuda.h).
  d.block = 256;
  while (d.block > 32 && d.block > max_threads) d.block /= 2;
  d.sm_count = std::max(d.sm_count, 1);
  drv.device_total_mem(&d.memory_total, d.device);
  if (CUresult rc = drv.primary_ctx_retain(&d.context, d.device); rc != 0) return fail(rc, "cuDevicePrimaryCtxRetain");
  bind(&d);
  // Freed memory stays in the pool for the next allocation instead of going back to the driver.
  CUmemoryPool pool = nullptr;
  if (drv.device_get_default_mem_pool(&pool, d.device) == 0) {
    uint64_t keep = UINT64_MAX;
    drv.mem_pool_set_attribute(pool, kMemPoolReleaseThreshold, &keep);
  }
  if (CUresult rc = drv.stream_create(&d.alloc_stream, kStreamNonBlocking); rc != 0) return fail(rc, "cuStreamCreate");
  if (CUresult rc = drv.mem_alloc(&d.dummy_error, sizeof(uint32_t) * emit::kErrWords); rc != 0)
    return fail(rc, "cuMemAlloc");
  d.name = std::string(name) + " (sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor) + ", " +
           std::to_string(d.sm_count) + " SMs)";
  return true;
}

DeviceList list_devices() {
  DeviceList list;
  const Driver& drv = Driver::get();
  if (!drv.available()) {
    list.why = drv.why;
    return list;
  }
  int n = 0;
  if (CUresult rc = drv.device_get_count(&n); rc != 0) {
    list.why = "cuDeviceGetCount: " + drv.error_text(rc);
    return list;
  }
  if (n == 0) list.why = "the CUDA driver (" + drv.library + ") lists no GPU";
  for (int i = 0; i < n; ++i) {
    auto d = std::make_unique<DeviceContext>();
    std::string why;
    if (!open_device(drv, i, *d, &why)) {
      // Devices are numbered as the driver numbers them: one that cannot be opened ends the list.
      if (list.devices.empty()) list.why = why;
      break;
    }
    list.devices.push_back(std::move(d));
  }
  return list;
}

// Never destroyed: the devices' streams and memory belong to the driver until the process ends
// (releasing them from a static destructor would race with the driver's own teardown).
const DeviceList& device_list() {
  static const DeviceList* list = new DeviceList(list_devices());
  return *list;
}

}  // namespace

const std::vector<std::unique_ptr<DeviceContext>>& devices(std::string* why) {
  const DeviceList& list = device_list();
  if (why) *why = list.why;
  return list.devices;
}

DeviceContext* device(int32_t index) {
  const auto& all = devices();
  return index >= 0 && size_t(index) < all.size() ? all[size_t(index)].get() : nullptr;
}

void bind(const DeviceContext* d) {
  thread_local CUcontext current = nullptr;
  if (current == d->context) return;
  Driver::get().ctx_set_current(d->context);
  current = d->context;
}

int32_t cuda_fail(ember_status* st, CUresult rc, const char* what) {
  constexpr CUresult kOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
  return plugin::set_status(st, rc == kOutOfMemory ? EMBER_ERR_OUT_OF_MEMORY : EMBER_ERR_INTERNAL, "cuda: %s: %s",
                            what, Driver::get().error_text(rc).c_str());
}

ember_status error_status(const uint32_t* word, const std::string& name, uint64_t tag) {
  ember_status s{};
  s.tag = tag;
  plugin::set_status(&s, EMBER_ERR_INVALID, "%s: %s", name.c_str(), emit::gpu_error_message(word).c_str());
  return s;
}

}  // namespace ember::cuda
