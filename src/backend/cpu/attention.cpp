// EMBER_LIB_FUSED_ATTENTION(_BACKWARD) for the CPU backend: softmax(q k^T * scale [+ mask]
// [causal]) v with flash-style tiling. Each task owns one (batch, block of queries): it walks the blocks of keys
// keeping a running maximum and sum per query row (online softmax), so no L x S buffer exists;
// per thread it holds one block of scores, one of probabilities' outputs and the query block.
// Block products are register-blocked SIMD loops (4 rows x 2 vectors) written with Highway, which
// compiles this file once per target (foreach_target) and picks the best at run time; exp is
// Highway's vector exp. f32 and f64 compute in their own dtype, f16/bf16 in f32. OpenMP over the
// (batch, query block) tasks; results do not depend on the thread count.
// EMBER_LIB_FUSED_ATTENTION_BACKWARD recomputes the probabilities block by block from the saved
// logsumexp in two passes: one task per (batch, key block) accumulates dk and dv over the query
// blocks, then one per (batch, query block) accumulates dq over the key blocks (each task owns
// its rows: no atomics, no L x S buffer).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/cpu/library.h"
#include "backend/cpu/parallel_for.h"
#include "backend/cpu/subnormal_inputs.h"
#include "ember/dtype.h"

#ifndef EMBER_CPU_ATTENTION_DECLS
#define EMBER_CPU_ATTENTION_DECLS
namespace ember::cpu::attn {

constexpr int64_t kBlockQ = 32;   // queries per task (a multiple of 4)
constexpr int64_t kBlockK = 128;  // keys per block (a multiple of every vector length)
constexpr int64_t kPad = 16;      // padded row length of packed k^T and v: a multiple of the lanes

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Elements [c0, c0 + n) of row (b, r) of a rank-3 descriptor, converted to T.
template <class T>
void read_row(const ember_tensor_desc& d, int64_t b, int64_t r, int64_t c0, int64_t n, T* dst) {
  if (n <= 0) return;
  const int64_t base = d.offset + b * d.strides[0] + r * d.strides[1] + c0 * d.strides[2], s = d.strides[2];
  const void* p = d.buffer->data;
  switch (d.dtype) {
    case EMBER_F32: {
      const float* x = static_cast<const float*>(p) + base;
      for (int64_t i = 0; i < n; ++i) dst[i] = T(x[i * s]);
      break;
    }
    case EMBER_F64: {
      const double* x = static_cast<const double*>(p) + base;
      for (int64_t i = 0; i < n; ++i) dst[i] = T(x[i * s]);
      break;
    }
    case EMBER_F16: {
      const uint16_t* x = static_cast<const uint16_t*>(p) + base;
      for (int64_t i = 0; i < n; ++i) dst[i] = T(ember::half_to_float(x[i * s]));
      break;
    }
    default: {
      const uint16_t* x = static_cast<const uint16_t*>(p) + base;
      for (int64_t i = 0; i < n; ++i) dst[i] = T(ember::bf16_to_float(x[i * s]));
      break;
    }
  }
}

// Element (b, i) of a rank-2 floating descriptor.
inline double load2(const ember_tensor_desc& d, int64_t b, int64_t i) {
  double v = 0;
  const ember_tensor_desc row{d.buffer, d.offset + b * d.strides[0] + i * d.strides[1], d.dtype, 3, {1, 1, 1}, {0, 0, 0}};
  read_row(row, 0, 0, 0, 1, &v);
  return v;
}

// The operands of one call, k and v already packed (dense, zero-padded rows).
template <class T>
struct Args {
  int64_t B, L, S, E, Ev, Sp, Evp;
  const ember_tensor_desc* q;
  const ember_tensor_desc* mask;  // null: none
  const T* kt;                    // [B, E, Sp]: k transposed
  const T* vp;                    // [B, S, Evp]
  T* o;                           // [B, L, Ev]
  T* lse;                         // [B, L]
  T scale;
  bool causal;
};

// The gradient's operands, packed dense with zero-padded rows (Lp, Sp: row counts and
// transposed row lengths; Ep, Evp: padded row lengths). t = transposed.
template <class T>
struct BwdArgs {
  int64_t B, L, S, E, Ev, Lp, Sp, Ep, Evp;
  // qp [B,Lp,Ep], qt [B,E,Lp], kp [B,Sp,Ep], kt [B,E,Sp], vp [B,Sp,Evp], vt [B,Ev,Sp],
  // dop [B,Lp,Evp], dot [B,Ev,Lp]
  const T *qp, *qt, *kp, *kt, *vp, *vt, *dop, *dot;
  const T *lse, *d;               // [B, Lp]
  const ember_tensor_desc* mask;  // null: none
  T *dq, *dk, *dv;                // [B,Lp,Ep] [B,Sp,Ep] [B,Sp,Evp], zero-initialized
  T scale;
  bool causal;
};

}  // namespace ember::cpu::attn
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ember::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using attn::Args;

