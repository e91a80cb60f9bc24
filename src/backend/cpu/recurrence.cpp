// EMBER_LIB_LSTM_RECURRENCE and EMBER_LIB_GRU_RECURRENCE (and their backwards) for the CPU backend:
// the time loop of one LSTM or GRU layer and direction (abi.h has the formulas). Per step, one
// product of the batch's hidden states with the recurrent weight (gemm_2d: loops for small
// products, oneDNN for large ones), then the gate math over the batch rows with Highway's vector
// exp and tanh (this file is compiled once per target, foreach_target, and picks the best at run
// time; lanes outside the vector functions' range, NaN included, take the C library as the
// reference does). f32 and f64 compute in their dtype; f16 / bf16 are widened to f32 once and
// rounded once at the end.
//
// Threads split the hidden units, not each product: thread p owns units [k0, k1), packs the
// gate rows of w_hh for them once per call (four for LSTM, three for GRU), and per step computes
// its own slice of the product and the gate math of its units; one barrier per step publishes h
// (forward) or the pre-activation gradients (backward).
// oneDNN splitting each [32, 256] x [256, 1024] step product over 2 threads made it slower than on
// one (26.7 against 22.3 ms per 128 products), and a thread's slice of w stays in its cache.
//
// Why a library call: built from ops, every step is a dozen nodes (a product, the chunks, three
// sigmoids and two tanh, the cell update), each planned, dispatched and, for the backward,
// recorded; the tiny LSTM of the benchmark suite (16 steps, batch 4, hidden 32) spent its time in
// that bookkeeping, not in arithmetic.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/cpu/library.h"
#include "backend/cpu/matmul.h"

