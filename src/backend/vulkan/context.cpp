// Vulkan instance and device set-up for the plugin (context.h).
#include "backend/vulkan/context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ember::vk {

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver found)";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    default: return "a Vulkan error";
  }
}

bool DeviceContext::create(VkDeviceSize bytes, bool host, MemoryBlock& out, std::string* why) {
  out = MemoryBlock{};
  out.size = bytes < 16 ? 16 : (bytes + 15) / 16 * 16;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = out.size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vkCreateBuffer(device, &bi, nullptr, &out.buffer);
  if (r != VK_SUCCESS) {
    if (why) *why = std::string("vkCreateBuffer: ") + result_name(r);
    return false;
  }
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, out.buffer, &req);
  const uint32_t type = host ? host_memory_type : device_memory_type;
  if (!(req.memoryTypeBits & (1u << type))) {
    vkDestroyBuffer(device, out.buffer, nullptr);
    out.buffer = VK_NULL_HANDLE;
    if (why) *why = "no memory type for storage buffers";
    return false;
  }
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  r = vkAllocateMemory(device, &ai, nullptr, &out.memory);
  ++counters.allocations;
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device, out.buffer, nullptr);
    out.buffer = VK_NULL_HANDLE;
    if (why) *why = std::string("vkAllocateMemory of ") + std::to_string(req.size) + " bytes: " + result_name(r);
    return false;
  }
  vkBindBufferMemory(device, out.buffer, out.memory, 0);
  if (host || device_memory_host_visible) {
    r = vkMapMemory(device, out.memory, 0, VK_WHOLE_SIZE, 0, &out.mapped);
    if (r != VK_SUCCESS) {
      destroy(out);
      if (why) *why = std::string("vkMapMemory: ") + result_name(r);
      return false;
    }
  }
  return true;
}

void DeviceContext::destroy(MemoryBlock& b) {
  if (b.buffer) vkDestroyBuffer(device, b.buffer, nullptr);
  if (b.memory) vkFreeMemory(device, b.memory, nullptr);  // unmaps too
  b = MemoryBlock{};
}

// EMBER_VULKAN_DISABLE=f64,int8,int16,int64,push_descriptors,overlap_barriers: take features
// away from capable devices, so that the weak-device paths are tested on any driver.
bool feature_disabled(const char* feature) {
  const char* env = std::getenv("EMBER_VULKAN_DISABLE");
  if (!env) return false;
  std::string list = std::string(",") + env + ",";
  return list.find(std::string(",") + feature + ",") != std::string::npos;
}

