// Library calls on a CUDA device (runtime.h). Today one: MATMUL as a KIR reduction kernel of the
// plugin's own (a launch over the output's (batch.., M, N) points that reduces K), which keeps
// products on the GPU, exact in the reference's sense (floating products summed in f64 and
// rounded once, integers wrapping in 64 bits), until cuBLASLt takes the floating dtypes (issue
// 19). Every other library call is refused by supports_op, and the core runs it on the host
// fallback.
#include <map>
#include <mutex>

#include "backend/common/plugin_status.h"
#include "backend/cuda/runtime.h"

namespace ember::cuda {

namespace {

// c = sum_k a * b: both operands cast to the accumulation dtype (f64 for floating dtypes, u64
// for u64, i64 for the other integers and bool), multiplied, summed over the reduce dim, cast
// back and stored.
ember_kir_program matmul_program(uint8_t dt, std::vector<ember_kir_inst>& insts, std::vector<uint8_t>& dtypes) {
  const bool floating = dt == EMBER_F32 || dt == EMBER_F64 || dt == EMBER_F16 || dt == EMBER_BF16;
  const uint8_t acc = floating ? uint8_t(EMBER_F64) : dt == EMBER_U64 ? uint8_t(EMBER_U64) : uint8_t(EMBER_I64);
  auto inst = [](uint16_t op, uint8_t dtype, uint8_t phase, int32_t a, int32_t b, int32_t arg) {
    return ember_kir_inst{op, dtype, phase, a, b, -1, arg, 0, 0.0, 0};
  };
  insts = {
      inst(EMBER_KIR_LOAD, dt, 0, -1, -1, 0),     inst(EMBER_KIR_LOAD, dt, 0, -1, -1, 1),
      inst(EMBER_KIR_CAST, acc, 0, 0, -1, -1),    inst(EMBER_KIR_CAST, acc, 0, 1, -1, -1),
      inst(EMBER_KIR_MUL, acc, 0, 2, 3, -1),      inst(EMBER_KIR_ACC_SUM, acc, 1, 4, -1, -1),
      inst(EMBER_KIR_CAST, dt, 1, 5, -1, -1),     inst(EMBER_KIR_STORE, dt, 1, 6, -1, 2),
  };
  dtypes = {dt, dt, dt};
  return ember_kir_program{"matmul", int32_t(insts.size()), insts.data(), 3, dtypes.data(), 1};
}

// The device's matmul program for dtype `dt`, built once.
int32_t matmul_kernel(DeviceContext* d, uint8_t dt, ember_program* out, ember_status* st) {
  static std::mutex mutex;
  // Kept for the process, never destroyed: unloading modules while the process exits would race
  // with the driver's own teardown.
  static auto* programs = new std::map<std::pair<int, uint8_t>, ember_program>;
  std::lock_guard lock(mutex);
  ember_program& p = (*programs)[{d->index, dt}];
  if (!p) {
    std::vector<ember_kir_inst> insts;
    std::vector<uint8_t> dtypes;
    const ember_kir_program prog = matmul_program(dt, insts, dtypes);
    if (int32_t rc = program_create(d->index, &prog, &p, st); rc != EMBER_OK) return rc;
  }
  *out = p;
  return EMBER_OK;
}

// c [batch.., M, N] = a [batch.., M, K] b [batch.., K, N] (batch dims broadcast with stride 0).
int32_t matmul(ember_queue q, const ember_tensor_desc& a, const ember_tensor_desc& b, const ember_tensor_desc& c,
               uint64_t tag, ember_status* st) {
  const int r = c.rank;
  if (r < 2 || r > 8 || a.rank != r || b.rank != r || a.dtype != c.dtype || b.dtype != c.dtype ||
      a.shape[r - 1] != b.shape[r - 2] || a.shape[r - 2] != c.shape[r - 2] || b.shape[r - 1] != c.shape[r - 1])
    return plugin::set_status(st, EMBER_ERR_INVALID, "cuda: matmul: operands of rank %d, %d, %d do not fit", a.rank,
                              b.rank, c.rank);
  ember_program p = nullptr;
  if (int32_t rc = matmul_kernel(q->device, uint8_t(c.dtype), &p, st); rc != EMBER_OK) return rc;
  ember_kir_launch l{};
  l.outer_rank = r;   // batch.., M, N
  l.reduce_rank = 1;  // K
  for (int k = 0; k < r; ++k) l.shape[k] = c.shape[k];
  l.shape[r] = a.shape[r - 1];
  ember_kir_arg args[3] = {};
  const ember_tensor_desc* ts[3] = {&a, &b, &c};
  for (int t = 0; t < 3; ++t) {
    args[t].buffer = ts[t]->buffer;
    args[t].offset = ts[t]->offset;
  }
  for (int k = 0; k < r - 2; ++k)  // batch dims (a broadcast one: stride 0)
    for (int t = 0; t < 3; ++t) args[t].strides[k] = ts[t]->shape[k] == 1 ? 0 : ts[t]->strides[k];
  args[0].strides[r - 2] = a.strides[r - 2], args[0].strides[r] = a.strides[r - 1];  // a: M, K
  args[1].strides[r - 1] = b.strides[r - 1], args[1].strides[r] = b.strides[r - 2];  // b: N, K
  args[2].strides[r - 2] = c.strides[r - 2], args[2].strides[r - 1] = c.strides[r - 1];  // c: M, N
  l.n_args = 3;
  l.args = args;
  return program_run(q, p, &l, tag, st);
}

}  // namespace

bool library_supported(int32_t op) { return op == EMBER_LIB_MATMUL; }

int32_t library_call(ember_queue q, int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                     int32_t n_out, const void*, uint64_t tag, ember_status* st) {
  if (op == EMBER_LIB_MATMUL && n_in == 2 && n_out == 1) return matmul(q, in[0], in[1], out[0], tag, st);
  return plugin::set_status(st, EMBER_ERR_UNSUPPORTED, "cuda: library call %d is not on the GPU yet", op);
}

}  // namespace ember::cuda