#ifndef EMBER_CPU_RECURRENCE_DECLS
#define EMBER_CPU_RECURRENCE_DECLS
namespace ember::cpu::rec {

// One batch row of one step, for the units [k0, k1) of a thread (pointers already at k0). Gate g
// of unit j: gi, act and da at [g * gate_stride + j], the thread's product slice at
// [g * pre_stride + j].
template <class T>
struct ForwardRow {
  const T *gi, *pre, *c_prev;
  T *act, *c, *h;
  int64_t gate_stride, pre_stride, units;
};
template <class T>
struct BackwardRow {
  const T *act, *c, *c_prev, *dh, *dc, *dh_next;  // dh_next: dh' (the carry from the later step)
  T *dc_next, *da;                                  // dc_next: in and out
  int64_t gate_stride, units;
};

// GRU: gates r, z, n (act, gi, dgi, db and bias at [g * gate_stride + j], the product slice at
// [g * pre_stride + j]).
template <class T>
struct GruForwardRow {
  const T *gi, *pre, *bias, *h_prev;
  T *act, *hn, *h;
  int64_t gate_stride, pre_stride, units;
};
template <class T>
struct GruBackwardRow {
  const T *act, *hn, *h_prev, *dh, *dh_next;
  T *dgi, *db, *z_carry;  // z_carry: dh_t * z, the part of dh' that skips the product
  int64_t gate_stride, units;
};

}  // namespace ember::cpu::rec
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/recurrence.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ember::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class T>
HWY_INLINE T sigmoid1(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// Lanes of r where x is outside [lo, hi] (or NaN) recomputed by the scalar f.
template <class D, class V, class F>
HWY_INLINE V fix_lanes(D d, V x, V r, hn::TFromD<D> lo, hn::TFromD<D> hi, F f) {
  using T = hn::TFromD<D>;
  if (hn::AllTrue(d, hn::And(hn::Ge(x, hn::Set(d, lo)), hn::Le(x, hn::Set(d, hi))))) return r;
  alignas(64) T xs[64 / sizeof(T)], rs[64 / sizeof(T)];
  hn::Store(x, d, xs);
  hn::Store(r, d, rs);
  for (size_t j = 0; j < hn::Lanes(d); ++j)
    if (!(xs[j] >= lo && xs[j] <= hi)) rs[j] = f(xs[j]);
  return hn::Load(d, rs);
}

// sigmoid(x) = 1 / (1 + exp(-x)) with exp's vector range for -x; tanh over every non-NaN lane.
template <class D, class V>
HWY_INLINE V Sigmoid(D d, V x) {
  using T = hn::TFromD<D>;
  constexpr T lim = sizeof(T) == 4 ? T(87) : T(707);
  const auto one = hn::Set(d, T(1));
  return fix_lanes(d, x, hn::Div(one, hn::Add(one, hn::Exp(d, hn::Neg(x)))), -lim, lim, sigmoid1<T>);
}
template <class D, class V>
HWY_INLINE V TanhV(D d, V x) {
  using T = hn::TFromD<D>;
  constexpr T inf = std::numeric_limits<T>::infinity();
  return fix_lanes(d, x, hn::Tanh(d, x), -inf, inf, [](T v) { return std::tanh(v); });
}

template <class T>
HWY_INLINE void forward_row(const rec::ForwardRow<T>& r) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d)), G = r.gate_stride, P = r.pre_stride;
  int64_t j = 0;
  for (; j + N <= r.units; j += N) {
    const auto i = Sigmoid(d, hn::Add(hn::LoadU(d, r.gi + j), hn::LoadU(d, r.pre + j)));
    const auto f = Sigmoid(d, hn::Add(hn::LoadU(d, r.gi + G + j), hn::LoadU(d, r.pre + P + j)));
    const auto g = TanhV(d, hn::Add(hn::LoadU(d, r.gi + 2 * G + j), hn::LoadU(d, r.pre + 2 * P + j)));
    const auto o = Sigmoid(d, hn::Add(hn::LoadU(d, r.gi + 3 * G + j), hn::LoadU(d, r.pre + 3 * P + j)));
    const auto c = hn::Add(hn::Mul(f, hn::LoadU(d, r.c_prev + j)), hn::Mul(i, g));
    hn::StoreU(i, d, r.act + j);
    hn::StoreU(f, d, r.act + G + j);
    hn::StoreU(g, d, r.act + 2 * G + j);
    hn::StoreU(o, d, r.act + 3 * G + j);
    hn::StoreU(c, d, r.c + j);
    hn::StoreU(hn::Mul(o, TanhV(d, c)), d, r.h + j);
  }
  for (; j < r.units; ++j) {
    const T i = sigmoid1(r.gi[j] + r.pre[j]), f = sigmoid1(r.gi[G + j] + r.pre[P + j]);
    const T g = std::tanh(r.gi[2 * G + j] + r.pre[2 * P + j]), o = sigmoid1(r.gi[3 * G + j] + r.pre[3 * P + j]);
    r.act[j] = i;
    r.act[G + j] = f;
    r.act[2 * G + j] = g;
    r.act[3 * G + j] = o;
    r.c[j] = f * r.c_prev[j] + i * g;
    r.h[j] = o * std::tanh(r.c[j]);
  }
}

