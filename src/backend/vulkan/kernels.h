// Compute pipelines of the Vulkan plugin: KIR programs and library shaders (matmul) rendered as
// GLSL by the shared emitter (emit_glsl.h), compiled to SPIR-V with libshaderc, and dispatched on
// a queue with their launch parameters in the batch's host-visible memory. A launch's buffers are
// pushed into the command buffer (VK_KHR_push_descriptor) where the device allows, else bound
// through a descriptor set from the batch's pool; each launch names the byte ranges it reads and
// writes, so that the queue places barriers only where launches overlap (hazards.h).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/vulkan/access_ranges.h"
#include "backend/vulkan/queue.h"

namespace ember::vk {

// A compiled shader: binding 0 launch words, 1 error word, 2.. arguments. Its layout is one of
// the device's shared ones (shared_layout() below); `push`: the push-descriptor layout
// (dispatches push their bindings).
struct Pipeline {
  DeviceContext* device = nullptr;
  VkShaderModule module = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  int32_t n_args = 0;
  bool push = false;
  ~Pipeline();
};

// Whether a pipeline of `n_args` arguments built now pushes its bindings: the device has
// VK_KHR_push_descriptor with room for them, and EMBER_VULKAN_DISABLE does not name
// push_descriptors.
bool use_push_descriptors(const DeviceContext* d, int32_t n_args);

// The device's layout a pipeline built with or without pushed bindings uses.
inline const DeviceContext::SharedLayout& shared_layout(const DeviceContext* d, bool push) {
  return push ? d->pushed_layout : d->set_layout;
}

// Most arguments a kernel may take on this device (ember_device_properties::max_kernel_args): the
// per-shader storage-buffer limit less the two bindings every pipeline has.
uint32_t max_kernel_args(const DeviceContext* d);

// GLSL -> SPIR-V -> pipeline; false and *st on failure (the message names `what`).
int32_t build_pipeline(DeviceContext* d, const std::string& glsl, int32_t n_args, const std::string& what,
                       std::shared_ptr<const Pipeline>* out, ember_status* st);

// What a dispatch covers: `items` points (or outer points), each costing an invocation `cost`
// loop iterations; a workgroup per item or an invocation per item; whether the shader loops
// over its items (then the plugin picks the number of workgroups).
struct Work {
  int64_t items = 0;
  bool group_per_item = false;
  bool grid_stride = true;
  int64_t cost = 1;
};

// Records one dispatch with launch words `words` and argument buffers (null entries are bound to
// a dummy). `accesses`: the argument bytes it may read and write (the launch words, private to
// the launch, and the error word, which only the first failing point writes after an atomic
// compare-and-swap, are not listed). checked: the launch may write an error (tag, name): it gets
// an error word of its own, read when its batch retires.
// `windows` (per argument, or empty: every buffer whole) are the byte ranges bound to the
// descriptors; the launch words address each argument from its window's start.
int32_t dispatch(ember_queue q, const std::shared_ptr<const Pipeline>& pipeline, const int64_t* words, size_t n_words,
                 const ember_buffer* args, const std::vector<BufferAccess>& accesses, const Work& work, bool checked,
                 uint64_t tag, const std::string& name, ember_status* st, const std::vector<ByteRange>& windows = {});

}  // namespace ember::vk

struct ember_program_s {
  std::shared_ptr<const ember::vk::Pipeline> pipeline;  // 32-bit index arithmetic
  // The 64-bit index variant, built the first time a launch needs it.
  std::string glsl64;
  std::mutex mutex64;
  std::shared_ptr<const ember::vk::Pipeline> pipeline64;
  std::string name;
  bool reduce = false;
  bool can_fail = false;
  int passes = 1;  // reductions: passes over the reduce dims
  // Per argument: whether the program stores to it, and its element size (0: unknown dtype).
  std::vector<bool> arg_written;
  std::vector<uint32_t> arg_bytes;
  // Per argument: whether it is read only by LOAD_UNIFORM (the same element at every point).
  std::vector<bool> arg_uniform;
  // Per argument: whether it is a launch-time scalar (LOAD_SCALAR: its offset word is a value).
  std::vector<bool> arg_scalar;
};

namespace ember::vk {

int32_t program_create(int32_t device, const ember_kir_program* program, ember_program* out, ember_status* st);
void program_destroy(ember_program p);
int32_t program_run(ember_queue q, ember_program p, const ember_kir_launch* launch, uint64_t tag, ember_status* st);
int32_t library_call(ember_queue q, int32_t op, const ember_tensor_desc* inputs, int32_t n_inputs,
                     const ember_tensor_desc* outputs, int32_t n_outputs, const void* attrs, uint64_t tag,
                     ember_status* st);

}  // namespace ember::vk
