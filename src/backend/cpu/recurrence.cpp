// EMBER_LIB_LSTM_RECURRENCE(_BACKWARD) for the CPU backend: the time loop of one LSTM layer and
// direction (abi.h has the formulas). Per step, one product of the batch's hidden states with the
// recurrent weight (gemm_2d: loops for small products, oneDNN for large ones), then the gate math
// over the batch rows with Highway's vector exp and tanh (this file is compiled once per target,
// foreach_target, and picks the best at run time; lanes outside the vector functions' range, NaN
// included, take the C library as the reference does). f32 and f64 compute in their dtype;
// f16 / bf16 are widened to f32 once and rounded once at the end.
//
// Threads split the hidden units, not each product: thread p owns units [k0, k1), packs the four
// gate rows of w_hh for them once per call, and per step computes its own slice of the product
// and the gate math of its units; one barrier per step publishes h (forward) or da (backward).
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
  const T *act, *c, *c_prev, *dh, *dc;
  T *dh_next, *dc_next, *da;  // dh_next: in (the carry); dc_next: in and out
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

void ForwardRowF32(const rec::ForwardRow<float>& r) { forward_row(r); }
void ForwardRowF64(const rec::ForwardRow<double>& r) { forward_row(r); }
void BackwardRowF32(const rec::BackwardRow<float>& r) { backward_row(r); }
void BackwardRowF64(const rec::BackwardRow<double>& r) { backward_row(r); }

}  // namespace ember::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::cpu {

HWY_EXPORT(ForwardRowF32);
HWY_EXPORT(ForwardRowF64);
HWY_EXPORT(BackwardRowF32);
HWY_EXPORT(BackwardRowF64);

using ember::host::set_status;

