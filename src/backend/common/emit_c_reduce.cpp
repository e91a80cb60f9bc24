// The C-like KIR emitter for reductions and multi-phase programs (fused sum, softmax, layer norm,
// cross-entropy...): renders the program as a CPU translation unit with the two loop structures
// of ember_c_reduce_launch (emit_c.h). The per-instruction expressions come from the same table
// as the elementwise kernels (emit_c.cpp); this file only adds the loops, the accumulators and
// the naming of per-outer-point values.
//
// Rows: one outer point per task. Per-outer-point values (odd phases) are scalars; each pass is a
// `#pragma omp simd` loop along the innermost reduce dim whose accumulators are OpenMP
// reductions (GCC keeps one partial per vector lane: a reassociated, but fixed, order that does
// not depend on the thread count). Rows are cut into chunks of 4096 points summed separately, so
// a long f32 sum is not one long chain of additions.
// Columns: a task is a block of up to 256 consecutive outer points; per-outer-point values are
// arrays over the block, every lane accumulates its own outer point in the reduce dims' order
// (the reference backend's order, so float sums agree exactly).
// Float max/min propagate NaN as the interpreter does.
// GCC 12 reports a false -Wrestrict inside std::string concatenation (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <string>
#include <vector>

#include "backend/common/emit_c.h"