// C[r][c] (= or +=) sum_k A[r][k] * Bm[k][c] for 4 rows r and columns c < ncols (a multiple of
// the vector length): 4 x 2 (then 4 x 1) accumulator vectors, one load of Bm per 4 FMAs.
template <class T>
HWY_INLINE void gemm4(const T* HWY_RESTRICT A, int64_t lda, int64_t K, const T* HWY_RESTRICT Bm, int64_t ldb,
                      int64_t ncols, T* HWY_RESTRICT C, int64_t ldc, bool accumulate) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const T *a0 = A, *a1 = A + lda, *a2 = A + 2 * lda, *a3 = A + 3 * lda;
  T *c0 = C, *c1 = C + ldc, *c2 = C + 2 * ldc, *c3 = C + 3 * ldc;
  int64_t c = 0;
  for (; c + 2 * N <= ncols; c += 2 * N) {
    auto z = hn::Zero(d);
    auto x00 = accumulate ? hn::LoadU(d, c0 + c) : z, x01 = accumulate ? hn::LoadU(d, c0 + c + N) : z;
    auto x10 = accumulate ? hn::LoadU(d, c1 + c) : z, x11 = accumulate ? hn::LoadU(d, c1 + c + N) : z;
    auto x20 = accumulate ? hn::LoadU(d, c2 + c) : z, x21 = accumulate ? hn::LoadU(d, c2 + c + N) : z;
    auto x30 = accumulate ? hn::LoadU(d, c3 + c) : z, x31 = accumulate ? hn::LoadU(d, c3 + c + N) : z;
    for (int64_t k = 0; k < K; ++k) {
      const T* b = Bm + k * ldb + c;
      const auto b0 = hn::LoadU(d, b), b1 = hn::LoadU(d, b + N);
      auto a = hn::Set(d, a0[k]);
      x00 = hn::MulAdd(a, b0, x00);
      x01 = hn::MulAdd(a, b1, x01);
      a = hn::Set(d, a1[k]);
      x10 = hn::MulAdd(a, b0, x10);
      x11 = hn::MulAdd(a, b1, x11);
      a = hn::Set(d, a2[k]);
      x20 = hn::MulAdd(a, b0, x20);
      x21 = hn::MulAdd(a, b1, x21);
      a = hn::Set(d, a3[k]);
      x30 = hn::MulAdd(a, b0, x30);
      x31 = hn::MulAdd(a, b1, x31);
    }
    hn::StoreU(x00, d, c0 + c);
    hn::StoreU(x01, d, c0 + c + N);
    hn::StoreU(x10, d, c1 + c);
    hn::StoreU(x11, d, c1 + c + N);
    hn::StoreU(x20, d, c2 + c);
    hn::StoreU(x21, d, c2 + c + N);
    hn::StoreU(x30, d, c3 + c);
    hn::StoreU(x31, d, c3 + c + N);
  }
  for (; c < ncols; c += N) {
    auto z = hn::Zero(d);
    auto x0 = accumulate ? hn::LoadU(d, c0 + c) : z, x1 = accumulate ? hn::LoadU(d, c1 + c) : z;
    auto x2 = accumulate ? hn::LoadU(d, c2 + c) : z, x3 = accumulate ? hn::LoadU(d, c3 + c) : z;
    for (int64_t k = 0; k < K; ++k) {
      const auto b0 = hn::LoadU(d, Bm + k * ldb + c);
      x0 = hn::MulAdd(hn::Set(d, a0[k]), b0, x0);
      x1 = hn::MulAdd(hn::Set(d, a1[k]), b0, x1);
      x2 = hn::MulAdd(hn::Set(d, a2[k]), b0, x2);
      x3 = hn::MulAdd(hn::Set(d, a3[k]), b0, x3);
    }
    hn::StoreU(x0, d, c0 + c);
    hn::StoreU(x1, d, c1 + c);
    hn::StoreU(x2, d, c2 + c);
    hn::StoreU(x3, d, c3 + c);
  }
}