namespace {

void run_row(const rec::ForwardRow<float>& r) { HWY_DYNAMIC_DISPATCH(ForwardRowF32)(r); }
void run_row(const rec::ForwardRow<double>& r) { HWY_DYNAMIC_DISPATCH(ForwardRowF64)(r); }
void run_row(const rec::BackwardRow<float>& r) { HWY_DYNAMIC_DISPATCH(BackwardRowF32)(r); }
void run_row(const rec::BackwardRow<double>& r) { HWY_DYNAMIC_DISPATCH(BackwardRowF64)(r); }

// A descriptor's elements as a dense row-major array of T: the buffer itself when it already is
// one, else a packed copy.
template <class T>
struct DenseIn {
  std::vector<T> copy;
  const T* data = nullptr;
  explicit DenseIn(const ember_tensor_desc& d) {
    constexpr int32_t kDtype = sizeof(T) == 8 ? EMBER_F64 : EMBER_F32;
    if (d.dtype == kDtype && desc_contiguous(d)) {
      data = static_cast<const T*>(d.buffer->data) + d.offset;
    } else {
      copy = pack_dense<T>(d);
      data = copy.data();
    }
  }
};

// An output (a fresh contiguous buffer, abi.h) written as T: in place when its dtype is T, else
// through a vector that finish() rounds into it.
template <class T>
struct DenseOut {
  const ember_tensor_desc& desc;
  std::vector<T> copy;
  T* data = nullptr;
  explicit DenseOut(const ember_tensor_desc& d) : desc(d) {
    constexpr int32_t kDtype = sizeof(T) == 8 ? EMBER_F64 : EMBER_F32;
    if (d.dtype == kDtype && desc_contiguous(d)) {
      data = static_cast<T*>(d.buffer->data) + d.offset;
    } else {
      copy.resize(size_t(desc_numel(d)));
      data = copy.data();
    }
  }
  void finish() {
    if (!copy.empty()) unpack_dense(copy, desc);
  }
};

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

template <class T>
void forward(const ember_tensor_desc* in, const ember_tensor_desc* out, bool reverse) {
  const int64_t L = in[0].shape[0], N = in[0].shape[1], H = in[0].shape[2] / 4, G = 4 * H;
  const DenseIn<T> gi(in[0]), h0(in[1]), c0(in[2]), w(in[3]);
  DenseOut<T> h(out[0]), c(out[1]), gates(out[2]);
  Team team(unit_parts(H));
  team.run([&](int p, Team& tm) {
    const auto range = unit_range(H, p, tm.parts());
    const int64_t k0 = range.first, units = range.second - range.first;
    // The gate rows of w for these units, [4 units, H] (w itself on one thread).
    std::vector<T> packed;
    const T* wp = w.data;
    if (tm.parts() > 1 && units > 0) {
      packed.resize(size_t(4 * units * H));
      for (int64_t g = 0; g < 4; ++g)
        std::memcpy(packed.data() + g * units * H, w.data + (g * H + k0) * H, size_t(units * H) * sizeof(T));
      wp = packed.data();
    }
    std::vector<T> pre(size_t(N * 4 * units));
    for (int64_t s = 0; s < L; ++s) {
      const int64_t t = reverse ? L - 1 - s : s, prev = reverse ? t + 1 : t - 1;
      const T* h_prev = s == 0 ? h0.data : h.data + prev * N * H;
      const T* c_prev = s == 0 ? c0.data : c.data + prev * N * H;
      if (units > 0) tm.work([&] {
        // pre = h_prev wp^T: wp [4 units, H] read as a column-major [H, 4 units].
        gemm_2d(N, 4 * units, H, h_prev, H, 1, wp, 1, H, pre.data(), 4 * units);
        for (int64_t n = 0; n < N; ++n) {
          const int64_t row = (t * N + n);
          run_row(rec::ForwardRow<T>{gi.data + row * G + k0, pre.data() + n * 4 * units, c_prev + n * H + k0,
                                     gates.data + row * G + k0, c.data + row * H + k0, h.data + row * H + k0, H,
                                     units, units});
        }
      });
      tm.barrier();
    }
  });
  h.finish();
  c.finish();
  gates.finish();
}

template <class T>
void backward(const ember_tensor_desc* in, const ember_tensor_desc* out, bool reverse) {
  const int64_t L = in[0].shape[0], N = in[0].shape[1], H = in[0].shape[2] / 4, G = 4 * H;
  const DenseIn<T> gates(in[0]), c(in[1]), c0(in[2]), w(in[3]), dh(in[4]), dc(in[5]);
  DenseOut<T> da(out[0]), dh0(out[1]), dc0(out[2]);
  // The carries between steps, zero before the last: dh' = da w of the later step, and dc'. Each
  // part owns its units' columns of both; dh' is a dense [N, units] per part, which its product
  // writes (oneDNN took 5x longer for a product into columns of a wider matrix).
  std::vector<T> dc_next(size_t(N * H), T(0));
  std::vector<std::vector<T>> dh_parts(size_t(unit_parts(H)));
  Team team(int(dh_parts.size()));
  team.run([&](int p, Team& tm) {
    const auto range = unit_range(H, p, tm.parts());
    const int64_t k0 = range.first, units = range.second - range.first;
    std::vector<T>& dh_next = dh_parts[size_t(p)];
    dh_next.assign(size_t(N * units), T(0));
    // w's columns for these units, [4H, units] (w itself on one thread).
    std::vector<T> packed;
    const T* wp = w.data;
    if (tm.parts() > 1 && units > 0) {
      packed.resize(size_t(G * units));
      for (int64_t r = 0; r < G; ++r)
        std::memcpy(packed.data() + r * units, w.data + r * H + k0, size_t(units) * sizeof(T));
      wp = packed.data();
    }
    for (int64_t s = L - 1; s >= 0; --s) {
      const int64_t t = reverse ? L - 1 - s : s, prev = reverse ? t + 1 : t - 1;
      const T* c_prev = s == 0 ? c0.data : c.data + prev * N * H;
      if (units > 0) tm.work([&] {
        for (int64_t n = 0; n < N; ++n) {
          const int64_t row = t * N + n;
          run_row(rec::BackwardRow<T>{gates.data + row * G + k0, c.data + row * H + k0, c_prev + n * H + k0,
                                      dh.data + row * H + k0, dc.data + row * H + k0, dh_next.data() + n * units,
                                      dc_next.data() + n * H + k0, da.data + row * G + k0, H, units});
        }
      });
      tm.barrier();
      // dh'[:, k0:k1] = da[t] w[:, k0:k1]: [N, 4H] x [4H, units] (every part's da of this step).
      // (The next step's gate math reads only this part's dh': no barrier after it.)
      if (units > 0)
        tm.work([&] { gemm_2d(N, units, G, da.data + t * N * G, G, 1, wp, units, 1, dh_next.data(), units); });
    }
  });
  for (size_t p = 0; p < dh_parts.size(); ++p) {
    const auto range = unit_range(H, int(p), int(dh_parts.size()));
    const int64_t units = range.second - range.first;
    for (int64_t n = 0; n < N; ++n)
      std::memcpy(dh0.data + n * H + range.first, dh_parts[p].data() + n * units, size_t(units) * sizeof(T));
  }
  std::memcpy(dc0.data, dc_next.data(), dc_next.size() * sizeof(T));
  da.finish();
  dh0.finish();
  dc0.finish();
}

bool shaped(const ember_tensor_desc& d, int64_t a, int64_t b, int64_t c) {
  return d.rank == 3 && d.shape[0] == a && d.shape[1] == b && d.shape[2] == c;
}
bool shaped(const ember_tensor_desc& d, int64_t a, int64_t b) {
  return d.rank == 2 && d.shape[0] == a && d.shape[1] == b;
}

}  // namespace