namespace ember::emit {

namespace {

constexpr int kMaxBlock = 256;  // columns: outer points per task (emit_c.h)
constexpr int kMaxPointValues = 64;  // per-outer-point values a kernel may hold (stack arrays)

bool is_float(uint8_t dt) { return dt == EMBER_F32 || dt == EMBER_F64; }
bool is_acc(uint16_t op) { return op >= EMBER_KIR_ACC_SUM && op <= EMBER_KIR_ACC_ARGMIN; }
bool uses_arg(uint16_t op) {
  return op == EMBER_KIR_LOAD || op == EMBER_KIR_LOAD_GATHER || op == EMBER_KIR_IOTA || op == EMBER_KIR_STORE;
}
// Number of operands (a, b, c) an instruction reads.
int operand_count(const ember_kir_inst& in) {
  const uint16_t op = in.op;
  if (op == EMBER_KIR_RAND_UNIFORM) return in.b >= 0 ? 2 : 1;  // b: a run-time key
  switch (op) {
    case EMBER_KIR_CONST: case EMBER_KIR_LOAD: case EMBER_KIR_IOTA: case EMBER_KIR_LOAD_UNIFORM: return 0;
    case EMBER_KIR_SELECT: return 3;
    default: return op >= EMBER_KIR_ADD && op <= EMBER_KIR_OR ? 2 : 1;
  }
}
std::string S(int64_t v) { return std::to_string(v); }
std::string var(int32_t k) { return "v" + S(k); }

std::string acc_init(uint16_t op, uint8_t dt) {
  const bool fl = is_float(dt);
  const std::string T = cpp_table().reg_type(dt);
  const bool wide = T == "int64_t", u64 = dt == EMBER_U64;
  switch (op) {
    case EMBER_KIR_ACC_SUM: return T + "(0)";
    case EMBER_KIR_ACC_PROD: return T + "(1)";
    case EMBER_KIR_ACC_MAX: return fl ? T + "(-__builtin_inf())" : u64 ? "uint64_t(0)" : wide ? "INT64_MIN" : "INT32_MIN";
    default: return fl ? T + "(__builtin_inf())" : u64 ? "UINT64_MAX" : wide ? "INT64_MAX" : "INT32_MAX";
  }
}

// `acc = acc (op) x` for one lane, with the interpreter's semantics (wrapping integer sums and
// products, NaN-propagating float max/min).
std::string acc_fold(uint16_t op, uint8_t dt, const std::string& acc, const std::string& x) {
  const std::string T = cpp_table().reg_type(dt);
  const std::string U = wrap_type(dt);
  switch (op) {
    case EMBER_KIR_ACC_SUM:
      return acc + " = " + (is_float(dt) ? acc + " + " + x : T + "(" + U + "(" + acc + ") + " + U + "(" + x + "))") + ";";
    case EMBER_KIR_ACC_PROD:
      return acc + " = " + (is_float(dt) ? acc + " * " + x : T + "(" + U + "(" + acc + ") * " + U + "(" + x + "))") + ";";
    case EMBER_KIR_ACC_MAX:
      return acc + " = " + (is_float(dt) ? "e_max(" + acc + ", " + x + ")" : "(" + x + " > " + acc + " ? " + x + " : " + acc + ")") + ";";
    default:
      return acc + " = " + (is_float(dt) ? "e_min(" + acc + ", " + x + ")" : "(" + x + " < " + acc + " ? " + x + " : " + acc + ")") + ";";
  }
}

struct Analysis {
  int max_phase = 0;
  std::vector<uint8_t> uniform;       // per instruction: same value everywhere (emitted once)
  std::vector<uint8_t> used;          // per argument: loaded, stored or IOTA'd
  std::vector<std::vector<int32_t>> phase;  // non-uniform instructions of each phase, in order
  int point_values = 0;               // non-store, non-uniform instructions of odd phases
};

std::string analyze(const ember_kir_program& p, const ExprTable& t, Analysis& a) {
  a.uniform.assign(size_t(p.n_insts), 0);
  a.used.assign(size_t(p.n_args), 0);
  for (int32_t k = 0; k < p.n_insts; ++k) a.max_phase = std::max(a.max_phase, int(p.insts[k].phase));
  a.phase.assign(size_t(a.max_phase + 2), {});
  for (int32_t r = 0; r < p.n_args; ++r)
    if (!t.storage_type(p.arg_dtypes[r])) return "argument " + S(r) + " has no storage type";
  ArgRefs dummy{[](int r) { return "p" + S(r) + "[0]"; }, [](int) { return std::string("0"); }};
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    if (in.op >= EMBER_KIR_NUM_OPS) return "unknown op";
    if (in.op == EMBER_KIR_LOAD_GATHER) return "has a gather";
    if (in.op == EMBER_KIR_ACC_ARGMAX || in.op == EMBER_KIR_ACC_ARGMIN) return "has an argmax/argmin";
    if (!t.reg_type(in.dtype)) return "instruction " + S(k) + " has no register type";
    // Accumulations stay in f32 registers without rounding each step to f16/bf16.
    if (is_acc(in.op) && (in.dtype == EMBER_F16 || in.dtype == EMBER_BF16)) return "f16/bf16 accumulation";
    if (uses_arg(in.op)) a.used[size_t(in.arg)] = 1;
    if (is_acc(in.op)) {
      if (in.phase % 2 != 1 || in.a < 0 || in.a >= k || p.insts[in.a].dtype != in.dtype) return "malformed accumulation";
    } else if (render_inst(p, t, dummy, k, var).empty()) {
      return "instruction " + S(k) + " (op " + S(in.op) + ") has no expression";
    }
    // Uniform: constants and arithmetic on uniform values only (as program.cpp decides).
    bool uniform = !uses_arg(in.op) && !is_acc(in.op) && in.op != EMBER_KIR_RAND_UNIFORM;
    const int32_t ops[3] = {in.a, in.b, in.c};
    for (int j = 0; j < operand_count(in) && uniform; ++j)
      uniform = ops[j] >= 0 && ops[j] < k && a.uniform[size_t(ops[j])] != 0;
    a.uniform[size_t(k)] = uniform;
    if (uniform) continue;
    a.phase[in.phase].push_back(k);
    if (in.phase % 2 == 1 && in.op != EMBER_KIR_STORE) ++a.point_values;
  }
  if (a.point_values > kMaxPointValues) return "more than " + S(kMaxPointValues) + " per-outer-point values";
  return "";
}

// Accumulations of odd phase `ph`.
std::vector<int32_t> accs_of(const ember_kir_program& p, const Analysis& a, int ph) {
  std::vector<int32_t> out;
  if (ph < int(a.phase.size()))
    for (int32_t k : a.phase[size_t(ph)])
      if (is_acc(p.insts[k].op)) out.push_back(k);
  return out;
}

// Offsets of the used arguments over dims [lo, hi) of the flat index `idx` (innermost last),
// added to the variables named prefix + arg.
std::string offsets(const Analysis& a, const std::string& idx, const std::string& lo, const std::string& hi,
                    const std::string& prefix, const std::string& ind) {
  std::string s = ind + "for (int64_t rem = " + idx + ", d = " + hi + " - 1; d >= " + lo + "; --d) {\n" + ind +
                  "  const int64_t i = rem % L->shape[d];\n" + ind + "  rem /= L->shape[d];\n";
  for (size_t r = 0; r < a.used.size(); ++r)
    if (a.used[r]) s += ind + "  " + prefix + S(int64_t(r)) + " += i * st" + S(int64_t(r)) + "[d];\n";
  return s + ind + "}\n";
}

// Rows: per-outer-point values are scalars; passes are SIMD loops along the innermost reduce dim.
std::string rows_body(const ember_kir_program& p, const ExprTable& t, const Analysis& a) {
  std::string s;
  const std::string I1 = "    ", I2 = I1 + "  ", I3 = I2 + "  ", I4 = I3 + "  ";
  // Outer offsets: computed for t0, then advanced as an odometer (no divisions per row, which
  // would cost as much as a short row's work).
  s += I1 + "int64_t ix[" + S(EMBER_MAX_ITER_RANK) + "];\n";
  for (size_t r = 0; r < a.used.size(); ++r)
    if (a.used[r]) s += I1 + "int64_t b" + S(int64_t(r)) + " = L->offset[" + S(int64_t(r)) + "];\n";
  s += I1 + "for (int64_t rem = t0, d = ro - 1; d >= 0; --d) {\n" + I1 + "  ix[d] = rem % L->shape[d];\n" + I1 +
       "  rem /= L->shape[d];\n";
  for (size_t r = 0; r < a.used.size(); ++r)
    if (a.used[r]) s += I1 + "  b" + S(int64_t(r)) + " += ix[d] * st" + S(int64_t(r)) + "[d];\n";
  s += I1 + "}\n";
  s += I1 + "for (int64_t t = t0; t < t1; ++t) {\n";
  // IOTA arguments are not among those whose stride the launch checks: use their real strides.
  ArgRefs even{[](int r) { return "p" + S(r) + "[o" + S(r) + " + j]"; },
               [](int r) { return "o" + S(r) + " + j * st" + S(r) + "[R - 1]"; }};
  ArgRefs even_h{[](int r) { return "p" + S(r) + "[o" + S(r) + " + j + h]"; },
                 [](int r) { return "o" + S(r) + " + (j + h) * st" + S(r) + "[R - 1]"; }};
  ArgRefs odd{[](int r) { return "p" + S(r) + "[b" + S(r) + "]"; }, [](int r) { return "b" + S(r); }};
  for (int pass = 0; 2 * pass <= a.max_phase; ++pass) {
    const std::vector<int32_t> accs = accs_of(p, a, 2 * pass + 1);
    const std::vector<int32_t>& row = a.phase[size_t(2 * pass)];
    std::string clauses, decl, fold, combine, finish;
    for (int32_t k : accs) {
      const ember_kir_inst& in = p.insts[k];
      const std::string T = t.reg_type(in.dtype), v = var(k), c = "c" + S(k), n = "n" + S(k);
      const bool fl = is_float(in.dtype), minmax = in.op == EMBER_KIR_ACC_MAX || in.op == EMBER_KIR_ACC_MIN;
      const bool wrap = !fl && !minmax;
      const std::string CT = wrap ? wrap_type(in.dtype) : T;
      s += I2 + T + " " + v + " = " + acc_init(in.op, in.dtype) + ";\n";
      if (fl && minmax) s += I2 + "int32_t nan" + S(k) + " = 0;\n";
      decl += I4 + CT + " " + c + " = " + (wrap ? CT + "(" + acc_init(in.op, in.dtype) + ")" : acc_init(in.op, in.dtype)) + ";\n";
      const std::string x = wrap ? CT + "(" + var(in.a) + ")" : var(in.a);
      switch (in.op) {
        case EMBER_KIR_ACC_SUM:
          clauses += " reduction(+:" + c + ")";
          fold += I4 + "  " + c + " += " + x + ";\n";
          combine += I4 + v + " = " + (wrap ? T + "(" + CT + "(" + v + ") + " + c + ")" : v + " + " + c) + ";\n";
          break;
        case EMBER_KIR_ACC_PROD:
          clauses += " reduction(*:" + c + ")";
          fold += I4 + "  " + c + " *= " + x + ";\n";
          combine += I4 + v + " = " + (wrap ? T + "(" + CT + "(" + v + ") * " + c + ")" : v + " * " + c) + ";\n";
          break;
        default: {
          const bool mx = in.op == EMBER_KIR_ACC_MAX;
          const std::string cmp = mx ? " > " : " < ";
          clauses += std::string(" reduction(") + (mx ? "max" : "min") + ":" + c + ")";
          fold += I4 + "  " + c + " = " + x + cmp + c + " ? " + x + " : " + c + ";\n";
          combine += I4 + v + " = " + c + cmp + v + " ? " + c + " : " + v + ";\n";
          if (fl) {
            decl += I4 + "int32_t " + n + " = 0;\n";
            clauses += " reduction(|:" + n + ")";
            fold += I4 + "  " + n + " |= int32_t(" + x + " != " + x + ");\n";
            combine += I4 + "nan" + S(k) + " |= " + n + ";\n";
            finish += I2 + "if (nan" + S(k) + ") " + v + " = " + T + "(__builtin_nan(\"\"));\n";
          }
        }
      }
    }
    if (!row.empty() || !accs.empty()) {
      s += I2 + "for (int64_t rr = 0; rr < nrows; ++rr) {\n";
      for (size_t r = 0; r < a.used.size(); ++r)
        if (a.used[r]) s += I3 + "int64_t o" + S(int64_t(r)) + " = b" + S(int64_t(r)) + ";\n";
      s += offsets(a, "rr", "ro", "R - 1", "o", I3);
      auto body = [&](const ArgRefs& refs, const std::string& indent) {
        std::string b;
        for (int32_t k : row)
          b += indent + (p.insts[k].op == EMBER_KIR_STORE ? "" : std::string("const ") + t.reg_type(p.insts[k].dtype) +
                                                                     " " + var(k) + " = ") +
               render_inst(p, t, refs, k, var) + (p.insts[k].op == EMBER_KIR_STORE ? "\n" : ";\n");
        return b;
      };
      s += I3 + "for (int64_t j0 = 0; j0 < inner; j0 += 4096) {\n";
      s += I4 + "const int64_t j1 = j0 + 4096 < inner ? j0 + 4096 : inner;\n" + decl;
      if (accs.empty()) {
        // A pass that only stores (softmax's last): two independent points per iteration, half
        // the chunk apart, as in the elementwise kernels (emit_c.cpp): the math is latency-bound.
        s += I4 + "const int64_t h = (j1 - j0) / 2;\n#pragma omp simd\n";
        s += I4 + "for (int64_t j = j0; j < j0 + h; ++j) {\n" + I4 + "  {\n" + body(even, I4 + "    ") + I4 + "  }\n" +
             I4 + "  {\n" + body(even_h, I4 + "    ") + I4 + "  }\n" + I4 + "}\n";
        s += I4 + "if ((j1 - j0) % 2 != 0) {\n" + I4 + "  const int64_t j = j1 - 1;\n" + body(even, I4 + "  ") + I4 + "}\n";
        s += I3 + "}\n" + I2 + "}\n";
      } else {
        s += "#pragma omp simd" + clauses + "\n";
        s += I4 + "for (int64_t j = j0; j < j1; ++j) {\n" + body(even, I4 + "  ");
        s += fold + I4 + "}\n" + combine + I3 + "}\n" + I2 + "}\n";
      }
    }
    s += finish;
    if (size_t(2 * pass + 1) < a.phase.size())
      for (int32_t k : a.phase[size_t(2 * pass + 1)]) {
        const ember_kir_inst& in = p.insts[k];
        if (is_acc(in.op)) continue;
        if (in.op == EMBER_KIR_STORE) s += I2 + render_inst(p, t, odd, k, var) + "\n";
        else s += I2 + "const " + t.reg_type(in.dtype) + " " + var(k) + " = " + render_inst(p, t, odd, k, var) + ";\n";
      }
  }
  s += I2 + "for (int d = ro - 1; d >= 0; --d) {\n";
  for (size_t r = 0; r < a.used.size(); ++r)
    if (a.used[r]) s += I3 + "b" + S(int64_t(r)) + " += st" + S(int64_t(r)) + "[d];\n";
  s += I3 + "if (++ix[d] < L->shape[d]) break;\n" + I3 + "ix[d] = 0;\n";
  for (size_t r = 0; r < a.used.size(); ++r)
    if (a.used[r]) s += I3 + "b" + S(int64_t(r)) + " -= st" + S(int64_t(r)) + "[d] * L->shape[d];\n";
  return s + I2 + "}\n    }\n";
}

// Columns: per-outer-point values are arrays over a block of consecutive outer points (lanes).
std::string columns_body(const ember_kir_program& p, const ExprTable& t, const Analysis& a) {
  std::string s;
  const std::string I2 = "      ", I3 = I2 + "  ", I4 = I3 + "  ", I5 = I4 + "  ";
  auto name = [&](int32_t k) { return !a.uniform[size_t(k)] && p.insts[k].phase % 2 == 1 ? var(k) + "[j]" : var(k); };
  s += "    const int64_t ocols = L->shape[ro - 1];\n";
  s += "    for (int64_t t = t0; t < t1; ++t) {\n";
  s += I2 + "const int64_t orow = t / L->nblk, c0 = (t % L->nblk) * L->block;\n";
  s += I2 + "const int64_t n = L->block < ocols - c0 ? L->block : ocols - c0;\n";
  for (size_t r = 0; r < a.used.size(); ++r)
    if (a.used[r])
      s += I2 + "int64_t b" + S(int64_t(r)) + " = L->offset[" + S(int64_t(r)) + "] + c0 * st" + S(int64_t(r)) + "[ro - 1];\n";
  s += offsets(a, "orow", "0", "ro - 1", "b", I2);
  for (int ph = 1; ph < int(a.phase.size()); ph += 2)
    for (int32_t k : a.phase[size_t(ph)])
      if (p.insts[k].op != EMBER_KIR_STORE)
        s += I2 + "alignas(64) " + t.reg_type(p.insts[k].dtype) + " " + var(k) + "[" + S(kMaxBlock) + "];\n";
  ArgRefs even{[](int r) { return "p" + S(r) + "[q" + S(r) + " + j]"; },
               [](int r) { return "q" + S(r) + " + j * st" + S(r) + "[ro - 1]"; }};
  ArgRefs odd{[](int r) { return "p" + S(r) + "[b" + S(r) + " + j]"; },
              [](int r) { return "b" + S(r) + " + j * st" + S(r) + "[ro - 1]"; }};
  for (int pass = 0; 2 * pass <= a.max_phase; ++pass) {
    const std::vector<int32_t> accs = accs_of(p, a, 2 * pass + 1);
    const std::vector<int32_t>& row = a.phase[size_t(2 * pass)];
    if (!accs.empty()) {
      s += "#pragma omp simd\n" + I2 + "for (int64_t j = 0; j < n; ++j) {\n";
      for (int32_t k : accs) s += I3 + var(k) + "[j] = " + acc_init(p.insts[k].op, p.insts[k].dtype) + ";\n";
      s += I2 + "}\n";
    }
    if (!row.empty() || !accs.empty()) {
      s += I2 + "for (int64_t rr = 0; rr < nrows; ++rr) {\n";
      for (size_t r = 0; r < a.used.size(); ++r)
        if (a.used[r]) s += I3 + "int64_t o" + S(int64_t(r)) + " = b" + S(int64_t(r)) + ";\n";
      s += offsets(a, "rr", "ro", "R - 1", "o", I3);
      s += I3 + "for (int64_t r = 0; r < inner; ++r) {\n";
      for (size_t r = 0; r < a.used.size(); ++r)
        if (a.used[r]) s += I4 + "const int64_t q" + S(int64_t(r)) + " = o" + S(int64_t(r)) + " + r * st" +
                            S(int64_t(r)) + "[R - 1];\n";
      s += "#pragma omp simd\n" + I4 + "for (int64_t j = 0; j < n; ++j) {\n";
      for (int32_t k : row) {
        if (p.insts[k].op == EMBER_KIR_STORE) s += I5 + render_inst(p, t, even, k, name) + "\n";
        else s += I5 + "const " + t.reg_type(p.insts[k].dtype) + " " + var(k) + " = " + render_inst(p, t, even, k, name) + ";\n";
      }
      for (int32_t k : accs) s += I5 + acc_fold(p.insts[k].op, p.insts[k].dtype, var(k) + "[j]", name(p.insts[k].a)) + "\n";
      s += I4 + "}\n" + I3 + "}\n" + I2 + "}\n";
    }
    std::string point;
    if (size_t(2 * pass + 1) < a.phase.size())
      for (int32_t k : a.phase[size_t(2 * pass + 1)]) {
        const ember_kir_inst& in = p.insts[k];
        if (is_acc(in.op)) continue;
        if (in.op == EMBER_KIR_STORE) point += I3 + render_inst(p, t, odd, k, name) + "\n";
        else point += I3 + var(k) + "[j] = " + render_inst(p, t, odd, k, name) + ";\n";
      }
    if (!point.empty()) s += "#pragma omp simd\n" + I2 + "for (int64_t j = 0; j < n; ++j) {\n" + point + I2 + "}\n";
  }
  return s + "    }\n";
}

}  // namespace

