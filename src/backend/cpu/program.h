// Shared definitions of the CPU backend's KIR tile interpreter: the compiled form of a program
// (instruction lists per phase, register kinds), the tile state the SIMD kernels work on, and
// the entry points between the planner (interpreter.cpp), the per-target kernels
// (tile_kernels.cpp) and program analysis (program.cpp).
//
// A tile is up to kTile consecutive points of the iteration space. Every instruction owns one
// register slot of kTile values; values are held widened as abi.h allows: f32 for f32/f16/bf16,
// f64, i32 for i32/i16/i8/u16/u8/bool, i64 for i64/u32, and u64 (unsigned semantics).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/abi.h"

namespace ember::cpu {

struct Tier1;  // tier1.h

constexpr size_t kTile = 512;                  // points per tile
constexpr size_t kSlotBytes = kTile * 8;       // one register: kTile values of up to 8 bytes
constexpr int64_t kParallelMinPoints = 32768;  // below this a launch runs on one thread

enum RegKind : uint8_t { kF32 = 0, kF64, kI32, kI64, kU64 };
inline bool is_wide_kind(uint8_t k) { return k == kF64 || k == kI64 || k == kU64; }

inline bool is_float_dtype(uint8_t dt) {
  return dt == EMBER_F32 || dt == EMBER_F64 || dt == EMBER_F16 || dt == EMBER_BF16;
}
inline RegKind reg_kind(uint8_t dt) {
  switch (dt) {
    case EMBER_F64: return kF64;
    case EMBER_F32: case EMBER_F16: case EMBER_BF16: return kF32;
    case EMBER_I64: case EMBER_U32: return kI64;
    case EMBER_U64: return kU64;
    default: return kI32;
  }
}
inline bool is_acc_op(uint16_t op) { return op >= EMBER_KIR_ACC_SUM && op <= EMBER_KIR_ACC_ARGMIN; }
inline bool is_arg_acc(uint16_t op) { return op == EMBER_KIR_ACC_ARGMAX || op == EMBER_KIR_ACC_ARGMIN; }

// A program after analysis (program.cpp).
struct Program {
  std::string name;
  std::vector<ember_kir_inst> insts;
  std::vector<uint8_t> arg_dtypes;
  std::vector<uint8_t> kind;         // register kind of each instruction's result
  std::vector<int32_t> uniform;      // same value at every point (consts and ALU ops on them)
  std::vector<std::vector<int32_t>> phase;  // the other non-ACC instructions of each phase, in order
                                            // (always at least phases 0 and 1)
  int max_phase = 0;                 // highest phase of any instruction (see abi.h: 2k = pass k)
  std::vector<int32_t> accs;         // ACC_* instructions
  std::vector<uint8_t> zero_copy;    // LOAD whose value is dead before any later STORE, so it
                                     // may be read in place from the argument's memory
  std::vector<uint8_t> arg_in_phase[2];  // argument whose memory a row ([0]: even phases) or a
                                         // per-outer-point ([1]: odd phases) instruction touches
  std::vector<uint8_t> arg_uniform;      // argument read by LOAD_UNIFORM (one element, at its offset)
  std::vector<uint8_t> arg_stored;       // argument a STORE writes
  bool has_reduction = false;
  std::shared_ptr<Tier1> tier1;      // the compiled kernel, if the program can have one (tier1.h)
};

// Where the points of a tile live in one argument: element offset of point i is
// base + offs[i] when offs is set, else base + i * step.
struct ArgAddr {
  int64_t base = 0;
  int64_t step = 0;
  const int64_t* offs = nullptr;
};

struct TileError {
  int32_t code = 0;
  const char* what = nullptr;
  long long value = 0, extra = 0;
};

// One tile being interpreted. src[k] is where instruction k's values are read from: its own
// register slot, or (contiguous loads in the register's format) the argument's memory itself.
struct Tile {
  const Program* prog = nullptr;
  const ember_kir_launch* launch = nullptr;
  const ArgAddr* addr = nullptr;  // per argument
  const void** src = nullptr;     // per instruction
  char* regs = nullptr;           // per instruction: kSlotBytes, 64-byte aligned
  char* tmp = nullptr;            // one spare slot (store conversions)
  size_t len = 0;
};

// ---- per-target kernels (tile_kernels.cpp, Highway runtime dispatch) -----------------------
// Runs instructions list[0..n) over the tile; false (and err filled) on a KIR error.
bool run_list(const Tile& t, const int32_t* list, size_t n, TileError* err);
// Lane-wise accumulation: lane i folds in x[i] (argmax/argmin index idx0 + i * idx_step).
// kind is the operand's register kind; val holds lanes of that kind, idx lanes of i64.
void acc_update(uint16_t op, uint8_t kind, void* val, int64_t* idx, const void* x, size_t n,
                int64_t idx0, int64_t idx_step);
// Name of the SIMD target chosen at run time ("AVX3", "AVX2", "SCALAR"...).
const char* simd_target_name();
// out[i] = erf(a[i]) as KIR ERF computes it (`a` and `out` do not overlap).
void erf_array(const float* a, float* out, size_t n);
void erf_array(const double* a, double* out, size_t n);

// Calls fn(t0, t1) over contiguous ranges of [0, tasks): one range per OpenMP thread when the
// launch covers at least kParallelMinPoints points (and not already inside a parallel region),
// else the whole range on the calling thread. Ranges do not depend on timing, only on the team size.
template <class F>
void run_tasks(int64_t tasks, int64_t points, F&& fn) {
  const int threads = omp_get_max_threads();
  if (points >= kParallelMinPoints && tasks > 1 && threads > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(int(std::min<int64_t>(threads, tasks)))
    {
      const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
      fn(tasks * id / nt, tasks * (id + 1) / nt);
    }
  } else {
    fn(int64_t(0), tasks);
  }
}

// ---- analysis and execution -----------------------------------------------------------------
int32_t compile_program(const ember_kir_program& src, Program& out, ember_status* st);
int32_t run_program(const Program& p, const ember_kir_launch& l, ember_status* st);
// The launch checks run_program starts with (argument count, ranks, views inside buffers).
int32_t check_launch(const Program& p, const ember_kir_launch& l, ember_status* st);

}  // namespace ember::cpu
