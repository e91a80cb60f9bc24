// Library calls (abi.h EMBER_LIB_*) as GLSL compute shaders for the Vulkan plugin: each call is
// one or more passes (emit_glsl.h GlslPass) whose shaders read the call's tensors through their
// offsets and strides. The semantics are the reference backend's (src/backend/reference/
// library.cpp): same formulas, NaN rules and tie-breaking. This file has the shared helpers
// (emit_glsl_library.h), matmul, the dispatch and the table of what exists; the families live in
// emit_glsl_conv.cpp, emit_glsl_sort_scan.cpp and emit_glsl_attention.cpp. The epilogue calls
// (MATMUL_EPILOGUE, CONV2D_EPILOGUE) apply their post-ops before the store (post_ops).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329 in std::string concatenation
#endif
#include "backend/common/emit_glsl_library.h"

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "backend/common/emit_c.h"
#include "backend/common/emit_glsl.h"
#include "backend/common/glsl_f64_math.h"
#include "backend/library_attrs.h"

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

namespace {

// Names the post-op chain's intermediate values, each a `precise` variable (no contraction, as
// in the KIR shaders).
struct PostSpeller {
  const ExprTable& t;
  uint8_t dt;
  std::string ind;
  std::string code;
  int next = 0;
  std::string c(double v) const { return t.constant(ember_kir_inst{EMBER_KIR_CONST, dt, 0, -1, -1, -1, 0, 0, v, 0}); }
  std::string let(const std::string& e) {
    const std::string v = "pq" + S(next++);
    code += ind + "precise " + compute_type(dt) + " " + v + " = " + e + ";\n";
    return v;
  }
  std::string bin(uint16_t op, const std::string& a, const std::string& b) { return let(t.binary(op, dt, a, b)); }
  std::string un(uint16_t op, const std::string& a) { return let(t.unary(op, dt, a)); }
};

}  // namespace

std::string post_ops(const ExprTable& t, uint8_t dt, const ember_epilogue_attrs& e,
                     const std::function<std::string(int)>& operand, const std::string& ind) {
  PostSpeller p{t, dt, ind, "", 0};
  std::string y = "y";
  for (int k = 0; k < e.n_ops; ++k) {
    const ember_post_op& op = e.ops[k];
    switch (op.kind) {
      case EMBER_POST_ADD: y = p.bin(EMBER_KIR_ADD, y, operand(op.input)); break;
      case EMBER_POST_MUL: y = p.bin(EMBER_KIR_MUL, y, operand(op.input)); break;
      case EMBER_POST_MASK_POSITIVE:  // where(gt(o, 0), y, +0): false for a NaN o
        y = p.let("(" + operand(op.input) + " > " + p.c(0) + ") ? " + y + " : " + p.c(0));
        break;
      case EMBER_POST_LINEAR:  // x + c is (1, c); x * c is (c, -0), and y * c + -0 is y * c
        if (op.alpha != 1.0) y = p.bin(EMBER_KIR_MUL, p.c(op.alpha), y);
        if (op.alpha == 1.0 || !(op.beta == 0 && std::signbit(op.beta))) y = p.bin(EMBER_KIR_ADD, y, p.c(op.beta));
        break;
      case EMBER_POST_RELU: y = p.bin(EMBER_KIR_MAX, y, p.c(0)); break;  // max(x, 0)
      case EMBER_POST_TANH: y = p.un(EMBER_KIR_TANH, y); break;
      case EMBER_POST_SIGMOID: {  // 1.0 / (1.0 + exp(-x))
        const std::string e1 = p.un(EMBER_KIR_EXP, p.un(EMBER_KIR_NEG, y));
        y = p.bin(EMBER_KIR_DIV, p.c(1), p.bin(EMBER_KIR_ADD, p.c(1), e1));
        break;
      }
      case EMBER_POST_GELU_ERF: {  // 0.5 * x * (1.0 + erf(x * 0.70710678118654752440))
        const std::string h = p.bin(EMBER_KIR_MUL, p.c(0.5), y);
        const std::string er = p.un(EMBER_KIR_ERF, p.bin(EMBER_KIR_MUL, y, p.c(0.70710678118654752440)));
        y = p.bin(EMBER_KIR_MUL, h, p.bin(EMBER_KIR_ADD, p.c(1), er));
        break;
      }
      case EMBER_POST_GELU_TANH: {  // 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)))
        const std::string h = p.bin(EMBER_KIR_MUL, p.c(0.5), y);
        const std::string cube = p.bin(EMBER_KIR_MUL, p.bin(EMBER_KIR_MUL, p.bin(EMBER_KIR_MUL, p.c(0.044715), y), y), y);
        const std::string in = p.bin(EMBER_KIR_MUL, p.c(0.79788456080286535588), p.bin(EMBER_KIR_ADD, y, cube));
        y = p.bin(EMBER_KIR_MUL, h, p.bin(EMBER_KIR_ADD, p.c(1), p.un(EMBER_KIR_TANH, in)));
        break;
      }
      default: break;  // refused by the caller (post_ops_supported covers every kind)
    }
  }
  return p.code + ind + "y = " + y + ";\n";
}