// s[j] <- exp(s[j] - m) over n lanes (a multiple of the vector length; -inf gives 0, so padding
// lanes set to -inf add nothing); returns their sum.
template <class T>
HWY_INLINE T exp_row(T* HWY_RESTRICT s, int64_t n, T m) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vm = hn::Set(d, m);
  auto acc = hn::Zero(d);
  for (int64_t j = 0; j < n; j += N) {
    const auto p = hn::Exp(d, hn::Sub(hn::LoadU(d, s + j), vm));
    acc = hn::Add(acc, p);
    hn::StoreU(p, d, s + j);
  }
  return hn::GetLane(hn::SumOfLanes(d, acc));
}

// One (batch b, query block starting at i0) task. Buffers: qs [BQ, E], s [BQ, BK], acc [BQ, Evp],
// mrow [BK], m and l [BQ].
template <class T>
void attention_block(const Args<T>& a, int64_t b, int64_t i0, T* qs, T* s, T* acc, T* mrow, T* m, T* l) {
  using attn::kBlockK;
  using attn::kBlockQ;
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const T inf = std::numeric_limits<T>::infinity();
  const int64_t nq = std::min(kBlockQ, a.L - i0), nq4 = attn::round_up(nq, 4), E = a.E, Evp = a.Evp;
  for (int64_t r = 0; r < nq4; ++r) {
    T* qr = qs + r * E;
    if (r < nq) {
      attn::read_row(*a.q, b, i0 + r, 0, E, qr);
      for (int64_t e = 0; e < E; ++e) qr[e] *= a.scale;
    } else {
      std::fill(qr, qr + E, T(0));
    }
    m[r] = -inf;
    l[r] = 0;
  }
  std::fill(acc, acc + nq4 * Evp, T(0));
  const T* kt = a.kt + b * E * a.Sp;
  const T* vp = a.vp + b * a.S * Evp;
  const int64_t kend = a.causal ? std::min(a.S, i0 + nq) : a.S;  // keys past the last query's are hidden
  for (int64_t j0 = 0; j0 < kend; j0 += kBlockK) {
    const int64_t nk = std::min(kBlockK, kend - j0), nc = attn::round_up(nk, N);
    for (int64_t r0 = 0; r0 < nq4; r0 += 4) gemm4(qs + r0 * E, E, E, kt + j0, a.Sp, nc, s + r0 * kBlockK, kBlockK, false);
    for (int64_t r = 0; r < nq4; ++r) {
      T* sr = s + r * kBlockK;
      if (r >= nq) {  // padding rows take no part
        std::fill(sr, sr + nc, T(0));
        continue;
      }
      const int64_t i = i0 + r;
      if (a.mask) {
        attn::read_row(*a.mask, b, i, j0, nk, mrow);
        for (int64_t j = 0; j < nk; ++j) sr[j] += mrow[j];
      }
      if (a.causal)
        for (int64_t j = std::max<int64_t>(0, i + 1 - j0); j < nk; ++j) sr[j] = -inf;
      for (int64_t j = nk; j < nc; ++j) sr[j] = -inf;
      T mx = -inf;
      for (int64_t j = 0; j < nk; ++j) mx = std::max(mx, sr[j]);
      const T m_new = std::max(m[r], mx);
      if (m_new == -inf) {  // nothing visible yet in this row
        std::fill(sr, sr + nc, T(0));
        continue;
      }
      const T corr = std::exp(m[r] - m_new);
      l[r] = l[r] * corr + exp_row(sr, nc, m_new);
      m[r] = m_new;
      if (corr != T(1))
        for (int64_t c = 0; c < Evp; ++c) acc[r * Evp + c] *= corr;
    }
    for (int64_t r0 = 0; r0 < nq4; r0 += 4)
      gemm4(s + r0 * kBlockK, kBlockK, nk, vp + j0 * Evp, Evp, Evp, acc + r0 * Evp, Evp, true);
  }
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (int64_t r = 0; r < nq; ++r) {
    const int64_t i = i0 + r;
    T* o = a.o + (b * a.L + i) * a.Ev;
    const bool none = l[r] == T(0);
    const T inv = none ? T(0) : T(1) / l[r];
    for (int64_t c = 0; c < a.Ev; ++c) o[c] = none ? nan : acc[r * Evp + c] * inv;
    a.lse[b * a.L + i] = none ? -inf : m[r] + std::log(l[r]);
  }
}

