// CUDA's built-ins for a host compiler, so that generated CUDA C (backend/common/emit_cuda.h)
// compiles as C++ and runs on real threads: threadIdx and blockIdx per thread, __syncthreads as a
// barrier of the block's threads, warp shuffles through shared slots, atomicCAS, the bit casts.
// Blocks run one after another, so `static` plays __shared__; the barrier and shuffle slots
// belong to the running block. The generated kernels go inside `namespace cuda_emu { ... }` after
// this text; before each block, each of its threads calls cuda_emu_setup with its indices and
// the host's barrier of the block (a function and its argument). Users:
// tests/backend/cuda_emulation_test.cpp and the emulated driver tests/backend/fake_cuda/.
// Only <cmath> and <cstring> are included (the barrier is the host's, atomics are compiler
// built-ins): the emulated driver compiles every kernel, and headers are most of that time.
#pragma once

#include <barrier>

namespace ember::testing {

// The host's side of __syncthreads: the block's std::barrier<> as cuda_emu_setup's argument.
inline void cuda_emu_barrier_wait(void* barrier) { static_cast<std::barrier<>*>(barrier)->arrive_and_wait(); }

// The entry cuda_emu_setup has, for dlsym.
using CudaEmuSetupFn = void (*)(void (*sync)(void*), void* arg, unsigned tid, unsigned bid, unsigned grid,
                                unsigned block);

inline constexpr const char* kCudaHostShim = R"(#include <cmath>
#include <cstring>
namespace cuda_emu {
struct Dim3 { unsigned x = 0, y = 1, z = 1; };
#ifndef CUDA_EMU_THREAD_LOCAL  // real threads per CUDA thread; the emulated driver's fibers share one
#define CUDA_EMU_THREAD_LOCAL thread_local
#endif
inline CUDA_EMU_THREAD_LOCAL Dim3 threadIdx, blockIdx, gridDim, blockDim;
inline void (*block_sync)(void*) = nullptr;  // waits for the block's other threads
inline void* block_sync_arg = nullptr;
inline unsigned long long shuffle_slots[1024];
extern "C" void cuda_emu_setup(void (*sync)(void*), void* arg, unsigned tid, unsigned bid, unsigned grid,
                               unsigned block) {
  block_sync = sync, block_sync_arg = arg;
  threadIdx.x = tid, blockIdx.x = bid, gridDim.x = grid, blockDim.x = block;
}
inline void __syncthreads() { block_sync(block_sync_arg); }
template <class T> T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  shuffle_slots[threadIdx.x] = bits;
  __syncthreads();
  bits = shuffle_slots[threadIdx.x ^ unsigned(lane_mask)];
  __syncthreads();
  T r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}
inline unsigned atomicCAS(unsigned* p, unsigned expected, unsigned desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long u) { double d; std::memcpy(&d, &u, 8); return d; }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((unsigned long long)a * b >> 32); }
}  // namespace cuda_emu
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(n)
#define __shared__ static
)";

}  // namespace ember::testing
