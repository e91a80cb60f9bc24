// Matrix multiplication for the CPU backend (EMBER_LIB_MATMUL, see abi.h): a [..., M, K] times
// b [..., K, N] into a contiguous out [..., M, N], batch dims already broadcast (stride 0 allowed).
//  - f32 with M <= 4: dot-product / row-update loops (gemv.cpp);
//  - f32: oneDNN matmul on strided 2-D descriptors (transposed operands are read in place; other
//    layouts are packed first). A batch that shares b and walks a contiguously is folded into M;
//    other batches loop over their entries with one cached primitive.
//  - bf16 on CPUs with bf16 units (dnnl_bf16.h): oneDNN's bf16 matmul (f32 accumulation, one
//    rounding); f16, and bf16 elsewhere: operands widened to f32 (convert.h), oneDNN, the result
//    rounded to nearest even.
//  - f64 (accumulated in f64) and integers (accumulated in i64, wrapping): a row-blocked loop.
// EMBER_LIB_MATMUL_EPILOGUE (f32, f64) adds post-ops: oneDNN post-ops (binary add or multiply with a broadcast
// operand, eltwise) in the oneDNN path, else post_ops.h's row loops right after each product.
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <exception>
#include <string>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/dnnl_bf16.h"
#include "backend/cpu/dnnl_post_ops.h"
#include "backend/cpu/dnnl_scratchpad.h"
#include "backend/cpu/gemv.h"
#include "backend/cpu/library.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/parallel_for.h"
#include "backend/cpu/subnormal_inputs.h"
#include "backend/cpu/post_ops.h"
#include "ember/dtype.h"

namespace ember::cpu {

using ember::host::set_status;

namespace {

size_t elem_bytes(int32_t dt) { return ember_dtype_bytes(dt); }

// A 2-D operand: element (i, j) at data[i * rs + j * cs].
template <class T>
struct Mat {
  T* data;
  int64_t rs, cs;
};

// ---- oneDNN f32 -----------------------------------------------------------------------------
dnnl::engine& engine() {
  // Never destroyed (like the caches below): work may still run on a queue thread during exit.
  static dnnl::engine& e = *new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return e;
}

// Strides oneDNN accepts for a plain 2-D tensor (row- or column-major with a leading dimension);
// size-1 dims get a canonical stride. False if the layout is not plain.
bool plain_strides(int64_t rows, int64_t cols, int64_t& rs, int64_t& cs) {
  if (cols == 1) cs = 1;
  if (rows == 1) rs = cs == 1 ? std::max<int64_t>(cols, 1) : 1;
  if (rows == 1 && cols == 1) rs = cs = 1;
  return (cs == 1 && rs >= cols) || (rs == 1 && cs >= rows);
}

// Key: M, N, K, the six strides of a, b, c, then the post-ops: count, and per op its kind, alpha
// and beta (bits), and for a binary add or multiply the operand's dims and strides.
using Key = std::vector<int64_t>;

struct Prim {
  dnnl::matmul prim;
  bool post = false;  // the post-ops run inside the primitive
  std::vector<dnnl::memory::desc> operands;  // per post-op (binary ops only)
  dnnl::memory::desc scratchpad;
};

Prim make_prim(const Key& key) {
  using dt = dnnl::memory::data_type;
  const int64_t M = key[0], N = key[1], K = key[2];
  dnnl::memory::desc a({M, K}, dt::f32, {key[3], key[4]});
  dnnl::memory::desc b({K, N}, dt::f32, {key[5], key[6]});
  dnnl::memory::desc c({M, N}, dt::f32, {key[7], key[8]});
  dnnl::matmul::desc d(a, b, c);
  Prim p;
  const int64_t n_ops = key[9];
  if (n_ops > 0) {
    dnnl::post_ops po;
    size_t at = 10;
    for (int64_t k = 0; k < n_ops; ++k, at += 7) {
      const int32_t kind = int32_t(key[at]);
      if (ember_post_has_operand(kind)) {
        dnnl::memory::desc md({key[at + 3], key[at + 4]}, dt::f32, {key[at + 5], key[at + 6]});
        po.append_binary(kind == EMBER_POST_ADD ? dnnl::algorithm::binary_add : dnnl::algorithm::binary_mul, md);
        p.operands.push_back(md);
      } else {
        ember_post_op op{};
        op.kind = kind;
        op.alpha = std::bit_cast<double>(key[at + 1]);
        op.beta = std::bit_cast<double>(key[at + 2]);
        append_eltwise_post_op(po, op);
        p.operands.emplace_back();
      }
    }
    dnnl::primitive_attr attr = user_scratchpad_attr();
    attr.set_post_ops(po);
    try {
      dnnl::matmul::primitive_desc pd(d, attr, engine());
      // oneDNN's reference kernels are far slower than a product plus Ember's own loops.
      if (std::string(pd.impl_info_str()).find("ref") == std::string::npos) {
        p.prim = dnnl::matmul(pd);
        p.post = true;
        p.scratchpad = pd.scratchpad_desc();
        return p;
      }
    } catch (const dnnl::error&) {  // post-ops not implemented for this case: the loops
    }
    p.operands.clear();
  }
  dnnl::matmul::primitive_desc pd(d, user_scratchpad_attr(), engine());
  p.prim = dnnl::matmul(pd);
  p.scratchpad = pd.scratchpad_desc();
  return p;
}

Prim primitive(const Key& key) {
  static std::mutex& mutex = *new std::mutex;
  static std::map<Key, Prim>& cache = *new std::map<Key, Prim>;
  std::lock_guard lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Prim prim = make_prim(key);
  if (cache.size() > 256) cache.clear();
  cache.emplace(key, prim);
  return prim;
}

// The post-ops of one 2-D block of an epilogue call: operand k's element (i, j) of the block at
// in[ops[k].input] + off[k] + i * rs[k] + j * cs[k].
struct EpiBlock {
  const ember_epilogue_attrs* attrs = nullptr;
  const ember_tensor_desc* in = nullptr;
  std::array<int64_t, EMBER_MAX_POST_OPS> off{}, rs{}, cs{};

