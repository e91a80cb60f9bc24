// The GLSL target of the KIR emitter (emit_glsl.h): the GLSL expression table (an ExprTable, so
// per-instruction rendering is shared with the C++ target through render_inst) and the two
// compute-shader loop structures. Formulas follow the interpreter and the reference backend
// (src/backend/reference/reference.cpp); where GLSL leaves a case undefined (log of a negative
// number, pow of a negative base, NaN in min/max, integer division by zero) the prelude spells it
// out. Accuracy where it differs from the CPU is stated in docs/backends.md (Vulkan).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329 in std::string concatenation
#endif
#include "backend/common/emit_glsl.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backend/common/emit_c.h"

namespace ember::emit {

namespace {

using W = GlslLaunchWords;

bool is_float(uint8_t dt) { return dt == EMBER_F32 || dt == EMBER_F64; }
bool is_half(uint8_t dt) { return dt == EMBER_F16 || dt == EMBER_BF16; }
bool is_acc(uint16_t op) { return is_acc_op(op); }
std::string S(int64_t v) { return std::to_string(v); }
std::string var(int32_t k) { return "v" + S(k); }

std::string hex32(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08xu", v);
  return b;
}

// Zeros, infinities and NaN are or'ed with e_opaque (a launch word that is always 0): drivers fold
// x * 0.0 to 0 and x + 0.0 to x when they see the constant (lavapipe does, even with float
// controls and NoContraction), which is wrong for NaN, infinities and -0.
std::string float_literal(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const bool special = f == 0.0f || std::isinf(f) || std::isnan(f);
  return "uintBitsToFloat(" + hex32(bits) + (special ? " | e_opaque" : "") + ")";
}

std::string double_literal(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  const bool special = d == 0.0 || std::isinf(d) || std::isnan(d);
  return "packDouble2x32(uvec2(" + hex32(uint32_t(bits)) + (special ? " | e_opaque" : "") + ", " +
         hex32(uint32_t(bits >> 32)) + "))";
}

std::string i64_literal(int64_t v) {
  char b[40];
  std::snprintf(b, sizeof b, "int64_t(0x%" PRIx64 "UL)", uint64_t(v));
  return b;
}

class GlslTable final : public ExprTable {
 public:
  explicit GlslTable(const GlslTarget& t) : t_(t) {}