template <class T>
void attention_impl(const Args<T>& a) {
  using attn::kBlockK;
  using attn::kBlockQ;
  const int64_t nqb = (a.L + kBlockQ - 1) / kBlockQ, tasks = a.B * nqb;
  [[maybe_unused]] const bool parallel =
      tasks > 1 && a.L * std::max<int64_t>(a.S, 1) * (a.E + a.Ev) * a.B >= (int64_t(1) << 15) &&
      !omp_in_parallel();
  struct Scratch {
    std::vector<T> qs, s, acc, mrow, m, l;
  };
  parallel_for_with(
      parallel, tasks,
      [&] {
        return Scratch{std::vector<T>(static_cast<size_t>(kBlockQ * std::max<int64_t>(a.E, 1))),
                       std::vector<T>(kBlockQ * kBlockK), std::vector<T>(static_cast<size_t>(kBlockQ * a.Evp)),
                       std::vector<T>(kBlockK), std::vector<T>(kBlockQ), std::vector<T>(kBlockQ)};
      },
      [&](Scratch& w, int64_t t) {
        const SubnormalInputsAsZero daz;  // subnormal probabilities read as zero (subnormal_inputs.h)
        attention_block(a, t / nqb, (t % nqb) * kBlockQ, w.qs.data(), w.s.data(), w.acc.data(), w.mrow.data(),
                        w.m.data(), w.l.data());
      },
      Schedule::Dynamic);
}

// Scores of a block (rows x cols, raw q.k) into probabilities p = exp(s * scale [+ mask] - lse),
// 0 where causal hides a key and in the padding columns (a -inf score gives 0 too).
// rows_are_queries: s[i][j] (pass 2), else s[j][i] (pass 1); r0 / c0: the first query or key
// index of the rows and columns. lse and d are padded to Lp per batch entry.
template <class T>
HWY_INLINE void probabilities(const attn::BwdArgs<T>& a, int64_t b, T* s, int64_t ld, int64_t nrows, int64_t ncols,
                              int64_t ncols_padded, bool rows_are_queries, int64_t r0, int64_t c0, T* mrow) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vscale = hn::Set(d, a.mask ? T(1) : a.scale);
  for (int64_t r = 0; r < nrows; ++r) {
    T* sr = s + r * ld;
    if (a.mask) {
      if (rows_are_queries) {
        attn::read_row(*a.mask, b, r0 + r, c0, ncols, mrow);
      } else {
        for (int64_t c = 0; c < ncols; ++c) attn::read_row(*a.mask, b, c0 + c, r0 + r, 1, mrow + c);
      }
      for (int64_t c = 0; c < ncols; ++c) sr[c] = sr[c] * a.scale + mrow[c];
    }
    const T* lrow = a.lse + b * a.Lp + c0;
    const auto lq = hn::Set(d, rows_are_queries ? a.lse[b * a.Lp + r0 + r] : T(0));
    for (int64_t c = 0; c < ncols_padded; c += N) {
      const auto l = rows_are_queries ? lq : hn::LoadU(d, lrow + c);
      hn::StoreU(hn::Exp(d, hn::Sub(hn::Mul(hn::LoadU(d, sr + c), vscale), l)), d, sr + c);
    }
    if (a.causal) {  // key j is hidden from query i when j > i
      const int64_t k = r0 + r - c0;
      if (rows_are_queries)
        for (int64_t c = std::max<int64_t>(0, k + 1); c < ncols; ++c) sr[c] = 0;
      else
        for (int64_t c = 0; c < std::min(ncols, k); ++c) sr[c] = 0;
    }
    for (int64_t c = ncols; c < ncols_padded; ++c) sr[c] = 0;
  }
}

// dp <- p * (dp - d_i) * scale over a block (d indexed by query, padded like lse).
template <class T>
HWY_INLINE void scores_grad(const attn::BwdArgs<T>& a, int64_t b, const T* p, T* dp, int64_t ld, int64_t nrows,
                            int64_t ncols_padded, bool rows_are_queries, int64_t r0, int64_t c0) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vscale = hn::Set(d, a.scale);
  for (int64_t r = 0; r < nrows; ++r) {
    const auto dq = hn::Set(d, rows_are_queries ? a.d[b * a.Lp + r0 + r] : T(0));
    const T* drow = a.d + b * a.Lp + c0;
    for (int64_t c = 0; c < ncols_padded; c += N) {
      const auto di = rows_are_queries ? dq : hn::LoadU(d, drow + c);
      const auto x = hn::Mul(hn::LoadU(d, p + r * ld + c), hn::Sub(hn::LoadU(d, dp + r * ld + c), di));
      hn::StoreU(hn::Mul(x, vscale), d, dp + r * ld + c);
    }
  }
}

