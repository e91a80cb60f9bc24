// KIR programs on a CUDA device (runtime.h): CUDA C from the shared emitter (emit_cuda.h),
// compiled by NVRTC for the device's architecture on first use, kept in the core's on-disk cache
// of compiled programs, loaded as a module, launched on a queue's stream with the launch words as
// a by-value kernel argument.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>

#include "backend/common/host_services.h"
#include "backend/common/launch_coalesce.h"
#include "backend/common/plugin_status.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/runtime.h"

namespace ember::cuda {

namespace {

using plugin::set_status;
using W = emit::GpuLaunchWords;

const Driver& drv() { return Driver::get(); }

// EMBER_CUDA_DUMP=DIR: every generated kernel's source is written there (as EMBER_VULKAN_DUMP).
void dump(const std::string& src) {
  const char* dir = std::getenv("EMBER_CUDA_DUMP");
  if (!dir || !*dir) return;
  static std::atomic<int> serial{0};
  std::ofstream(std::string(dir) + "/kernel_" + std::to_string(::getpid()) + "_" + std::to_string(serial++) + ".cu")
      << src;
}

// The compiled image of `src` for device d: a cubin for its architecture, or (where this NVRTC
// does not know it) PTX for compute_90 that the driver compiles. From the core's cache when an
// earlier run compiled it. The first byte says which: 'C' cubin, 'P' PTX (NUL-terminated).
int32_t compiled_image(const DeviceContext* d, const std::string& src, const std::string& name, std::string& image,
                       ember_status* st) {
  const Nvrtc& nvrtc = Nvrtc::get();
  if (!nvrtc.available()) return set_status(st, EMBER_ERR_UNSUPPORTED, "cuda: NVRTC is not available: %s", nvrtc.why().c_str());
  const std::string arch = "sm_" + std::to_string(d->cc_major) + std::to_string(d->cc_minor);
  const std::string key = "cuda kernel\n" + arch + "\nnvrtc " + nvrtc.version() + "\n" + src;
  if (auto cached = plugin::cache_load("cuda", key); cached && cached->size() > 1) {
    image.assign(cached->begin(), cached->end());
    return EMBER_OK;
  }
  dump(src);
  std::string binary, log, log_ptx;
  if (nvrtc.compile(src, name + ".cu", arch, binary, log)) {
    image = "C" + binary;
  } else if (nvrtc.compile(src, name + ".cu", "compute_90", binary, log_ptx)) {
    image = "P" + binary;
    image.push_back('\0');
  } else {
    return set_status(st, EMBER_ERR_INTERNAL, "cuda: NVRTC rejects the kernel of %s for %s: %.300s", name.c_str(),
                      arch.c_str(), log.c_str());
  }
  plugin::cache_store("cuda", key, image.data(), image.size());
  return EMBER_OK;
}

// The function of p's index width `wide` (0: 32-bit, 1: 64-bit), compiled and loaded on first use.
int32_t function_for(ember_program p, int wide, CUfunction* out, ember_status* st) {
  std::lock_guard lock(p->mutex);
  if (!p->function[wide]) {
    std::string image;
    if (int32_t rc = compiled_image(p->device, p->source[wide], p->name, image, st); rc != EMBER_OK) return rc;
    bind(p->device);
    CUmodule module = nullptr;
    if (CUresult rc = drv().module_load_data(&module, image.data() + 1); rc != 0)
      return cuda_fail(st, rc, ("loading the kernel of " + p->name).c_str());
    CUfunction fn = nullptr;
    if (CUresult rc = drv().module_get_function(&fn, module, emit::kCudaKernelName); rc != 0) {
      drv().module_unload(module);
      return cuda_fail(st, rc, ("finding the kernel of " + p->name).c_str());
    }
    p->module[wide] = module;
    p->function[wide] = fn;
  }
  *out = p->function[wide];
  return EMBER_OK;
}

}  // namespace

int32_t program_create(int32_t index, const ember_kir_program* program, ember_program* out, ember_status* st) {
  DeviceContext* d = device(index);
  if (!d) return set_status(st, EMBER_ERR_INVALID, "cuda: no device %d", index);
  auto p = std::make_unique<ember_program_s>();
  p->device = d;
  p->name = program->name ? program->name : "kernel";
  p->n_args = program->n_args;
  for (int wide = 0; wide < 2; ++wide) {
    std::string why;
    const emit::CudaTarget target{.block = d->block, .index32 = wide == 0};
    if (!emit::emit_cuda_kernel(*program, target, p->source[wide], &p->can_fail, &why))
      return set_status(st, EMBER_ERR_UNSUPPORTED, "cuda:%d cannot run %s: %s", index, p->name.c_str(), why.c_str());
  }
  int max_phase = 0;
  p->arg_scalar.assign(size_t(std::max(program->n_args, 0)), 0);
  for (int32_t k = 0; k < program->n_insts; ++k) {
    const ember_kir_inst& in = program->insts[k];
    max_phase = std::max(max_phase, int(in.phase));
    if (in.op == EMBER_KIR_LOAD_SCALAR && in.arg >= 0 && in.arg < program->n_args) p->arg_scalar[size_t(in.arg)] = 1;
  }
  p->reduce = program->has_reduction || max_phase > 0;
  // The 32-bit variant, which most launches take, is compiled now, so that a program the device
  // cannot build fails here, where the core expects it, and not at its first launch.
  CUfunction fn = nullptr;
  if (int32_t rc = function_for(p.get(), 0, &fn, st); rc != EMBER_OK) return rc;
  *out = p.release();
  return EMBER_OK;
}

void program_destroy(ember_program p) {
  if (!p) return;
  // The driver does not promise to keep a module that queued launches still use: the device's
  // work is waited for first (programs are destroyed rarely: the core caches them).
  bind(p->device);
  if (p->module[0] || p->module[1]) drv().ctx_synchronize();
  for (CUmodule m : p->module)
    if (m) drv().module_unload(m);
  delete p;
}

int32_t program_run(ember_queue q, ember_program p, const ember_kir_launch* launch_in, uint64_t tag, ember_status* st) {
  if (launch_in->outer_rank < 0 || launch_in->reduce_rank < 0 ||
      launch_in->outer_rank + launch_in->reduce_rank > EMBER_MAX_ITER_RANK)
    return set_status(st, EMBER_ERR_INVALID, "cuda: %s: rank %d + %d", p->name.c_str(), launch_in->outer_rank,
                      launch_in->reduce_rank);
  if (launch_in->n_args != p->n_args)
    return set_status(st, EMBER_ERR_INVALID, "cuda: %s: launch has %d arguments, the program %d", p->name.c_str(),
                      launch_in->n_args, p->n_args);
  std::vector<ember_kir_arg> merged_args;
  const ember_kir_launch merged = plugin::coalesce(*launch_in, merged_args);
  const ember_kir_launch* l = &merged;
  const int rank = l->outer_rank + l->reduce_rank;
  std::vector<long long> words(size_t(W::words(l->n_args)), 0);
  int64_t points = 1, nred = 1;
  for (int dim = 0; dim < (p->reduce ? l->outer_rank : rank); ++dim) points *= l->shape[dim];
  for (int dim = 0; dim < rank; ++dim)
    if (l->shape[dim] == 0) points = p->reduce && dim >= l->outer_rank ? points : 0;
  for (int dim = l->outer_rank; dim < rank; ++dim) nred *= l->shape[dim];
  if (points == 0) return EMBER_OK;
  // Reductions over more than a few points per output take a block per output point (mode 1).
  const bool tree = p->reduce && nred > 64;
  words[W::kPoints] = points;
  words[W::kRank] = rank;
  words[W::kOuterRank] = l->outer_rank;
  words[W::kMode] = tree ? 1 : 0;
  for (int dim = 0; dim < rank; ++dim) words[size_t(W::kShape + dim)] = l->shape[dim];
  std::vector<CUdeviceptr> pointers(size_t(l->n_args), 0);
  for (int32_t a = 0; a < l->n_args; ++a) {
    const ember_kir_arg& arg = l->args[a];
    if (arg.buffer && arg.buffer->device != q->device)
      return set_status(st, EMBER_ERR_INVALID, "cuda: %s: argument %d lives on another device", p->name.c_str(), a);
    long long* aw = words.data() + W::kArgs + W::kPerArg * a;
    aw[W::kOffset] = arg.offset;
    for (int dim = 0; dim < rank; ++dim) aw[W::kStrides + dim] = arg.strides[dim];
    aw[W::kGatherStride] = arg.gather_stride;
    aw[W::kGatherSize] = arg.gather_size;
    if (arg.buffer) pointers[size_t(a)] = arg.buffer->ptr;
  }
  // 32-bit index arithmetic when every offset the launch can form fits in an int.
  constexpr int64_t kMax32 = (int64_t(1) << 31) - 1;
  bool fits32 = (tree ? points * q->device->block : points) <= kMax32 && nred <= kMax32;
  for (int32_t a = 0; a < l->n_args && fits32; ++a) {
    if (p->arg_scalar[size_t(a)]) continue;  // its offset word is a value, not an index
    const ember_kir_arg& arg = l->args[a];
    int64_t hi = arg.offset, lo = arg.offset;
    for (int dim = 0; dim < rank; ++dim) {
      const int64_t span = (l->shape[dim] > 0 ? l->shape[dim] - 1 : 0) * arg.strides[dim];
      (span >= 0 ? hi : lo) += span;
    }
    if (arg.gather_size > 0)
      hi += (arg.gather_size - 1) * (arg.gather_stride < 0 ? -arg.gather_stride : arg.gather_stride);
    fits32 = hi <= kMax32 && lo >= -kMax32;
  }
  CUfunction fn = nullptr;
  if (int32_t rc = function_for(p, fits32 ? 0 : 1, &fn, st); rc != EMBER_OK) return rc;
  CUdeviceptr error_word = q->device->dummy_error;
  std::unique_lock<std::mutex> slot_lock;  // held until the launch is enqueued (take_error_slot)
  if (p->can_fail) {
    slot_lock = std::unique_lock(q->mutex);
    if (int32_t rc = take_error_slot(q, tag, p->name, &error_word, st); rc != EMBER_OK) return rc;
  }
  // The parameters as cuLaunchKernel takes them: a pointer to each argument's value (the launch
  // struct's bytes are the words).
  std::vector<void*> params{words.data(), &error_word};
  for (CUdeviceptr& ptr : pointers) params.push_back(&ptr);
  // Enough blocks to fill the device a few times over; the kernels loop over the rest.
  const int64_t block = q->device->block;
  const int64_t wanted = tree ? points : (points + block - 1) / block;
  const unsigned grid = unsigned(std::clamp<int64_t>(wanted, 1, int64_t(q->device->sm_count) * 32));
  bind(q->device);
  if (CUresult rc = drv().launch_kernel(fn, grid, 1, 1, unsigned(block), 1, 1, 0, q->stream, params.data(), nullptr);
      rc != 0)
    return cuda_fail(st, rc, ("launching " + p->name).c_str());
  return EMBER_OK;
}

}  // namespace ember::cuda