template <class T>
HWY_INLINE void backward_row(const rec::BackwardRow<T>& r) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d)), G = r.gate_stride;
  const auto one = hn::Set(d, T(1));
  int64_t j = 0;
  for (; j + N <= r.units; j += N) {
    const auto i = hn::LoadU(d, r.act + j), f = hn::LoadU(d, r.act + G + j);
    const auto g = hn::LoadU(d, r.act + 2 * G + j), o = hn::LoadU(d, r.act + 3 * G + j);
    const auto tc = TanhV(d, hn::LoadU(d, r.c + j));
    const auto dh = hn::Add(hn::LoadU(d, r.dh + j), hn::LoadU(d, r.dh_next + j));
    const auto dc = hn::Add(hn::Add(hn::LoadU(d, r.dc + j), hn::LoadU(d, r.dc_next + j)),
                            hn::Mul(hn::Mul(dh, o), hn::Sub(one, hn::Mul(tc, tc))));
    hn::StoreU(hn::Mul(hn::Mul(dc, g), hn::Mul(i, hn::Sub(one, i))), d, r.da + j);
    hn::StoreU(hn::Mul(hn::Mul(dc, hn::LoadU(d, r.c_prev + j)), hn::Mul(f, hn::Sub(one, f))), d, r.da + G + j);
    hn::StoreU(hn::Mul(hn::Mul(dc, i), hn::Sub(one, hn::Mul(g, g))), d, r.da + 2 * G + j);
    hn::StoreU(hn::Mul(hn::Mul(dh, tc), hn::Mul(o, hn::Sub(one, o))), d, r.da + 3 * G + j);
    hn::StoreU(hn::Mul(dc, f), d, r.dc_next + j);
  }
  for (; j < r.units; ++j) {
    const T i = r.act[j], f = r.act[G + j], g = r.act[2 * G + j], o = r.act[3 * G + j];
    const T tc = std::tanh(r.c[j]);
    const T dh = r.dh[j] + r.dh_next[j];
    const T dc = r.dc[j] + r.dc_next[j] + dh * o * (T(1) - tc * tc);
    r.da[j] = dc * g * (i * (T(1) - i));
    r.da[G + j] = dc * r.c_prev[j] * (f * (T(1) - f));
    r.da[2 * G + j] = dc * i * (T(1) - g * g);
    r.da[3 * G + j] = dh * tc * (o * (T(1) - o));
    r.dc_next[j] = dc * f;
  }
}

template <class T>
HWY_INLINE void gru_forward_row(const rec::GruForwardRow<T>& r) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d)), G = r.gate_stride, P = r.pre_stride;
  int64_t j = 0;
  for (; j + N <= r.units; j += N) {
    const auto br = hn::Add(hn::LoadU(d, r.pre + j), hn::LoadU(d, r.bias + j));
    const auto bz = hn::Add(hn::LoadU(d, r.pre + P + j), hn::LoadU(d, r.bias + G + j));
    const auto bn = hn::Add(hn::LoadU(d, r.pre + 2 * P + j), hn::LoadU(d, r.bias + 2 * G + j));
    const auto rv = Sigmoid(d, hn::Add(hn::LoadU(d, r.gi + j), br));
    const auto z = Sigmoid(d, hn::Add(hn::LoadU(d, r.gi + G + j), bz));
    const auto n = TanhV(d, hn::Add(hn::LoadU(d, r.gi + 2 * G + j), hn::Mul(rv, bn)));
    hn::StoreU(rv, d, r.act + j);
    hn::StoreU(z, d, r.act + G + j);
    hn::StoreU(n, d, r.act + 2 * G + j);
    hn::StoreU(bn, d, r.hn + j);
    hn::StoreU(hn::Add(n, hn::Mul(z, hn::Sub(hn::LoadU(d, r.h_prev + j), n))), d, r.h + j);
  }
  for (; j < r.units; ++j) {
    const T bn = r.pre[2 * P + j] + r.bias[2 * G + j];
    const T rv = sigmoid1(r.gi[j] + (r.pre[j] + r.bias[j]));
    const T z = sigmoid1(r.gi[G + j] + (r.pre[P + j] + r.bias[G + j]));
    const T n = std::tanh(r.gi[2 * G + j] + rv * bn);
    r.act[j] = rv;
    r.act[G + j] = z;
    r.act[2 * G + j] = n;
    r.hn[j] = bn;
    r.h[j] = n + z * (r.h_prev[j] - n);
  }
}