  const char* reg_type(uint8_t dt) const override {
    switch (dt) {
      case EMBER_F32: case EMBER_F16: case EMBER_BF16: return "float";
      case EMBER_F64: return t_.float64 ? "double" : nullptr;
      case EMBER_I64: case EMBER_U32: return t_.int64 ? "int64_t" : nullptr;  // u32 held in i64 (abi.h)
      case EMBER_I32: case EMBER_U8: case EMBER_BOOL: case EMBER_I8: case EMBER_I16: case EMBER_U16: return "int";
      case EMBER_U64: return t_.int64 ? "uint64_t" : nullptr;
      default: return nullptr;
    }
  }
  const char* storage_type(uint8_t dt) const override {
    switch (dt) {
      case EMBER_F32: return "float";
      case EMBER_F64: return t_.float64 ? "double" : nullptr;
      case EMBER_I64: return t_.int64 ? "int64_t" : nullptr;
      case EMBER_I32: return "int";
      case EMBER_U8: case EMBER_BOOL: return t_.storage8 ? "uint8_t" : nullptr;
      case EMBER_I8: return t_.storage8 ? "int8_t" : nullptr;
      case EMBER_I16: return t_.storage16 ? "int16_t" : nullptr;
      case EMBER_U16: return t_.storage16 ? "uint16_t" : nullptr;
      case EMBER_U32: return t_.int64 ? "uint" : nullptr;
      case EMBER_U64: return t_.int64 ? "uint64_t" : nullptr;
      case EMBER_F16: case EMBER_BF16: return t_.storage16 ? "uint16_t" : nullptr;
      default: return nullptr;
    }
  }
  std::string constant(const ember_kir_inst& in) const override {
    switch (in.dtype) {
      case EMBER_F32: case EMBER_F16: case EMBER_BF16: return float_literal(float(in.fimm));
      case EMBER_F64: return t_.float64 ? double_literal(in.fimm) : "";
      case EMBER_I64: case EMBER_U32: return t_.int64 ? i64_literal(in.iimm) : "";
      case EMBER_U64: return t_.int64 ? "uint64_t(" + i64_literal(in.iimm) + ")" : "";
      case EMBER_I32: case EMBER_U8: case EMBER_BOOL: case EMBER_I8: case EMBER_I16: case EMBER_U16:
        return "int(" + hex32(uint32_t(uint64_t(in.iimm))) + ")";
      default: return "";
    }
  }
  std::string unary(uint16_t op, uint8_t dt, const std::string& a) const override {
    if (is_half(dt)) dt = EMBER_F32;
    if (!reg_type(dt)) return "";
    if (dt == EMBER_F32) {
      if (t_.float64 && t_.f32_math_via_f64) {
        const char* d = nullptr;
        switch (op) {
          case EMBER_KIR_EXP: d = "e_expd"; break;
          case EMBER_KIR_LOG: d = "e_logd"; break;
          case EMBER_KIR_TANH: d = "e_tanhd"; break;
          case EMBER_KIR_ERF: d = "e_erfd"; break;
          case EMBER_KIR_SIN: d = "e_sind"; break;
          case EMBER_KIR_COS: d = "e_cosd"; break;
          default: break;
        }
        if (d) return std::string("float(") + d + "(double(" + a + ")))";
      }
      switch (op) {
        case EMBER_KIR_NEG: return "-" + a;
        case EMBER_KIR_ABS: return "abs(" + a + ")";
        case EMBER_KIR_FLOOR: return "floor(" + a + ")";
        case EMBER_KIR_CEIL: return "ceil(" + a + ")";
        case EMBER_KIR_SQRT: return "e_sqrtf(" + a + ")";
        case EMBER_KIR_EXP: return "e_expf(" + a + ")";
        case EMBER_KIR_LOG: return "e_logf(" + a + ")";
        case EMBER_KIR_TANH: return "e_tanhf(" + a + ")";
        case EMBER_KIR_ERF: return "e_erff(" + a + ")";
        case EMBER_KIR_SIN: return "e_sinf(" + a + ")";
        case EMBER_KIR_COS: return "e_cosf(" + a + ")";
        default: return "";
      }
    }
    if (dt == EMBER_F64) {  // GLSL has no f64 transcendental functions: glsl_f64_math.h has them
      switch (op) {
        case EMBER_KIR_NEG: return "-" + a;
        case EMBER_KIR_ABS: return "abs(" + a + ")";
        case EMBER_KIR_FLOOR: return "floor(" + a + ")";
        case EMBER_KIR_CEIL: return "ceil(" + a + ")";
        case EMBER_KIR_SQRT: return "e_sqrtd(" + a + ")";
        case EMBER_KIR_EXP: return "e_expd(" + a + ")";
        case EMBER_KIR_LOG: return "e_logd(" + a + ")";
        case EMBER_KIR_TANH: return "e_tanhd(" + a + ")";
        case EMBER_KIR_ERF: return "e_erfd(" + a + ")";
        case EMBER_KIR_SIN: return "e_sind(" + a + ")";
        case EMBER_KIR_COS: return "e_cosd(" + a + ")";
        default: return "";
      }
    }
    const std::string T = reg_type(dt);
    if (dt == EMBER_U64) {  // wraps; |x| is x
      switch (op) {
        case EMBER_KIR_NEG: return "(uint64_t(0) - " + a + ")";
        case EMBER_KIR_ABS: case EMBER_KIR_FLOOR: case EMBER_KIR_CEIL: return a;
        case EMBER_KIR_NOT: return "int(" + a + " == uint64_t(0))";
        default: return "";
      }
    }
    switch (op) {
      case EMBER_KIR_NEG: return "(-" + a + ")";
      case EMBER_KIR_ABS: return "(" + a + " < " + T + "(0) ? -" + a + " : " + a + ")";
      case EMBER_KIR_NOT: return "int(" + a + " == " + T + "(0))";
      case EMBER_KIR_FLOOR: case EMBER_KIR_CEIL: return a;
      default: return "";
    }
  }
  std::string binary(uint16_t op, uint8_t dt, const std::string& a, const std::string& b) const override {
    if (is_half(dt)) dt = EMBER_F32;
    if (!reg_type(dt)) return "";
    const std::string x = a, y = b;
    if (is_float(dt)) {
      const bool f = dt == EMBER_F32;
      switch (op) {
        case EMBER_KIR_ADD: return x + " + " + y;
        case EMBER_KIR_SUB: return x + " - " + y;
        case EMBER_KIR_MUL: return x + " * " + y;
        case EMBER_KIR_DIV: return x + " / " + y;
        case EMBER_KIR_FLOORDIV:
          if (f && t_.float64) return "float(floor(double(" + x + ") / double(" + y + ")))";
          return "floor(" + x + " / " + y + ")";
        case EMBER_KIR_REM: return (f ? "e_remf(" : "e_remd(") + x + ", " + y + ")";
        case EMBER_KIR_FMOD: return (f ? "e_fmodf(" : "e_fmodd(") + x + ", " + y + ")";
        case EMBER_KIR_POW: return (f ? (t_.float64 ? "e_powf_d(" : "e_powf(") : "e_powd(") + x + ", " + y + ")";
        case EMBER_KIR_MAX: return (f ? "e_maxf(" : "e_maxd(") + x + ", " + y + ")";
        case EMBER_KIR_MIN: return (f ? "e_minf(" : "e_mind(") + x + ", " + y + ")";
        default: return "";
      }
    }
    if (dt == EMBER_U64) {  // unsigned: + - * wrap; division and remainder unsigned (abi.h)
      switch (op) {
        case EMBER_KIR_ADD: return x + " + " + y;
        case EMBER_KIR_SUB: return x + " - " + y;
        case EMBER_KIR_MUL: return x + " * " + y;
        case EMBER_KIR_DIV: case EMBER_KIR_FLOORDIV: return "e_div_ul(" + x + ", " + y + ")";
        case EMBER_KIR_REM: case EMBER_KIR_FMOD: return "e_rem_ul(" + x + ", " + y + ")";
        case EMBER_KIR_POW: return "e_pow_ul(" + x + ", " + y + ")";
        case EMBER_KIR_MAX: return "(" + x + " > " + y + " ? " + x + " : " + y + ")";
        case EMBER_KIR_MIN: return "(" + x + " < " + y + " ? " + x + " : " + y + ")";
        case EMBER_KIR_AND: return "int(" + x + " != uint64_t(0) && " + y + " != uint64_t(0))";
        case EMBER_KIR_OR: return "int(" + x + " != uint64_t(0) || " + y + " != uint64_t(0))";
        default: return "";
      }
    }
    const char* sfx = dt == EMBER_I64 || dt == EMBER_U32 ? "l" : "i";
    switch (op) {
      case EMBER_KIR_ADD: return x + " + " + y;
      case EMBER_KIR_SUB: return x + " - " + y;
      case EMBER_KIR_MUL: return x + " * " + y;
      case EMBER_KIR_DIV: return std::string("e_div_") + sfx + "(" + x + ", " + y + ")";
      case EMBER_KIR_FLOORDIV: return std::string("e_floordiv_") + sfx + "(" + x + ", " + y + ")";
      case EMBER_KIR_REM: return std::string("e_rem_") + sfx + "(" + x + ", " + y + ")";
      case EMBER_KIR_FMOD: return std::string("e_fmod_") + sfx + "(" + x + ", " + y + ")";
      case EMBER_KIR_POW: return std::string("e_pow_") + sfx + "(" + x + ", " + y + ")";
      case EMBER_KIR_MAX: return "max(" + x + ", " + y + ")";
      case EMBER_KIR_MIN: return "min(" + x + ", " + y + ")";
      case EMBER_KIR_AND: return "int(" + x + " != 0 && " + y + " != 0)";
      case EMBER_KIR_OR: return "int(" + x + " != 0 || " + y + " != 0)";
      default: return "";
    }
  }
  std::string compare(uint16_t op, uint8_t operand_dt, const std::string& a, const std::string& b) const override {
    if (is_half(operand_dt)) operand_dt = EMBER_F32;
    if (!reg_type(operand_dt)) return "";
    switch (op) {
      case EMBER_KIR_LT: return "int(" + a + " < " + b + ")";
      case EMBER_KIR_LE: return "int(" + a + " <= " + b + ")";
      case EMBER_KIR_GT: return "int(" + a + " > " + b + ")";
      case EMBER_KIR_GE: return "int(" + a + " >= " + b + ")";
      case EMBER_KIR_EQ: return "int(" + a + " == " + b + ")";
      case EMBER_KIR_NE: return "int(!(" + a + " == " + b + "))";  // true for NaN operands
      default: return "";
    }
  }
  std::string cast(uint8_t from, uint8_t to, const std::string& a) const override {
    const char* Sr = reg_type(from);
    if (!Sr || !reg_type(to)) return "";
    const bool sf = is_float(from) || is_half(from);
    const bool sd = from == EMBER_F64;
    switch (to) {
      case EMBER_F16: return "e_h2f(e_f2h(float(" + a + ")))";
      case EMBER_BF16: return "e_b2f(e_f2b(float(" + a + ")))";
      case EMBER_BOOL: return "int(!(" + a + " == " + Sr + "(0)))";
      case EMBER_F64: return "double(" + a + ")";
      case EMBER_F32:  // i64 -> f32 through f64, as the CPU (double rounding included)
        return (from == EMBER_I64 || from == EMBER_U32 || from == EMBER_U64) && t_.float64 ? "float(double(" + a + "))"
                                                                                           : "float(" + a + ")";
      case EMBER_I64:
        if (from == EMBER_U64) return "int64_t(" + a + ")";  // the same bits
        return sf ? (sd ? "e_d2l(" : "e_f2l(") + a + ")" : "e_i2l(" + a + ")";
      case EMBER_U64:  // floats as the CPU's e_to_u64; integers sign-extended to 64 bits, then the bits
        if (sf) return sd ? "e_d2ul(" + a + ")" : "e_f2ul(" + a + ")";
        return "uint64_t(e_i2l(" + a + "))";
      case EMBER_U32: {  // held in i64: wrapped to 0..2^32-1; floats through i64
        const std::string wide = sf ? (sd ? "e_d2l(" : "e_f2l(") + a + ")"
                                    : from == EMBER_U64 ? "int64_t(" + a + ")" : "e_i2l(" + a + ")";
        return "(" + wide + " & int64_t(0xffffffffUL))";
      }
      case EMBER_U8: return sf ? std::string("(") + (sd ? "e_d2i(" : "e_f2i(") + a + ") & 255)" : "(int(" + a + ") & 255)";
      case EMBER_I8: case EMBER_I16: case EMBER_U16: {  // held in int: wrapped (sign-extended for i8/i16)
        const std::string narrow = sf ? std::string(sd ? "e_d2i(" : "e_f2i(") + a + ")" : "int(" + a + ")";
        if (to == EMBER_U16) return "(" + narrow + " & 65535)";
        const std::string m = to == EMBER_I8 ? "255" : "65535", h = to == EMBER_I8 ? "128" : "32768";
        return "(((" + narrow + " & " + m + ") ^ " + h + ") - " + h + ")";
      }
      default: return sf ? (sd ? "e_d2i(" : "e_f2i(") + a + ")" : "int(" + a + ")";
    }
  }
  std::string select(const std::string& c, const std::string& a, const std::string& b) const override {
    return "(" + c + " != 0 ? " + a + " : " + b + ")";
  }
  std::string rand_uniform(uint8_t dt, const std::string& counter, uint32_t stream, const std::string& key) const override {
    if (dt == EMBER_F32) return "e_uniform_f32(" + counter + ", " + S(stream) + "u, " + key + ")";
    if (dt == EMBER_F64 && t_.float64) return "e_uniform_f64(" + counter + ", " + S(stream) + "u, " + key + ")";
    return "";
  }
  std::string load(uint8_t dt, const std::string& ref) const override {
    if (!storage_type(dt)) return "";
    switch (dt) {
      case EMBER_U8: case EMBER_I8: case EMBER_I16: case EMBER_U16: return "int(" + ref + ")";
      case EMBER_U32: return "int64_t(" + ref + ")";
      case EMBER_BOOL: return "int(" + ref + " != uint8_t(0))";
      case EMBER_F16: return "e_h2f(uint(" + ref + "))";
      case EMBER_BF16: return "e_b2f(uint(" + ref + "))";
      default: return ref;
    }
  }
  std::string store_value(uint8_t dt, uint8_t value_dt, const std::string& v) const override {
    std::string x = v;
    if (value_dt != dt) {
      x = cast(value_dt, dt, v);
      if (x.empty()) return "";
    }
    switch (dt) {
      case EMBER_U8: return "uint8_t(" + x + ")";
      case EMBER_I8: return "int8_t(" + x + ")";
      case EMBER_I16: return "int16_t(" + x + ")";
      case EMBER_U16: return "uint16_t(" + x + ")";
      case EMBER_U32: return "uint(" + x + ")";
      case EMBER_BOOL: return "uint8_t(" + x + " != 0 ? 1 : 0)";
      case EMBER_F16: return "uint16_t(e_f2h(" + x + "))";
      case EMBER_BF16: return "uint16_t(e_f2b(" + x + "))";
      default: return storage_type(dt) ? x : "";
    }
  }

