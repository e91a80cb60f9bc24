// Compute pipelines and dispatches of the Vulkan plugin (kernels.h).
#include "backend/vulkan/kernels.h"

#include <shaderc/shaderc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "backend/common/host_services.h"
#include "backend/common/launch_coalesce.h"
#include "backend/vulkan/access_ranges.h"
#include "backend/vulkan/launch_pieces.h"

namespace ember::vk {

namespace {

using W = emit::GlslLaunchWords;

shaderc_compiler_t compiler() {
  static shaderc_compiler_t c = shaderc_compiler_initialize();  // thread safe (shaderc.h)
  return c;
}

// EMBER_VULKAN_DUMP=DIR writes every generated shader to DIR (for spirv-val and debugging).
void dump(const std::string& glsl) {
  const char* dir = std::getenv("EMBER_VULKAN_DUMP");
  if (!dir || !*dir) return;
  const size_t h = std::hash<std::string>{}(glsl);
  char path[1024];
  std::snprintf(path, sizeof path, "%s/%016zx.comp", dir, h);
  if (FILE* f = std::fopen(path, "w")) {
    std::fwrite(glsl.data(), 1, glsl.size(), f);
    std::fclose(f);
  }
}

// The key of a shader's SPIR-V in the core's compiled-program cache (backend/common/host_services.h):
// the GLSL (which spells out every device feature it uses), shaderc's SPIR-V version and the
// options. CPU drivers keep nothing useful in a VkPipelineCache, so compiled SPIR-V is what is
// worth keeping: shaderc takes most of a new kernel's first-launch time.
std::string spirv_cache_key(const std::string& glsl) {
  unsigned version = 0, revision = 0;
  shaderc_get_spv_version(&version, &revision);
  return glsl + "\nspirv " + std::to_string(version) + "." + std::to_string(revision) + " vulkan1.2 O0";
}

// GLSL -> SPIR-V, from the disk cache when it has it.
int32_t compile_spirv(const std::string& glsl, const std::string& what, std::vector<uint32_t>& spirv,
                      ember_status* st) {
  const std::string key = spirv_cache_key(glsl);
  // The core checks the entry's key and checksum; the size and the magic number are checked here
  // too, so that nothing but SPIR-V reaches the driver.
  if (std::optional<std::vector<uint8_t>> cached = plugin::cache_load("vulkan", key);
      cached && cached->size() >= 20 && cached->size() % 4 == 0) {
    spirv.resize(cached->size() / 4);
    std::memcpy(spirv.data(), cached->data(), cached->size());
    if (spirv[0] == 0x07230203u) return EMBER_OK;
  }
  shaderc_compile_options_t opts = shaderc_compile_options_initialize();
  shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  shaderc_compile_options_set_optimization_level(opts, shaderc_optimization_level_zero);  // the driver optimizes
  shaderc_compilation_result_t res = shaderc_compile_into_spv(compiler(), glsl.data(), glsl.size(),
                                                              shaderc_glsl_compute_shader, "ember_kernel.comp", "main", opts);
  shaderc_compile_options_release(opts);
  if (shaderc_result_get_compilation_status(res) != shaderc_compilation_status_success) {
    int32_t rc = set_status(st, EMBER_ERR_INTERNAL, "vulkan: compiling the shader of %s: %.300s", what.c_str(),
                            shaderc_result_get_error_message(res));
    shaderc_result_release(res);
    return rc;
  }
  const size_t bytes = shaderc_result_get_length(res);
  spirv.resize(bytes / 4);
  std::memcpy(spirv.data(), shaderc_result_get_bytes(res), bytes);
  shaderc_result_release(res);
  plugin::cache_store("vulkan", key, spirv.data(), spirv.size() * sizeof(uint32_t));
  return EMBER_OK;
}

}  // namespace

Pipeline::~Pipeline() {
  if (!device) return;
  VkDevice d = device->device;
  if (pipeline) vkDestroyPipeline(d, pipeline, nullptr);
  if (module) vkDestroyShaderModule(d, module, nullptr);
}

bool use_push_descriptors(const DeviceContext* d, int32_t n_args) {
  return d->pushed_layout.set && uint32_t(n_args) + 2 <= d->pushed_layout.bindings &&
         !feature_disabled("push_descriptors");
}

uint32_t max_kernel_args(const DeviceContext* d) {
  const uint32_t bindings = d->set_layout.bindings;
  return bindings > 2 ? bindings - 2 : 1;  // bindings 0 and 1: the launch words and the error word
}

int32_t build_pipeline(DeviceContext* d, const std::string& glsl, int32_t n_args, const std::string& what,
                       std::shared_ptr<const Pipeline>* out, ember_status* st) {
  // More storage buffers than the driver binds per shader is undefined behaviour (lavapipe, whose
  // limit is 32, crashed in its queue thread on a 44-binding kernel); the core keeps its kernels
  // within max_kernel_args, so this names a program that would not fit.
  if (n_args < 0 || uint32_t(n_args) > max_kernel_args(d))
    return set_status(st, EMBER_ERR_UNSUPPORTED,
                      "vulkan:%d: %s takes %d buffers; this device binds at most %u per shader "
                      "(maxPerStageDescriptorStorageBuffers %u, two of them Ember's own)",
                      d->index, what.c_str(), int(n_args), max_kernel_args(d),
                      d->props.limits.maxPerStageDescriptorStorageBuffers);
  dump(glsl);
  std::vector<uint32_t> spirv;
  if (int32_t rc = compile_spirv(glsl, what, spirv, st); rc != EMBER_OK) return rc;
  auto p = std::make_shared<Pipeline>();
  p->device = d;
  p->n_args = n_args;
  p->push = use_push_descriptors(d, n_args);
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = spirv.size() * sizeof(uint32_t);
  mi.pCode = spirv.data();
  VkResult r = vkCreateShaderModule(d->device, &mi, nullptr, &p->module);
  if (r != VK_SUCCESS) return set_status(st, EMBER_ERR_INTERNAL, "vulkan: vkCreateShaderModule: %s", result_name(r));
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = VkPipelineShaderStageCreateInfo{VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = p->module;
  ci.stage.pName = "main";
  ci.layout = shared_layout(d, p->push).pipeline;
  r = vkCreateComputePipelines(d->device, VK_NULL_HANDLE, 1, &ci, nullptr, &p->pipeline);
  if (r != VK_SUCCESS) return set_status(st, EMBER_ERR_INTERNAL, "vulkan: vkCreateComputePipelines: %s", result_name(r));
  *out = std::move(p);
  return EMBER_OK;
}

int32_t dispatch(ember_queue q, const std::shared_ptr<const Pipeline>& pipe, const int64_t* words, size_t n_words,
                 const ember_buffer* args, const std::vector<BufferAccess>& accesses, const Work& work, bool checked,
                 uint64_t tag, const std::string& name, ember_status* st, const std::vector<ByteRange>& windows) {
  if (work.items <= 0) return EMBER_OK;
  DeviceContext* d = q->device;
  const int64_t wg = d->target.workgroup;
  const int64_t per_group = work.group_per_item ? 1 : wg;  // items one workgroup takes per round
  const int64_t all_groups = (work.items + per_group - 1) / per_group;
  int64_t groups = work.grid_stride ? std::min(all_groups, d->preferred_groups) : all_groups;
  auto iterations = [&](int64_t g) { return (work.items + g * per_group - 1) / (g * per_group) * work.cost; };
  if (d->loop_budget && iterations(groups) > d->loop_budget && work.grid_stride) {
    // More workgroups, so that no invocation runs past the driver's loop limit.
    const int64_t rounds = std::max<int64_t>(1, d->loop_budget / std::max<int64_t>(1, work.cost));
    groups = std::min(all_groups, (work.items + rounds * per_group - 1) / (rounds * per_group));
  }
  if (d->loop_budget && iterations(groups) > d->loop_budget)
    return set_status(st, EMBER_ERR_UNSUPPORTED,
                "vulkan:%d: %s needs about %lld loop iterations in one shader invocation; this driver (llvmpipe) "
                "stops an invocation after %lld",
                d->index, name.c_str(), (long long)iterations(groups), (long long)d->loop_budget);
  const int64_t max_x = d->props.limits.maxComputeWorkGroupCount[0], max_y = d->props.limits.maxComputeWorkGroupCount[1];
  const int64_t gx = std::min(groups, max_x);
  const int64_t gy = (groups + gx - 1) / gx;
  if (gy > max_y)
    return set_status(st, EMBER_ERR_UNSUPPORTED, "vulkan: %s: %lld points are more than one launch can cover", name.c_str(),
                (long long)work.items);
  std::lock_guard lock(q->mutex);
  const uint32_t n_bind = uint32_t(pipe->n_args) + 2;
  VkDescriptorSet set = VK_NULL_HANDLE;  // stays null for a push (vkCmdPushDescriptorSetKHR ignores dstSet)
  // A set of the shared layout takes all its bindings from the batch's pool; only the first n_bind
  // are written (the shader uses no others).
  const DeviceContext::SharedLayout& layout = shared_layout(d, pipe->push);
  if (int32_t rc = pipe->push ? begin(q, st) : open_launch(q, layout.set, layout.bindings, &set, st);
      rc != EMBER_OK)
    return rc;
  Chunk* c = nullptr;
  VkDeviceSize at = 0;
  const VkDeviceSize align = std::max<VkDeviceSize>(16, d->props.limits.minStorageBufferOffsetAlignment);
  const VkDeviceSize bytes = n_words * sizeof(int64_t);
  if (int32_t rc = scratch(q, bytes, align, &c, &at, st); rc != EMBER_OK) return rc;
  const uint32_t id = q->next_launch++;
  if (q->next_launch == 0) q->next_launch = 1;
  auto* w = reinterpret_cast<int64_t*>(static_cast<char*>(c->block.mapped) + at);
  std::memcpy(w, words, bytes);
  w[W::kLaunchId] = id;

  std::vector<VkDescriptorBufferInfo>& infos = q->binding_infos;
  infos.resize(n_bind);
  infos[0] = {c->block.buffer, at, bytes};
  infos[1] = {q->error_word.buffer, 0, VK_WHOLE_SIZE};
  if (checked) {  // an error word of its own, zeroed (read when the batch retires)
    Chunk* ec = nullptr;
    VkDeviceSize eat = 0;
    const VkDeviceSize ebytes = sizeof(uint32_t) * emit::kErrWords;
    if (int32_t rc = scratch(q, ebytes, align, &ec, &eat, st); rc != EMBER_OK) return rc;
    std::memset(static_cast<char*>(ec->block.mapped) + eat, 0, ebytes);
    infos[1] = {ec->block.buffer, eat, ebytes};
    q->open.error_slots.push_back(Batch::ErrorSlot{id, ec, eat});
  }
  for (int32_t i = 0; i < pipe->n_args; ++i) {
    const bool window = size_t(i) < windows.size() && windows[size_t(i)].end > windows[size_t(i)].begin;
    infos[size_t(i) + 2] =
        !args[i] ? VkDescriptorBufferInfo{q->error_word.buffer, 0, VK_WHOLE_SIZE}
        : window ? VkDescriptorBufferInfo{args[i]->vk, args[i]->base + windows[size_t(i)].begin,
                                          windows[size_t(i)].end - windows[size_t(i)].begin}
                 : VkDescriptorBufferInfo{args[i]->vk, args[i]->base,
                                          std::min<VkDeviceSize>(args[i]->extent, d->max_binding)};
  }
  std::vector<VkWriteDescriptorSet>& writes = q->binding_writes;
  writes.resize(n_bind);
  for (uint32_t i = 0; i < n_bind; ++i) {
    writes[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  order_accesses(q, accesses.data(), accesses.size());  // a barrier first if needed
  VkCommandBuffer cb = q->open.cb;
  if (q->open.bound != pipe->pipeline) {
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe->pipeline);
    q->open.bound = pipe->pipeline;
  }
  if (pipe->push) {
    d->push_descriptor_set(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout.pipeline, 0, n_bind, writes.data());
    ++d->counters.pushed;
  } else {
    vkUpdateDescriptorSets(d->device, n_bind, writes.data(), 0, nullptr);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout.pipeline, 0, 1, &set, 0, nullptr);
    ++d->counters.descriptor_sets;
  }
  vkCmdDispatch(cb, uint32_t(gx), uint32_t(gy), 1);
  ++d->counters.dispatches;
  q->open.pipelines.push_back(pipe);
  if (checked) {
    q->checked[id] = ember_queue_s::Checked{tag, name};
  }
  return end_command(q, st);
}

int32_t program_create(int32_t device_index, const ember_kir_program* program, ember_program* out, ember_status* st) {
  DeviceContext* d = device(device_index);
  if (!d) return set_status(st, EMBER_ERR_INVALID, "vulkan: no device %d", device_index);
  const std::string name = program->name ? program->name : "kernel";
  // An IOTA counts from its argument's offset, which a launch rebases to the window it binds for
  // an argument with a buffer, and a LOAD_SCALAR's offset is its value: the core gives both
  // arguments of their own (abi.h).
  std::vector<uint8_t> bufferless(size_t(std::max(program->n_args, 0)), 0), buffer(bufferless.size(), 0),
      scalar(bufferless.size(), 0);
  for (int32_t k = 0; k < program->n_insts; ++k) {
    const ember_kir_inst& in = program->insts[k];
    if (in.arg < 0 || in.arg >= program->n_args) continue;
    const bool no_buffer = in.op == EMBER_KIR_IOTA || in.op == EMBER_KIR_LOAD_SCALAR;
    (no_buffer ? bufferless : buffer)[size_t(in.arg)] |=
        no_buffer || in.op == EMBER_KIR_LOAD || in.op == EMBER_KIR_LOAD_GATHER || in.op == EMBER_KIR_STORE ||
        in.op == EMBER_KIR_LOAD_UNIFORM;
    scalar[size_t(in.arg)] |= in.op == EMBER_KIR_LOAD_SCALAR;
  }
  for (size_t a = 0; a < bufferless.size(); ++a)
    if (bufferless[a] && buffer[a])
      return set_status(st, EMBER_ERR_UNSUPPORTED,
                        "vulkan:%d cannot run %s: argument %d is both an IOTA's or launch scalar's and a buffer's",
                        device_index, name.c_str(), int(a));
  std::string glsl, why;
  bool can_fail = false;
  emit::GlslTarget t32 = d->target;
  t32.index32 = true;
  if (!emit::emit_glsl_kernel(*program, t32, glsl, &can_fail, &why))
    return set_status(st, EMBER_ERR_UNSUPPORTED, "vulkan:%d cannot run %s: %s", device_index, name.c_str(), why.c_str());
  auto p = std::make_unique<ember_program_s>();
  emit::GlslTarget t64 = d->target;
  t64.index32 = false;
  if (d->target.int64 && !emit::emit_glsl_kernel(*program, t64, p->glsl64, nullptr, &why))
    return set_status(st, EMBER_ERR_UNSUPPORTED, "vulkan:%d cannot run %s: %s", device_index, name.c_str(), why.c_str());
  if (int32_t rc = build_pipeline(d, glsl, program->n_args, name, &p->pipeline, st); rc != EMBER_OK) return rc;
  p->name = name;
  p->can_fail = can_fail;
  int max_phase = 0;
  for (int32_t k = 0; k < program->n_insts; ++k) max_phase = std::max(max_phase, int(program->insts[k].phase));
  p->reduce = program->has_reduction || max_phase > 0;
  p->passes = max_phase / 2 + 1;
  p->arg_written.assign(size_t(std::max(program->n_args, 0)), false);
  for (int32_t k = 0; k < program->n_insts; ++k) {
    const ember_kir_inst& in = program->insts[k];
    if (in.op == EMBER_KIR_STORE && in.arg >= 0 && in.arg < program->n_args) p->arg_written[size_t(in.arg)] = true;
  }
  for (int32_t a = 0; a < program->n_args; ++a) p->arg_bytes.push_back(storage_bytes(program->arg_dtypes[a]));
  p->arg_scalar.assign(scalar.begin(), scalar.end());
  p->arg_uniform.assign(size_t(std::max(program->n_args, 0)), true);
  for (int32_t k = 0; k < program->n_insts; ++k) {
    const ember_kir_inst& in = program->insts[k];
    const bool uses_arg = in.op == EMBER_KIR_LOAD || in.op == EMBER_KIR_LOAD_GATHER || in.op == EMBER_KIR_STORE ||
                          in.op == EMBER_KIR_IOTA;
    if (uses_arg && in.arg >= 0 && in.arg < program->n_args) p->arg_uniform[size_t(in.arg)] = false;
  }
  *out = p.release();
  return EMBER_OK;
}

void program_destroy(ember_program p) { delete p; }  // batches still running hold the pipeline

namespace {

// One launch whose argument windows fit the device's bindings (launch_pieces.h): its launch words
// (offsets counted from each window's start), the 32- or 64-bit pipeline, then the dispatch.
int32_t run_piece(ember_queue q, ember_program p, const ember_kir_launch* l, uint64_t tag, ember_status* st) {
  const int rank = l->outer_rank + l->reduce_rank;
  std::vector<int64_t> words(size_t(W::words(l->n_args)), 0);
  int64_t points = 1;
  for (int dim = 0; dim < (p->reduce ? l->outer_rank : rank); ++dim) points *= l->shape[dim];
  for (int dim = 0; dim < rank; ++dim)
    if (l->shape[dim] == 0) points = p->reduce && dim >= l->outer_rank ? points : 0;
  // Reductions over more than a few points per output take a workgroup per output (mode 1).
  int64_t nred = 1;
  for (int dim = l->outer_rank; dim < rank; ++dim) nred *= l->shape[dim];
  const bool tree = p->reduce && nred > 64;
  const int64_t step = tree ? q->device->target.workgroup : 1;
  words[W::kPoints] = points;
  words[W::kRank] = rank;
  words[W::kOuterRank] = l->outer_rank;
  words[W::kMode] = tree ? 1 : 0;
  for (int dim = 0; dim < rank; ++dim) words[size_t(W::kShape + dim)] = l->shape[dim];
  std::vector<ember_buffer> bufs(size_t(l->n_args));
  for (int32_t a = 0; a < l->n_args; ++a) {
    const ember_kir_arg& arg = l->args[a];
    int64_t* aw = words.data() + W::kArgs + W::kPerArg * a;
    aw[W::kOffset] = arg.offset;
    for (int dim = 0; dim < rank; ++dim) aw[W::kStrides + dim] = arg.strides[dim];
    aw[W::kGatherStride] = arg.gather_stride;
    aw[W::kGatherSize] = arg.gather_size;
    bufs[size_t(a)] = arg.buffer;
  }
  // Loop iterations per item: the unravel loops (none for one dim) and the reduce passes.
  auto unravel_cost = [](int dims) { return dims > 1 ? dims : 0; };
  Work work;
  work.items = points;
  work.group_per_item = tree;
  work.cost = 1 + unravel_cost(l->outer_rank);
  if (p->reduce)
    work.cost += p->passes * ((nred + step - 1) / step * (1 + unravel_cost(l->reduce_rank)) + (tree ? 16 : 0));
  // What each argument's buffer may see: stored-to arguments are written, the others read (an
  // argument without loads costs nothing: reads conflict only with writes). Each descriptor is
  // bound to that range (from an aligned start, which the argument's offset word then counts
  // from): the shader cannot reach past it, and the validation layer's synchronization checks,
  // which see a descriptor's whole range as accessed, see what the barriers were decided on
  // (kernels touching disjoint parts of one buffer need none between them).
  std::vector<BufferAccess> accesses;
  std::vector<ByteRange> windows(size_t(l->n_args));
  for (int32_t a = 0; a < l->n_args; ++a) {
    const ember_kir_arg& arg = l->args[a];
    if (!arg.buffer) continue;
    const uint32_t elem = p->arg_bytes[size_t(a)];
    const ByteRange w = arg_window(*l, arg, {elem, arg.buffer->extent, false}, q->device->binding_alignment);
    if (w.end <= w.begin) {  // touches nothing: the buffer's first bytes (a binding must have some)
      windows[size_t(a)] = {0, std::min<uint64_t>(arg.buffer->extent, q->device->max_binding)};
      continue;
    }
    windows[size_t(a)] = w;
    // The whole window counts as accessed (as the validation layer counts it): the aligned start
    // may reach into what a neighbouring launch writes, e.g. the previous piece of a split launch.
    // (Offsets in the VkBuffer: small buffers share their slab's.)
    accesses.push_back({buffer_key(arg.buffer->vk), arg.buffer->base + w.begin, arg.buffer->base + w.end,
                        bool(p->arg_written[size_t(a)])});
    if (elem > 0) words[size_t(W::kArgs + W::kPerArg * a + W::kOffset)] -= int64_t(w.begin / elem);
  }
  // 32-bit index arithmetic when every offset the launch can form from its windows fits in an int.
  constexpr int64_t kMax32 = (int64_t(1) << 31) - 1;
  bool fits32 = (tree ? points * step : points) <= kMax32 && nred <= kMax32;
  for (int32_t a = 0; a < l->n_args && fits32; ++a) {
    if (p->arg_scalar[size_t(a)]) continue;  // its offset word is a value, not an index
    const ember_kir_arg& arg = l->args[a];  // with or without a buffer (IOTA offsets count too)
    const int64_t offset = words[size_t(W::kArgs + W::kPerArg * a + W::kOffset)];
    int64_t hi = offset, lo = offset;
    for (int dim = 0; dim < rank; ++dim) {
      const int64_t span = (l->shape[dim] > 0 ? l->shape[dim] - 1 : 0) * arg.strides[dim];
      (span >= 0 ? hi : lo) += span;
    }
    if (arg.gather_size > 0) hi += (arg.gather_size - 1) * (arg.gather_stride < 0 ? -arg.gather_stride : arg.gather_stride);
    fits32 = hi <= kMax32 && lo >= -kMax32;
  }
  std::shared_ptr<const Pipeline> pipe = p->pipeline;
  if (!fits32 && !q->device->target.int64)
    return set_status(st, EMBER_ERR_UNSUPPORTED,
                      "vulkan:%d: %s needs 64-bit index arithmetic (offsets past 2^31), which this device lacks "
                      "(no shaderInt64)",
                      q->device->index, p->name.c_str());
  if (!fits32) {
    std::lock_guard lock(p->mutex64);
    if (!p->pipeline64)
      if (int32_t rc = build_pipeline(q->device, p->glsl64, p->pipeline->n_args, p->name, &p->pipeline64, st); rc != EMBER_OK)
        return rc;
    pipe = p->pipeline64;
  }
  return dispatch(q, pipe, words.data(), words.size(), bufs.data(), accesses, work, p->can_fail, tag, p->name, st,
                  windows);
}

}  // namespace

int32_t program_run(ember_queue q, ember_program p, const ember_kir_launch* launch_in, uint64_t tag, ember_status* st) {
  if (launch_in->outer_rank < 0 || launch_in->reduce_rank < 0 ||
      launch_in->outer_rank + launch_in->reduce_rank > EMBER_MAX_ITER_RANK)
    return set_status(st, EMBER_ERR_INVALID, "vulkan: %s: rank %d + %d", p->name.c_str(), launch_in->outer_rank,
                      launch_in->reduce_rank);
  if (launch_in->n_args != p->pipeline->n_args)
    return set_status(st, EMBER_ERR_INVALID, "vulkan: %s: launch has %d arguments, the program %d", p->name.c_str(),
                      launch_in->n_args, p->pipeline->n_args);
  std::vector<ember_kir_arg> merged_args;
  const ember_kir_launch merged = plugin::coalesce(*launch_in, merged_args);
  std::vector<ArgLayout> layout(size_t(merged.n_args));
  for (int32_t a = 0; a < merged.n_args; ++a) {
    const ember_kir_arg& arg = merged.args[a];
    if (arg.buffer && arg.buffer->device != q->device)
      return set_status(st, EMBER_ERR_INVALID, "vulkan: %s: argument %d lives on another device", p->name.c_str(), a);
    layout[size_t(a)] = {p->arg_bytes[size_t(a)], arg.buffer ? uint64_t(arg.buffer->extent) : 0,
                         bool(p->arg_uniform[size_t(a)])};
  }
  std::string why;
  const int32_t rc = run_in_pieces(
      merged, layout, q->device->max_binding, q->device->binding_alignment,
      [&](const ember_kir_launch& piece) { return run_piece(q, p, &piece, tag, st); }, &why);
  if (rc != EMBER_OK && !why.empty())
    return set_status(st, rc, "vulkan:%d: %s: %s", q->device->index, p->name.c_str(), why.c_str());
  return rc;
}

namespace {

// Library pipelines, built on first use and kept per (device, shader source).
int32_t library_pipeline(DeviceContext* d, const std::string& glsl, int32_t n_args, std::shared_ptr<const Pipeline>* out,
                         ember_status* st) {
  static std::mutex m;
  // Keyed by the binding path too: EMBER_VULKAN_DISABLE=push_descriptors may change between builds.
  static std::map<std::tuple<DeviceContext*, std::string, bool>, std::shared_ptr<const Pipeline>> cache;
  std::lock_guard lock(m);
  auto& slot = cache[{d, glsl, use_push_descriptors(d, n_args)}];
  if (!slot) {
    if (int32_t rc = build_pipeline(d, glsl, n_args, "a library call", &slot, st); rc != EMBER_OK) return rc;
  }
  *out = slot;
  return EMBER_OK;
}

}  // namespace

namespace {

int32_t library_call_whole(ember_queue q, int32_t op, const ember_tensor_desc* in_abs, int32_t n_in,
                           const ember_tensor_desc* out_abs, int32_t n_out, const void* attrs, uint64_t tag,
                           ember_status* st);

// A matmul whose tensors do not fit the device's bindings, as pieces that do: c [batch.., M, N] =
// a [batch.., M, K] b [batch.., K, N] is the launch over (batch.., M, N) that reduces K, with a
// moving along batch, M and K, b along batch, N and K and c along batch, M and N, so
// run_in_pieces (launch_pieces.h) splits it like a KIR launch (M, N and the batch dims, never K);
// each piece is an ordinary matmul call on its rows and columns.
int32_t matmul_in_pieces(ember_queue q, const ember_tensor_desc* in, const ember_tensor_desc* out, uint64_t tag,
                         ember_status* st, bool* split) {
  *split = false;
  const ember_tensor_desc &a = in[0], &b = in[1], &c = out[0];
  const int r = c.rank;
  if (r < 2 || r + 1 > EMBER_MAX_ITER_RANK || a.rank != r || b.rank != r || !a.buffer || !b.buffer || !c.buffer)
    return EMBER_OK;
  DeviceContext* d = q->device;
  auto fits = [&](const ember_tensor_desc& t) {
    const ByteRange w = tensor_range(t, t.buffer->extent);
    return w.end - w.begin / d->binding_alignment * d->binding_alignment <= d->max_binding;
  };
  if (fits(a) && fits(b) && fits(c)) return EMBER_OK;
  ember_kir_launch l{};
  l.outer_rank = r;  // batch.., M, N
  l.reduce_rank = 1;  // K
  for (int k = 0; k < r; ++k) l.shape[k] = c.shape[k];
  l.shape[r] = a.shape[r - 1];
  std::vector<ember_kir_arg> args(3);
  const ember_tensor_desc* ts[3] = {&a, &b, &c};
  for (int t = 0; t < 3; ++t) args[size_t(t)].offset = ts[t]->offset;
  for (int k = 0; k < r - 2; ++k) {  // batch dims (a broadcast one: stride 0)
    for (int t = 0; t < 3; ++t) args[size_t(t)].strides[k] = ts[t]->shape[k] == 1 ? 0 : ts[t]->strides[k];
  }
  args[0].strides[r - 2] = a.strides[r - 2], args[0].strides[r] = a.strides[r - 1];  // a: M, K
  args[1].strides[r - 1] = b.strides[r - 1], args[1].strides[r] = b.strides[r - 2];  // b: N, K
  args[2].strides[r - 2] = c.strides[r - 2], args[2].strides[r - 1] = c.strides[r - 1];  // c: M, N
  l.n_args = 3;
  l.args = args.data();
  std::vector<ArgLayout> layout;
  for (int t = 0; t < 3; ++t) layout.push_back({storage_bytes(ts[t]->dtype), uint64_t(ts[t]->buffer->extent), false});
  *split = true;
  std::string why;
  const int32_t rc = run_in_pieces(
      l, layout, d->max_binding, d->binding_alignment,
      [&](const ember_kir_launch& piece) {
        ember_tensor_desc pa = a, pb = b, pc = c;
        pa.offset = piece.args[0].offset, pb.offset = piece.args[1].offset, pc.offset = piece.args[2].offset;
        for (int k = 0; k < r - 2; ++k) {
          pc.shape[k] = piece.shape[k];
          if (a.shape[k] != 1) pa.shape[k] = piece.shape[k];
          if (b.shape[k] != 1) pb.shape[k] = piece.shape[k];
        }
        pa.shape[r - 2] = pc.shape[r - 2] = piece.shape[r - 2];
        pb.shape[r - 1] = pc.shape[r - 1] = piece.shape[r - 1];
        const ember_tensor_desc ins[2] = {pa, pb};
        return library_call_whole(q, EMBER_LIB_MATMUL, ins, 2, &pc, 1, nullptr, tag, st);
      },
      &why);
  if (rc != EMBER_OK && !why.empty())
    return set_status(st, rc, "vulkan:%d: matmul: %s", d->index, why.c_str());
  return rc;
}

}  // namespace

int32_t library_call(ember_queue q, int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                     int32_t n_out, const void* attrs, uint64_t tag, ember_status* st) {
  if (op == EMBER_LIB_MATMUL && n_in == 2 && n_out == 1) {
    bool split = false;
    const int32_t rc = matmul_in_pieces(q, in, out, tag, st, &split);
    if (split || rc != EMBER_OK) return rc;
  }
  return library_call_whole(q, op, in, n_in, out, n_out, attrs, tag, st);
}

namespace {

int32_t library_call_whole(ember_queue q, int32_t op, const ember_tensor_desc* in_abs, int32_t n_in,
                           const ember_tensor_desc* out_abs, int32_t n_out, const void* attrs, uint64_t tag,
                           ember_status* st) {
  DeviceContext* d = q->device;
  // Each tensor is bound as the window of its buffer it covers (from an aligned start, which its
  // offset then counts from), so a buffer may be larger than a binding; a tensor that is itself
  // larger than the device's largest binding is refused (matmul is split first, above).
  std::vector<ember_tensor_desc> in(in_abs, in_abs + n_in), out(out_abs, out_abs + n_out);
  std::vector<ember_buffer> bufs;
  std::vector<BufferAccess> accesses;  // inputs read and outputs written, the same for every pass
  std::vector<ByteRange> windows;
  for (int32_t i = 0; i < n_in + n_out; ++i) {
    ember_tensor_desc& t = i < n_in ? in[size_t(i)] : out[size_t(i - n_in)];
    bufs.push_back(t.buffer);
    windows.push_back({});
    if (!t.buffer) continue;
    if (t.buffer->device != d)
      return set_status(st, EMBER_ERR_INVALID, "vulkan: library call %d: a tensor lives on another device", op);
    const uint64_t size = t.buffer->extent;
    const ByteRange r = tensor_range(t, size);
    const uint32_t elem = storage_bytes(t.dtype);
    if (elem == 0 || r.end <= r.begin) {  // no elements (or an unknown dtype): the buffer's first bytes
      windows.back() = {0, std::min<uint64_t>(size, d->max_binding)};
      if (r.end > r.begin) accesses.push_back({buffer_key(t.buffer->vk), t.buffer->base, t.buffer->base + size, i >= n_in});
      continue;
    }
    const ByteRange w{r.begin / d->binding_alignment * d->binding_alignment, r.end};
    // The bound window counts as accessed, as for KIR launches. (A pass may read what an earlier
    // pass of the call wrote: the queue orders those by their overlap.)
    accesses.push_back({buffer_key(t.buffer->vk), t.buffer->base + w.begin, t.buffer->base + w.end, i >= n_in});
    if (w.end - w.begin > d->max_binding)
      return set_status(st, EMBER_ERR_UNSUPPORTED,
                        "vulkan:%d: library call %d: %s %d spans %llu bytes, more than the device's largest storage "
                        "binding (%llu bytes)",
                        d->index, op, i < n_in ? "input" : "output", i < n_in ? i : i - n_in,
                        (unsigned long long)(w.end - w.begin), (unsigned long long)d->max_binding);
    windows.back() = w;
    t.offset -= int64_t(w.begin / elem);
  }
  std::vector<emit::GlslPass> passes;
  std::string why;
  // 32-bit index arithmetic when every tensor's extent (in its window) fits in an int. On a device
  // without int64 only the plain matmul shader runs (glsl_library_supports), whose offsets are
  // bounded by each tensor's highest one and whose grid-stride point index by twice the points
  // (larger calls take the host fallback: Backend::unsupported_library). Elsewhere 32 bits are an
  // optimization, taken with room for per-point products.
  const int64_t max_points = d->target.int64 ? (int64_t(1) << 31) / 1024 : int64_t(1) << 30;
  emit::GlslTarget target = d->target;
  target.index32 = true;
  auto fits = [&](const ember_tensor_desc& t) {
    int64_t hi = t.offset, n = 1;
    for (int k = 0; k < t.rank && k < 8; ++k) {
      if (t.strides[k] < 0) return false;
      hi += (t.shape[k] > 0 ? t.shape[k] - 1 : 0) * t.strides[k];
      n *= t.shape[k];
    }
    return hi < (int64_t(1) << 31) && n < max_points;
  };
  for (const ember_tensor_desc& t : in) target.index32 = target.index32 && fits(t);
  for (const ember_tensor_desc& t : out) target.index32 = target.index32 && fits(t);
  if (!target.index32 && !target.int64)
    return set_status(st, EMBER_ERR_UNSUPPORTED,
                      "vulkan:%d: library call %d needs 64-bit index arithmetic (tensors past 2^31 elements), which "
                      "this device lacks (no shaderInt64)",
                      d->index, op);
  if (!emit::emit_glsl_library(op, in.data(), n_in, out.data(), n_out, attrs, target, passes, &why))
    return set_status(st, EMBER_ERR_UNSUPPORTED, "vulkan:%d: %s", d->index, why.c_str());
  for (const emit::GlslPass& p : passes) {
    std::shared_ptr<const Pipeline> pipe;
    if (int32_t rc = library_pipeline(d, p.glsl, int32_t(bufs.size()), &pipe, st); rc != EMBER_OK) return rc;
    Work work;
    work.items = p.points;
    work.grid_stride = p.grid_stride;
    work.cost = std::max<int64_t>(1, p.loop_iterations);
    const bool checked = !p.check_name.empty();
    if (int32_t rc = dispatch(q, pipe, p.words.data(), p.words.size(), bufs.data(), accesses, work, checked, tag,
                              checked ? p.check_name : "library call " + std::to_string(op), st, windows);
        rc != EMBER_OK)
      return rc;
  }
  return EMBER_OK;
}

}  // namespace

}  // namespace ember::vk