template <class T>
HWY_INLINE void gru_backward_row(const rec::GruBackwardRow<T>& r) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d)), G = r.gate_stride;
  const auto one = hn::Set(d, T(1));
  int64_t j = 0;
  for (; j + N <= r.units; j += N) {
    const auto rv = hn::LoadU(d, r.act + j), z = hn::LoadU(d, r.act + G + j), n = hn::LoadU(d, r.act + 2 * G + j);
    const auto dh = hn::Add(hn::LoadU(d, r.dh + j), hn::LoadU(d, r.dh_next + j));
    const auto da_n = hn::Mul(hn::Mul(dh, hn::Sub(one, z)), hn::Sub(one, hn::Mul(n, n)));
    const auto da_r = hn::Mul(hn::Mul(da_n, hn::LoadU(d, r.hn + j)), hn::Mul(rv, hn::Sub(one, rv)));
    const auto da_z = hn::Mul(hn::Mul(dh, hn::Sub(hn::LoadU(d, r.h_prev + j), n)), hn::Mul(z, hn::Sub(one, z)));
    hn::StoreU(da_r, d, r.dgi + j);
    hn::StoreU(da_z, d, r.dgi + G + j);
    hn::StoreU(da_n, d, r.dgi + 2 * G + j);
    hn::StoreU(da_r, d, r.db + j);
    hn::StoreU(da_z, d, r.db + G + j);
    hn::StoreU(hn::Mul(da_n, rv), d, r.db + 2 * G + j);
    hn::StoreU(hn::Mul(dh, z), d, r.z_carry + j);
  }
  for (; j < r.units; ++j) {
    const T rv = r.act[j], z = r.act[G + j], n = r.act[2 * G + j];
    const T dh = r.dh[j] + r.dh_next[j];
    const T da_n = dh * (T(1) - z) * (T(1) - n * n);
    const T da_r = da_n * r.hn[j] * (rv * (T(1) - rv));
    const T da_z = dh * (r.h_prev[j] - n) * (z * (T(1) - z));
    r.dgi[j] = r.db[j] = da_r;
    r.dgi[G + j] = r.db[G + j] = da_z;
    r.dgi[2 * G + j] = da_n;
    r.db[2 * G + j] = da_n * rv;
    r.z_carry[j] = dh * z;
  }
}

void ForwardRowF32(const rec::ForwardRow<float>& r) { forward_row(r); }
void ForwardRowF64(const rec::ForwardRow<double>& r) { forward_row(r); }
void BackwardRowF32(const rec::BackwardRow<float>& r) { backward_row(r); }
void BackwardRowF64(const rec::BackwardRow<double>& r) { backward_row(r); }
void GruForwardRowF32(const rec::GruForwardRow<float>& r) { gru_forward_row(r); }
void GruForwardRowF64(const rec::GruForwardRow<double>& r) { gru_forward_row(r); }
void GruBackwardRowF32(const rec::GruBackwardRow<float>& r) { gru_backward_row(r); }
void GruBackwardRowF64(const rec::GruBackwardRow<double>& r) { gru_backward_row(r); }

}  // namespace ember::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::cpu {

HWY_EXPORT(ForwardRowF32);
HWY_EXPORT(ForwardRowF64);
HWY_EXPORT(BackwardRowF32);
HWY_EXPORT(BackwardRowF64);
HWY_EXPORT(GruForwardRowF32);
HWY_EXPORT(GruForwardRowF64);
HWY_EXPORT(GruBackwardRowF32);
HWY_EXPORT(GruBackwardRowF64);

using ember::host::set_status;

