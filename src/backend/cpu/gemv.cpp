// Small-M f32 products (gemv.h).
#include "backend/cpu/gemv.h"
#include "backend/cpu/parallel_for.h"
#include "backend/cpu/target_clones.h"

#include <omp.h>

#include <algorithm>
#include <vector>

namespace ember::cpu {

namespace {


// Dot product of two contiguous vectors, 16 independent partial sums (vectorizes without
// reassociation flags).
EMBER_CLONES float dot(const float* x, const float* y, int64_t n) {
  float acc[16] = {};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int l = 0; l < 16; ++l) acc[l] += x[k + l] * y[k + l];
  float s = 0;
  for (; k < n; ++k) s += x[k] * y[k];
  for (int l = 0; l < 16; ++l) s += acc[l];
  return s;
}

// Four dot products of x with rows b, b + ldb, b + 2 ldb, b + 3 ldb: x is loaded once for the
// four, each product keeps 16 lanes of partial sums (GCC vector extension: one zmm on AVX-512,
// two ymm on AVX2), summed pairwise at the end.
typedef float v16 __attribute__((vector_size(64)));
EMBER_CLONES void dot4(const float* x, const float* b, int64_t ldb, int64_t n, float* out) {
  // (No helper functions taking or returning v16: their ABI would depend on the clone's target.)
  v16 a[4] = {};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    v16 xv, bv;
    __builtin_memcpy(&xv, x + k, sizeof xv);
    for (int r = 0; r < 4; ++r) {
      __builtin_memcpy(&bv, b + r * ldb + k, sizeof bv);
      a[r] += xv * bv;
    }
  }
  for (int r = 0; r < 4; ++r) {
    float s = 0;
    if (k > 0) {  // (short rows, attention's head size 8, have no vector part)
      float l[16];
      __builtin_memcpy(l, &a[r], sizeof l);
      for (int w = 8; w; w >>= 1)
        for (int i = 0; i < w; ++i) l[i] += l[i + w];
      s = l[0];
    }
    for (int64_t t = k; t < n; ++t) s += x[t] * b[r * ldb + t];
    out[r] = s;
  }
}

// y[0..n) += alpha * x[0..n)
EMBER_CLONES void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += alpha * x[j];
}

// narrow_gemm_f32 (gemv.h). Multi-versioned functions stay internal, as dot4 and axpy do; the
// exported entry below calls this one.
EMBER_CLONES void narrow_rows(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
                              const float* b, int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs) {
  thread_local std::vector<float> padded;
  padded.assign(size_t(K * 16), 0.0f);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) padded[size_t(k * 16 + j)] = b[k * b_rs + j * b_cs];
  for (int64_t i = 0; i < M; ++i) {
    v16 acc = {};
    for (int64_t k = 0; k < K; ++k) {
      v16 row;
      __builtin_memcpy(&row, padded.data() + k * 16, sizeof row);
      acc += a[i * a_rs + k * a_cs] * row;
    }
    float out[16];
    __builtin_memcpy(out, &acc, sizeof out);
    for (int64_t j = 0; j < N; ++j) c[i * c_rs + j] = out[j];
  }
}

}  // namespace

bool small_m_gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                      int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs) {
  const bool b_transposed = b_rs == 1 && (b_cs == K || N == 1), b_rows = b_cs == 1 && (b_rs == N || K == 1);
  if (!b_transposed && !b_rows) return false;
  // Contiguous rows of a (packed when strided: K floats per row).
  thread_local std::vector<float> packed;
  if (a_cs != 1) {
    packed.resize(size_t(M * K));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) packed[size_t(i * K + k)] = a[i * a_rs + k * a_cs];
    a = packed.data();
    a_rs = K;
  }
  // Threads only for large products: waking the OpenMP team costs tens of microseconds here (its
  // threads wait passively), more than a 784x512 matrix-vector product takes on one core. A serial
  // call enters no parallel region at all (parallel_for.h).
  const bool par = N * K >= (int64_t(1) << 22) && !omp_in_parallel();
  if (b_transposed) {
    // Column j of B is row j of Bᵀ: contiguous, so c[i, j] is a dot product.
    // Four columns at a time (x read once for four rows of Bᵀ), the rest one by one.
    const int64_t quads = N / 4;
    parallel_for(par, quads, [&](int64_t q) {
      for (int64_t i = 0; i < M; ++i) {
        float out[4];
        dot4(a + i * a_rs, b + 4 * q * b_cs, b_cs, K, out);
        for (int r = 0; r < 4; ++r) c[i * c_rs + 4 * q + r] = out[r];
      }
    });
    for (int64_t j = 4 * quads; j < N; ++j)
      for (int64_t i = 0; i < M; ++i) c[i * c_rs + j] = dot(a + i * a_rs, b + j * b_cs, K);
    return true;
  }
  // Row-major B: c[i, :] = sum_k a[i, k] * B[k, :], threads split the columns.
  auto columns = [&](int64_t j0, int64_t j1) {
    for (int64_t i = 0; i < M && j0 < j1; ++i) {
      float* ci = c + i * c_rs;
      std::fill(ci + j0, ci + j1, 0.0f);
      for (int64_t k = 0; k < K; ++k) axpy(a[i * a_rs + k], b + k * b_rs + j0, ci + j0, j1 - j0);
    }
  };
  if (!par) {
    columns(0, N);
    return true;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = (N + nt - 1) / nt, j0 = std::min(N, t * chunk);
    columns(j0, std::min(N, j0 + chunk));
  }
  return true;
}

void narrow_gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                     int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs) {
  narrow_rows(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs);
}

bool gemv_n1_f32(int64_t M, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs,
                 float* c, int64_t c_rs) {
  if ((a_cs != 1 && K > 1) || (b_rs != 1 && K > 1)) return false;
  // Four rows of a against b per call (dot4 reads b once for the four); threads split the rows.
  const bool par = M * K >= (int64_t(1) << 22) && !omp_in_parallel();
  const int64_t quads = M / 4;
  parallel_for(par, quads, [&](int64_t q) {
    float out[4];
    dot4(b, a + 4 * q * a_rs, a_rs, K, out);
    for (int r = 0; r < 4; ++r) c[(4 * q + r) * c_rs] = out[r];
  });
  for (int64_t i = 4 * quads; i < M; ++i) c[i * c_rs] = dot(a + i * a_rs, b, K);
  return true;
}

}  // namespace ember::cpu