  template <class T>
  std::array<PostArg<T>, EMBER_MAX_POST_OPS> args() const {
    std::array<PostArg<T>, EMBER_MAX_POST_OPS> r{};
    for (int k = 0; k < attrs->n_ops; ++k)
      if (ember_post_has_operand(attrs->ops[k].kind))
        r[size_t(k)] = {static_cast<const T*>(in[attrs->ops[k].input].buffer->data) + off[size_t(k)],
                        rs[size_t(k)], cs[size_t(k)]};
    return r;
  }
  template <class T>
  void apply(T* c, int64_t crs, int64_t ccs, int64_t M, int64_t N) const {
    auto a = args<T>();
    apply_post_ops<T>(*attrs, a.data(), c, crs, ccs, M, N);
  }
};

// A bf16/f16 matrix as dense f32 in `out`, keeping its layout: row-major when its rows are
// contiguous, column-major when its columns are (a transposed view, such as x^T in a weight's
// gradient: oneDNN reads either layout), each run converted vectorized (convert.h). Element by
// element only for other strides. Converting a transposed operand element by element into
// row-major order was 10 % of a bf16 transformer training step.
Mat<const float> widen(int32_t dt, Mat<const uint16_t> m, int64_t rows, int64_t cols, float* out) {
  if (m.cs == 1 && m.rs == cols) {
    widen_to_f32(dt, m.data, out, rows * cols);
    return {out, cols, 1};
  }
  if (m.cs == 1) {
    for (int64_t i = 0; i < rows; ++i) widen_to_f32(dt, m.data + i * m.rs, out + i * cols, cols);
    return {out, cols, 1};
  }
  if (m.rs == 1 && rows > 1) {
    for (int64_t j = 0; j < cols; ++j) widen_to_f32(dt, m.data + j * m.cs, out + j * rows, rows);
    return {out, 1, rows};
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const uint16_t h = m.data[i * m.rs + j * m.cs];
      out[i * cols + j] = dt == EMBER_F16 ? ember::half_to_float(h) : ember::bf16_to_float(h);
    }
  return {out, cols, 1};
}

// Packs a strided matrix into a row-major one.
template <class T, class D, class F>
void pack(Mat<const T> m, int64_t rows, int64_t cols, D* out, F convert) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = convert(m.data[i * m.rs + j * m.cs]);
}

// C (plain, f32) = A B with oneDNN, then the post-ops of `epi` (if any); operands in other
// layouts are packed.
// Products up to this many multiply-adds take the loops whatever M is: oneDNN's per-call setup
// (key, primitive lookup, memory objects, stream: about 1.4 us) was 95 % of attention's per-head
// products in the exported transformer (7 tokens, head size 8: 392 multiply-adds each, 64 of them
// per batch-32 matmul, 88 us per matmul).
constexpr int64_t kTinyProductMacs = 16384;

void gemm_f32(int64_t M, int64_t N, int64_t K, Mat<const float> A, Mat<const float> B, Mat<float> C,
              const EpiBlock* epi = nullptr) {
  // A few rows (batch-1 inference, matrix-vector) or a tiny product: plain loops beat oneDNN's
  // per-call setup. They write rows of C (c[i * rs + j]) and read B row- or column-major: a tiny
  // product packs a B of any other layout (a transposed view of heads, say) first.
  const bool tiny = M * N * K <= kTinyProductMacs;
  if (tiny && N <= kNarrowGemmMaxN && (C.cs == 1 || N == 1)) {
    narrow_gemm_f32(M, N, K, A.data, A.rs, A.cs, B.data, B.rs, B.cs, C.data, C.rs);
    if (epi) epi->apply(C.data, C.rs, C.cs, M, N);
    return;
  }
  if ((M <= 4 || tiny) && (C.cs == 1 || N == 1)) {
    bool done = small_m_gemm_f32(M, N, K, A.data, A.rs, A.cs, B.data, B.rs, B.cs, C.data, C.rs);
    if (!done && tiny) {
      thread_local std::vector<float> packed;
      packed.resize(size_t(K * N));
      pack(B, K, N, packed.data(), [](float x) { return x; });
      done = small_m_gemm_f32(M, N, K, A.data, A.rs, A.cs, packed.data(), N, 1, C.data, C.rs);
    }
    if (done) {
      if (epi) epi->apply(C.data, C.rs, C.cs, M, N);
      return;
    }
  }
  // Matrix-vector (one column of B): dot products of a's rows with it, at the speed of reading a.
  if (N == 1 && gemv_n1_f32(M, K, A.data, A.rs, A.cs, B.data, B.rs, C.data, C.rs)) {
    if (epi) epi->apply(C.data, C.rs, C.cs, M, N);
    return;
  }
  std::vector<float> pa, pb;
  if (!plain_strides(M, K, A.rs, A.cs)) {
    pa.resize(size_t(M * K));
    pack(A, M, K, pa.data(), [](float x) { return x; });
    A = {pa.data(), K, 1};
  }
  if (!plain_strides(K, N, B.rs, B.cs)) {
    pb.resize(size_t(K * N));
    pack(B, K, N, pb.data(), [](float x) { return x; });
    B = {pb.data(), N, 1};
  }
  plain_strides(M, N, C.rs, C.cs);
  Key key{M, N, K, A.rs, A.cs, B.rs, B.cs, C.rs, C.cs, 0};
  if (epi) {
    // Operands as oneDNN descriptors: a broadcast dim (stride 0) has size 1. Any operand that is
    // not a plain 2-D layout keeps the post-ops out of oneDNN.
    bool plain = dnnl_post_ops_faithful(*epi->attrs);
    for (int k = 0; k < epi->attrs->n_ops; ++k) {
      const ember_post_op& op = epi->attrs->ops[k];
      int64_t d0 = 0, d1 = 0, s0 = 0, s1 = 0;
      if (ember_post_has_operand(op.kind)) {
        d0 = epi->rs[size_t(k)] == 0 ? 1 : M;
        d1 = epi->cs[size_t(k)] == 0 ? 1 : N;
        s0 = epi->rs[size_t(k)];
        s1 = epi->cs[size_t(k)];
        plain = plain && plain_strides(d0, d1, s0, s1);
      }
      key.insert(key.end(), {int64_t(op.kind), std::bit_cast<int64_t>(op.alpha), std::bit_cast<int64_t>(op.beta),
                             d0, d1, s0, s1});
    }
    if (plain) key[9] = epi->attrs->n_ops;
    else key.resize(10);
  }
  Prim prim = primitive(key);
  using dt = dnnl::memory::data_type;
  dnnl::memory am({{M, K}, dt::f32, {A.rs, A.cs}}, engine(), const_cast<float*>(A.data));
  dnnl::memory bm({{K, N}, dt::f32, {B.rs, B.cs}}, engine(), const_cast<float*>(B.data));
  dnnl::memory cm({{M, N}, dt::f32, {C.rs, C.cs}}, engine(), C.data);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (prim.post) {
    auto ops = epi->args<float>();
    for (int k = 0; k < epi->attrs->n_ops; ++k)
      if (ember_post_has_operand(epi->attrs->ops[k].kind))
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(dnnl_post_op_index(*epi->attrs, k)) | DNNL_ARG_SRC_1,
                     dnnl::memory(prim.operands[size_t(k)], engine(), const_cast<float*>(ops[size_t(k)].p)));
  }
  add_scratchpad(args, prim.scratchpad, engine());
  dnnl::stream s(engine());
  prim.prim.execute(s, args);
  s.wait();
  if (epi && !prim.post) epi->apply(C.data, C.rs, C.cs, M, N);
}

