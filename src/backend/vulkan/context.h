// The Vulkan plugin's view of the machine: one VkInstance, and per physical device a logical
// device with one compute queue, its features (what the GLSL emitter may use) and the memory
// types buffers come from. Created once, on the first call that needs it; a machine without a
// usable device gets a context with no devices and the reason why (plugin.cpp reports it).
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/abi.h"
#include "backend/common/emit_glsl.h"
#include "backend/common/plugin_status.h"

namespace ember::vk {

// One VkBuffer with its own memory. `mapped` is set when the memory is host visible.
struct MemoryBlock {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  void* mapped = nullptr;
};

// What the queues of one device recorded, for EMBER_VULKAN_STATS=1 (printed at exit): how many
// dispatches, how many of them pushed their bindings or took a descriptor set, the transfers,
// the pipeline barriers between commands by the hazard that called for them (hazards.h; all
// under EMBER_VULKAN_DISABLE=overlap_barriers), the submissions and the memory allocations.
struct RecordingCounters {
  std::atomic<uint64_t> dispatches{0}, pushed{0}, descriptor_sets{0}, transfers{0}, submissions{0};
  std::atomic<uint64_t> read_after_write{0}, write_after_write{0}, write_after_read{0}, unconditional{0};
  std::atomic<uint64_t> allocations{0};  // vkAllocateMemory calls (buffers, slabs, staging)
};

class SmallBufferPool;  // small_buffers.h

struct DeviceContext {
  int index = 0;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  uint32_t family = 0;
  // Valid bits of the compute queue's timestamps, 0 where the device cannot time work (no
  // timestamps there, or no host query reset): timing.cpp.
  uint32_t timestamp_bits = 0;
  VkQueue queue = VK_NULL_HANDLE;
  std::mutex submit_mutex;  // vkQueueSubmit needs the VkQueue externally synchronized

  VkPhysicalDeviceProperties props{};
  uint32_t subgroup_size = 1;
  // Largest buffer (maxMemoryAllocationSize, and maxBufferSize on Vulkan 1.3) and largest range
  // one descriptor may bind (maxStorageBufferRange, or EMBER_VULKAN_MAX_BINDING where smaller, to
  // test the split launches on any driver). A buffer may be larger than a binding: kernels bind
  // the window of it they touch, and launches whose windows are too large are split (kernels.cpp).
  uint64_t max_buffer = 0, max_binding = 0;
  // minStorageBufferOffsetAlignment, at least 8 (a multiple of every element size; a power of two).
  uint64_t binding_alignment = 8;
  uint64_t heap_bytes = 0;
  uint32_t device_memory_type = 0;  // where tensors live
  uint32_t host_memory_type = 0;    // staging and launch parameters (host visible, coherent)
  bool device_memory_host_visible = false;
  emit::GlslTarget target;          // the features shaders may use (EMBER_VULKAN_DISABLE masks some)
  // Loop iterations a shader invocation may run in all (0 = no limit): llvmpipe ends any
  // invocation silently after 65535, so launches that would need more are refused.
  int64_t loop_budget = 0;
  // Workgroups a grid-stride launch uses at most: few on CPU drivers (each workgroup costs
  // llvmpipe about 20 us to start), as many as there are points elsewhere.
  int64_t preferred_groups = int64_t(1) << 40;
  std::string name;                 // "llvmpipe (LLVM 15.0.6, 256 bits), Mesa 22.3.6"
  // VK_KHR_push_descriptor, where the device has it (lavapipe; not SwiftShader): launches push
  // their bindings into the command buffer instead of allocating and writing a descriptor set.
  PFN_vkCmdPushDescriptorSetKHR push_descriptor_set = nullptr;
  uint32_t max_push_descriptors = 0;  // bindings one push may set (a pipeline with more uses sets)
  // The descriptor layouts every pipeline shares, made when the device opens: storage buffers at
  // bindings 0 .. bindings - 1 (a shader declares those it uses), one layout whose bindings are
  // pushed (where the device has VK_KHR_push_descriptor) and one for descriptor sets from the
  // batches' pools. One layout for all means no layout objects per shader, and every pipeline's
  // layout is compatible with every other's.
  struct SharedLayout {
    VkDescriptorSetLayout set = VK_NULL_HANDLE;
    VkPipelineLayout pipeline = VK_NULL_HANDLE;
    uint32_t bindings = 0;
  };
  SharedLayout pushed_layout, set_layout;
  RecordingCounters counters;
  // Slabs that small buffers are ranges of (small_buffers.h), made on first use; lives as long as
  // the device.
  std::once_flag small_buffers_once;
  SmallBufferPool* small_buffers = nullptr;

  // Creates a buffer of `bytes` (at least 16) in device memory or, with `host`, in host-visible
  // memory (mapped). Returns false with *why on failure (out of memory, over the device limits).
  bool create(VkDeviceSize bytes, bool host, MemoryBlock& out, std::string* why);
  void destroy(MemoryBlock& block);
};

struct Context {
  VkInstance instance = VK_NULL_HANDLE;
  std::vector<std::unique_ptr<DeviceContext>> devices;
  std::string why_none;  // set when there is no usable device
  // EMBER_VULKAN_VALIDATION=1: the Khronos validation layer reports through a messenger; its
  // first error is returned by the next synchronize, so a test run fails on any of them.
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  std::mutex validation_mutex;
  std::string validation_error;  // the first, until reported
};

// The validation layer's first error since the last call ("" if none), forgotten once returned.
std::string take_validation_error();

// The process-wide context (created on first use, thread safe).
Context& context();
DeviceContext* device(int32_t index);  // nullptr if out of range

// Whether EMBER_VULKAN_DISABLE (a comma-separated list) names `feature`. Read when the device is
// opened for shader features, and whenever a pipeline is built for "push_descriptors" (so that
// one process can test both binding paths).
bool feature_disabled(const char* feature);

using plugin::set_status;
const char* result_name(VkResult r);

}  // namespace ember::vk
