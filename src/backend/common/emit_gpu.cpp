// What the GPU targets of the KIR emitter share (emit_gpu.h).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329 in std::string concatenation
#endif
#include "backend/common/emit_gpu.h"

#include <algorithm>

#include "backend/common/emit_c.h"

namespace ember::emit {

namespace {
using W = GpuLaunchWords;
std::string S(int64_t v) { return std::to_string(v); }
bool is_floating(uint8_t dt) { return dt == EMBER_F32 || dt == EMBER_F64 || dt == EMBER_F16 || dt == EMBER_BF16; }
}  // namespace

const char* gpu_error_text(uint32_t code) {
  switch (code) {
    case kErrGather: return "index out of range";
    case kErrDivZero: return "integer division by zero";
    case kErrRemZero: return "integer remainder by zero";
    case kErrNegativePow: return "integer raised to a negative power";
    default: return "kernel error";
  }
}

std::string gpu_error_message(const uint32_t* e) {
  const int64_t value = int64_t(uint64_t(e[2]) | (uint64_t(e[3]) << 32));
  const int64_t extra = int64_t(uint64_t(e[4]) | (uint64_t(e[5]) << 32));
  std::string s = gpu_error_text(e[0]);
  if (e[0] == kErrGather)
    s += " (" + std::to_string(value) + " for a dimension of size " + std::to_string(extra) + ")";
  return s;
}

bool survey_kernel(const ember_kir_program& p, const ExprTable& t, KernelSurvey& out, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  out = KernelSurvey{};
  out.used.assign(size_t(p.n_args), 0);
  for (int32_t a = 0; a < p.n_args; ++a)
    if (!t.storage_type(p.arg_dtypes[a])) return fail("argument " + S(a) + " has a dtype the device cannot store");
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    if (in.op >= EMBER_KIR_NUM_OPS) return fail("unknown op " + S(in.op));
    if (!t.reg_type(in.dtype)) return fail("instruction " + S(k) + " has a dtype the device lacks");
    out.max_phase = std::max(out.max_phase, int(in.phase));
    if (in.op == EMBER_KIR_LOAD || in.op == EMBER_KIR_LOAD_GATHER || in.op == EMBER_KIR_IOTA || in.op == EMBER_KIR_STORE)
      out.used[size_t(in.arg)] = 1;
    out.can_fail |= in.op == EMBER_KIR_LOAD_GATHER ||
                    (!is_floating(in.dtype) && (in.op == EMBER_KIR_DIV || in.op == EMBER_KIR_FLOORDIV ||
                                                in.op == EMBER_KIR_REM || in.op == EMBER_KIR_FMOD || in.op == EMBER_KIR_POW));
    if (is_acc_op(in.op) && (in.phase % 2 != 1 || in.a < 0 || in.a >= k ||
                             (!is_arg_reduction(in.op) && p.insts[in.a].dtype != in.dtype)))
      return fail("malformed accumulation at instruction " + S(k));
  }
  out.reduce = p.has_reduction || out.max_phase > 0;
  return true;
}

std::string unravel_offsets(const std::vector<uint8_t>& used, const std::string& idx, const std::string& lo,
                            const std::string& hi, const std::string& prefix, const std::string& ind) {
  auto stride = [](size_t a, const std::string& d) {
    return "IX(P[" + S(W::kArgs + W::kPerArg * int64_t(a) + W::kStrides) + " + " + d + "])";
  };
  std::string s = ind + "if (" + hi + " - " + lo + " == 1) {\n";
  for (size_t a = 0; a < used.size(); ++a)
    if (used[a]) s += ind + "  " + prefix + S(int64_t(a)) + " += " + idx + " * " + stride(a, lo) + ";\n";
  s += ind + "} else {\n" + ind + "  IX rem = " + idx + ";\n" + ind + "  for (int d = " + hi + " - 1; d >= " + lo +
       "; --d) {\n" + ind + "    IX n = IX(P[" + S(W::kShape) + " + d]);\n" + ind + "    IX i = rem % n;\n" + ind +
       "    rem /= n;\n";
  for (size_t a = 0; a < used.size(); ++a)
    if (used[a]) s += ind + "    " + prefix + S(int64_t(a)) + " += i * " + stride(a, "d") + ";\n";
  return s + ind + "  }\n" + ind + "}\n";
}

std::string arg_reduction_wins(bool mx, const std::string& b2, const std::string& i2, const std::string& n2,
                               const std::string& b1, const std::string& i1, const std::string& n1) {
  return "(" + i2 + " >= 0 && (" + i1 + " < 0 || ((" + n1 + " || " + n2 + ") ? (" + n2 + " && (!" + n1 + " || " + i2 +
         " < " + i1 + ")) : (" + b2 + (mx ? " > " : " < ") + b1 + " || (" + b2 + " == " + b1 + " && " + i2 + " < " +
         i1 + ")))))";
}

}  // namespace ember::emit