bool post_ops_supported(const ExprTable& t, uint8_t dt) {
  for (uint16_t op : {EMBER_KIR_NEG, EMBER_KIR_EXP, EMBER_KIR_TANH, EMBER_KIR_ERF})
    if (t.unary(op, dt, "a").empty()) return false;
  for (uint16_t op : {EMBER_KIR_ADD, EMBER_KIR_MUL, EMBER_KIR_DIV, EMBER_KIR_MAX})
    if (t.binary(op, dt, "a", "b").empty()) return false;
  return true;
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

// The launch words both matmul shaders declare (M, N, K, the batch dims n0.., then a, b, c and an
// epilogue's operands p2.., offset and strides each) and their bindings' dtypes (the call's
// inputs, then c).
lib::Params matmul_params(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& c,
                          std::vector<uint8_t>& dtypes) {
  using lib::S;
  const int r = c.rank;
  lib::Params params;
  params.i64("M", c.shape[r - 2]);
  params.i64("N", c.shape[r - 1]);
  params.i64("K", in[0].shape[r - 1]);
  for (int d = 0; d < r - 2; ++d) params.i64("n" + S(d), c.shape[d]);
  params.tensor("a", in[0], r);
  params.tensor("b", in[1], r);
  params.tensor("c", c, r);
  dtypes = {uint8_t(c.dtype), uint8_t(c.dtype)};
  for (int32_t k = 2; k < n_in; ++k) {
    params.tensor("p" + S(k), in[k], r);
    dtypes.push_back(uint8_t(in[k].dtype));
  }
  dtypes.push_back(uint8_t(c.dtype));
  return params;
}

// Statements adding the batch index (decoded from `rem`, innermost dim first) times each
// tensor's batch strides to its offset: oa, ob, oc and op2...
std::string batch_offsets(int32_t n_in, int r) {
  using lib::S;
  std::string s;
  for (int d = r - 3; d >= 0; --d) {
    s += "  { int64_t x = rem % n" + S(d) + "; rem /= n" + S(d) + "; oa += x * a_s" + S(d) + "; ob += x * b_s" + S(d) +
         "; oc += x * c_s" + S(d) + ";";
    for (int32_t k = 2; k < n_in; ++k) s += " op" + S(k) + " += x * p" + S(k) + "_s" + S(d) + ";";
    s += " }\n";
  }
  return s;
}

// `in` = a, b, then an epilogue's operands (MATMUL_EPILOGUE, with `epi`; shaped as c, broadcast
// by their strides): the bindings are the call's inputs, then c.
GlslPass matmul_tiled(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& c, const GlslTarget& target,
                      const ember_epilogue_attrs* epi) {
  using lib::S;
  const ember_tensor_desc& a = in[0];
  const int r = c.rank;
  const uint8_t dt = uint8_t(c.dtype);
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  const std::string A = lib::compute_type(dt), R2 = S(r - 2), R1 = S(r - 1);
  const int64_t M = c.shape[r - 2], N = c.shape[r - 1], K = a.shape[r - 1];
  int64_t tiles = ((M + kTile - 1) / kTile) * ((N + kTile - 1) / kTile);
  for (int d = 0; d < r - 2; ++d) tiles *= c.shape[d];
  std::vector<uint8_t> dtypes;
  const lib::Params params = matmul_params(in, n_in, c, dtypes);
  const int out_arg = n_in;
  const std::string shared = "shared " + A + " sa[16][65];\nshared " + A + " sb[16][65];\n";
  std::string s;
  s += "  int64_t tn = (N + 63) / 64, tm = (M + 63) / 64;\n";
  s += "  int64_t tj = id % tn, rem = id / tn;\n  int64_t ti = rem % tm;\n  rem /= tm;\n";
  s += "  int64_t oa = a_o, ob = b_o, oc = c_o;\n";
  for (int32_t k = 2; k < n_in; ++k) s += "  int64_t op" + S(k) + " = p" + S(k) + "_o;\n";
  s += batch_offsets(n_in, r);
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
  const std::string at_c = "oc + gi * c_s" + R2 + " + gj * c_s" + R1;
  if (!epi) {
    s += "    if (gi < M && gj < N) " + lib::store(*t, dt, out_arg, at_c, lib::compute_dtype(dt), "acc[u][v]") + "\n  }\n";
  } else {
    s += "    if (gi < M && gj < N) {\n      precise " + A + " y = acc[u][v];\n";
    s += lib::post_ops(*t, dt, *epi, [&](int k) {
      return lib::load(*t, uint8_t(in[k].dtype), k, "op" + S(k) + " + gi * p" + S(k) + "_s" + R2 + " + gj * p" + S(k) + "_s" + R1);
    }, "      ");
    s += "      " + lib::store(*t, dt, out_arg, at_c, lib::compute_dtype(dt), "y") + "\n    }\n  }\n";
  }
  return lib::make_pass(epi ? "matmul with epilogue (tiled)" : "matmul (tiled)", target, dtypes, params, tiles,
                        tiled_iterations(K, r), s, shared, /*tree=*/true);
}

// MATMUL_EPILOGUE where the tiled shader does not apply: one output per invocation, the K loop as
// emit_glsl_matmul's, then the post-ops.
GlslPass matmul_epilogue_simple(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& c,
                                const GlslTarget& target, const ember_epilogue_attrs& epi) {
  using lib::S;
  const ember_tensor_desc& a = in[0];
  const int r = c.rank;
  const uint8_t dt = uint8_t(c.dtype);
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  const std::string A = lib::compute_type(dt), R2 = S(r - 2), R1 = S(r - 1);
  const int64_t M = c.shape[r - 2], N = c.shape[r - 1], K = a.shape[r - 1];
  int64_t points = M * N;
  for (int d = 0; d < r - 2; ++d) points *= c.shape[d];
  std::vector<uint8_t> dtypes;
  const lib::Params params = matmul_params(in, n_in, c, dtypes);
  std::string s = "  int64_t j = id % N, rem = id / N;\n  int64_t i = rem % M;\n  rem /= M;\n";
  s += "  int64_t oa = a_o + i * a_s" + R2 + ", ob = b_o + j * b_s" + R1 + ", oc = c_o + i * c_s" + R2 + " + j * c_s" + R1 + ";\n";
  for (int32_t k = 2; k < n_in; ++k)
    s += "  int64_t op" + S(k) + " = p" + S(k) + "_o + i * p" + S(k) + "_s" + R2 + " + j * p" + S(k) + "_s" + R1 + ";\n";
  s += batch_offsets(n_in, r);
  s += "  " + A + " acc = " + A + "(0);\n";
  s += "  for (int64_t k = 0; k < K; ++k)\n";
  s += "    acc += " + lib::load(*t, dt, 0, "oa + k * a_s" + R1) + " * " + lib::load(*t, dt, 1, "ob + k * b_s" + R2) + ";\n";
  s += "  precise " + A + " y = acc;\n";
  s += lib::post_ops(*t, dt, epi, [&](int k) { return lib::load(*t, uint8_t(in[k].dtype), k, "op" + S(k)); }, "  ");
  s += "  " + lib::store(*t, dt, n_in, "oc", lib::compute_dtype(dt), "y") + "\n";
  return lib::make_pass("matmul with epilogue", target, dtypes, params, points, K + r, s);
}

bool matmul_epilogue(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                     const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why) {
  const auto& epi = *static_cast<const ember_epilogue_attrs*>(attrs);
  if (n_in < 2 || n_out != 1 || epi.n_ops < 1 || epi.n_ops > EMBER_MAX_POST_OPS)
    return lib::fail(why, "matmul epilogue: bad operand or post-op counts");
  const ember_tensor_desc &a = in[0], &b = in[1], &c = out[0];
  const int r = c.rank;
  if (r < 2 || r > 8 || a.rank != r || b.rank != r || a.dtype != c.dtype || b.dtype != c.dtype)
    return lib::fail(why, "matmul epilogue: ranks or dtypes differ");
  for (int k = 0; k < epi.n_ops; ++k) {
    const ember_post_op& op = epi.ops[k];
    if (op.kind < 0 || op.kind >= EMBER_POST_NUM_KINDS) return lib::fail(why, "matmul epilogue: unknown post-op");
    if (ember_post_has_operand(op.kind) &&
        (op.input < 2 || op.input >= n_in || in[op.input].rank != r || in[op.input].dtype != c.dtype))
      return lib::fail(why, "matmul epilogue: a post-op's operand is missing or not shaped as the output");
  }
  if (use_tiled_matmul(a, c, target)) passes.push_back(matmul_tiled(in, n_in, c, target, &epi));
  else passes.push_back(matmul_epilogue_simple(in, n_in, c, target, epi));
  return true;
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
    passes.push_back(matmul_tiled(in, n_in, c, target, nullptr));
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
    case EMBER_LIB_INDEX_ADD: return dtype == EMBER_F32 || (dtype == EMBER_F64 && target.float64);
    // f32 and f64 (the core folds no other dtype), where every post-op can be spelled
    case EMBER_LIB_MATMUL_EPILOGUE:
    case EMBER_LIB_CONV2D_EPILOGUE:
      return (dtype == EMBER_F32 || dtype == EMBER_F64) && storable && target.int64 && lib::post_ops_supported(*t, dtype);
    default: return false;
  }
}