namespace {

void run_row(const rec::ForwardRow<float>& r) { HWY_DYNAMIC_DISPATCH(ForwardRowF32)(r); }
void run_row(const rec::ForwardRow<double>& r) { HWY_DYNAMIC_DISPATCH(ForwardRowF64)(r); }
void run_row(const rec::BackwardRow<float>& r) { HWY_DYNAMIC_DISPATCH(BackwardRowF32)(r); }
void run_row(const rec::BackwardRow<double>& r) { HWY_DYNAMIC_DISPATCH(BackwardRowF64)(r); }
void run_row(const rec::GruForwardRow<float>& r) { HWY_DYNAMIC_DISPATCH(GruForwardRowF32)(r); }
void run_row(const rec::GruForwardRow<double>& r) { HWY_DYNAMIC_DISPATCH(GruForwardRowF64)(r); }
void run_row(const rec::GruBackwardRow<float>& r) { HWY_DYNAMIC_DISPATCH(GruBackwardRowF32)(r); }
void run_row(const rec::GruBackwardRow<double>& r) { HWY_DYNAMIC_DISPATCH(GruBackwardRowF64)(r); }

// How many threads split the units: all of them when there are enough units for 16 each (one
// AVX-512 vector of f32); the call already runs on one thread when a step's product is small
// (cpu_backend.cpp, SerialWhenSmall).
int unit_parts(int64_t H) {
  if (omp_in_parallel()) return 1;
  return int(std::clamp<int64_t>(std::min<int64_t>(omp_get_max_threads(), H / 16), 1, 64));
}

// Units [k0, k1) of part p of `parts`: multiples of 16 but the last.
std::pair<int64_t, int64_t> unit_range(int64_t H, int p, int parts) {
  const int64_t per = (H + parts - 1) / parts, step = parts == 1 ? per : (per + 15) / 16 * 16;
  return {std::min(H, p * step), std::min(H, (p + 1) * step)};
}

// The threads of one call. body(p, team) runs on each of `parts` threads (inline when 1). A
// step's work goes through team.work(f) and steps end with team.barrier(): a thread whose work
// throws keeps reaching the barriers (no thread may leave the loop early) and every later work is
// skipped; run() rethrows the first exception after the region.
class Team {
 public:
  explicit Team(int parts) : parts_(parts) {}
  int parts() const { return parts_; }

  template <class Body>
  void run(Body&& body) {
    if (parts_ == 1) {
      body(0, *this);
    } else {
#pragma omp parallel num_threads(parts_)
      body(omp_get_thread_num(), *this);
    }
    if (error_) std::rethrow_exception(error_);
  }
  template <class F>
  void work(F&& f) {
    if (failed_) return;
    try {
      f();
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
      failed_ = true;
    }
  }
  void barrier() const {
    if (parts_ > 1) {
#pragma omp barrier
    }
  }