// bf16 operands on CPUs with bf16 units (dnnl_bf16.h): oneDNN's bf16 matmul with f32 accumulation
// and one rounding of the result. False, and the caller widens to f32, on other CPUs, for a few
// rows or one column (the f32 loops of gemv.cpp), K = 0, or layouts oneDNN does not take.
bool gemm_bf16(int64_t M, int64_t N, int64_t K, Mat<const uint16_t> A, Mat<const uint16_t> B, Mat<uint16_t> C) {
  if (!dnnl_native_bf16() || M <= 4 || N == 1 || K == 0) return false;
  if (!plain_strides(M, K, A.rs, A.cs) || !plain_strides(K, N, B.rs, B.cs) || !plain_strides(M, N, C.rs, C.cs))
    return false;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc a({M, K}, dt::bf16, {A.rs, A.cs}), b({K, N}, dt::bf16, {B.rs, B.cs}),
      c({M, N}, dt::bf16, {C.rs, C.cs});
  struct Bf16Prim {
    dnnl::matmul prim;
    dnnl::memory::desc scratchpad;
  };
  static std::mutex& mutex = *new std::mutex;
  static std::map<std::array<int64_t, 9>, Bf16Prim>& cache = *new std::map<std::array<int64_t, 9>, Bf16Prim>;
  Bf16Prim prim;
  {
    const std::array<int64_t, 9> key{M, N, K, A.rs, A.cs, B.rs, B.cs, C.rs, C.cs};
    std::lock_guard lock(mutex);
    auto it = cache.find(key);
    if (it == cache.end()) {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), user_scratchpad_attr(), engine());
      if (cache.size() > 256) cache.clear();
      it = cache.emplace(key, Bf16Prim{dnnl::matmul(pd), pd.scratchpad_desc()}).first;
    }
    prim = it->second;
  }
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(a, engine(), const_cast<uint16_t*>(A.data))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(b, engine(), const_cast<uint16_t*>(B.data))},
      {DNNL_ARG_DST, dnnl::memory(c, engine(), C.data)}};
  add_scratchpad(args, prim.scratchpad, engine());
  dnnl::stream s(engine());
  prim.prim.execute(s, args);
  s.wait();
  return true;
}