// Pass 1, one (batch, key block) task: dv and dk of its keys over every query block that sees
// them. Pass 2, one (batch, query block) task: dq over the key blocks. Each task owns its rows.
template <class T>
void attention_backward_impl(const attn::BwdArgs<T>& a) {
  using attn::kBlockK;
  using attn::kBlockQ;
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d)), E = a.E, Ev = a.Ev, Ep = a.Ep, Evp = a.Evp;
  const int64_t nkb = (a.S + kBlockK - 1) / kBlockK, nqb = (a.L + kBlockQ - 1) / kBlockQ;
  [[maybe_unused]] const bool parallel =
      a.L * std::max<int64_t>(a.S, 1) * (E + Ev) * a.B >= (int64_t(1) << 15) && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    const SubnormalInputsAsZero daz;  // on each thread of the region (subnormal_inputs.h)
    const size_t blk = size_t(kBlockK * kBlockQ), big = size_t(std::max(kBlockK, kBlockQ));
    std::vector<T> p(blk), dp(blk), mrow(big);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < a.B * nkb; ++t) {  // pass 1: rows = keys, columns = queries
      const int64_t b = t / nkb, j0 = (t % nkb) * kBlockK, nk = std::min(kBlockK, a.S - j0), nk4 = attn::round_up(nk, 4);
      T* dk = a.dk + b * a.Sp * Ep;
      T* dv = a.dv + b * a.Sp * Evp;
      const int64_t i_first = a.causal ? j0 : 0;  // queries before j0 see none of these keys
      for (int64_t i0 = i_first / kBlockQ * kBlockQ; i0 < a.L; i0 += kBlockQ) {
        const int64_t nq = std::min(kBlockQ, a.L - i0), nc = attn::round_up(nq, N);
        const T* kp = a.kp + (b * a.Sp + j0) * Ep;
        for (int64_t r0 = 0; r0 < nk4; r0 += 4)
          gemm4(kp + r0 * Ep, Ep, E, a.qt + b * E * a.Lp + i0, a.Lp, nc, p.data() + r0 * kBlockQ, kBlockQ, false);
        probabilities(a, b, p.data(), kBlockQ, nk, nq, nc, false, j0, i0, mrow.data());
        for (int64_t r0 = 0; r0 < nk4; r0 += 4)  // dp^T[j][i] = v_j . do_i
          gemm4(a.vp + (b * a.Sp + j0 + r0) * Evp, Evp, Ev, a.dot + b * Ev * a.Lp + i0, a.Lp, nc,
                dp.data() + r0 * kBlockQ, kBlockQ, false);
        for (int64_t r0 = 0; r0 < nk4; r0 += 4)  // dv += p^T do
          gemm4(p.data() + r0 * kBlockQ, kBlockQ, nq, a.dop + (b * a.Lp + i0) * Evp, Evp, Evp, dv + (j0 + r0) * Evp,
                Evp, true);
        scores_grad(a, b, p.data(), dp.data(), kBlockQ, nk, nc, false, j0, i0);
        for (int64_t r0 = 0; r0 < nk4; r0 += 4)  // dk += ds^T q
          gemm4(dp.data() + r0 * kBlockQ, kBlockQ, nq, a.qp + (b * a.Lp + i0) * Ep, Ep, Ep, dk + (j0 + r0) * Ep, Ep,
                true);
      }
    }
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < a.B * nqb; ++t) {  // pass 2: rows = queries, columns = keys
      const int64_t b = t / nqb, i0 = (t % nqb) * kBlockQ, nq = std::min(kBlockQ, a.L - i0), nq4 = attn::round_up(nq, 4);
      T* dq = a.dq + b * a.Lp * Ep;
      const int64_t kend = a.causal ? std::min(a.S, i0 + nq) : a.S;
      for (int64_t j0 = 0; j0 < kend; j0 += kBlockK) {
        const int64_t nk = std::min(kBlockK, kend - j0), nc = attn::round_up(nk, N);
        for (int64_t r0 = 0; r0 < nq4; r0 += 4)
          gemm4(a.qp + (b * a.Lp + i0 + r0) * Ep, Ep, E, a.kt + b * E * a.Sp + j0, a.Sp, nc, p.data() + r0 * kBlockK,
                kBlockK, false);
        probabilities(a, b, p.data(), kBlockK, nq, nk, nc, true, i0, j0, mrow.data());
        for (int64_t r0 = 0; r0 < nq4; r0 += 4)  // dp = do v^T
          gemm4(a.dop + (b * a.Lp + i0 + r0) * Evp, Evp, Ev, a.vt + b * Ev * a.Sp + j0, a.Sp, nc,
                dp.data() + r0 * kBlockK, kBlockK, false);
        scores_grad(a, b, p.data(), dp.data(), kBlockK, nq, nc, true, i0, j0);
        for (int64_t r0 = 0; r0 < nq4; r0 += 4)  // dq += ds k
          gemm4(dp.data() + r0 * kBlockK, kBlockK, nk, a.kp + (b * a.Sp + j0) * Ep, Ep, Ep, dq + (i0 + r0) * Ep, Ep,
                true);
      }
    }
  }
}

