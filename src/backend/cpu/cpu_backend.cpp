// The CPU backend plugin's C table (abi.h, v2): host-memory buffers, KIR programs run by the tile
// interpreter (program.cpp, interpreter.cpp, tile_kernels.cpp) or compiled tier-1 kernels,
// matmul through oneDNN (matmul_dnnl.cpp), conv/pooling (conv_dnnl.cpp) and sorting/scans
// (library_loops.cpp). Its queue is immediate (host_queue.h): work runs on the calling thread
// (the core's device worker) plus OpenMP threads before each call returns, so errors come back
// from the call and events are reached when recorded. No exception crosses the C boundary.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>

#include "backend/abi.h"
#include "backend/common/host_memory.h"
#include "backend/common/host_plugin.h"
#include "backend/common/host_services.h"
#include "backend/library_attrs.h"
#include "backend/cpu/library.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/parallel_for.h"
#include "backend/cpu/program.h"
#include "backend/cpu/tier1.h"

using ember::host::set_status;

namespace {

int32_t device_count() { return 1; }

const char* device_name(int32_t) {
  static char name[128];
  static std::once_flag once;
  std::call_once(once, [] {
    const char* target = ember::cpu::simd_target_name();
    const char* pretty = std::strcmp(target, "AVX3") == 0 ? "AVX-512" : target;
    std::snprintf(name, sizeof name, "x86-64 %s (Highway target %s), %d threads", pretty, target,
                  omp_get_max_threads());
  });
  return name;
}

int32_t device_properties(int32_t device, ember_device_properties* out, ember_status* st) {
  if (device != 0) return set_status(st, EMBER_ERR_INVALID, "cpu backend: no device %d", device);
  ember_device_properties p = ember::host::host_device_properties(/*async=*/false);
  std::snprintf(p.name, sizeof p.name, "%s", device_name(0));
  std::snprintf(p.kind, sizeof p.kind, "cpu");
  p.host_threads = uint32_t(std::max(1, omp_get_max_threads()));
  return ember::host::copy_properties(p, out, st);
}

int32_t queue_create(int32_t device, ember_queue* out, ember_status* st) {
  if (device != 0 || !out) return set_status(st, EMBER_ERR_INVALID, "cpu backend: no device %d", device);
  *out = new ember_queue_s(device, ember::host::AsyncSettings{});
  return EMBER_OK;
}

int32_t buffer_alloc(int32_t, size_t bytes, ember_buffer* out, ember_status* st) {
  return ember::host::buffer_alloc(0, bytes, out, st);
}

int32_t program_create(int32_t, const ember_kir_program* prog, ember_program* out, ember_status* st) {
  if (!prog || !out) return set_status(st, EMBER_ERR_INVALID, "cpu backend: program_create without a program");
  try {
    auto* p = new ember::cpu::Program;
    if (int32_t rc = ember::cpu::compile_program(*prog, *p, st)) {
      delete p;
      return rc;
    }
    ember::cpu::tier1_attach(*p, *prog);
    *out = reinterpret_cast<ember_program>(p);
    return EMBER_OK;
  } catch (const std::bad_alloc&) {
    return set_status(st, EMBER_ERR_OUT_OF_MEMORY, "cpu backend: out of memory compiling a kernel");
  } catch (const std::exception& e) {
    return set_status(st, EMBER_ERR_INTERNAL, "cpu backend: %s", e.what());
  }
}

void program_destroy(ember_program p) { delete reinterpret_cast<ember::cpu::Program*>(p); }

int32_t program_run(ember_queue, ember_program p, const ember_kir_launch* l, uint64_t, ember_status* st) {
  if (!p || !l) return set_status(st, EMBER_ERR_INVALID, "cpu backend: program_run without a program or launch");
  try {
    const auto& prog = *reinterpret_cast<const ember::cpu::Program*>(p);
    for (int32_t a = 0; a < l->n_args && size_t(a) < prog.arg_stored.size(); ++a)
      if (prog.arg_stored[size_t(a)]) ember::host::mark_written(l->args[a].buffer);  // host_memory.h
    int32_t rc = EMBER_OK;
    if (ember::cpu::tier1_try_run(prog, *l, st, &rc)) return rc;
    return ember::cpu::run_program(prog, *l, st);
  } catch (const std::bad_alloc&) {
    return set_status(st, EMBER_ERR_OUT_OF_MEMORY, "cpu backend: out of memory running a kernel");
  } catch (const std::exception& e) {
    return set_status(st, EMBER_ERR_INTERNAL, "cpu backend: %s", e.what());
  }
}

// kSerialMacs (parallel_for.h): multiply-adds below which a matmul or convolution runs on the
// calling thread alone. oneDNN would split even a tiny product over every OpenMP thread: a fork
// and join that costs more than the work, and on a busy machine (a thread of the team waiting
// for a core) up to a scheduler time slice per call (measured: a batch-1 ONNX CNN at 2 threads
// beside a compiler, 64 ms a run instead of 0.3 ms). At 2^20 the CIFAR-shaped residual CNN at
// batch 1 (convolutions of 9.4M multiply-adds, each with its layout reorders) took 2.4 ms at 2
// threads against 1.15 at 1 (oneDNN's 32K-value reorders: 51-61 us at 2 threads, 2-8 at 1), and
// the GPT decoder's 64 x 256 x 256 products 136 us against 88, so it was raised to 2^24. Those
// were measured while a queue worker ran the kernels beside the planning host thread: three busy
// threads on two cores. Since host devices run their work on the calling thread (realize.cpp,
// worker_pays), 2^22 is faster at 2 threads (same binary, the threshold the only change,
// 2026-12-06): Fashion-MNIST MLP epoch 1.51-1.56 s at 2^24 against 1.33-1.35 (its 8.4M
// multiply-add products split), CNN epoch on 12,000 images 12.6-12.9 against 11.2-11.4 s,
// `resnet_infer.b1` 1.16-2.1 against 0.90-1.08 ms, `gpt_infer.b1` 1.94-2.46 against 1.67-2.34 ms,
// the training-step rows the same within noise; 2^20 was no better than 2^22.
using ember::cpu::kSerialMacs;
using ember::cpu::kSerialStepMacs;

bool is_recurrence(int32_t op) {
  return op == EMBER_LIB_LSTM_RECURRENCE || op == EMBER_LIB_LSTM_RECURRENCE_BACKWARD || op == EMBER_LIB_GRU_RECURRENCE ||
         op == EMBER_LIB_GRU_RECURRENCE_BACKWARD;
}

int64_t numel(const ember_tensor_desc& d) {
  int64_t n = 1;
  for (int i = 0; i < d.rank; ++i) n *= d.shape[i];
  return n;
}

// The multiply-adds of a contraction call (0 for other ops): matmul out[..., M, N] with K from a;
// a convolution's larger activation times one output channel's weights (every pass of the three).
int64_t contraction_macs(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out) {
  if (op == EMBER_LIB_MATMUL || op == EMBER_LIB_MATMUL_EPILOGUE) {
    if (n_in < 1 || in[0].rank < 1) return 0;
    return numel(out[0]) * in[0].shape[in[0].rank - 1];
  }
  if (op == EMBER_LIB_CONV2D || op == EMBER_LIB_CONV2D_EPILOGUE || op == EMBER_LIB_CONV2D_BACKWARD_DATA ||
      op == EMBER_LIB_CONV2D_BACKWARD_WEIGHTS) {
    if (n_in < 2) return 0;
    const ember_tensor_desc& w = op == EMBER_LIB_CONV2D_BACKWARD_WEIGHTS ? out[0] : in[1];
    if (w.rank != 4 || w.shape[0] == 0) return 0;
    const int64_t act = op == EMBER_LIB_CONV2D_BACKWARD_WEIGHTS ? numel(in[1]) : op == EMBER_LIB_CONV2D_BACKWARD_DATA ? numel(in[0]) : numel(out[0]);
    return act * (numel(w) / w.shape[0]);
  }
  // A recurrence runs one [N, H] x [H, G·H] product per step, in sequence: a step's product is
  // what a thread team would split (the backward's is the same size).
  if (is_recurrence(op)) {
    if (n_in < 1 || in[0].rank != 3) return 0;
    const int64_t gates = op == EMBER_LIB_GRU_RECURRENCE || op == EMBER_LIB_GRU_RECURRENCE_BACKWARD ? 3 : 4;
    return in[0].shape[1] * in[0].shape[2] * (in[0].shape[2] / gates);
  }
  return 0;
}

// The multiply-adds under which a call of `op` runs on one thread.
int64_t serial_below(int32_t op) { return is_recurrence(op) ? kSerialStepMacs : kSerialMacs; }

// Runs the enclosing call with one OpenMP thread when its work is small (restored on exit).
// Primitive caches key on the geometry, and the choice depends on the geometry only, so a cached
// primitive is always run with the thread count it was created with.
class SerialWhenSmall {
 public:
  SerialWhenSmall(int64_t macs, int64_t below) {
    if (macs > 0 && macs < below && !omp_in_parallel() && (previous_ = omp_get_max_threads()) > 1)
      omp_set_num_threads(1);
    else
      previous_ = 0;
  }
  ~SerialWhenSmall() {
    if (previous_ > 0) omp_set_num_threads(previous_);
  }
  SerialWhenSmall(const SerialWhenSmall&) = delete;
  SerialWhenSmall& operator=(const SerialWhenSmall&) = delete;