// ---- loops for f64 and integers ---------------------------------------------------------------
// kBool: bytes are booleans (read as != 0, stored as 0/1).
template <class T, class Acc, bool kBool = false>
void gemm_loop(int64_t M, int64_t N, int64_t K, Mat<const T> A, Mat<const T> B, Mat<T> C) {
  const bool par = M > 1 && M * N * K >= (int64_t(1) << 18) && !omp_in_parallel();
  parallel_for_with(par, M, [&] { return std::vector<Acc>(static_cast<size_t>(N)); }, [&](std::vector<Acc>& acc, int64_t i) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k = 0; k < K; ++k) {
        const T* b = B.data + k * B.rs;
        if constexpr (kBool) {
          const Acc a = Acc(A.data[i * A.rs + k * A.cs] != 0);
          for (int64_t j = 0; j < N; ++j) acc[size_t(j)] += a * Acc(b[j * B.cs] != 0);
          continue;
        }
        const Acc a = Acc(A.data[i * A.rs + k * A.cs]);
        if (B.cs == 1) {
          for (int64_t j = 0; j < N; ++j) acc[size_t(j)] += a * Acc(b[j]);
        } else {
          for (int64_t j = 0; j < N; ++j) acc[size_t(j)] += a * Acc(b[j * B.cs]);
        }
      }
      for (int64_t j = 0; j < N; ++j) {
        if constexpr (kBool) C.data[i * C.rs + j * C.cs] = acc[size_t(j)] != 0;
        else C.data[i * C.rs + j * C.cs] = T(acc[size_t(j)]);
      }
  });
}