void AttentionF32(const Args<float>& a) { attention_impl(a); }
void AttentionF64(const Args<double>& a) { attention_impl(a); }
void AttentionBackwardF32(const attn::BwdArgs<float>& a) { attention_backward_impl(a); }
void AttentionBackwardF64(const attn::BwdArgs<double>& a) { attention_backward_impl(a); }

}  // namespace ember::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::cpu {

HWY_EXPORT(AttentionF32);
HWY_EXPORT(AttentionF64);
HWY_EXPORT(AttentionBackwardF32);
HWY_EXPORT(AttentionBackwardF64);

namespace {

// Whether a dense buffer of T can be written straight into `d` (contiguous, of T's dtype).
template <class T>
bool writes_directly(const ember_tensor_desc& d) {
  return (std::is_same_v<T, float> && d.dtype == EMBER_F32) || (std::is_same_v<T, double> && d.dtype == EMBER_F64);
}

template <class T>
void run_attention(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& o_out,
                   const ember_tensor_desc& lse_out, const ember_attention_attrs& at) {
  using attn::kPad;
  const ember_tensor_desc &q = in[0], &k = in[1], &v = in[2];
  attn::Args<T> a{};
  a.B = q.shape[0];
  a.L = q.shape[1];
  a.E = q.shape[2];
  a.S = k.shape[1];
  a.Ev = v.shape[2];
  a.Sp = attn::round_up(std::max<int64_t>(a.S, 1), kPad);
  a.Evp = attn::round_up(std::max<int64_t>(a.Ev, 1), kPad);
  // k transposed to [B, E, Sp] and v to [B, S, Evp], zero padded, in T.
  std::vector<T> kt(size_t(a.B * a.E * a.Sp), T(0)), vp(size_t(a.B * a.S * a.Evp), T(0));
  const int64_t B = a.B, S = a.S, E = a.E, Ev = a.Ev, Sp = a.Sp, Evp = a.Evp;
  parallel_for(B * S * (E + Ev) >= (int64_t(1) << 15) && !omp_in_parallel(), B * S, [&](int64_t bj) {
    const int64_t b = bj / S, j = bj % S;
    std::vector<T> row(size_t(std::max<int64_t>(E, 1)));
    if (E > 0) attn::read_row(k, b, j, 0, E, row.data());
    for (int64_t e = 0; e < E; ++e) kt[size_t((b * E + e) * Sp + j)] = row[size_t(e)];
    if (Ev > 0) attn::read_row(v, b, j, 0, Ev, vp.data() + (b * S + j) * Evp);
  });
  a.kt = kt.data();
  a.vp = vp.data();
  a.q = &q;
  a.mask = n_in > 3 ? &in[3] : nullptr;
  a.scale = T(at.scale);
  a.causal = at.causal != 0;
  // Each output written in place when it has T's dtype, else through a buffer of T.
  const bool o_direct = writes_directly<T>(o_out), lse_direct = writes_directly<T>(lse_out);
  std::vector<T> o_tmp(o_direct ? 0 : size_t(a.B * a.L * a.Ev)), lse_tmp(lse_direct ? 0 : size_t(a.B * a.L));
  a.o = o_direct ? static_cast<T*>(o_out.buffer->data) + o_out.offset : o_tmp.data();
  a.lse = lse_direct ? static_cast<T*>(lse_out.buffer->data) + lse_out.offset : lse_tmp.data();
  if constexpr (std::is_same_v<T, float>)
    HWY_DYNAMIC_DISPATCH(AttentionF32)(a);
  else
    HWY_DYNAMIC_DISPATCH(AttentionF64)(a);
  if (!o_direct) unpack_dense(o_tmp, o_out);
  if (!lse_direct) unpack_dense(lse_tmp, lse_out);
}

// rows x cols of d[b] (rank 3; an element (b, r, c)) into dst [rows_padded x ld] (transposed:
// dst[c][r], ld >= rows), zero elsewhere.
template <class T>
void pack(const ember_tensor_desc& d, int64_t B, int64_t rows, int64_t cols, int64_t rows_padded, int64_t ld,
          bool transposed, std::vector<T>& dst) {
  const int64_t outer = transposed ? cols : rows_padded;
  dst.assign(size_t(B * outer * ld), T(0));
  parallel_for(B * rows * cols >= (int64_t(1) << 15) && !omp_in_parallel(), B * rows, [&](int64_t br) {
    const int64_t b = br / rows, r = br % rows;
    if (!transposed) {
      attn::read_row(d, b, r, 0, cols, dst.data() + (b * rows_padded + r) * ld);
    } else {
      std::vector<T> row(size_t(std::max<int64_t>(cols, 1)));
      attn::read_row(d, b, r, 0, cols, row.data());
      for (int64_t c = 0; c < cols; ++c) dst[size_t((b * cols + c) * ld + r)] = row[size_t(c)];
    }
  });
}

template <class T>
void run_attention_backward(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                            const ember_attention_attrs& at) {
  using attn::kPad;
  const ember_tensor_desc &q = in[0], &k = in[1], &v = in[2], &lse = in[3], &dd = in[4], &dout = in[5];
  attn::BwdArgs<T> a{};
  const int64_t B = q.shape[0], L = q.shape[1], E = q.shape[2], S = k.shape[1], Ev = v.shape[2];
  const int64_t Lp = attn::round_up(std::max<int64_t>(L, 1), kPad), Sp = attn::round_up(std::max<int64_t>(S, 1), kPad);
  const int64_t Ep = attn::round_up(std::max<int64_t>(E, 1), kPad), Evp = attn::round_up(std::max<int64_t>(Ev, 1), kPad);
  a.B = B, a.L = L, a.S = S, a.E = E, a.Ev = Ev, a.Lp = Lp, a.Sp = Sp, a.Ep = Ep, a.Evp = Evp;
  std::vector<T> qp, qt, kp, kt, vp, vt, dop, dot, lse_v, d_v;
  pack(q, B, L, E, Lp, Ep, false, qp);
  pack(q, B, L, E, Lp, Lp, true, qt);
  pack(k, B, S, E, Sp, Ep, false, kp);
  pack(k, B, S, E, Sp, Sp, true, kt);
  pack(v, B, S, Ev, Sp, Evp, false, vp);
  pack(v, B, S, Ev, Sp, Sp, true, vt);
  pack(dout, B, L, Ev, Lp, Evp, false, dop);
  pack(dout, B, L, Ev, Lp, Lp, true, dot);
  lse_v.assign(size_t(B * Lp), T(0));
  d_v.assign(size_t(B * Lp), T(0));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      lse_v[size_t(b * Lp + i)] = T(ember::cpu::attn::load2(lse, b, i));
      d_v[size_t(b * Lp + i)] = T(ember::cpu::attn::load2(dd, b, i));
    }
  std::vector<T> dq(size_t(B * Lp * Ep), T(0)), dk(size_t(B * Sp * Ep), T(0)), dv(size_t(B * Sp * Evp), T(0));
  a.qp = qp.data(), a.qt = qt.data(), a.kp = kp.data(), a.kt = kt.data(), a.vp = vp.data(), a.vt = vt.data();
  a.dop = dop.data(), a.dot = dot.data(), a.lse = lse_v.data(), a.d = d_v.data();
  a.mask = n_in > 6 ? &in[6] : nullptr;
  a.dq = dq.data(), a.dk = dk.data(), a.dv = dv.data();
  a.scale = T(at.scale);
  a.causal = at.causal != 0;
  if constexpr (std::is_same_v<T, float>)
    HWY_DYNAMIC_DISPATCH(AttentionBackwardF32)(a);
  else
    HWY_DYNAMIC_DISPATCH(AttentionBackwardF64)(a);
  // Unpad into the outputs dq, dk, dv.
  auto unpad = [](const std::vector<T>& padded, int64_t rows, int64_t padded_rows, int64_t cols, int64_t ld,
                  int64_t batches, const ember_tensor_desc& d) {
    std::vector<T> res(size_t(batches * rows * cols));
    T* o = res.data();
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) *o++ = padded[size_t((b * padded_rows + r) * ld + c)];
    unpack_dense(res, d);
  };
  unpad(dq, L, Lp, E, Ep, B, out[0]);
  unpad(dk, S, Sp, E, Ep, B, out[1]);
  unpad(dv, S, Sp, Ev, Evp, B, out[2]);
}