 private:
  int parts_;
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::mutex mutex_;
};

// The gate rows of w [gates * H, H] for units [k0, k0 + units): [gates * units, H], gate-major
// (w itself when one part has every unit).
template <class T>
const T* gate_rows(const T* w, int64_t gates, int64_t H, int64_t k0, int64_t units, std::vector<T>& storage) {
  if (units == H) return w;
  storage.resize(size_t(gates * units * H));
  for (int64_t g = 0; g < gates; ++g)
    std::memcpy(storage.data() + g * units * H, w + (g * H + k0) * H, size_t(units * H) * sizeof(T));
  return storage.data();
}
// The columns [k0, k0 + units) of w [rows, H]: [rows, units] (w itself when they are all of it).
template <class T>
const T* unit_columns(const T* w, int64_t rows, int64_t H, int64_t k0, int64_t units, std::vector<T>& storage) {
  if (units == H) return w;
  storage.resize(size_t(rows * units));
  for (int64_t r = 0; r < rows; ++r) std::memcpy(storage.data() + r * units, w + r * H + k0, size_t(units) * sizeof(T));
  return storage.data();
}

// Each part's dh' ([N, units]) as the columns [k0, k1) of out [N, H].
template <class T>
void gather_parts(const std::vector<std::vector<T>>& parts, int64_t N, int64_t H, T* out) {
  for (size_t p = 0; p < parts.size(); ++p) {
    const auto range = unit_range(H, int(p), int(parts.size()));
    const int64_t units = range.second - range.first;
    for (int64_t n = 0; n < N; ++n)
      std::memcpy(out + n * H + range.first, parts[p].data() + n * units, size_t(units) * sizeof(T));
  }
}

// A step of the forward loop as the drivers below see it: its time index t, the previous step's
// index `prev` (-1 before the first), and this part's units.
struct Step {
  int64_t t, prev, k0, units;
};

// The forward time loop of both cells. Each part packs the gate rows of w for its units; per step
// pre = h_prev wp^T ([N, gates · units], wp read as a column-major [H, gates · units]) and then
// row(step, n, pre row) for each batch row, which writes h[t] for these units.
template <class T, class Row>
void forward_steps(int64_t L, int64_t N, int64_t H, int64_t gates, const T* w, const T* h0, const T* h, bool reverse,
                   Row&& row) {
  Team team(unit_parts(H));
  team.run([&](int p, Team& tm) {
    const auto range = unit_range(H, p, tm.parts());
    const int64_t k0 = range.first, units = range.second - range.first;
    std::vector<T> storage, pre(size_t(N * gates * units));
    const T* wp = units > 0 ? gate_rows(w, gates, H, k0, units, storage) : nullptr;
    for (int64_t s = 0; s < L; ++s) {
      const Step step{reverse ? L - 1 - s : s, s == 0 ? -1 : reverse ? L - s : s - 1, k0, units};
      const T* h_prev = step.prev < 0 ? h0 : h + step.prev * N * H;
      if (units > 0) tm.work([&] {
        gemm_2d(N, gates * units, H, h_prev, H, 1, wp, 1, H, pre.data(), gates * units);
        for (int64_t n = 0; n < N; ++n) row(step, n, pre.data() + n * gates * units);
      });
      tm.barrier();
    }
  });
}

// The backward time loop of both cells, from the last step to the first. Per step row(step, n,
// dh' row, carry row) writes the pre-activation gradients d[t] ([N, gates · H], what multiplies
// w) for this part's units, reading this part's dh' ([N, units], dense: oneDNN took 5x longer for
// a product into columns of a wider matrix); after a barrier, dh' = d[t] w[:, units] plus, when
// `carry`, what the row left in the carry row (the GRU's dh_t * z). The final dh' is dh0.
template <class T, class Row>
void backward_steps(int64_t L, int64_t N, int64_t H, int64_t gates, const T* w, const T* d, bool carry, bool reverse,
                    T* dh0, Row&& row) {
  const int64_t G = gates * H;
  std::vector<std::vector<T>> dh_parts(size_t(unit_parts(H)));
  Team team(int(dh_parts.size()));
  team.run([&](int p, Team& tm) {
    const auto range = unit_range(H, p, tm.parts());
    const int64_t k0 = range.first, units = range.second - range.first;
    std::vector<T>& dh_next = dh_parts[size_t(p)];
    dh_next.assign(size_t(N * units), T(0));
    std::vector<T> storage, carried(carry ? size_t(N * units) : 0);
    const T* wp = units > 0 ? unit_columns(w, G, H, k0, units, storage) : nullptr;
    for (int64_t s = L - 1; s >= 0; --s) {
      const Step step{reverse ? L - 1 - s : s, s == 0 ? -1 : reverse ? L - s : s - 1, k0, units};
      if (units > 0) tm.work([&] {
        for (int64_t n = 0; n < N; ++n)
          row(step, n, dh_next.data() + n * units, carry ? carried.data() + n * units : nullptr);
      });
      tm.barrier();  // d[t] of every part is written
      // (The next step's row reads only this part's dh': no barrier after the product.)
      if (units > 0) tm.work([&] {
        gemm_2d(N, units, G, d + step.t * N * G, G, 1, wp, units, 1, dh_next.data(), units);
        for (size_t i = 0; i < carried.size(); ++i) dh_next[i] += carried[i];
      });
    }
  });
  gather_parts(dh_parts, N, H, dh0);
}

template <class T>
void lstm_forward(const ember_tensor_desc* in, const ember_tensor_desc* out, bool reverse) {
  const int64_t L = in[0].shape[0], N = in[0].shape[1], H = in[0].shape[2] / 4, G = 4 * H;
  const DenseIn<T> gi(in[0]), h0(in[1]), c0(in[2]), w(in[3]);
  DenseOut<T> h(out[0]), c(out[1]), gates(out[2]);
  forward_steps<T>(L, N, H, 4, w.data, h0.data, h.data, reverse, [&](const Step& st, int64_t n, const T* pre) {
    const int64_t row = st.t * N + n;
    const T* c_prev = st.prev < 0 ? c0.data + n * H : c.data + (st.prev * N + n) * H;
    run_row(rec::ForwardRow<T>{gi.data + row * G + st.k0, pre, c_prev + st.k0, gates.data + row * G + st.k0,
                               c.data + row * H + st.k0, h.data + row * H + st.k0, H, st.units, st.units});
  });
  h.finish();
  c.finish();
  gates.finish();
}

template <class T>
void lstm_backward(const ember_tensor_desc* in, const ember_tensor_desc* out, bool reverse) {
  const int64_t L = in[0].shape[0], N = in[0].shape[1], H = in[0].shape[2] / 4, G = 4 * H;
  const DenseIn<T> gates(in[0]), c(in[1]), c0(in[2]), w(in[3]), dh(in[4]), dc(in[5]);
  DenseOut<T> da(out[0]), dh0(out[1]), dc0(out[2]);
  std::vector<T> dc_next(size_t(N * H), T(0));  // dc', each part its own columns
  backward_steps<T>(L, N, H, 4, w.data, da.data, false, reverse, dh0.data,
                    [&](const Step& st, int64_t n, const T* dh_next, T*) {
                      const int64_t row = st.t * N + n, k0 = st.k0;
                      const T* c_prev = st.prev < 0 ? c0.data + n * H : c.data + (st.prev * N + n) * H;
                      run_row(rec::BackwardRow<T>{gates.data + row * G + k0, c.data + row * H + k0, c_prev + k0,
                                                  dh.data + row * H + k0, dc.data + row * H + k0, dh_next,
                                                  dc_next.data() + n * H + k0, da.data + row * G + k0, H, st.units});
                    });
  std::memcpy(dc0.data, dc_next.data(), dc_next.size() * sizeof(T));
  da.finish();
  dh0.finish();
  dc0.finish();
}

template <class T>
void gru_forward(const ember_tensor_desc* in, const ember_tensor_desc* out, bool reverse) {
  const int64_t L = in[0].shape[0], N = in[0].shape[1], H = in[0].shape[2] / 3, G = 3 * H;
  const DenseIn<T> gi(in[0]), h0(in[1]), w(in[2]), bias(in[3]);
  DenseOut<T> h(out[0]), gates(out[1]), hn(out[2]);
  forward_steps<T>(L, N, H, 3, w.data, h0.data, h.data, reverse, [&](const Step& st, int64_t n, const T* pre) {
    const int64_t row = st.t * N + n;
    const T* h_prev = st.prev < 0 ? h0.data + n * H : h.data + (st.prev * N + n) * H;
    run_row(rec::GruForwardRow<T>{gi.data + row * G + st.k0, pre, bias.data + st.k0, h_prev + st.k0,
                                  gates.data + row * G + st.k0, hn.data + row * H + st.k0, h.data + row * H + st.k0,
                                  H, st.units, st.units});
  });
  h.finish();
  gates.finish();
  hn.finish();
}

template <class T>
void gru_backward(const ember_tensor_desc* in, const ember_tensor_desc* out, bool reverse) {
  const int64_t L = in[0].shape[0], N = in[0].shape[1], H = in[0].shape[2] / 3, G = 3 * H;
  const DenseIn<T> gates(in[0]), hn(in[1]), h(in[2]), h0(in[3]), w(in[4]), dh(in[5]);
  DenseOut<T> dgi(out[0]), db(out[1]), dh0(out[2]);
  backward_steps<T>(L, N, H, 3, w.data, db.data, true, reverse, dh0.data,
                    [&](const Step& st, int64_t n, const T* dh_next, T* carry) {
                      const int64_t row = st.t * N + n, k0 = st.k0;
                      const T* h_prev = st.prev < 0 ? h0.data + n * H : h.data + (st.prev * N + n) * H;
                      run_row(rec::GruBackwardRow<T>{gates.data + row * G + k0, hn.data + row * H + k0, h_prev + k0,
                                                     dh.data + row * H + k0, dh_next, dgi.data + row * G + k0,
                                                     db.data + row * G + k0, carry, H, st.units});
                    });
  dgi.finish();
  db.finish();
  dh0.finish();
}

bool shaped(const ember_tensor_desc& d, int64_t a, int64_t b, int64_t c) {
  return d.rank == 3 && d.shape[0] == a && d.shape[1] == b && d.shape[2] == c;
}
bool shaped(const ember_tensor_desc& d, int64_t a, int64_t b) {
  return d.rank == 2 && d.shape[0] == a && d.shape[1] == b;
}

}  // namespace

