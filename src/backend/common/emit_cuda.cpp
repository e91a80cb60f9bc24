// The CUDA target of the KIR emitter (emit_cuda.h): the CUDA C expression table (an ExprTable
// that keeps the C++ table's integer, comparison, cast and load/store spellings and replaces what
// CUDA spells differently: float constants as bit patterns, device math functions, integer
// division with errors) and the two kernel loop structures, those of the GLSL target
// (emit_glsl.cpp) with warps for subgroups: a grid-stride loop over points for elementwise
// programs, and for reductions an outer point per thread (mode 0) or per block (mode 1, a warp
// butterfly then a fixed tree over the warps' partials in shared memory: a deterministic order).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329 in std::string concatenation
#endif
#include "backend/common/emit_cuda.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backend/common/emit_c.h"
#include "backend/common/emit_gpu.h"

namespace ember::emit {

namespace {

using W = GpuLaunchWords;

bool is_float(uint8_t dt) { return dt == EMBER_F32 || dt == EMBER_F64; }
bool is_half(uint8_t dt) { return dt == EMBER_F16 || dt == EMBER_BF16; }
bool is_acc(uint16_t op) { return is_acc_op(op); }
std::string S(int64_t v) { return std::to_string(v); }
std::string var(int32_t k) { return "v" + S(k); }
std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

class CudaTable final : public ExprTable {
 public:
  std::string prelude() const override { return ""; }  // cuda_prelude() is added by the kernel emitter
  std::string constant(const ember_kir_inst& in) const override {
    switch (in.dtype) {  // floats as bit patterns: NaN payloads, infinities and -0 exactly
      case EMBER_F32: case EMBER_F16: case EMBER_BF16: {
        const float f = float(in.fimm);
        uint32_t bits = 0;
        std::memcpy(&bits, &f, sizeof bits);
        return "__uint_as_float(" + hex(bits) + "u)";
      }
      case EMBER_F64: {
        uint64_t bits = 0;
        std::memcpy(&bits, &in.fimm, sizeof bits);
        return "__longlong_as_double(" + hex(bits) + "LL)";
      }
      default: return ExprTable::constant(in);
    }
  }
  std::string unary(uint16_t op, uint8_t dt, const std::string& a) const override {
    if (is_half(dt)) dt = EMBER_F32;
    if (!is_float(dt)) return ExprTable::unary(op, dt, a);
    const std::string f = dt == EMBER_F32 ? "f" : "";
    const char* name = nullptr;
    switch (op) {
      case EMBER_KIR_NEG: return "(-" + a + ")";
      case EMBER_KIR_ABS: name = "fabs"; break;
      case EMBER_KIR_FLOOR: name = "floor"; break;
      case EMBER_KIR_CEIL: name = "ceil"; break;
      case EMBER_KIR_SQRT: name = "sqrt"; break;
      case EMBER_KIR_EXP: name = "exp"; break;
      case EMBER_KIR_LOG: name = "log"; break;
      case EMBER_KIR_TANH: name = "tanh"; break;
      case EMBER_KIR_ERF: name = "erf"; break;
      case EMBER_KIR_SIN: name = "sin"; break;
      case EMBER_KIR_COS: name = "cos"; break;
      default: return "";
    }
    return name + f + "(" + a + ")";
  }
  std::string binary(uint16_t op, uint8_t dt, const std::string& a, const std::string& b) const override {
    if (is_half(dt)) dt = EMBER_F32;
    const char* T = reg_type(dt);
    if (!T) return "";
    if (is_float(dt)) {
      switch (op) {
        case EMBER_KIR_FLOORDIV: return std::string(T) + "(floor(double(" + a + ") / double(" + b + ")))";
        case EMBER_KIR_FMOD: return std::string(T) + "(fmod(double(" + a + "), double(" + b + ")))";
        case EMBER_KIR_POW: return std::string(T) + "(pow(double(" + a + "), double(" + b + ")))";
        default: return ExprTable::binary(op, dt, a, b);  // + - * /, e_rem, e_max, e_min
      }
    }
    if (dt == EMBER_U64) {
      switch (op) {
        case EMBER_KIR_DIV: case EMBER_KIR_FLOORDIV: return "e_div_ul(er, " + a + ", " + b + ")";
        case EMBER_KIR_REM: case EMBER_KIR_FMOD: return "e_rem_ul(er, " + a + ", " + b + ")";
        case EMBER_KIR_POW: return "e_pow_ul(" + a + ", " + b + ")";
        default: return ExprTable::binary(op, dt, a, b);
      }
    }
    const std::string tu = std::string("<") + T + ", " + wrap_type(dt) + ">";
    switch (op) {
      case EMBER_KIR_DIV: return "e_div" + tu + "(er, " + a + ", " + b + ")";
      case EMBER_KIR_FLOORDIV: return "e_floordiv" + tu + "(er, " + a + ", " + b + ")";
      case EMBER_KIR_REM: return "e_irem<" + std::string(T) + ">(er, " + a + ", " + b + ")";
      case EMBER_KIR_FMOD: return "e_ifmod<" + std::string(T) + ">(er, " + a + ", " + b + ")";
      case EMBER_KIR_POW: return "e_ipow" + tu + "(er, " + a + ", " + b + ")";
      default: return ExprTable::binary(op, dt, a, b);
    }
  }
};

// Instruction k as a statement: what only the GPU loop structure spells (launch-time scalars,
// device scalars, gathers) here, the rest through the shared rendering.
std::string render(const ember_kir_program& p, const CudaTable& t, const ArgRefs& refs, int32_t k) {
  const ember_kir_inst& in = p.insts[k];
  const char* T = t.reg_type(in.dtype);
  if (!T) return "";
  std::string e;
  auto word = [](int arg, int field) { return "P[" + S(W::kArgs + W::kPerArg * arg + field) + "]"; };
  switch (in.op) {
    case EMBER_KIR_LOAD_SCALAR:
      if (in.dtype != EMBER_I64 || p.arg_dtypes[in.arg] != EMBER_I64) return "";
      e = "int64_t(" + word(in.arg, W::kOffset) + ")";
      break;
    case EMBER_KIR_LOAD_UNIFORM:
      if (p.arg_dtypes[in.arg] != in.dtype) return "";
      e = t.load(in.dtype, "g" + S(in.arg) + "[" + word(in.arg, W::kOffset) + "]");
      break;
    case EMBER_KIR_LOAD_GATHER:
      if (p.arg_dtypes[in.arg] != in.dtype || in.a < 0 || p.insts[in.a].dtype != EMBER_I64) return "";
      e = t.load(in.dtype, "g" + S(in.arg) + "[e_gather(er, " + refs.index(in.arg) + ", " + var(in.a) + ", " +
                               word(in.arg, W::kGatherStride) + ", " + word(in.arg, W::kGatherSize) + ")]");
      break;
    default:
      e = render_inst(p, t, refs, k, var);
      if (in.op == EMBER_KIR_STORE) return e;
  }
  if (e.empty()) return "";
  return std::string("const ") + T + " " + var(k) + " = " + e + ";";
}

std::string acc_init(const CudaTable& t, uint16_t op, uint8_t dt) {
  const std::string T = t.reg_type(dt);
  const bool fl = is_float(dt) || is_half(dt);
  if (dt == EMBER_U64) {
    switch (op) {
      case EMBER_KIR_ACC_SUM: case EMBER_KIR_ACC_MAX: case EMBER_KIR_ACC_ARGMAX: return "0ULL";
      case EMBER_KIR_ACC_PROD: return "1ULL";
      default: return "0xffffffffffffffffULL";
    }
  }
  const bool wide = dt == EMBER_I64 || dt == EMBER_U32;
  const std::string inf = dt == EMBER_F64 ? "__longlong_as_double(0x7ff0000000000000LL)" : "__uint_as_float(0x7f800000u)";
  switch (op) {
    case EMBER_KIR_ACC_SUM: return T + "(0)";
    case EMBER_KIR_ACC_PROD: return T + "(1)";
    case EMBER_KIR_ACC_MAX: case EMBER_KIR_ACC_ARGMAX: return fl ? "(-" + inf + ")" : wide ? "INT64_MIN" : "INT32_MIN";
    default: return fl ? inf : wide ? "int64_t(0x7fffffffffffffffLL)" : "int32_t(0x7fffffff)";
  }
}

// `x (op) y` of accumulation `in`: f16/bf16 sums and products accumulate in f32 (the program
// rounds the result, as on the CPU); integer sums and products wrap (in the unsigned twin of the
// register type: signed overflow is undefined in C++); max and min propagate NaN.
std::string combine(const ember_kir_inst& in, const std::string& x, const std::string& y) {
  const bool fl = is_float(in.dtype) || is_half(in.dtype);
  const std::string T = fl ? "" : CudaTable().reg_type(in.dtype), U = fl ? "" : wrap_type(in.dtype);
  auto wrapped = [&](const char* op) { return T + "(" + U + "(" + x + ") " + op + " " + U + "(" + y + "))"; };
  switch (in.op) {
    case EMBER_KIR_ACC_SUM: return fl ? "(" + x + " + " + y + ")" : wrapped("+");
    case EMBER_KIR_ACC_PROD: return fl ? "(" + x + " * " + y + ")" : wrapped("*");
    case EMBER_KIR_ACC_MAX: return fl ? "e_max(" + x + ", " + y + ")" : "(" + x + " > " + y + " ? " + x + " : " + y + ")";
    default: return fl ? "e_min(" + x + ", " + y + ")" : "(" + x + " < " + y + " ? " + x + " : " + y + ")";
  }
}

}  // namespace

bool emit_cuda_kernel(const ember_kir_program& p, const CudaTarget& target, std::string& src, bool* can_fail,
                      std::string* why, const CudaSourceOptions& options) {
  const CudaTable t;
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (target.block < 32 || (target.block & (target.block - 1)) != 0)
    return fail("block size " + S(target.block) + " is not a power of two of at least 32");
  KernelSurvey survey;
  if (!survey_kernel(p, t, survey, why)) return false;
  if (can_fail) *can_fail = survey.can_fail;
  const int max_phase = survey.max_phase;
  const bool reduce = survey.reduce;
  const std::vector<uint8_t>& used = survey.used;
  const ArgRefs refs{[](int a) { return "g" + S(a) + "[o" + S(a) + "]"; }, [](int a) { return "o" + S(a); }};
  const ArgRefs odd_refs{[](int a) { return "g" + S(a) + "[b" + S(a) + "]"; }, [](int a) { return "b" + S(a); }};
  for (int32_t k = 0; k < p.n_insts; ++k)
    if (!is_acc(p.insts[k].op) && render(p, t, refs, k).empty())
      return fail("instruction " + S(k) + " (" + S(p.insts[k].op) + " on dtype " + S(p.insts[k].dtype) +
                  ") has no CUDA form");

  const std::string B = S(target.block);
  src = "// CUDA kernel for KIR program '" + std::string(p.name ? p.name : "kernel") +
        "', generated by ember (src/backend/common/emit_cuda.cpp).\n";
  if (options.prelude) src += cuda_prelude(target);
  const std::string launch = options.name + "_launch";
  src += "struct " + launch + " { long long P[" + S(W::words(p.n_args)) + "]; };\n";
  src += "extern \"C\" __global__ void __launch_bounds__(" + B + ") " + options.name + "(const " + launch +
         " L, unsigned int* E";
  for (int32_t a = 0; a < p.n_args; ++a) src += std::string(", ") + t.storage_type(p.arg_dtypes[a]) + "* g" + S(a);
  src += ") {\n  const long long* P = L.P;\n  const EmberErr er{E, P[" + S(W::kLaunchId) + "]};\n  (void)er;\n";
  src += "  const int R = int(P[" + S(W::kRank) + "]);\n";
  auto offsets = [&](const std::string& prefix) {
    std::string s;
    for (int32_t a = 0; a < p.n_args; ++a)
      if (used[size_t(a)]) s += "    IX " + prefix + S(a) + " = IX(P[" + S(W::kArgs + W::kPerArg * a + W::kOffset) + "]);\n";
    return s;
  };
  if (!reduce) {
    src += "  const IX nthreads = IX(gridDim.x) * " + B + ";\n";
    src += "  for (IX id = IX(blockIdx.x) * " + B + " + IX(threadIdx.x); id < IX(P[" + S(W::kPoints) +
           "]); id += nthreads) {\n";
    src += offsets("o") + unravel_offsets(used, "id", "0", "R", "o", "    ");
    for (int32_t k = 0; k < p.n_insts; ++k) src += "    " + render(p, t, refs, k) + "\n";
    src += "  }\n}\n";
    return true;
  }
  // Reductions, in the mode of launch word kMode (the same for a whole launch): 0, a thread per
  // outer point walking its reduce points in row-major order (the reference backend's order);
  // 1, a block per outer point: thread l takes reduce points l, l + block, ...; the partials are
  // combined by a butterfly within each warp and a fixed tree over the warps in shared memory,
  // every thread then computes the per-outer-point values, and thread 0 stores them.
  const std::string NW = S(target.block / 32);
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    if (!is_acc(in.op)) continue;
    if (is_arg_reduction(in.op))
      src += "  __shared__ " + std::string(t.reg_type(p.insts[in.a].dtype)) + " shb" + S(k) + "[" + NW +
             "];\n  __shared__ int64_t shi" + S(k) + "[" + NW + "];\n  __shared__ bool shn" + S(k) + "[" + NW + "];\n";
    else
      src += "  __shared__ " + std::string(t.reg_type(in.dtype)) + " sh" + S(k) + "[" + NW + "];\n";
  }
  src += "  const bool tree = P[" + S(W::kMode) + "] != 0;\n  const unsigned lid = threadIdx.x, lane = lid % 32u, warp = lid / 32u;\n";
  src += "  const int ro = int(P[" + S(W::kOuterRank) + "]);\n";
  src += "  IX nred = 1;\n  for (int d = ro; d < R; ++d) nred *= IX(P[" + S(W::kShape) + " + d]);\n";
  src += "  const IX id_step = tree ? IX(gridDim.x) : IX(gridDim.x) * " + B + ";\n";
  src += "  const IX r_start = tree ? IX(lid) : 0, r_step = tree ? " + B + " : 1;\n";
  src += "  for (IX id = tree ? IX(blockIdx.x) : IX(blockIdx.x) * " + B + " + IX(lid); id < IX(P[" + S(W::kPoints) +
         "]); id += id_step) {\n";
  src += offsets("b") + unravel_offsets(used, "id", "0", "ro", "b", "    ");
  for (int pass = 0; 2 * pass <= max_phase; ++pass) {
    std::vector<int32_t> accs;
    bool has_even = false;
    for (int32_t k = 0; k < p.n_insts; ++k) {
      if (p.insts[k].phase == 2 * pass + 1 && is_acc(p.insts[k].op)) accs.push_back(k);
      has_even |= p.insts[k].phase == 2 * pass;
    }
    for (int32_t k : accs) {
      const ember_kir_inst& in = p.insts[k];
      if (is_arg_reduction(in.op)) {
        const uint8_t odt = p.insts[in.a].dtype;
        src += "    int64_t " + var(k) + " = -1;\n    " + t.reg_type(odt) + " best" + S(k) + " = " +
               acc_init(t, in.op, odt) + ";\n    bool nan" + S(k) + " = false;\n";
      } else {
        src += "    " + std::string(t.reg_type(in.dtype)) + " " + var(k) + " = " + acc_init(t, in.op, in.dtype) + ";\n";
      }
    }
    if (has_even || !accs.empty()) {
      src += "    for (IX r = r_start; r < nred; r += r_step) {\n";
      for (int32_t a = 0; a < p.n_args; ++a)
        if (used[size_t(a)]) src += "      IX o" + S(a) + " = b" + S(a) + ";\n";
      src += unravel_offsets(used, "r", "ro", "R", "o", "      ");
      for (int32_t k = 0; k < p.n_insts; ++k)
        if (p.insts[k].phase == 2 * pass) src += "      " + render(p, t, refs, k) + "\n";
      for (int32_t k : accs) {
        const ember_kir_inst& in = p.insts[k];
        const std::string v = var(k), x = var(in.a), K = S(k);
        if (is_arg_reduction(in.op)) {  // the first extreme value; the first NaN wins
          const uint8_t odt = p.insts[in.a].dtype;
          src += "      if (!nan" + K + ") {\n";
          if (is_float(odt) || is_half(odt))
            src += "        if (" + x + " != " + x + ") { nan" + K + " = true; " + v + " = int64_t(r); }\n        else ";
          else
            src += "        ";
          src += "if (" + x + (in.op == EMBER_KIR_ACC_ARGMAX ? " > " : " < ") + "best" + K + " || " + v +
                 " < 0) { best" + K + " = " + x + "; " + v + " = int64_t(r); }\n      }\n";
        } else {
          src += "      " + v + " = " + combine(in, v, x) + ";\n";
        }
      }
      src += "    }\n";
    }
    if (!accs.empty()) {
      src += "    if (tree) {\n";
      for (int32_t k : accs) {
        const ember_kir_inst& in = p.insts[k];
        const std::string v = var(k), K = S(k);
        if (is_arg_reduction(in.op)) {
          const bool mx = in.op == EMBER_KIR_ACC_ARGMAX;
          const std::string b = "best" + K, n = "nan" + K;
          src += "      for (int o = 16; o > 0; o >>= 1) {\n";
          src += "        const int64_t i2 = __shfl_xor_sync(0xffffffffu, " + v + ", o);\n";
          src += "        const auto b2 = __shfl_xor_sync(0xffffffffu, " + b + ", o);\n";
          src += "        const bool n2 = __shfl_xor_sync(0xffffffffu, int(" + n + "), o) != 0;\n";
          src += "        if (" + arg_reduction_wins(mx, "b2", "i2", "n2", b, v, n) + ") { " + b + " = b2; " + v + " = i2; " + n +
                 " = n2; }\n      }\n";
          src += "      if (lane == 0u) { shb" + K + "[warp] = " + b + "; shi" + K + "[warp] = " + v + "; shn" + K +
                 "[warp] = " + n + "; }\n      __syncthreads();\n";
          src += "      for (unsigned s = " + NW + "u / 2u; s > 0u; s >>= 1) {\n        if (lid < s && " +
                 arg_reduction_wins(mx, "shb" + K + "[lid + s]", "shi" + K + "[lid + s]", "shn" + K + "[lid + s]", "shb" + K + "[lid]",
                          "shi" + K + "[lid]", "shn" + K + "[lid]") +
                 ") { shb" + K + "[lid] = shb" + K + "[lid + s]; shi" + K + "[lid] = shi" + K + "[lid + s]; shn" + K +
                 "[lid] = shn" + K + "[lid + s]; }\n        __syncthreads();\n      }\n";
          src += "      " + v + " = shi" + K + "[0]; " + b + " = shb" + K + "[0]; " + n + " = shn" + K + "[0];\n";
        } else {
          // The partner's value in a variable: every lane must reach every shuffle (a ternary
          // would skip the second of two shuffles in some lanes).
          src += "      for (int o = 16; o > 0; o >>= 1) {\n        const " + std::string(t.reg_type(in.dtype)) +
                 " other = __shfl_xor_sync(0xffffffffu, " + v + ", o);\n        " + v + " = " + combine(in, v, "other") +
                 ";\n      }\n";
          src += "      if (lane == 0u) sh" + K + "[warp] = " + v + ";\n      __syncthreads();\n";
          src += "      for (unsigned s = " + NW + "u / 2u; s > 0u; s >>= 1) {\n";
          src += "        if (lid < s) sh" + K + "[lid] = " + combine(in, "sh" + K + "[lid]", "sh" + K + "[lid + s]") + ";\n";
          src += "        __syncthreads();\n      }\n      " + v + " = sh" + K + "[0];\n";
        }
      }
      src += "      __syncthreads();\n    }\n";
    }
    for (int32_t k = 0; k < p.n_insts; ++k)
      if (p.insts[k].phase == 2 * pass + 1 && !is_acc(p.insts[k].op)) {
        std::string line = render(p, t, odd_refs, k);
        if (p.insts[k].op == EMBER_KIR_STORE) line = "if (!tree || lid == 0u) " + line;
        src += "    " + line + "\n";
      }
  }
  src += "  }\n}\n";
  return true;
}

}  // namespace ember::emit