// Whether `stored` is the f32 that f16 / bf16 operands of dtype `operands` compute in.
bool widened(int32_t operands, int32_t stored) {
  return stored == EMBER_F32 && (operands == EMBER_F16 || operands == EMBER_BF16);
}

}  // namespace

// The outputs' shapes are [B, rows, cols] (contiguous, of `dtype`).
bool output_is(const ember_tensor_desc& d, int32_t dtype, int64_t B, int64_t rows, int64_t cols) {
  return d.dtype == dtype && d.rank == 3 && d.shape[0] == B && d.shape[1] == rows && d.shape[2] == cols;
}

int32_t attention_backward_library(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                                   int32_t n_out, const void* attrs, ember_status* st) {
  using ember::host::set_status;
  if ((n_in != 6 && n_in != 7) || n_out != 3)
    return set_status(st, EMBER_ERR_INVALID,
                      "cpu backend: fused attention backward takes 6 or 7 inputs and 3 outputs, got %d and %d", n_in,
                      n_out);
  const int32_t dt = in[0].dtype;
  // lse and d (inputs 3 and 4) may be f32 where the operands are f16 / bf16.
  for (int32_t i = 0; i < n_in; ++i)
    if (!(in[i].dtype == dt || ((i == 3 || i == 4) && widened(dt, in[i].dtype))) ||
        in[i].rank != (i == 3 || i == 4 ? 2 : 3))
      return set_status(st, EMBER_ERR_INVALID, "cpu backend: fused attention backward: input %d has a bad rank or dtype", i);
  const int64_t B = in[0].shape[0], L = in[0].shape[1], E = in[0].shape[2], S = in[1].shape[1], Ev = in[2].shape[2];
  if (!output_is(out[0], dt, B, L, E) || !output_is(out[1], dt, B, S, E) || !output_is(out[2], dt, B, S, Ev) ||
      in[5].shape[1] != L || in[5].shape[2] != Ev)
    return set_status(st, EMBER_ERR_INVALID, "cpu backend: fused attention backward: operand shapes do not match");
  if (B * L * E + B * S * E + B * S * Ev == 0) return EMBER_OK;
  const auto& a = *static_cast<const ember_attention_attrs*>(attrs);
  if (dt == EMBER_F64)
    run_attention_backward<double>(in, n_in, out, a);
  else
    run_attention_backward<float>(in, n_in, out, a);
  return EMBER_OK;
}