 private:
  int previous_ = 0;
};

int32_t library_call(ember_queue, int32_t op, const ember_tensor_desc* in, int32_t n_in,
                     const ember_tensor_desc* out, int32_t n_out, const void* attrs, uint64_t, ember_status* st) {
  try {
    for (int32_t k = 0; out && k < n_out; ++k) ember::host::mark_written(out[k].buffer);  // host_memory.h
    const SerialWhenSmall serial(in && out && n_out >= 1 ? contraction_macs(op, in, n_in, out) : 0, serial_below(op));
    if (op == EMBER_LIB_MATMUL) return ember::cpu::matmul(in, n_in, out, n_out, st);
    if (op > EMBER_LIB_MATMUL && op < EMBER_LIB_NUM_OPS &&
        (!in || !out || n_in < 1 || !ember::library_output_count_ok(op, n_out) || !attrs))
      return set_status(st, EMBER_ERR_INVALID, "cpu backend: library op %d: bad arguments", op);
    switch (op) {
      case EMBER_LIB_CONV2D: case EMBER_LIB_CONV2D_BACKWARD_DATA: case EMBER_LIB_CONV2D_BACKWARD_WEIGHTS:
      case EMBER_LIB_CONV2D_EPILOGUE:
        return ember::cpu::conv_library(op, in, n_in, out[0], attrs, st);
      case EMBER_LIB_MATMUL_EPILOGUE: return ember::cpu::matmul_epilogue(in, n_in, out, n_out, attrs, st);
      case EMBER_LIB_MAX_POOL2D:
        if (n_out == 2) {  // values and indices: two passes over the windows
          if (int32_t rc = ember::cpu::pool_library(op, in[0], out[0], attrs, st); rc != EMBER_OK) return rc;
          return ember::cpu::pool_library(EMBER_LIB_MAX_POOL2D_INDICES, in[0], out[1], attrs, st);
        }
        return ember::cpu::pool_library(op, in[0], out[0], attrs, st);
      case EMBER_LIB_MAX_POOL2D_INDICES: case EMBER_LIB_AVG_POOL2D: case EMBER_LIB_AVG_POOL2D_BACKWARD:
        return ember::cpu::pool_library(op, in[0], out[0], attrs, st);
      case EMBER_LIB_MAX_POOL2D_BACKWARD:
        return ember::cpu::max_pool_library(op, in, n_in, out[0], *static_cast<const ember_pool_attrs*>(attrs), st);
      case EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE: {
        const auto* post = static_cast<const ember_epilogue_attrs*>(attrs);
        return ember::cpu::max_pool_library(EMBER_LIB_MAX_POOL2D_BACKWARD, in, n_in, out[0], post->pool, st, post);
      }
      case EMBER_LIB_ARGSORT: case EMBER_LIB_TOPK: case EMBER_LIB_CUMSUM: case EMBER_LIB_CUMPROD:
      case EMBER_LIB_CUMMAX_INDICES: case EMBER_LIB_CUMMIN_INDICES:
        return ember::cpu::sort_scan_library(op, in[0], out[0], attrs, st);
      case EMBER_LIB_FUSED_ATTENTION: return ember::cpu::attention_library(in, n_in, out, n_out, attrs, st);
      case EMBER_LIB_FUSED_ATTENTION_BACKWARD:
        return ember::cpu::attention_backward_library(in, n_in, out, n_out, attrs, st);
      case EMBER_LIB_LSTM_RECURRENCE: case EMBER_LIB_LSTM_RECURRENCE_BACKWARD: case EMBER_LIB_GRU_RECURRENCE:
      case EMBER_LIB_GRU_RECURRENCE_BACKWARD:
        return ember::cpu::recurrence_library(op, in, n_in, out, n_out, attrs, st);
      case EMBER_LIB_INDEX_ADD:
        return ember::cpu::index_add_library(in, n_in, out[0], *static_cast<const ember_index_attrs*>(attrs), st);
      default: break;
    }
    return set_status(st, EMBER_ERR_UNSUPPORTED, "cpu backend: unknown library op %d", op);
  } catch (const std::bad_alloc&) {
    return set_status(st, EMBER_ERR_OUT_OF_MEMORY, "cpu backend: out of memory in library op %d", op);
  } catch (const std::exception& e) {
    return set_status(st, EMBER_ERR_INTERNAL, "cpu backend: library op %d: %s", op, e.what());
  }
}

constexpr ember_backend_v2 table = ember::host::host_plugin_table({
    .name = "cpu",
    .device_count = device_count,
    .device_properties = device_properties,
    .queue_create = queue_create,
    .buffer_alloc = buffer_alloc,
    .program_create = program_create,
    .program_destroy = program_destroy,
    .program_run = program_run,
    .library_call = library_call,
    .attach_host = ember::plugin::attach_host,  // the compiled-program cache, for tier 1
});

}  // namespace

extern "C" __attribute__((visibility("default"))) const ember_backend_v2* ember_backend_entry(uint32_t abi) {
  return abi == EMBER_BACKEND_ABI_VERSION ? &table : nullptr;
}