template <class T>
Mat<T> mat(void* base, int64_t offset, int64_t rs, int64_t cs) {
  return {static_cast<T*>(base) + offset, rs, cs};
}

// One 2-D product at the given element offsets.
void gemm_one(int32_t dt, int64_t M, int64_t N, int64_t K, const ember_tensor_desc& a, int64_t oa,
              int64_t ars, int64_t acs, const ember_tensor_desc& b, int64_t ob, const ember_tensor_desc& c,
              int64_t oc, int64_t crs, const EpiBlock* epi = nullptr) {
  const int r = c.rank;
  const int64_t brs = b.strides[r - 2], bcs = b.strides[r - 1], ccs = c.strides[r - 1];
  void *da = a.buffer->data, *db = b.buffer->data, *dc = c.buffer->data;
  switch (dt) {
    case EMBER_F32:
      gemm_f32(M, N, K, mat<const float>(da, oa, ars, acs), mat<const float>(db, ob, brs, bcs),
               mat<float>(dc, oc, crs, ccs), epi);
      break;
    case EMBER_F16: case EMBER_BF16: {
      if (dt == EMBER_BF16 && gemm_bf16(M, N, K, mat<const uint16_t>(da, oa, ars, acs),
                                        mat<const uint16_t>(db, ob, brs, bcs), mat<uint16_t>(dc, oc, crs, ccs)))
        break;
      std::vector<float> pa(size_t(M * K)), pb(size_t(K * N)), pc(size_t(M * N));
      const Mat<const float> wa = widen(dt, mat<const uint16_t>(da, oa, ars, acs), M, K, pa.data());
      const Mat<const float> wb = widen(dt, mat<const uint16_t>(db, ob, brs, bcs), K, N, pb.data());
      gemm_f32(M, N, K, wa, wb, {pc.data(), N, 1});
      Mat<uint16_t> C = mat<uint16_t>(dc, oc, crs, ccs);
      if (C.cs == 1 && C.rs == N) {
        narrow_from_f32(dt, pc.data(), C.data, M * N);
      } else {
        for (int64_t i = 0; i < M; ++i) {
          if (C.cs == 1) {
            narrow_from_f32(dt, pc.data() + i * N, C.data + i * C.rs, N);
            continue;
          }
          for (int64_t j = 0; j < N; ++j) {
            float v = pc[size_t(i * N + j)];
            C.data[i * C.rs + j * C.cs] = dt == EMBER_F16 ? ember::float_to_half(v) : ember::float_to_bf16(v);
          }
        }
      }
      break;
    }
    case EMBER_F64:
      gemm_loop<double, double>(M, N, K, mat<const double>(da, oa, ars, acs), mat<const double>(db, ob, brs, bcs),
                                mat<double>(dc, oc, crs, ccs));
      if (epi) epi->apply(static_cast<double*>(dc) + oc, crs, ccs, M, N);
      break;
    case EMBER_I64:
      gemm_loop<int64_t, uint64_t>(M, N, K, mat<const int64_t>(da, oa, ars, acs),
                                   mat<const int64_t>(db, ob, brs, bcs), mat<int64_t>(dc, oc, crs, ccs));
      break;
    case EMBER_I32:
      gemm_loop<int32_t, uint64_t>(M, N, K, mat<const int32_t>(da, oa, ars, acs),
                                   mat<const int32_t>(db, ob, brs, bcs), mat<int32_t>(dc, oc, crs, ccs));
      break;
    case EMBER_U8:
      gemm_loop<uint8_t, uint64_t>(M, N, K, mat<const uint8_t>(da, oa, ars, acs),
                                   mat<const uint8_t>(db, ob, brs, bcs), mat<uint8_t>(dc, oc, crs, ccs));
      break;
    case EMBER_I8:
      gemm_loop<int8_t, uint64_t>(M, N, K, mat<const int8_t>(da, oa, ars, acs),
                                  mat<const int8_t>(db, ob, brs, bcs), mat<int8_t>(dc, oc, crs, ccs));
      break;
    case EMBER_I16:
      gemm_loop<int16_t, uint64_t>(M, N, K, mat<const int16_t>(da, oa, ars, acs),
                                   mat<const int16_t>(db, ob, brs, bcs), mat<int16_t>(dc, oc, crs, ccs));
      break;
    case EMBER_U16:
      gemm_loop<uint16_t, uint64_t>(M, N, K, mat<const uint16_t>(da, oa, ars, acs),
                                    mat<const uint16_t>(db, ob, brs, bcs), mat<uint16_t>(dc, oc, crs, ccs));
      break;
    case EMBER_U32:
      gemm_loop<uint32_t, uint64_t>(M, N, K, mat<const uint32_t>(da, oa, ars, acs),
                                    mat<const uint32_t>(db, ob, brs, bcs), mat<uint32_t>(dc, oc, crs, ccs));
      break;
    case EMBER_U64:
      gemm_loop<uint64_t, uint64_t>(M, N, K, mat<const uint64_t>(da, oa, ars, acs),
                                    mat<const uint64_t>(db, ob, brs, bcs), mat<uint64_t>(dc, oc, crs, ccs));
      break;
    default:  // bool
      gemm_loop<uint8_t, uint64_t, true>(M, N, K, mat<const uint8_t>(da, oa, ars, acs),
                                         mat<const uint8_t>(db, ob, brs, bcs), mat<uint8_t>(dc, oc, crs, ccs));
      break;
  }
}