int32_t attention_library(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                          const void* attrs, ember_status* st) {
  using ember::host::set_status;
  if ((n_in != 3 && n_in != 4) || n_out != 2)
    return set_status(st, EMBER_ERR_INVALID, "cpu backend: fused attention takes 3 or 4 inputs and 2 outputs, got %d and %d",
                      n_in, n_out);
  for (int32_t i = 0; i < n_in; ++i)
    if (in[i].rank != 3 || in[i].dtype != in[0].dtype)
      return set_status(st, EMBER_ERR_INVALID, "cpu backend: fused attention input %d must be rank 3 of q's dtype", i);
  // o and lse have the operands' dtype, or f32 for f16 / bf16 operands.
  const ember_tensor_desc &o = out[0], &lse = out[1];
  for (const ember_tensor_desc* d : {&o, &lse})
    if (!(d->dtype == in[0].dtype || widened(in[0].dtype, d->dtype)))
      return set_status(st, EMBER_ERR_INVALID,
                        "cpu backend: fused attention: o and lse must have q's dtype, or f32 for f16 / bf16");
  const ember_tensor_desc &q = in[0], &k = in[1], &v = in[2];
  const int64_t B = q.shape[0], L = q.shape[1], E = q.shape[2], S = k.shape[1], Ev = v.shape[2];
  if (k.shape[0] != B || v.shape[0] != B || k.shape[2] != E || v.shape[1] != S ||
      (n_in == 4 && (in[3].shape[0] != B || in[3].shape[1] != L || in[3].shape[2] != S)) ||
      !output_is(o, o.dtype, B, L, Ev) || lse.rank != 2 || lse.shape[0] != B || lse.shape[1] != L)
    return set_status(st, EMBER_ERR_INVALID, "cpu backend: fused attention: operand shapes do not match");
  if (B * L == 0) return EMBER_OK;
  const auto& a = *static_cast<const ember_attention_attrs*>(attrs);
  if (q.dtype == EMBER_F64)
    run_attention<double>(in, n_in, o, lse, a);
  else
    run_attention<float>(in, n_in, o, lse, a);
  return EMBER_OK;
}

}  // namespace ember::cpu
#endif
