// Loops over [0, n) that enter an OpenMP parallel region only when they use it. A region with
// `#pragma omp parallel if (false)` is not free: libgomp still sets up a team of one and makes
// futex calls, about 300 ns per region on the development machine against 1 ns for a loop of 8
// additions. That was 6 % of the replayed exported transformer at batch 32 (its 64 tiny per-head
// products per matmul each entered a region) and counts against every small op.
#pragma once

#include <omp.h>

#include <cstdint>

namespace ember::cpu {

// Contractions (matmul, convolution) under this many multiply-adds run on one OpenMP thread
// whatever the thread count (cpu_backend.cpp, SerialWhenSmall, says why): about 60 us of work
// at one thread, where waking a sleeping thread of the team costs 11-19 us spinning and about
// 60 us passive on the development VM (an empty `omp parallel` between 10 us gaps: 66-74 us).
constexpr int64_t kSerialMacs = int64_t(1) << 22;
// A recurrence's per-time-step product under this many multiply-adds runs on one thread (the
// whole call is one parallel region over the hidden units, so one fork per call, not per step).
constexpr int64_t kSerialStepMacs = int64_t(1) << 20;

// body(i) for i in [0, n): over the OpenMP team (static schedule) when `parallel`, else on the
// calling thread.
template <class F>
void parallel_for(bool parallel, int64_t n, F&& body) {
  if (parallel) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
  } else {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

enum class Schedule { Static, Dynamic };

// The same with per-thread state: make() once on each thread that runs iterations, then
// body(state, i); iterations of uneven cost take Schedule::Dynamic.
template <class Make, class F>
void parallel_for_with(bool parallel, int64_t n, Make&& make, F&& body, Schedule schedule = Schedule::Static) {
  if (parallel && schedule == Schedule::Dynamic) {
#pragma omp parallel
    {
      auto state = make();
#pragma omp for schedule(dynamic)
      for (int64_t i = 0; i < n; ++i) body(state, i);
    }
  } else if (parallel) {
#pragma omp parallel
    {
      auto state = make();
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) body(state, i);
    }
  } else {
    auto state = make();
    for (int64_t i = 0; i < n; ++i) body(state, i);
  }
}

}  // namespace ember::cpu