// Fills an output with zeros (K = 0).
void zero_fill(const ember_tensor_desc& c, int64_t batches) {
  const int r = c.rank;
  const size_t es = elem_bytes(c.dtype);
  char* data = static_cast<char*>(c.buffer->data);
  for (int64_t bt = 0; bt < batches; ++bt) {
    int64_t oc = c.offset, rem = bt;
    for (int d = r - 3; d >= 0; --d) {
      oc += (rem % c.shape[d]) * c.strides[d];
      rem /= c.shape[d];
    }
    for (int64_t i = 0; i < c.shape[r - 2]; ++i)
      for (int64_t j = 0; j < c.shape[r - 1]; ++j)
        std::memset(data + size_t(oc + i * c.strides[r - 2] + j * c.strides[r - 1]) * es, 0, es);
  }
}

bool in_bounds(const ember_tensor_desc& t) {
  int64_t lo = t.offset, hi = t.offset;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] == 0) return true;
    const int64_t ext = (t.shape[d] - 1) * t.strides[d];
    (ext > 0 ? hi : lo) += ext;
  }
  return lo >= 0 && size_t(hi + 1) * elem_bytes(t.dtype) <= t.buffer->bytes;
}

// If dims [0, r-1) of t (batch dims and rows) walk memory as one strided dim, its stride.
bool fold_rows(const ember_tensor_desc& t, int64_t& stride) {
  const int r = t.rank;
  int64_t s = 0, extent = 1;
  bool have = false;
  for (int d = r - 2; d >= 0; --d) {
    if (t.shape[d] == 1) continue;
    if (!have) {
      s = t.strides[d];
      have = true;
    } else if (t.strides[d] != s * extent) {
      return false;
    }
    extent *= t.shape[d];
  }
  stride = have ? s : 1;
  return true;
}

}  // namespace