bool emit_glsl_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                       int32_t n_out, const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes,
                       std::string* why) {
  passes.clear();
  if (op != EMBER_LIB_MATMUL && !attrs)
    return lib::fail(why, "library call " + std::to_string(op) + " needs attributes");
  if (!in || !out || n_in < 1 || !library_output_count_ok(op, n_out))
    return lib::fail(why, "library call " + std::to_string(op) + ": bad operand counts");
  if (!glsl_library_supports(op, uint8_t(in[0].dtype), target))
    return lib::fail(why, "library call " + std::to_string(op) + " on dtype " + std::to_string(in[0].dtype) +
                              " has no shader on this device");
  switch (op) {
    case EMBER_LIB_MATMUL: return matmul(in, n_in, out, n_out, target, passes, why);
    case EMBER_LIB_MATMUL_EPILOGUE: return matmul_epilogue(in, n_in, out, n_out, attrs, target, passes, why);
    case EMBER_LIB_CONV2D:
    case EMBER_LIB_CONV2D_BACKWARD_DATA:
    case EMBER_LIB_CONV2D_BACKWARD_WEIGHTS:
    case EMBER_LIB_MAX_POOL2D:
    case EMBER_LIB_MAX_POOL2D_INDICES:
    case EMBER_LIB_AVG_POOL2D:
    case EMBER_LIB_AVG_POOL2D_BACKWARD:
    case EMBER_LIB_MAX_POOL2D_BACKWARD:
    case EMBER_LIB_CONV2D_EPILOGUE: return lib::conv_pool(op, in, n_in, out, n_out, attrs, target, passes, why);
    case EMBER_LIB_ARGSORT:
    case EMBER_LIB_TOPK:
    case EMBER_LIB_CUMSUM:
    case EMBER_LIB_CUMPROD:
    case EMBER_LIB_CUMMAX_INDICES:
    case EMBER_LIB_CUMMIN_INDICES: return lib::sort_scan(op, in, n_in, out, n_out, attrs, target, passes, why);
    case EMBER_LIB_FUSED_ATTENTION:
    case EMBER_LIB_FUSED_ATTENTION_BACKWARD:
      return lib::attention(op, in, n_in, out, n_out, attrs, target, passes, why);
    case EMBER_LIB_INDEX_ADD: return lib::index_add(in, n_in, out, n_out, attrs, target, passes, why);
    default: return lib::fail(why, "library call " + std::to_string(op) + " has no Vulkan shader");
  }
}

}  // namespace ember::emit