 private:
  GlslTarget t_;
};

// Renders instruction k: the shared rendering, plus what only the GPU loop structure spells
// (gathers, device scalars, random numbers with a GLSL key).
std::string render(const ember_kir_program& p, const GlslTable& t, const ArgRefs& refs, int32_t k) {
  const ember_kir_inst& in = p.insts[k];
  const char* T = t.reg_type(in.dtype);
  std::string e;
  switch (in.op) {
    case EMBER_KIR_LOAD_SCALAR:  // the launch's value: its argument's offset word
      if (!T || in.dtype != EMBER_I64 || p.arg_dtypes[in.arg] != EMBER_I64) return "";
      e = "int64_t(P[" + S(W::kArgs + W::kPerArg * in.arg + W::kOffset) + "])";
      break;
    case EMBER_KIR_LOAD_UNIFORM:
      if (p.arg_dtypes[in.arg] != in.dtype) return "";
      e = t.load(in.dtype, "g" + S(in.arg) + ".d[uint(P[" + S(W::kArgs + W::kPerArg * in.arg + W::kOffset) + "])]");
      break;
    case EMBER_KIR_LOAD_GATHER: {
      if (p.arg_dtypes[in.arg] != in.dtype || in.a < 0 || p.insts[in.a].dtype != EMBER_I64) return "";
      const int base = W::kArgs + W::kPerArg * in.arg;
      e = t.load(in.dtype, "g" + S(in.arg) + ".d[uint(e_gather(" + refs.index(in.arg) + ", " + var(in.a) + ", P[" +
                               S(base + W::kGatherStride) + "], P[" + S(base + W::kGatherSize) + "]))]");
      break;
    }
    case EMBER_KIR_IOTA: e = "e_i2l(" + refs.index(in.arg) + ")"; break;
    case EMBER_KIR_RAND_UNIFORM: {
      char lit[40];
      std::snprintf(lit, sizeof lit, "uint64_t(0x%" PRIx64 "UL)", uint64_t(in.iimm));
      e = t.rand_uniform(in.dtype, var(in.a), uint32_t(in.aux), in.b >= 0 ? "uint64_t(" + var(in.b) + ")" : std::string(lit));
      break;
    }
    default:
      e = render_inst(p, t, refs, k, var);
      if (in.op == EMBER_KIR_STORE) return e;
  }
  if (e.empty() || !T) return "";
  // `precise` on every float value: the SPIR-V NoContraction that stops drivers from folding
  // x * -0.0 to 0 or contracting a * b + c (float controls alone do not stop Mesa's NIR).
  const bool fl = std::strcmp(T, "float") == 0 || std::strcmp(T, "double") == 0;
  return std::string(fl ? "precise " : "") + T + " " + var(k) + " = " + e + ";";
}

std::string arg_word(int arg, int field, int dim = 0) {
  return "IX(P[" + S(W::kArgs + W::kPerArg * arg + field + dim) + "])";
}

std::string acc_init(const GlslTable& t, uint16_t op, uint8_t dt) {
  const bool fl = is_float(dt) || is_half(dt);
  const std::string T = t.reg_type(dt);
  const bool d = dt == EMBER_F64;
  if (dt == EMBER_U64) {
    switch (op) {
      case EMBER_KIR_ACC_SUM: return "uint64_t(0)";
      case EMBER_KIR_ACC_PROD: return "uint64_t(1)";
      case EMBER_KIR_ACC_MAX: case EMBER_KIR_ACC_ARGMAX: return "uint64_t(0)";
      default: return "uint64_t(0xffffffffffffffffUL)";
    }
  }
  switch (op) {
    case EMBER_KIR_ACC_SUM: return T + "(0)";
    case EMBER_KIR_ACC_PROD: return T + "(1)";
    case EMBER_KIR_ACC_MAX: case EMBER_KIR_ACC_ARGMAX:
      return fl ? (d ? "-e_infd()" : "-e_inff()") : dt == EMBER_I64 || dt == EMBER_U32 ? "int64_t(0x8000000000000000UL)" : "int(0x80000000u)";
    default:
      return fl ? (d ? "e_infd()" : "e_inff()") : dt == EMBER_I64 || dt == EMBER_U32 ? "int64_t(0x7fffffffffffffffUL)" : "int(0x7fffffffu)";
  }
}

// The grid-stride loop over points `id` (closed by the caller with "  }\n"): a launch has as
// many workgroups as the plugin chooses, each invocation takes points id, id + threads, ...
std::string grid_loop_begin(const GlslTarget& target) {
  const std::string WG = S(target.workgroup);
  return "  IX nthreads = IX(gl_NumWorkGroups.x) * IX(gl_NumWorkGroups.y) * " + WG + ";\n"
         "  for (IX id = (IX(gl_WorkGroupID.y) * IX(gl_NumWorkGroups.x) + IX(gl_WorkGroupID.x)) * " + WG +
         " + IX(gl_LocalInvocationID.x); id < IX(P[" + S(W::kPoints) + "]); id += nthreads) {\n";
}

}  // namespace

std::unique_ptr<ExprTable> make_glsl_table(const GlslTarget& target) { return std::make_unique<GlslTable>(target); }

bool emit_glsl_matmul(uint8_t dt, const GlslTarget& target, std::string& src, std::string* why) {
  GlslTable t(target);
  const char* ST = t.storage_type(dt);
  if (!ST || !t.reg_type(dt)) {
    if (why) *why = "matmul on dtype " + S(dt) + " is not available on this device";
    return false;
  }
  // Accumulator: the register type (f16/bf16 in f32, rounded once at the store).
  const std::string A = t.reg_type(dt);
  src = glsl_header("matmul", target, dt == EMBER_U8 || dt == EMBER_BOOL, is_half(dt));
  for (int a = 0; a < 3; ++a)
    src += "layout(std430, binding = " + S(2 + a) + ") buffer Arg" + S(a) + " { " + ST + " d[]; } g" + S(a) + ";\n";
  auto word = [](int arg, int field) { return "IX(P[" + S(W::kArgs + W::kPerArg * arg + field) + "])"; };
  auto stride = [&](int arg, const std::string& d) {
    return "IX(P[" + S(W::kArgs + W::kPerArg * arg + W::kStrides) + " + " + d + "])";
  };
  src += "void main() {\n  e_opaque = uint(P[" + S(W::kZero) + "]);\n";
  src += "  int r = int(P[1]);\n  IX K = IX(P[2]);\n";
  src += grid_loop_begin(target);
  src += "  IX M = IX(P[" + S(W::kShape) + " + r - 2]), N = IX(P[" + S(W::kShape) + " + r - 1]);\n";
  src += "  IX j = id % N, rem = id / N;\n  IX i = rem % M;\n  rem /= M;\n";
  src += "  IX oa = " + word(0, W::kOffset) + " + i * " + stride(0, "r - 2") + ";\n";
  src += "  IX ob = " + word(1, W::kOffset) + " + j * " + stride(1, "r - 1") + ";\n";
  src += "  IX oc = " + word(2, W::kOffset) + " + i * " + stride(2, "r - 2") + " + j * " + stride(2, "r - 1") + ";\n";
  src += "  for (int d = r - 3; d >= 0; --d) {\n    IX n = IX(P[" + S(W::kShape) + " + d]);\n"
         "    IX x = rem % n;\n    rem /= n;\n";
  src += "    oa += x * " + stride(0, "d") + ";\n    ob += x * " + stride(1, "d") + ";\n    oc += x * " + stride(2, "d") + ";\n  }\n";
  src += "  IX sak = " + stride(0, "r - 1") + ", sbk = " + stride(1, "r - 2") + ";\n";
  src += "  " + A + " acc = " + A + "(0);\n";
  src += "  for (IX k = 0; k < K; ++k)\n";
  src += "    acc += " + t.load(dt, "g0.d[uint(oa + k * sak)]") + " * " + t.load(dt, "g1.d[uint(ob + k * sbk)]") + ";\n";
  const std::string v = is_half(dt) ? t.cast(EMBER_F32, dt, "acc") : std::string("acc");
  src += "  g2.d[uint(oc)] = " + t.store_value(dt, dt, v) + ";\n  }\n}\n";
  return true;
}

bool glsl_supports(const GlslTarget& target, uint16_t op, uint8_t dtype) {
  GlslTable t(target);
  if (!t.reg_type(dtype)) return false;
  switch (op) {
    case EMBER_KIR_CONST: return !t.constant(ember_kir_inst{op, dtype, 0, -1, -1, -1, 0, 0, 0.0, 0}).empty();
    case EMBER_KIR_LOAD_GATHER: return target.int64 && t.storage_type(dtype) != nullptr;
    case EMBER_KIR_LOAD: case EMBER_KIR_STORE: case EMBER_KIR_LOAD_UNIFORM:
      return t.storage_type(dtype) != nullptr;
    case EMBER_KIR_LOAD_SCALAR: return target.int64 && dtype == EMBER_I64;
    case EMBER_KIR_IOTA: return dtype == EMBER_I64;
    case EMBER_KIR_CAST: case EMBER_KIR_SELECT: return true;
    case EMBER_KIR_RAND_UNIFORM: return target.int64 && !t.rand_uniform(dtype, "c", 0, "k").empty();
    case EMBER_KIR_LT: case EMBER_KIR_LE: case EMBER_KIR_GT: case EMBER_KIR_GE: case EMBER_KIR_EQ: case EMBER_KIR_NE:
      return true;
    default:
      if (is_acc(op)) return true;
      if (op >= EMBER_KIR_ADD && op <= EMBER_KIR_OR) return !t.binary(op, dtype, "a", "b").empty();
      if (op >= EMBER_KIR_NEG && op <= EMBER_KIR_NOT) return !t.unary(op, dtype, "a").empty();
      return false;
  }
}

bool emit_glsl_kernel(const ember_kir_program& p, const GlslTarget& target, std::string& src, bool* can_fail,
                      std::string* why) {
  GlslTable t(target);
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  KernelSurvey survey;
  if (!survey_kernel(p, t, survey, why)) return false;
  bool need8 = false, need16 = false;
  for (int32_t a = 0; a < p.n_args; ++a) {
    const uint8_t dt = p.arg_dtypes[a];
    need8 |= dt == EMBER_U8 || dt == EMBER_BOOL || dt == EMBER_I8;
    need16 |= is_half(dt) || dt == EMBER_I16 || dt == EMBER_U16;
  }
  if (can_fail) *can_fail = survey.can_fail;
  const int max_phase = survey.max_phase;
  const bool reduce = survey.reduce;
  const std::vector<uint8_t>& used = survey.used;

  // Argument references: `o<arg>` is the element offset of the current point.
  ArgRefs refs{[](int a) { return "g" + S(a) + ".d[uint(o" + S(a) + ")]"; }, [](int a) { return "o" + S(a); }};
  ArgRefs odd_refs{[](int a) { return "g" + S(a) + ".d[uint(b" + S(a) + ")]"; }, [](int a) { return "b" + S(a); }};
  for (int32_t k = 0; k < p.n_insts; ++k)
    if (!is_acc(p.insts[k].op) && render(p, t, refs, k).empty())
      return fail("instruction " + S(k) + " (" + S(p.insts[k].op) + " on dtype " + S(p.insts[k].dtype) +
                  ") has no GLSL form on this device");

  src = glsl_header("KIR program '" + std::string(p.name ? p.name : "kernel") + "'", target, need8, need16);
  // Sums, products, maxima and minima of 32-bit values take the subgroup butterfly (shuffles of
  // 64-bit and 16-bit values need more device features), and so do arg reductions over 32-bit
  // values (their i64 index is shuffled as two 32-bit halves).
  auto butterfly = [&](int32_t k) {
    const ember_kir_inst& in = p.insts[k];
    const bool arg = in.op == EMBER_KIR_ACC_ARGMAX || in.op == EMBER_KIR_ACC_ARGMIN;
    const std::string reg = t.reg_type(arg ? p.insts[in.a].dtype : in.dtype);
    return target.subgroup_shuffle && is_acc(in.op) && (!arg || target.int64) &&
           (reg == "float" || reg == "int" || reg == "uint");
  };
  bool uses_butterfly = false;
  for (int32_t k = 0; k < p.n_insts; ++k) uses_butterfly |= butterfly(k);
  if (uses_butterfly) src += "#extension GL_KHR_shader_subgroup_shuffle : require\n";
  for (int32_t a = 0; a < p.n_args; ++a)
    src += "layout(std430, binding = " + S(2 + a) + ") buffer Arg" + S(a) + " { " + t.storage_type(p.arg_dtypes[a]) +
           " d[]; } g" + S(a) + ";\n";
  if (!reduce) {
    src += "void main() {\n  e_opaque = uint(P[" + S(W::kZero) + "]);\n";
    src += "  int R = int(P[" + S(W::kRank) + "]);\n";
    src += grid_loop_begin(target);
    for (int32_t a = 0; a < p.n_args; ++a)
      if (used[size_t(a)]) src += "  IX o" + S(a) + " = " + arg_word(a, W::kOffset) + ";\n";
    src += unravel_offsets(used, "id", "0", "R", "o", "  ");
    for (int32_t k = 0; k < p.n_insts; ++k) src += "  " + render(p, t, refs, k) + "\n";
    src += "  }\n}\n";
    return true;
  }
  // Reductions, in one of two modes (launch word kMode, the same for a whole launch):
  //  0: an invocation per outer point walks the reduce points in row-major order (the reference
  //     backend's order); for short rows;
  //  1: a workgroup per outer point: invocation l takes reduce points l, l + WG, ...; the partial
  //     results are combined by a fixed tree in shared memory (a deterministic order), and every
  //     invocation then computes the per-outer-point values; only invocation 0 stores them.
  // (Per-invocation loop counts stay small: lavapipe stops a shader after 65535 loop iterations
  // in all, which the plugin checks before it launches.)
  const std::string WG = S(target.workgroup);
  std::string shared_decl;
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    if (!is_acc(in.op)) continue;
    const uint8_t odt = p.insts[in.a].dtype;
    if (in.op == EMBER_KIR_ACC_ARGMAX || in.op == EMBER_KIR_ACC_ARGMIN)
      shared_decl += "shared " + std::string(t.reg_type(odt)) + " shb" + S(k) + "[" + WG + "];\nshared int64_t shi" + S(k) +
                     "[" + WG + "];\nshared uint shn" + S(k) + "[" + WG + "];\n";
    else
      shared_decl += "shared " + std::string(t.reg_type(in.dtype)) + " sh" + S(k) + "[" + WG + "];\n";
  }
  src += shared_decl;
  src += "void main() {\n  e_opaque = uint(P[" + S(W::kZero) + "]);\n";
  src += "  bool tree = int(P[" + S(W::kMode) + "]) != 0;\n  uint lid = gl_LocalInvocationID.x;\n";
  src += "  IX wg = IX(gl_WorkGroupID.y) * IX(gl_NumWorkGroups.x) + IX(gl_WorkGroupID.x);\n";
  src += "  IX ngroups = IX(gl_NumWorkGroups.x) * IX(gl_NumWorkGroups.y);\n";
  // Outer points in a grid-stride loop: a workgroup's (mode 1) or an invocation's (mode 0); in
  // mode 1 every invocation of a workgroup takes the same points, so the barriers stay uniform.
  src += "  IX id_step = tree ? ngroups : ngroups * " + WG + ";\n";
  src += "  IX r_start = tree ? IX(lid) : 0, r_step = tree ? " + WG + " : 1;\n";
  src += "  int R = int(P[" + S(W::kRank) + "]), ro = int(P[" + S(W::kOuterRank) + "]);\n";
  src += "  IX nred = 1;\n  for (int d = ro; d < R; ++d) nred *= IX(P[" + S(W::kShape) + " + d]);\n";
  src += "  for (IX id = tree ? wg : wg * " + WG + " + IX(lid); id < IX(P[" + S(W::kPoints) + "]); id += id_step) {\n";
  for (int32_t a = 0; a < p.n_args; ++a)
    if (used[size_t(a)]) src += "  IX b" + S(a) + " = " + arg_word(a, W::kOffset) + ";\n";
  src += unravel_offsets(used, "id", "0", "ro", "b", "  ");
  for (int pass = 0; 2 * pass <= max_phase; ++pass) {
    std::vector<int32_t> accs;
    for (int32_t k = 0; k < p.n_insts; ++k)
      if (p.insts[k].phase == 2 * pass + 1 && is_acc(p.insts[k].op)) accs.push_back(k);
    for (int32_t k : accs) {
      const ember_kir_inst& in = p.insts[k];
      const uint8_t odt = p.insts[in.a].dtype;
      if (in.op == EMBER_KIR_ACC_ARGMAX || in.op == EMBER_KIR_ACC_ARGMIN) {
        src += "  int64_t " + var(k) + " = -1;\n  " + std::string(t.reg_type(odt)) + " best" + S(k) + " = " +
               acc_init(t, in.op, odt) + ";\n  bool nan" + S(k) + " = false;\n";
      } else {
        src += "  " + std::string(t.reg_type(in.dtype)) + " " + var(k) + " = " + acc_init(t, in.op, in.dtype) + ";\n";
      }
    }
    bool has_even = false;
    for (int32_t k = 0; k < p.n_insts; ++k) has_even |= p.insts[k].phase == 2 * pass;
    // `x (op) y` of accumulation k, for the fold and for the tree.
    auto combine = [&](int32_t k, const std::string& x, const std::string& y) {
      const ember_kir_inst& in = p.insts[k];
      const uint8_t dt = in.dtype;
      const bool fl = is_float(dt) || is_half(dt);
      const char* sfx = dt == EMBER_F64 ? "d" : "f";
      // f16/bf16 sums and products accumulate in f32, as on the CPU and the reference backend;
      // the program rounds the result to the dtype (the core emits that rounding after each
      // reduction), and a store rounds again (a no-op then).
      switch (in.op) {
        case EMBER_KIR_ACC_SUM: return x + " + " + y;
        case EMBER_KIR_ACC_PROD: return x + " * " + y;
        case EMBER_KIR_ACC_MAX: return fl ? std::string("e_max") + sfx + "(" + x + ", " + y + ")" : "max(" + x + ", " + y + ")";
        default: return fl ? std::string("e_min") + sfx + "(" + x + ", " + y + ")" : "min(" + x + ", " + y + ")";
      }
    };
    if (has_even || !accs.empty()) {
      src += "  for (IX r = r_start; r < nred; r += r_step) {\n";
      for (int32_t a = 0; a < p.n_args; ++a)
        if (used[size_t(a)]) src += "    IX o" + S(a) + " = b" + S(a) + ";\n";
      src += unravel_offsets(used, "r", "ro", "R", "o", "    ");
      for (int32_t k = 0; k < p.n_insts; ++k)
        if (p.insts[k].phase == 2 * pass) {
          std::string line = render(p, t, refs, k);
          // Even-phase stores happen at every reduce point, once each: every mode stores them.
          src += "    " + line + "\n";
        }
      for (int32_t k : accs) {
        const ember_kir_inst& in = p.insts[k];
        const std::string v = var(k), x = var(in.a);
        if (in.op == EMBER_KIR_ACC_ARGMAX || in.op == EMBER_KIR_ACC_ARGMIN) {
          // The first extreme value; the first NaN wins.
          const bool mx = in.op == EMBER_KIR_ACC_ARGMAX;
          const uint8_t odt = p.insts[in.a].dtype;
          const bool ofl = is_float(odt) || is_half(odt);
          const std::string b = "best" + S(k), n = "nan" + S(k);
          src += "    if (!" + n + ") {\n";
          if (ofl) src += "      if (isnan(" + x + ")) { " + n + " = true; " + v + " = e_i2l(r); }\n      else ";
          else src += "      ";
          src += "if (" + x + (mx ? " > " : " < ") + b + " || " + v + " < 0) { " + b + " = " + x + "; " + v + " = e_i2l(r); }\n";
          src += "    }\n";
        } else {
          src += "    " + v + " = " + combine(k, v, x) + ";\n";
        }
      }
      src += "  }\n";
    }
    if (!accs.empty()) {
      src += "  if (tree) {\n";
      for (int32_t k : accs) {
        const ember_kir_inst& in = p.insts[k];
        const std::string K = S(k);
        if ((in.op == EMBER_KIR_ACC_ARGMAX || in.op == EMBER_KIR_ACC_ARGMIN) && butterfly(k)) {
          // The pair (value, index) that wins (emit_gpu.h: a strict order, so both lanes of a
          // shuffle pair pick the same one).
          const bool mx = in.op == EMBER_KIR_ACC_ARGMAX;
          auto wins = [&](const std::string& b2, const std::string& i2, const std::string& n2, const std::string& b1,
                          const std::string& i1, const std::string& n1) {
            return arg_reduction_wins(mx, b2, i2, n2, b1, i1, n1);
          };
          const std::string v = var(k), b = "best" + K, n = "nan" + K;
          src += "    for (uint o = gl_SubgroupSize / 2u; o > 0u; o >>= 1) {\n";
          src += "      uvec2 h = unpackUint2x32(uint64_t(" + v + "));\n";
          src += "      int64_t i2 = int64_t(packUint2x32(uvec2(subgroupShuffleXor(h.x, o), subgroupShuffleXor(h.y, o))));\n";
          src += "      " + std::string(t.reg_type(p.insts[in.a].dtype)) + " b2 = subgroupShuffleXor(" + b + ", o);\n";
          src += "      bool n2 = subgroupShuffleXor(" + n + " ? 1u : 0u, o) != 0u;\n";
          src += "      if (" + wins("b2", "i2", "n2", b, v, n) + ") { " + b + " = b2; " + v + " = i2; " + n + " = n2; }\n";
          src += "    }\n";
          src += "    if (gl_SubgroupInvocationID == 0u) { shb" + K + "[gl_SubgroupID] = " + b + "; shi" + K +
                 "[gl_SubgroupID] = " + v + "; shn" + K + "[gl_SubgroupID] = " + n + " ? 1u : 0u; }\n    barrier();\n";
          src += "    for (uint s = gl_NumSubgroups / 2u; s > 0u; s >>= 1) {\n      if (lid < s && " +
                 wins("shb" + K + "[lid + s]", "shi" + K + "[lid + s]", "(shn" + K + "[lid + s] != 0u)", "shb" + K + "[lid]",
                      "shi" + K + "[lid]", "(shn" + K + "[lid] != 0u)") +
                 ") { shb" + K + "[lid] = shb" + K + "[lid + s]; shi" + K + "[lid] = shi" + K + "[lid + s]; shn" + K +
                 "[lid] = shn" + K + "[lid + s]; }\n      barrier();\n    }\n";
          src += "    " + v + " = shi" + K + "[0]; " + b + " = shb" + K + "[0]; " + n + " = shn" + K + "[0] != 0u;\n";
        } else if (in.op == EMBER_KIR_ACC_ARGMAX || in.op == EMBER_KIR_ACC_ARGMIN) {
          const bool mx = in.op == EMBER_KIR_ACC_ARGMAX;
          src += "    shb" + K + "[lid] = best" + K + "; shi" + K + "[lid] = " + var(k) + "; shn" + K + "[lid] = nan" + K +
                 " ? 1u : 0u;\n";
          src += "    barrier();\n    for (uint s = " + WG + "u / 2u; s > 0u; s >>= 1) {\n      if (lid < s) {\n";
          src += "        int64_t i1 = shi" + K + "[lid], i2 = shi" + K + "[lid + s];\n";
          src += "        uint n1 = shn" + K + "[lid], n2 = shn" + K + "[lid + s];\n";
          src += "        bool take2;\n        if (i2 < 0) take2 = false;\n        else if (i1 < 0) take2 = true;\n";
          src += "        else if (n1 != 0u || n2 != 0u) take2 = n2 != 0u && (n1 == 0u || i2 < i1);\n";
          src += "        else take2 = shb" + K + "[lid + s] " + (mx ? ">" : "<") + " shb" + K + "[lid] || (shb" + K +
                 "[lid + s] == shb" + K + "[lid] && i2 < i1);\n";
          src += "        if (take2) { shb" + K + "[lid] = shb" + K + "[lid + s]; shi" + K + "[lid] = i2; shn" + K +
                 "[lid] = n2; }\n";
          src += "      }\n      barrier();\n    }\n";
          src += "    " + var(k) + " = shi" + K + "[0]; best" + K + " = shb" + K + "[0]; nan" + K + " = shn" + K + "[0] != 0u;\n";
        } else if (butterfly(k)) {
          // Within each subgroup a butterfly (every lane ends with its subgroup's result), then a
          // tree over the subgroups' partials; a fixed order for a given subgroup size.
          const std::string v = var(k);
          src += "    for (uint o = gl_SubgroupSize / 2u; o > 0u; o >>= 1) " + v + " = " +
                 combine(k, v, "subgroupShuffleXor(" + v + ", o)") + ";\n";
          src += "    if (gl_SubgroupInvocationID == 0u) sh" + K + "[gl_SubgroupID] = " + v + ";\n    barrier();\n";
          src += "    for (uint s = gl_NumSubgroups / 2u; s > 0u; s >>= 1) {\n";
          src += "      if (lid < s) sh" + K + "[lid] = " + combine(k, "sh" + K + "[lid]", "sh" + K + "[lid + s]") + ";\n";
          src += "      barrier();\n    }\n    " + v + " = sh" + K + "[0];\n";
        } else {
          src += "    sh" + K + "[lid] = " + var(k) + ";\n    barrier();\n";
          src += "    for (uint s = " + WG + "u / 2u; s > 0u; s >>= 1) {\n";
          src += "      if (lid < s) sh" + K + "[lid] = " + combine(k, "sh" + K + "[lid]", "sh" + K + "[lid + s]") + ";\n";
          src += "      barrier();\n    }\n    " + var(k) + " = sh" + K + "[0];\n";
        }
      }
      src += "    barrier();\n  }\n";
    }
    for (int32_t k = 0; k < p.n_insts; ++k)
      if (p.insts[k].phase == 2 * pass + 1 && !is_acc(p.insts[k].op)) {
        std::string line = render(p, t, odd_refs, k);
        if (p.insts[k].op == EMBER_KIR_STORE) line = "if (!tree || lid == 0u) " + line;
        src += "  " + line + "\n";
      }
  }
  src += "  }\n";
  src += "}\n";
  return true;
}

}  // namespace ember::emit