int32_t recurrence_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                           int32_t n_out, const void* attrs, ember_status* st) {
  const bool lstm = op == EMBER_LIB_LSTM_RECURRENCE || op == EMBER_LIB_LSTM_RECURRENCE_BACKWARD;
  const bool fwd = op == EMBER_LIB_LSTM_RECURRENCE || op == EMBER_LIB_GRU_RECURRENCE;
  const char* what = lstm ? (fwd ? "lstm recurrence" : "lstm recurrence backward")
                          : (fwd ? "gru recurrence" : "gru recurrence backward");
  if (n_in != (fwd ? 4 : 6) || n_out != 3)
    return set_status(st, EMBER_ERR_INVALID, "cpu backend: %s: %d inputs and %d outputs", what, n_in, n_out);
  const int32_t dt = in[0].dtype;
  if (dt != EMBER_F32 && dt != EMBER_F64 && dt != EMBER_F16 && dt != EMBER_BF16)
    return set_status(st, EMBER_ERR_UNSUPPORTED, "cpu backend: %s: dtype %d is not floating", what, dt);
  const int64_t gates = lstm ? 4 : 3;
  const int64_t L = in[0].shape[0], N = in[0].shape[1], G = in[0].shape[2], H = G / gates;
  bool ok = in[0].rank == 3 && G % gates == 0;
  for (int32_t i = 0; i < n_in; ++i) ok = ok && in[i].dtype == dt;
  for (int32_t i = 0; i < n_out; ++i) ok = ok && out[i].dtype == dt;
  if (lstm && fwd) {  // gi, h0, c0, w -> h, c, gates
    ok = ok && shaped(in[1], N, H) && shaped(in[2], N, H) && shaped(in[3], G, H) && shaped(out[0], L, N, H) &&
         shaped(out[1], L, N, H) && shaped(out[2], L, N, G);
  } else if (lstm) {  // gates, c, c0, w, dh, dc -> da, dh0, dc0
    ok = ok && shaped(in[1], L, N, H) && shaped(in[2], N, H) && shaped(in[3], G, H) && shaped(in[4], L, N, H) &&
         shaped(in[5], L, N, H) && shaped(out[0], L, N, G) && shaped(out[1], N, H) && shaped(out[2], N, H);
  } else if (fwd) {  // gi, h0, w, b -> h, gates, hn
    ok = ok && shaped(in[1], N, H) && shaped(in[2], G, H) && in[3].rank == 1 && in[3].shape[0] == G &&
         shaped(out[0], L, N, H) && shaped(out[1], L, N, G) && shaped(out[2], L, N, H);
  } else {  // gates, hn, h, h0, w, dh -> dgi, db, dh0
    ok = ok && shaped(in[1], L, N, H) && shaped(in[2], L, N, H) && shaped(in[3], N, H) && shaped(in[4], G, H) &&
         shaped(in[5], L, N, H) && shaped(out[0], L, N, G) && shaped(out[1], L, N, G) && shaped(out[2], N, H);
  }
  if (!ok) return set_status(st, EMBER_ERR_INVALID, "cpu backend: %s: operand shapes or dtypes mismatch", what);
  const bool reverse = static_cast<const ember_recurrence_attrs*>(attrs)->reverse != 0;
  auto run = [&]<class T>() {
    if (lstm) fwd ? lstm_forward<T>(in, out, reverse) : lstm_backward<T>(in, out, reverse);
    else fwd ? gru_forward<T>(in, out, reverse) : gru_backward<T>(in, out, reverse);
  };
  if (dt == EMBER_F64) run.template operator()<double>();
  else run.template operator()<float>();
  return EMBER_OK;
}

}  // namespace ember::cpu
#endif  // HWY_ONCE