namespace {

bool has_extension(VkPhysicalDevice phys, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, exts.data());
  for (const VkExtensionProperties& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

int32_t find_memory_type(const VkPhysicalDeviceMemoryProperties& mp, VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
    if ((mp.memoryTypes[i].propertyFlags & want) == want) return int32_t(i);
  return -1;
}

// A descriptor set layout of `bindings` storage buffers (compute stage) and a pipeline layout of
// that one set; `push`: for vkCmdPushDescriptorSetKHR.
bool make_shared_layout(DeviceContext& d, uint32_t bindings, bool push, DeviceContext::SharedLayout& out,
                        std::string* why) {
  std::vector<VkDescriptorSetLayoutBinding> b(bindings);
  for (uint32_t i = 0; i < bindings; ++i)
    b[i] = VkDescriptorSetLayoutBinding{i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  if (push) li.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  li.bindingCount = bindings;
  li.pBindings = b.data();
  VkResult r = vkCreateDescriptorSetLayout(d.device, &li, nullptr, &out.set);
  if (r != VK_SUCCESS) {
    *why = std::string(d.props.deviceName) + ": vkCreateDescriptorSetLayout: " + result_name(r);
    return false;
  }
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &out.set;
  r = vkCreatePipelineLayout(d.device, &pli, nullptr, &out.pipeline);
  if (r != VK_SUCCESS) {
    *why = std::string(d.props.deviceName) + ": vkCreatePipelineLayout: " + result_name(r);
    return false;
  }
  out.bindings = bindings;
  return true;
}

// Sets up device `phys`; false and *why if it lacks what the plugin needs.
bool open_device(VkPhysicalDevice phys, int index, DeviceContext& d, std::string* why) {
  d.index = index;
  d.physical = phys;
  vkGetPhysicalDeviceProperties(phys, &d.props);
  if (d.props.apiVersion < VK_API_VERSION_1_2) {
    *why = std::string(d.props.deviceName) + ": Vulkan 1.2 is needed (timeline semaphores)";
    return false;
  }
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceFloatControlsProperties fc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
  VkPhysicalDevicePushDescriptorPropertiesKHR push{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR};
  const bool has_push = has_extension(phys, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceMaintenance4Properties m4{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
  sub.pNext = &drv;
  drv.pNext = &fc;
  fc.pNext = &m3;
  if (d.props.apiVersion >= VK_API_VERSION_1_3) m3.pNext = &m4;
  if (has_push) (d.props.apiVersion >= VK_API_VERSION_1_3 ? m4.pNext : m3.pNext) = &push;
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sub;
  vkGetPhysicalDeviceProperties2(phys, &p2);
  d.subgroup_size = sub.subgroupSize;
  // Subgroup butterflies in reductions (emit_glsl.h): shuffles in compute shaders, power-of-two
  // subgroups that divide the workgroup (set with it below). EMBER_VULKAN_DISABLE=subgroups.
  const bool shuffle = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                       (sub.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
                       (sub.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) && sub.subgroupSize >= 2 &&
                       (sub.subgroupSize & (sub.subgroupSize - 1)) == 0 && !feature_disabled("subgroups");
  d.binding_alignment = std::max<uint64_t>(8, d.props.limits.minStorageBufferOffsetAlignment);
  d.max_binding = d.props.limits.maxStorageBufferRange;
  if (const char* env = std::getenv("EMBER_VULKAN_MAX_BINDING")) {
    const uint64_t v = std::strtoull(env, nullptr, 10);
    if (v > 0) d.max_binding = std::min<uint64_t>(d.max_binding, std::max<uint64_t>(v, 4 * d.binding_alignment));
  }
  d.max_binding = d.max_binding / d.binding_alignment * d.binding_alignment;  // windows start aligned
  d.max_buffer = m3.maxMemoryAllocationSize;
  if (d.props.apiVersion >= VK_API_VERSION_1_3 && m4.maxBufferSize) d.max_buffer = std::min<uint64_t>(d.max_buffer, m4.maxBufferSize);
  if (d.max_buffer < d.max_binding) d.max_buffer = d.max_binding;
  d.name = std::string(d.props.deviceName) + (drv.driverInfo[0] ? std::string(", ") + drv.driverInfo : "");

  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f11;
  vkGetPhysicalDeviceFeatures2(phys, &f2);
  if (!f12.timelineSemaphore) {
    *why = std::string(d.props.deviceName) + ": timeline semaphores are needed";
    return false;
  }
  // Without shaderInt64 (SwiftShader) the shaders use int only, and f64 goes too (its helpers
  // convert through int64); what needs either runs on the CPU (host fallback).
  d.target.int64 = f2.features.shaderInt64 && !feature_disabled("int64");
  d.target.float64 = d.target.int64 && f2.features.shaderFloat64 && !feature_disabled("f64");
  d.target.storage8 = f12.storageBuffer8BitAccess && f12.shaderInt8 && !feature_disabled("int8");
  d.target.storage16 = f11.storageBuffer16BitAccess && f2.features.shaderInt16 && !feature_disabled("int16");
  d.target.preserve_inf_nan32 = fc.shaderSignedZeroInfNanPreserveFloat32;
  d.target.preserve_inf_nan64 = fc.shaderSignedZeroInfNanPreserveFloat64;
  // EMBER_VULKAN_F32_MATH=f64|native; by default f64 where f64 is as fast as f32 (CPU drivers).
  const char* f32_math = std::getenv("EMBER_VULKAN_F32_MATH");
  d.target.f32_math_via_f64 = d.target.float64 && (f32_math ? std::strcmp(f32_math, "f64") == 0
                                                            : d.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU);
  uint32_t wg = 256;  // a power of two (the reductions' shared-memory tree)
  while (wg > d.props.limits.maxComputeWorkGroupInvocations || wg > d.props.limits.maxComputeWorkGroupSize[0]) wg /= 2;
  d.target.workgroup = wg;
  d.target.shared_bytes = d.props.limits.maxComputeSharedMemorySize;
  d.target.subgroup_shuffle = shuffle && wg % sub.subgroupSize == 0;
  d.loop_budget = drv.driverID == VK_DRIVER_ID_MESA_LLVMPIPE ? 65535 : 0;
  if (d.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) d.preferred_groups = 64;

  uint32_t nfam = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nfam, nullptr);
  std::vector<VkQueueFamilyProperties> fams(nfam);
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nfam, fams.data());
  int32_t family = -1;
  for (uint32_t i = 0; i < nfam; ++i)
    if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      family = int32_t(i);
      break;
    }
  if (family < 0) {
    *why = std::string(d.props.deviceName) + ": no compute queue";
    return false;
  }
  d.family = uint32_t(family);
  // Device timing (timing.cpp) needs timestamps on the compute queue and host query resets.
  d.timestamp_bits = f12.hostQueryReset && d.props.limits.timestampPeriod > 0 ? fams[size_t(family)].timestampValidBits : 0;

  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(phys, &mp);
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int32_t unified = find_memory_type(mp, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | hv);
  int32_t local = find_memory_type(mp, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  int32_t host = find_memory_type(mp, hv);
  if (host < 0 || local < 0) {
    *why = std::string(d.props.deviceName) + ": no host-visible coherent memory";
    return false;
  }
  // Unified memory (integrated GPUs, CPU drivers) holds tensors where the host can read them
  // directly; discrete GPUs keep tensors in device-local memory and stage through host memory.
  const bool use_unified = unified >= 0 && mp.memoryHeaps[mp.memoryTypes[unified].heapIndex].size >= (1ull << 30);
  d.device_memory_type = uint32_t(use_unified ? unified : local);
  d.device_memory_host_visible = use_unified;
  d.host_memory_type = uint32_t(use_unified ? unified : host);
  d.heap_bytes = mp.memoryHeaps[mp.memoryTypes[d.device_memory_type].heapIndex].size;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = d.family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  // Enable exactly what the shaders may use.
  VkPhysicalDeviceVulkan11Features e11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features e12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  e11.pNext = &e12;
  e11.storageBuffer16BitAccess = d.target.storage16;
  e12.timelineSemaphore = VK_TRUE;
  e12.hostQueryReset = d.timestamp_bits > 0;
  e12.storageBuffer8BitAccess = d.target.storage8;
  e12.shaderInt8 = d.target.storage8;
  VkPhysicalDeviceFeatures2 e2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  e2.pNext = &e11;
  e2.features.shaderInt64 = d.target.int64;
  e2.features.shaderFloat64 = d.target.float64;
  e2.features.shaderInt16 = d.target.storage16;
  VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.pNext = &e2;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  // Enabled whenever present: EMBER_VULKAN_DISABLE=push_descriptors is read per pipeline.
  const char* push_extension = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
  if (has_push) {
    di.enabledExtensionCount = 1;
    di.ppEnabledExtensionNames = &push_extension;
  }
  VkResult r = vkCreateDevice(phys, &di, nullptr, &d.device);
  if (r != VK_SUCCESS) {
    *why = std::string(d.props.deviceName) + ": vkCreateDevice: " + result_name(r);
    return false;
  }
  vkGetDeviceQueue(d.device, d.family, 0, &d.queue);
  if (has_push) {
    d.push_descriptor_set =
        reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(vkGetDeviceProcAddr(d.device, "vkCmdPushDescriptorSetKHR"));
    d.max_push_descriptors = d.push_descriptor_set ? push.maxPushDescriptors : 0;
  }
  // The shared layouts: as many bindings as a shader may have (maxPerStageDescriptorStorageBuffers),
  // at most kMaxBindings (a GPU may allow a million; the fusion planner keeps kernels within the
  // plugin's max_kernel_args, this less the two bindings of Ember's own), and for the pushed one
  // at most maxPushDescriptors.
  constexpr uint32_t kMaxBindings = 64;
  const uint32_t set_bindings = std::min(kMaxBindings, d.props.limits.maxPerStageDescriptorStorageBuffers);
  if (!make_shared_layout(d, set_bindings, false, d.set_layout, why)) return false;
  if (d.max_push_descriptors >= 3 &&
      !make_shared_layout(d, std::min(set_bindings, d.max_push_descriptors), true, d.pushed_layout, why))
    return false;
  return true;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                    void* user) {
  auto* c = static_cast<Context*>(user);
  const char* text = data && data->pMessage ? data->pMessage : "(no message)";
  std::fprintf(stderr, "vulkan validation: %s\n", text);
  if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)) {
    std::lock_guard lock(c->validation_mutex);
    if (c->validation_error.empty()) c->validation_error = text;
  }
  return VK_FALSE;
}

void print_counters() {
  for (const auto& d : context().devices) {
    const RecordingCounters& c = d->counters;
    auto u = [](const std::atomic<uint64_t>& v) { return (unsigned long long)v.load(); };
    std::fprintf(stderr,
                 "vulkan:%d: %llu dispatches (%llu pushed, %llu with descriptor sets), %llu transfers, %llu barriers "
                 "between commands (%llu read-after-write, %llu write-after-write, %llu write-after-read, %llu "
                 "unconditional), %llu submissions, %llu memory allocations\n",
                 d->index, u(c.dispatches), u(c.pushed), u(c.descriptor_sets), u(c.transfers),
                 u(c.read_after_write) + u(c.write_after_write) + u(c.write_after_read) + u(c.unconditional),
                 u(c.read_after_write), u(c.write_after_write), u(c.write_after_read), u(c.unconditional),
                 u(c.submissions), u(c.allocations));
  }
}

Context* make_context() {
  auto* c = new Context;  // lives for the process: drivers may still be called at exit
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "ember";
  app.pEngineName = "ember";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  const char* layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  const char* v = std::getenv("EMBER_VULKAN_VALIDATION");
  const bool validate = v && std::strcmp(v, "1") == 0;
  VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                   VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mi.pfnUserCallback = on_validation_message;
  mi.pUserData = c;
  if (validate) {
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = extensions;
    ci.pNext = &mi;  // also covers vkCreateInstance/vkDestroyInstance themselves
  }
  VkResult r = vkCreateInstance(&ci, nullptr, &c->instance);
  if (r != VK_SUCCESS) {
    c->instance = VK_NULL_HANDLE;
    c->why_none = std::string("vkCreateInstance failed: ") + result_name(r) +
                  (validate ? " (EMBER_VULKAN_VALIDATION=1: is vulkan-validationlayers installed?)" : "");
    return c;
  }
  if (validate) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(c->instance, "vkCreateDebugUtilsMessengerEXT"));
    if (create) create(c->instance, &mi, nullptr, &c->messenger);
  }
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(c->instance, &n, nullptr);
  std::vector<VkPhysicalDevice> phys(n);
  vkEnumeratePhysicalDevices(c->instance, &n, phys.data());
  if (n == 0) c->why_none = "the Vulkan loader found no device (no driver installed, or VK_ICD_FILENAMES names none)";
  std::string why;
  for (uint32_t i = 0; i < n; ++i) {
    auto d = std::make_unique<DeviceContext>();
    std::string w;
    if (open_device(phys[i], int(c->devices.size()), *d, &w)) c->devices.push_back(std::move(d));
    else why += (why.empty() ? "" : "; ") + w;
  }
  if (c->devices.empty() && n > 0) c->why_none = "no usable Vulkan device: " + why;
  // EMBER_VULKAN_STATS=1: the recording counters of every device, at exit.
  const char* stats = std::getenv("EMBER_VULKAN_STATS");
  if (stats && std::strcmp(stats, "1") == 0 && !c->devices.empty()) std::atexit(print_counters);
  return c;
}

}  // namespace

Context& context() {
  static Context* c = make_context();
  return *c;
}

std::string take_validation_error() {
  Context& c = context();
  std::lock_guard lock(c.validation_mutex);
  std::string e;
  e.swap(c.validation_error);
  return e;
}

DeviceContext* device(int32_t index) {
  Context& c = context();
  if (index < 0 || size_t(index) >= c.devices.size()) return nullptr;
  return c.devices[size_t(index)].get();
}

}  // namespace ember::vk