bool emit_cpu_reduce_kernel(const ember_kir_program& p, std::string& src, std::string* why) {
  const ExprTable& t = cpp_table();
  Analysis a;
  std::string reason = analyze(p, t, a);
  if (!reason.empty()) {
    if (why) *why = reason;
    return false;
  }
  src = "// Tier-1 CPU reduction kernel for KIR program '" + std::string(p.name ? p.name : "kernel") +
        "', generated by ember (src/backend/common/emit_c_reduce.cpp).\n";
  src += t.prelude();
  src += R"(typedef struct ember_c_reduce_launch {
  int32_t outer_rank, reduce_rank, columns, unused;
  int64_t block, nblk;
  const int64_t* shape;
  void* const* data;
  const int64_t* offset;
  const int64_t* strides;
} ember_c_reduce_launch;
extern "C" __attribute__((visibility("default"))) void ember_kernel_reduce(const ember_c_reduce_launch* L, int64_t t0, int64_t t1) {
  const int ro = L->outer_rank, R = ro + L->reduce_rank;
  const int64_t inner = L->shape[R - 1];
  int64_t nrows = 1;
  for (int d = ro; d < R - 1; ++d) nrows *= L->shape[d];
  (void)nrows;
)";
  for (int32_t k = 0; k < p.n_insts; ++k)
    if (a.uniform[size_t(k)])
      src += std::string("  const ") + t.reg_type(p.insts[k].dtype) + " " + var(k) + " = " +
             render_inst(p, t, ArgRefs{}, k, var) + ";\n";
  for (int32_t r = 0; r < p.n_args; ++r) {
    if (!a.used[size_t(r)]) continue;
    const std::string A = S(r), ST = t.storage_type(p.arg_dtypes[r]);
    src += "  " + ST + "* const p" + A + " = (" + ST + "*)L->data[" + A + "];\n";
    src += "  const int64_t* const st" + A + " = L->strides + " + A + " * R;\n";
  }
  src += "  if (!L->columns) {\n" + rows_body(p, t, a) + "  } else {\n" + columns_body(p, t, a) + "  }\n}\n";
  return true;
}

}  // namespace ember::emit
