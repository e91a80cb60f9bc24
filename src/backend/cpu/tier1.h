// Tier-1 CPU execution: KIR programs (elementwise, reductions, multi-pass) rendered to C++ (backend/common/emit_c.h),
// compiled by the system compiler into a shared object (in the background, or synchronously with
// EMBER_CPU_TIER=1), cached on disk and loaded with dlopen. In auto mode a program runs on the tile
// interpreter (tier 0) until a fixed run after it became hot, then on its compiled kernel: the
// switch point depends on the sequence of launches only, never on how fast the compiler was or
// whether the kernel was in the disk cache, so the same program gives the same results each run
// (tier 1 may round differently from tier 0: reductions sum in another order).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/abi.h"
#include "backend/common/emit_c.h"

namespace ember::cpu {

struct Program;

struct Tier1 {
  enum State : int { kIdle = 0, kPending = 1, kReady = 2, kFailed = 3 };
  std::string source;  // the emitted translation unit
  std::string name;
  bool reduce = false;  // a reduction / multi-phase kernel (ember_kernel_reduce), else elementwise
  std::vector<uint8_t> row_splats;  // reduce: arguments the rows scheme reads from a splat (emit_c.h)
  std::atomic<ember_c_kernel_fn> fn{nullptr};
  std::atomic<ember_c_reduce_fn> rfn{nullptr};
  std::atomic<int> state{kIdle};
  std::atomic<int64_t> runs{0}, points{0};
  std::atomic<int64_t> switch_run{0};  // auto mode: the run that switches to tier 1 (0: not hot yet)
  std::atomic<bool> switched{false};   // auto mode: that run has passed (tier 1 if it compiled)
};

// Auto mode: a hot program switches this many runs after it became hot; its compile runs in the
// background meanwhile, and the switching run waits for it if it is not done.
constexpr int64_t kTier1SwitchDelayRuns = 8;

// Mode: 0 interpreter only, 1 compile synchronously before the first run, 2 auto (background,
// once a program is hot). From EMBER_CPU_TIER (0|1|auto, default auto) unless set.
int tier_mode();
void set_tier_mode(int mode);  // -1: back to the environment's

// Called when a program is created: renders it if it can run on tier 1 (else leaves p.tier1
// empty) and, in mode 1, compiles it now.
void tier1_attach(Program& p, const ember_kir_program& src);

// Runs the launch on tier 1 if the program's kernel is ready (after the usual launch checks);
// returns false if the caller should run tier 0. Counts runs to decide when a program is hot.
bool tier1_try_run(const Program& p, const ember_kir_launch& l, ember_status* st, int32_t* rc);

}  // namespace ember::cpu