int32_t lstm_recurrence_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                                int32_t n_out, const void* attrs, ember_status* st) {
  const bool fwd = op == EMBER_LIB_LSTM_RECURRENCE;
  const char* what = fwd ? "lstm recurrence" : "lstm recurrence backward";
  if (n_in != (fwd ? 4 : 6) || n_out != 3)
    return set_status(st, EMBER_ERR_INVALID, "cpu backend: %s: %d inputs and %d outputs", what, n_in, n_out);
  const int32_t dt = in[0].dtype;
  if (dt != EMBER_F32 && dt != EMBER_F64 && dt != EMBER_F16 && dt != EMBER_BF16)
    return set_status(st, EMBER_ERR_UNSUPPORTED, "cpu backend: %s: dtype %d is not floating", what, dt);
  const int64_t L = in[0].shape[0], N = in[0].shape[1], G = in[0].shape[2], H = G / 4;
  bool ok = in[0].rank == 3 && G % 4 == 0 && shaped(in[3], G, H);
  for (int32_t i = 0; i < n_in; ++i) ok = ok && in[i].dtype == dt;
  for (int32_t i = 0; i < n_out; ++i) ok = ok && out[i].dtype == dt;
  if (fwd) {
    ok = ok && shaped(in[1], N, H) && shaped(in[2], N, H) && shaped(out[0], L, N, H) && shaped(out[1], L, N, H) &&
         shaped(out[2], L, N, G);
  } else {
    ok = ok && shaped(in[1], L, N, H) && shaped(in[2], N, H) && shaped(in[4], L, N, H) && shaped(in[5], L, N, H) &&
         shaped(out[0], L, N, G) && shaped(out[1], N, H) && shaped(out[2], N, H);
  }
  if (!ok) return set_status(st, EMBER_ERR_INVALID, "cpu backend: %s: operand shapes or dtypes mismatch", what);
  const bool reverse = static_cast<const ember_recurrence_attrs*>(attrs)->reverse != 0;
  if (dt == EMBER_F64) {
    fwd ? forward<double>(in, out, reverse) : backward<double>(in, out, reverse);
  } else {
    fwd ? forward<float>(in, out, reverse) : backward<float>(in, out, reverse);
  }
  return EMBER_OK;
}

}  // namespace ember::cpu
#endif  // HWY_ONCE