namespace {

// Multiply-adds of one batch entry below which the entries of a batched matmul run in parallel,
// each on one thread.
constexpr int64_t kBatchSplitMacs = int64_t(1) << 24;
constexpr int64_t kPackRowsMax = int64_t(1) << 20;  // elements of a copied so that a product folds

int32_t matmul_impl(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                    const ember_epilogue_attrs* epi, ember_status* st) {
  const char* what = epi ? "matmul epilogue" : "matmul";
  if (n_in < 2 || (!epi && n_in != 2) || n_out != 1 || !in || !out)
    return set_status(st, EMBER_ERR_INVALID, "%s: expects 2 inputs and 1 output, got %d and %d", what, n_in, n_out);
  const ember_tensor_desc &a = in[0], &b = in[1], &c = out[0];
  const int r = c.rank;
  if (r < 2 || r > 8 || a.rank != r || b.rank != r)
    return set_status(st, EMBER_ERR_INVALID, "%s: ranks %d, %d -> %d (need equal ranks from 2 to 8)", what, a.rank,
                      b.rank, c.rank);
  if (a.dtype != c.dtype || b.dtype != c.dtype || c.dtype < EMBER_F32 || c.dtype >= EMBER_NUM_DTYPES)
    return set_status(st, EMBER_ERR_INVALID, "%s: dtypes %d, %d -> %d must be equal", what, a.dtype, b.dtype, c.dtype);
  if (epi)
    if (const char* why = check_epilogue(epi, in, n_in, c)) return set_status(st, EMBER_ERR_INVALID, "%s: %s", what, why);
  const int64_t M = c.shape[r - 2], N = c.shape[r - 1], K = a.shape[r - 1];
  bool ok = a.shape[r - 2] == M && b.shape[r - 2] == K && b.shape[r - 1] == N;
  int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) {
    ok = ok && a.shape[d] == c.shape[d] && b.shape[d] == c.shape[d];
    batches *= c.shape[d];
  }
  if (!ok) return set_status(st, EMBER_ERR_INVALID, "%s: operand shapes do not match [..., M, K] x [..., K, N]", what);
  if (batches * M * N == 0) return EMBER_OK;
  if (!a.buffer || !b.buffer || !c.buffer)
    return set_status(st, EMBER_ERR_INVALID, "%s: missing buffer", what);
  bool inside = in_bounds(a) && in_bounds(b) && in_bounds(c);
  for (int k = 0; epi && k < epi->n_ops; ++k)
    if (ember_post_has_operand(epi->ops[k].kind)) inside = inside && in_bounds(in[epi->ops[k].input]);
  if (!inside) return set_status(st, EMBER_ERR_INVALID, "%s: an operand view reaches outside its buffer", what);
  EpiBlock blk;
  if (epi) {
    blk.attrs = epi;
    blk.in = in;
    for (int k = 0; k < epi->n_ops; ++k)
      if (ember_post_has_operand(epi->ops[k].kind)) blk.cs[size_t(k)] = in[epi->ops[k].input].strides[r - 1];
  }
  try {
    if (K == 0) {
      zero_fill(c, batches);
      if (!epi) return EMBER_OK;
    }
    // b shared by every batch entry and a, out walking their batch and row dims as one: fold the
    // batch into M (one large product instead of many small ones).
    bool b_shared = true;
    for (int d = 0; d < r - 2; ++d) b_shared = b_shared && (b.strides[d] == 0 || c.shape[d] == 1);
    int64_t ars = 0, crs = 0;
    // With b shared but a's batch and row dims not one stride (a transposed view: the exported
    // transformer's [tokens, batch, features] input projection, 7 products of 32x16x48), a small f32
    // a is copied into rows first so that the product still folds into one.
    ember_tensor_desc a_rows = a;
    std::vector<float> packed_a;
    ember_buffer_s packed_buffer{};
    if (batches > 1 && b_shared && K > 0 && a.dtype == EMBER_F32 && batches * M * K <= kPackRowsMax &&
        !fold_rows(a, ars) && fold_rows(c, crs)) {
      packed_a = pack_dense<float>(a);  // a's shape is c's batch dims and [M, K]
      packed_buffer.data = packed_a.data();
      packed_buffer.bytes = packed_a.size() * sizeof(float);
      a_rows.buffer = &packed_buffer;
      a_rows.offset = 0;
      int64_t stride = 1;
      for (int d = r - 1; d >= 0; --d) {
        a_rows.strides[d] = stride;
        stride *= a.shape[d];
      }
    }
    bool fold = batches > 1 && b_shared && fold_rows(a_rows, ars) && fold_rows(c, crs);
    for (int k = 0; fold && epi && k < epi->n_ops; ++k)
      if (ember_post_has_operand(epi->ops[k].kind)) {
        const ember_tensor_desc& t = in[epi->ops[k].input];
        fold = fold_rows(t, blk.rs[size_t(k)]);
        blk.off[size_t(k)] = t.offset;
      }
    if (fold) {
      if (K == 0) {
        if (c.dtype == EMBER_F32) blk.apply(static_cast<float*>(c.buffer->data) + c.offset, crs, c.strides[r - 1], batches * M, N);
        else blk.apply(static_cast<double*>(c.buffer->data) + c.offset, crs, c.strides[r - 1], batches * M, N);
        return EMBER_OK;
      }
      const SubnormalInputsAsZero daz(!epi && batches * M * N * K < kSerialMacs);  // one thread at any count
      gemm_one(c.dtype, batches * M, N, K, a_rows, a_rows.offset, ars, a_rows.strides[r - 1], b, b.offset, c, c.offset,
               crs, epi ? &blk : nullptr);
      return EMBER_OK;
    }
    // A plain product reads subnormal operands as zero (subnormal_inputs.h) where each entry runs
    // on one thread whatever the thread count, so that results never depend on it: the entries of
    // a batch below kBatchSplitMacs (split over the threads, one each, or all on the calling
    // thread), a single product below kSerialMacs. Larger ones run on oneDNN's own threads, which
    // keep subnormals. Attention's per-head products are the first kind.
    const bool subnormals_as_zero = !epi && M * N * K < (batches > 1 ? kBatchSplitMacs : kSerialMacs);
    // One batch entry's product (blk: this entry's post-op offsets, a copy per thread).
    auto entry = [&](int64_t bt, EpiBlock& blk) {
      int64_t oa = a.offset, ob = b.offset, oc = c.offset, rem = bt;
      for (int k = 0; epi && k < epi->n_ops; ++k)
        if (ember_post_has_operand(epi->ops[k].kind)) {
          const ember_tensor_desc& t = in[epi->ops[k].input];
          blk.off[size_t(k)] = t.offset;
          blk.rs[size_t(k)] = t.strides[r - 2];
        }
      for (int d = r - 3; d >= 0; --d) {
        const int64_t i = rem % c.shape[d];
        rem /= c.shape[d];
        oa += i * a.strides[d];
        ob += i * b.strides[d];
        oc += i * c.strides[d];
        for (int k = 0; epi && k < epi->n_ops; ++k)
          if (ember_post_has_operand(epi->ops[k].kind)) blk.off[size_t(k)] += i * in[epi->ops[k].input].strides[d];
      }
      if (K == 0) {
        if (c.dtype == EMBER_F32) blk.apply(static_cast<float*>(c.buffer->data) + oc, c.strides[r - 2], c.strides[r - 1], M, N);
        else blk.apply(static_cast<double*>(c.buffer->data) + oc, c.strides[r - 2], c.strides[r - 1], M, N);
        return;
      }
      const SubnormalInputsAsZero daz(subnormals_as_zero);
      gemm_one(c.dtype, M, N, K, a, oa, a.strides[r - 2], a.strides[r - 1], b, ob, c, oc, c.strides[r - 2],
               epi ? &blk : nullptr);
    };
    // Many small products (attention's per-head matmuls): the entries are split over the OpenMP
    // threads and each product runs on one (oneDNN runs serially inside a parallel region), rather
    // than every small product forked over all threads in turn. Measured on the bf16 encoder step
    // at 2 threads: its batched matmuls took 2.7-6.5x their 1-thread time before this.
    const bool split = batches > 1 && M * N * K < kBatchSplitMacs && omp_get_max_threads() > 1 && !omp_in_parallel();
    std::exception_ptr failure;
    std::mutex failure_mutex;
    parallel_for(split, batches, [&](int64_t bt) {
      EpiBlock local = blk;
      try {
        entry(bt, local);
      } catch (...) {  // no exception may leave an OpenMP region: the first is rethrown below
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    });
    if (failure) std::rethrow_exception(failure);
  } catch (const dnnl::error& e) {
    return set_status(st, EMBER_ERR_INTERNAL, "%s: oneDNN failed: %s (status %d)", what, e.what(), int(e.status));
  } catch (const std::bad_alloc&) {
    return set_status(st, EMBER_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
  }
  return EMBER_OK;
}

}  // namespace

void gemm_2d(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
             int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs) {
  gemm_f32(M, N, K, {a, a_rs, a_cs}, {b, b_rs, b_cs}, {c, c_rs, 1});
}
void gemm_2d(int64_t M, int64_t N, int64_t K, const double* a, int64_t a_rs, int64_t a_cs, const double* b,
             int64_t b_rs, int64_t b_cs, double* c, int64_t c_rs) {
  gemm_loop<double, double>(M, N, K, {a, a_rs, a_cs}, {b, b_rs, b_cs}, {c, c_rs, 1});
}

int32_t matmul(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               ember_status* st) {
  return matmul_impl(in, n_in, out, n_out, nullptr, st);
}

int32_t matmul_epilogue(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                        const void* attrs, ember_status* st) {
  if (!attrs) return set_status(st, EMBER_ERR_INVALID, "matmul epilogue: no attrs");
  return matmul_impl(in, n_in, out, n_out, static_cast<const ember_epilogue_attrs*>(attrs), st);
}

}  // namespace ember::cpu
