// Library calls (abi.h EMBER_LIB_*) as GLSL compute shaders for the Vulkan plugin: each call is
// one or more passes (emit_glsl.h GlslPass) whose shaders read the call's tensors through their
// offsets and strides. The semantics are the reference backend's (src/backend/reference/
// library.cpp): same formulas, NaN rules and tie-breaking. This file has the shared helpers
// (emit_glsl_library.h), matmul, the dispatch and the table of what exists; the families live in
// emit_glsl_conv.cpp, emit_glsl_sort_scan.cpp and emit_glsl_attention.cpp. The epilogue calls
// (MATMUL_EPILOGUE, CONV2D_EPILOGUE) have no shader: the core then runs their post-ops as kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329 in std::string concatenation
#endif
#include "backend/common/emit_glsl_library.h"

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "backend/common/emit_c.h"
#include "backend/common/emit_glsl.h"
#include "backend/common/glsl_f64_math.h"

namespace ember::emit {

namespace lib {

using W = GlslLaunchWords;

bool fail(std::string* why, const std::string& msg) {
  if (why) *why = msg;
  return false;
}

int Params::u32(const std::string& name, int64_t v) {
  const int at = int(words.size());
  decl += "  uint " + name + " = uint(P[" + S(at) + "]);\n";
  words.push_back(v);
  return at;
}

int Params::i32(const std::string& name, int64_t v) {
  const int at = int(words.size());
  decl += "  int " + name + " = int(P[" + S(at) + "]);\n";
  words.push_back(v);
  return at;
}

int Params::i64(const std::string& name, int64_t v) {
  const int at = int(words.size());
  decl += "  int64_t " + name + " = P[" + S(at) + "];\n";
  words.push_back(v);
  return at;
}

void Params::real(const std::string& name, double v, bool as_double) {
  const int at = int(words.size());
  if (as_double) {
    int64_t bits;
    std::memcpy(&bits, &v, 8);
    words.push_back(bits);
    decl += "  double " + name + " = packDouble2x32(uvec2(uint(P[" + S(at) + "]), uint(P[" + S(at) + "] >> 32)));\n";
  } else {
    const float f = float(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    words.push_back(int64_t(bits));
    decl += "  float " + name + " = uintBitsToFloat(uint(P[" + S(at) + "]));\n";
  }
}

void Params::tensor(const std::string& name, const ember_tensor_desc& t, int rank) {
  i64(name + "_o", t.offset);
  for (int d = 0; d < rank; ++d) i64(name + "_s" + S(d), d < t.rank ? t.strides[d] : 0);
}

int Params::array(const int64_t* v, int n) {
  const int at = int(words.size());
  for (int i = 0; i < n; ++i) words.push_back(v[i]);
  return at;
}

GlslPass make_pass(const std::string& what, const GlslTarget& target, const std::vector<uint8_t>& dtypes,
                   const Params& params, int64_t outputs, int64_t loop_iterations, const std::string& body,
                   const std::string& functions, bool tree) {
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  bool need8 = false, need16 = false;
  for (uint8_t dt : dtypes) {
    need8 |= dt == EMBER_U8 || dt == EMBER_BOOL;
    need16 |= is_half(dt);
  }
  GlslPass p;
  p.glsl = glsl_header(what, target, need8, need16);
  for (size_t a = 0; a < dtypes.size(); ++a)
    p.glsl += "layout(std430, binding = " + S(int64_t(a) + 2) + ") buffer Arg" + S(int64_t(a)) + " { " +
              t->storage_type(dtypes[a]) + " d[]; } g" + S(int64_t(a)) + ";\n";
  p.glsl += functions;
  p.glsl += "void main() {\n  e_opaque = uint(P[" + S(W::kZero) + "]);\n";
  if (tree) {
    p.glsl += "  uint lid = gl_LocalInvocationID.x;\n";
    p.glsl += "  int64_t id = int64_t(gl_WorkGroupID.y) * int64_t(gl_NumWorkGroups.x) + int64_t(gl_WorkGroupID.x);\n";
    p.glsl += "  if (id >= P[" + S(W::kPoints) + "]) return;  // uniform in a workgroup\n";
  } else {
    p.glsl +=
        "  int64_t id = (int64_t(gl_WorkGroupID.y) * int64_t(gl_NumWorkGroups.x) + int64_t(gl_WorkGroupID.x)) * " +
        S(target.workgroup) + " + int64_t(gl_LocalInvocationID.x);\n";
    p.glsl += "  if (id >= P[" + S(W::kPoints) + "]) return;\n";
  }
  p.glsl += params.decl;
  p.glsl += body;
  p.glsl += "}\n";
  p.words = params.words;
  p.words[W::kPoints] = outputs;
  p.points = tree ? outputs * int64_t(target.workgroup) : outputs;
  // The header's own loops are in the bound too (a margin for the helper functions' loops).
  p.loop_iterations = loop_iterations + 16;
  return p;
}

std::string for_up(const std::string& v, const std::string& lo, const std::string& hi) {
  return "for (int64_t " + v + " = " + lo + "; " + v + " < " + hi + "; ++" + v + ")";
}

std::string for_down(const std::string& v, const std::string& lo, const std::string& hi) {
  return "for (int64_t " + v + " = " + hi + " - 1; " + v + " >= " + lo + "; --" + v + ")";
}

std::string unrolled(const std::string& v, const std::string& lo, const std::string& hi, const std::string& body,
                     const std::string& ind, const std::string& type) {
  const std::string b = v + "_u";
  auto copy = [&](int u, bool guard) {
    std::string c = ind + "  { " + type + " " + v + " = " + b + " + " + type + "(" + S(u) + ");\n";
    if (guard) c += ind + "    if (" + v + " < " + hi + ")\n";
    c += ind + "    {\n";
    size_t i = 0;
    while (i < body.size()) {
      size_t e = body.find('\n', i);
      if (e == std::string::npos) e = body.size();
      c += ind + "      " + body.substr(i, e - i) + "\n";
      i = e + 1;
    }
    return c + ind + "  } }\n";
  };
  // Whole blocks without guards, then the rest (fewer than kUnroll) guarded, outside the loop.
  std::string s = ind + "{\n" + ind + "  " + type + " " + b + " = " + lo + ";\n";
  s += ind + "  for (; " + b + " + " + type + "(" + S(kUnroll) + ") <= " + hi + "; " + b + " += " + type + "(" +
       S(kUnroll) + ")) {\n";
  for (int u = 0; u < kUnroll; ++u) s += "  " + copy(u, false);
  s += ind + "  }\n";
  for (int u = 0; u < kUnroll - 1; ++u) s += copy(u, true);
  return s + ind + "}\n";
}

std::string tree_shared(const std::string& A, const std::string& array, const GlslTarget& target) {
  return "shared " + A + " " + array + "[" + S(target.workgroup) + "];\n";
}

std::string tree_sum(const std::string& A, const std::string& array, const std::string& value, const std::string& total,
                     const GlslTarget& target) {
  std::string s = "  " + array + "[lid] = " + value + ";\n  barrier();\n";
  s += "  for (uint h = " + S(target.workgroup) + "u / 2u; h > 0u; h >>= 1) {\n";
  s += "    if (lid < h) " + array + "[lid] = " + array + "[lid] + " + array + "[lid + h];\n    barrier();\n  }\n";
  s += "  " + A + " " + total + " = " + array + "[0];\n  barrier();\n";
  return s;
}

int64_t tree_iterations(const GlslTarget& target) {
  int64_t n = 0;
  for (uint32_t h = target.workgroup / 2; h > 0; h >>= 1) ++n;
  return n;
}

std::string load(const ExprTable& t, uint8_t dt, int arg, const std::string& off) {
  return t.load(dt, "g" + S(arg) + ".d[uint(" + off + ")]");
}

std::string store(const ExprTable& t, uint8_t dt, int arg, const std::string& off, uint8_t value_dt,
                  const std::string& v) {
  return "g" + S(arg) + ".d[uint(" + off + ")] = " + t.store_value(dt, value_dt, v) + ";";
}

bool has_f64_exp_log(const GlslTarget& target) {
  const std::string_view m(kGlslF64Math);
  return target.float64 && m.find("e_expd(") != std::string_view::npos && m.find("e_logd(") != std::string_view::npos;
}

}  // namespace lib

namespace {

using W = GlslLaunchWords;

// Words of `n` tensors (offset and strides each) after the header.
void put_tensor(std::vector<int64_t>& words, int slot, const ember_tensor_desc& t) {
  int64_t* w = words.data() + W::kArgs + W::kPerArg * slot;
  w[W::kOffset] = t.offset;
  for (int d = 0; d < t.rank && d < 8; ++d) w[W::kStrides + d] = t.strides[d];
}

// Tiled matmul: a workgroup of 256 invocations per 64 x 64 block of outputs, each invocation 4 x 4
// of them; A and B go through shared memory 16 values of k at a time. Every output still sums
// k = 0, 1, ... K - 1 in order into one accumulator, as the one-output-per-invocation shader
// does. Used for floating dtypes when both output dims are at least 32 and the loop count per
// invocation stays under lavapipe's cap (K up to about 2500).
constexpr int64_t kTile = 64, kTileK = 16;

int64_t tiled_iterations(int64_t K, int rank) { return (K + kTileK - 1) / kTileK * 404 + 40 + rank; }

bool use_tiled_matmul(const ember_tensor_desc& a, const ember_tensor_desc& c, const GlslTarget& target) {
  const int r = c.rank;
  return target.workgroup == 256 && target.int64 && lib::is_floating(c.dtype) && c.shape[r - 2] >= 32 &&
         c.shape[r - 1] >= 32 && tiled_iterations(a.shape[r - 1], r) <= 60000;
}

GlslPass matmul_tiled(const ember_tensor_desc& a, const ember_tensor_desc& b, const ember_tensor_desc& c,
                      const GlslTarget& target) {
  using lib::S;
  const int r = c.rank;
  const uint8_t dt = uint8_t(c.dtype);
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  const std::string A = lib::compute_type(dt), R2 = S(r - 2), R1 = S(r - 1);
  const int64_t M = c.shape[r - 2], N = c.shape[r - 1], K = a.shape[r - 1];
  int64_t tiles = ((M + kTile - 1) / kTile) * ((N + kTile - 1) / kTile);
  lib::Params params;
  params.i64("M", M);
  params.i64("N", N);
  params.i64("K", K);
  for (int d = 0; d < r - 2; ++d) {
    params.i64("n" + S(d), c.shape[d]);
    tiles *= c.shape[d];
  }
  params.tensor("a", a, r);
  params.tensor("b", b, r);
  params.tensor("c", c, r);
  const std::string shared = "shared " + A + " sa[16][65];\nshared " + A + " sb[16][65];\n";
  std::string s;
  s += "  int64_t tn = (N + 63) / 64, tm = (M + 63) / 64;\n";
  s += "  int64_t tj = id % tn, rem = id / tn;\n  int64_t ti = rem % tm;\n  rem /= tm;\n";
  s += "  int64_t oa = a_o, ob = b_o, oc = c_o;\n";
  for (int d = r - 3; d >= 0; --d)
    s += "  { int64_t x = rem % n" + S(d) + "; rem /= n" + S(d) + "; oa += x * a_s" + S(d) + "; ob += x * b_s" + S(d) +
         "; oc += x * c_s" + S(d) + "; }\n";
  s += "  int64_t i0 = ti * 64, j0 = tj * 64;\n  uint tx = lid % 16u, ty = lid / 16u;\n";
  s += "  " + A + " acc[4][4];\n  for (int u = 0; u < 4; ++u) for (int v = 0; v < 4; ++v) acc[u][v] = " + A + "(0);\n";
  s += "  for (int64_t k0 = 0; k0 < K; k0 += 16) {\n";
  s += "    for (uint q = 0u; q < 4u; ++q) {\n      uint e = lid + 256u * q;\n";
  s += "      uint row = e / 16u, ka = e % 16u, kb = e / 64u, col = e % 64u;\n";
  s += "      int64_t gi = i0 + int64_t(row), gka = k0 + int64_t(ka), gj = j0 + int64_t(col), gkb = k0 + int64_t(kb);\n";
  s += "      sa[ka][row] = (gi < M && gka < K) ? " + lib::load(*t, dt, 0, "oa + gi * a_s" + R2 + " + gka * a_s" + R1) +
       " : " + A + "(0);\n";
  s += "      sb[kb][col] = (gj < N && gkb < K) ? " + lib::load(*t, dt, 1, "ob + gkb * b_s" + R2 + " + gj * b_s" + R1) +
       " : " + A + "(0);\n    }\n    barrier();\n";
  s += "    int kn = int(min(K - k0, int64_t(16)));\n    for (int kk = 0; kk < kn; ++kk) {\n";
  s += "      " + A + " av[4], bv[4];\n";
  s += "      for (int u = 0; u < 4; ++u) { av[u] = sa[kk][ty * 4u + uint(u)]; bv[u] = sb[kk][tx * 4u + uint(u)]; }\n";
  s += "      for (int u = 0; u < 4; ++u) for (int v = 0; v < 4; ++v) acc[u][v] += av[u] * bv[v];\n    }\n";
  s += "    barrier();\n  }\n";
  s += "  for (int u = 0; u < 4; ++u) for (int v = 0; v < 4; ++v) {\n";
  s += "    int64_t gi = i0 + int64_t(ty * 4u + uint(u)), gj = j0 + int64_t(tx * 4u + uint(v));\n";
  s += "    if (gi < M && gj < N) " +
       lib::store(*t, dt, 2, "oc + gi * c_s" + R2 + " + gj * c_s" + R1, lib::compute_dtype(dt), "acc[u][v]") + "\n  }\n";
  return lib::make_pass("matmul (tiled)", target, {dt, dt, dt}, params, tiles, tiled_iterations(K, r), s, shared,
                        /*tree=*/true);
}

bool matmul(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
            const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why) {
  if (n_in != 2 || n_out != 1) {
    if (why) *why = "matmul takes 2 inputs and 1 output";
    return false;
  }
  const ember_tensor_desc &a = in[0], &b = in[1], &c = out[0];
  const int r = c.rank;
  if (r < 2 || r > 8 || a.rank != r || b.rank != r || a.dtype != c.dtype || b.dtype != c.dtype) {
    if (why) *why = "matmul: ranks or dtypes differ";
    return false;
  }
  if (use_tiled_matmul(a, c, target)) {
    passes.push_back(matmul_tiled(a, b, c, target));
    return true;
  }
  GlslPass p;
  if (!emit_glsl_matmul(uint8_t(c.dtype), target, p.glsl, why)) return false;
  p.words.assign(size_t(W::words(3)), 0);
  p.points = 1;
  for (int d = 0; d < r; ++d) p.points *= c.shape[d];
  p.words[W::kPoints] = p.points;
  p.words[W::kRank] = r;
  p.words[2] = a.shape[r - 1];  // K
  for (int d = 0; d < r; ++d) p.words[size_t(W::kShape + d)] = c.shape[d];
  put_tensor(p.words, 0, a);
  put_tensor(p.words, 1, b);
  put_tensor(p.words, 2, c);
  // emit_glsl_matmul's loops: the batch dims, then K (in chunks of 32768).
  p.loop_iterations = r + a.shape[r - 1] + 17;  // per output: the batch dims, then K
  p.grid_stride = true;                        // emit_glsl_matmul loops over its outputs
  passes.push_back(std::move(p));
  return true;
}

}  // namespace

bool glsl_library_supports(int32_t op, uint8_t dtype, const GlslTarget& target) {
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  // The library shaders are written for the ABI's first eight dtypes; the newer integers (i8,
  // i16, u16, u32) run their library calls on the CPU (the host fallback).
  const bool storable = t->storage_type(dtype) && t->reg_type(dtype) && dtype <= EMBER_BOOL;
  const bool floating = storable && lib::is_floating(dtype);
  if (op != EMBER_LIB_MATMUL && !target.int64) return false;  // their shaders use int64 (the host fallback runs them)
  switch (op) {
    case EMBER_LIB_MATMUL: return storable;
    case EMBER_LIB_CONV2D:
    case EMBER_LIB_CONV2D_BACKWARD_DATA:
    case EMBER_LIB_CONV2D_BACKWARD_WEIGHTS:
    case EMBER_LIB_MAX_POOL2D:
    case EMBER_LIB_MAX_POOL2D_INDICES:
    case EMBER_LIB_AVG_POOL2D:
    case EMBER_LIB_AVG_POOL2D_BACKWARD:
    case EMBER_LIB_MAX_POOL2D_BACKWARD: return floating;
    case EMBER_LIB_ARGSORT:
    case EMBER_LIB_TOPK:
    case EMBER_LIB_CUMSUM:
    case EMBER_LIB_CUMPROD:
    case EMBER_LIB_CUMMAX_INDICES:
    case EMBER_LIB_CUMMIN_INDICES: return storable;
    case EMBER_LIB_FUSED_ATTENTION:
    case EMBER_LIB_FUSED_ATTENTION_BACKWARD: return floating && (dtype != EMBER_F64 || lib::has_f64_exp_log(target));
    default: return false;  // the epilogue calls: the core runs their post-ops as separate kernels
  }
}

bool emit_glsl_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                       int32_t n_out, const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes,
                       std::string* why) {
  passes.clear();
  if (op != EMBER_LIB_MATMUL && !attrs)
    return lib::fail(why, "library call " + std::to_string(op) + " needs attributes");
  if (!in || !out || n_in < 1 || n_out != 1)
    return lib::fail(why, "library call " + std::to_string(op) + ": bad operand counts");
  if (!glsl_library_supports(op, uint8_t(in[0].dtype), target))
    return lib::fail(why, "library call " + std::to_string(op) + " on dtype " + std::to_string(in[0].dtype) +
                              " has no shader on this device");
  switch (op) {
    case EMBER_LIB_MATMUL: return matmul(in, n_in, out, n_out, target, passes, why);
    case EMBER_LIB_CONV2D:
    case EMBER_LIB_CONV2D_BACKWARD_DATA:
    case EMBER_LIB_CONV2D_BACKWARD_WEIGHTS:
    case EMBER_LIB_MAX_POOL2D:
    case EMBER_LIB_MAX_POOL2D_INDICES:
    case EMBER_LIB_AVG_POOL2D:
    case EMBER_LIB_AVG_POOL2D_BACKWARD:
    case EMBER_LIB_MAX_POOL2D_BACKWARD: return lib::conv_pool(op, in, n_in, out, n_out, attrs, target, passes, why);
    case EMBER_LIB_ARGSORT:
    case EMBER_LIB_TOPK:
    case EMBER_LIB_CUMSUM:
    case EMBER_LIB_CUMPROD:
    case EMBER_LIB_CUMMAX_INDICES:
    case EMBER_LIB_CUMMIN_INDICES: return lib::sort_scan(op, in, n_in, out, n_out, attrs, target, passes, why);
    case EMBER_LIB_FUSED_ATTENTION:
    case EMBER_LIB_FUSED_ATTENTION_BACKWARD:
      return lib::attention(op, in, n_in, out, n_out, attrs, target, passes, why);
    default: return lib::fail(why, "library call " + std::to_string(op) + " has no Vulkan shader");
  }
}

}  // namespace ember::emit
