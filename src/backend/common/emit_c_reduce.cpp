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
// a long f32 sum is not one long chain of additions. A read-only operand may hold one value per
// row (stride 0 along it); the row loop then reads a splat of that value.
// Columns: a task is a block of up to 256 consecutive outer points; per-outer-point values are
// arrays over the block, every lane accumulates its own outer point in the reduce dims' order
// (the reference backend's order, so float sums agree exactly).
// Float max/min propagate NaN as the interpreter does. argmax/argmin give the row-major index into
// the reduce dims of the first extreme value (the first NaN, if any), as the interpreter does.
// GCC 12 reports a false -Wrestrict inside std::string concatenation (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "backend/common/emit_c.h"

namespace ember::emit {

namespace {

constexpr int kMaxBlock = 256;  // columns: outer points per task (emit_c.h)
constexpr int kMaxPointValues = 64;  // per-outer-point values a kernel may hold (stack arrays)

bool is_float(uint8_t dt) { return dt == EMBER_F32 || dt == EMBER_F64; }
bool is_acc(uint16_t op) { return op >= EMBER_KIR_ACC_SUM && op <= EMBER_KIR_ACC_ARGMIN; }
bool is_arg(uint16_t op) { return op == EMBER_KIR_ACC_ARGMAX || op == EMBER_KIR_ACC_ARGMIN; }
// Values held in float registers (f16 and bf16 widen to float).
bool float_reg(uint8_t dt) { return is_float(dt) || dt == EMBER_F16 || dt == EMBER_BF16; }

bool uses_arg(uint16_t op) {
  return op == EMBER_KIR_LOAD || op == EMBER_KIR_LOAD_GATHER || op == EMBER_KIR_IOTA || op == EMBER_KIR_STORE;
}
// Number of operands (a, b, c) an instruction reads.
int operand_count(const ember_kir_inst& in) {
  const uint16_t op = in.op;
  if (op == EMBER_KIR_RAND_UNIFORM) return in.b >= 0 ? 2 : 1;  // b: a run-time key
  switch (op) {
    case EMBER_KIR_CONST: case EMBER_KIR_LOAD: case EMBER_KIR_IOTA: case EMBER_KIR_LOAD_UNIFORM:
    case EMBER_KIR_LOAD_SCALAR:
      return 0;
    case EMBER_KIR_SELECT: return 3;
    default: return op >= EMBER_KIR_ADD && op <= EMBER_KIR_OR ? 2 : 1;
  }
}
std::string S(int64_t v) { return std::to_string(v); }
std::string var(int32_t k) { return "v" + S(k); }
// The dtype an accumulation computes in: f16/bf16 sums, products, maxima and minima in f32
// (their values live in f32 registers; docs/semantics.md, "Dtypes").
uint8_t acc_dtype(uint8_t dt) { return dt == EMBER_F16 || dt == EMBER_BF16 ? uint8_t(EMBER_F32) : dt; }

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

// The start of an argmax/argmin's running best value: the extreme no element can beat.
std::string arg_init(uint16_t op, uint8_t value_dt) {
  const uint16_t as = op == EMBER_KIR_ACC_ARGMAX ? EMBER_KIR_ACC_MAX : EMBER_KIR_ACC_MIN;
  return acc_init(as, float_reg(value_dt) && !is_float(value_dt) ? uint8_t(EMBER_F32) : value_dt);
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
  // Rows: a costly value (exp, log, ...) that a later pass computes again from the same operands
  // is kept from the earlier pass in a stack array and reloaded, when the whole reduction fits
  // (softmax's exp(x - max) of the sum pass, reused by the store pass).
  // twin[k]: the earlier instruction whose kept value k reloads (-1: none); kept[k]: k is stored.
  std::vector<int32_t> twin;
  std::vector<uint8_t> kept;
  // Pairs of arguments that a twin and its kept value load at the same points: the scheduler
  // passes one input once per use, so reuse holds only where they are the same view (run time).
  std::vector<std::pair<int32_t, int32_t>> same_views;
  int max_phase = 0;
  std::vector<uint8_t> uniform;       // per instruction: same value everywhere (emitted once)
  std::vector<uint8_t> used;          // per argument: loaded, stored or IOTA'd
  std::vector<uint8_t> splat;         // per argument: rows may read it from a splat (emit_c.h)
  std::vector<std::vector<int32_t>> phase;  // non-uniform instructions of each phase, in order
  int point_values = 0;               // non-store, non-uniform instructions of odd phases
  // Rows, L->stream: arguments the store-only passes write through chunk buffers and e_stream
  // (stored in an even phase, never loaded: a buffered store must not be read back).
  std::vector<uint8_t> streamed;
};

constexpr int kMaxKept = 2;      // values kept per kernel, each in a stack array of
constexpr int kKeepPoints = 8192;  // points: a reduction over up to this many is reused

bool costly(uint16_t op) {
  switch (op) {
    case EMBER_KIR_EXP: case EMBER_KIR_LOG: case EMBER_KIR_TANH: case EMBER_KIR_ERF: case EMBER_KIR_SIN:
    case EMBER_KIR_COS: case EMBER_KIR_POW: return true;
    default: return false;
  }
}

// reduce_row_splat_args from the program's argument use: arguments loaded in even phases only,
// never stored.
std::vector<uint8_t> row_splat_args(const ArgUse& use) {
  std::vector<uint8_t> out = use.loaded_even;
  for (size_t r = 0; r < out.size(); ++r) out[r] = out[r] && !use.stored[r];
  return out;
}

void find_reuse(const ember_kir_program& p, const ArgUse& use, Analysis& a) {
  a.twin.assign(size_t(p.n_insts), -1);
  a.kept.assign(size_t(p.n_insts), 0);
  // A program that stores into an argument it also loads could read different values in two passes.
  if (use.stored_and_read()) return;
  // Loads of different arguments of one dtype may be the same input (checked at run time).
  auto arg_key = [&](const ember_kir_inst& in) { return in.op == EMBER_KIR_LOAD ? -1 - int32_t(p.arg_dtypes[in.arg]) : in.arg; };
  // Canonical instruction: the first with the same operation on the same canonical operands.
  std::vector<int32_t> canon(size_t(p.n_insts));
  std::vector<std::tuple<uint16_t, uint8_t, int32_t, int32_t, int64_t, uint64_t, int32_t, int32_t, int32_t>> keys;
  std::vector<int32_t> first;
  int n_kept = 0;
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    canon[size_t(k)] = k;
    if (is_acc(in.op) || in.op == EMBER_KIR_STORE) continue;
    auto c = [&](int32_t o) { return o >= 0 && o < k ? canon[size_t(o)] : o; };
    uint64_t fbits;
    std::memcpy(&fbits, &in.fimm, sizeof fbits);
    auto key = std::make_tuple(in.op, in.dtype, arg_key(in), in.aux, in.iimm, fbits, c(in.a), c(in.b), c(in.c));
    size_t i = 0;
    while (i < keys.size() && keys[i] != key) ++i;
    if (i == keys.size()) {
      keys.push_back(key);
      first.push_back(k);
      continue;
    }
    canon[size_t(k)] = first[i];
  }
  // In each class of equal costly row values, the instance of the earliest pass is kept and the
  // instances of later passes reload it (program order need not follow the passes).
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    if (!costly(in.op) || in.phase % 2 || a.uniform[size_t(k)]) continue;
    int32_t e = -1;
    for (int32_t j = 0; j < p.n_insts; ++j)
      if (j != k && canon[size_t(j)] == canon[size_t(k)] && p.insts[j].phase % 2 == 0 && !a.uniform[size_t(j)] &&
          p.insts[j].phase < in.phase && (e < 0 || p.insts[j].phase < p.insts[e].phase))
        e = j;
    if (e < 0) continue;
    if (!a.kept[size_t(e)]) {
      if (n_kept == kMaxKept) continue;
      a.kept[size_t(e)] = 1;
      ++n_kept;
    }
    a.twin[size_t(k)] = e;
    // The loads under the two: where their arguments differ, they must be the same view.
    std::vector<std::pair<int32_t, int32_t>> stack{{k, e}};
    while (!stack.empty()) {
      auto [x, y] = stack.back();
      stack.pop_back();
      if (x == y || x < 0 || y < 0) continue;
      const ember_kir_inst &ix = p.insts[x], &iy = p.insts[y];
      if (ix.op == EMBER_KIR_LOAD) {
        if (ix.arg != iy.arg) {
          const auto pr = std::make_pair(std::min(ix.arg, iy.arg), std::max(ix.arg, iy.arg));
          if (std::find(a.same_views.begin(), a.same_views.end(), pr) == a.same_views.end()) a.same_views.push_back(pr);
        }
        continue;
      }
      stack.push_back({ix.a, iy.a});
      stack.push_back({ix.b, iy.b});
      stack.push_back({ix.c, iy.c});
    }
  }
}

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
    if (!t.reg_type(in.dtype)) return "instruction " + S(k) + " has no register type";
    // f16/bf16 accumulations run in f32 registers and round once, where a CAST or the store
    // rounds the result (acc_dtype), as in the interpreter and the reference backend.
    if (uses_arg(in.op)) a.used[size_t(in.arg)] = 1;
    if (is_acc(in.op)) {
      if (in.phase % 2 != 1 || in.a < 0 || in.a >= k) return "malformed accumulation";
      if (is_arg(in.op) ? in.dtype != EMBER_I64 : p.insts[in.a].dtype != in.dtype) return "malformed accumulation";
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
  const ArgUse use = arg_use(p);
  a.splat = row_splat_args(use);
  find_reuse(p, use, a);
  a.streamed = use.stored_and_read() ? std::vector<uint8_t>(size_t(p.n_args), 0) : use.stored_even;
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
  bool any_kept = false;
  for (int32_t k = 0; k < p.n_insts; ++k)
    if (a.kept[size_t(k)]) {
      s += I1 + "alignas(64) " + t.reg_type(p.insts[k].dtype) + " keep" + S(k) + "[" + S(kKeepPoints) + "];\n";
      any_kept = true;
    }
  // Kept values are used only when a whole reduction fits their arrays, and where the loads of a
  // value and of its twin are the same view of memory no store of the kernel writes.
  if (any_kept) {
    std::string cond = "nrows * inner <= " + S(kKeepPoints);
    std::vector<int32_t> stores;
    for (int32_t k = 0; k < p.n_insts; ++k)
      if (p.insts[k].op == EMBER_KIR_STORE) stores.push_back(p.insts[k].arg);
    for (auto [x, y] : a.same_views) {
      cond += " && same_view(" + S(x) + ", " + S(y) + ")";
      for (int32_t w : stores) cond += " && L->data[" + S(x) + "] != L->data[" + S(w) + "]";
    }
    if (!a.same_views.empty())
      s += I1 + "auto same_view = [&](int x, int y) {\n" + I1 +
           "  if (L->data[x] != L->data[y] || L->offset[x] != L->offset[y]) return false;\n" + I1 +
           "  for (int d = 0; d < R; ++d)\n" + I1 + "    if (L->strides[x * R + d] != L->strides[y * R + d]) return false;\n" +
           I1 + "  return true;\n" + I1 + "};\n";
    s += I1 + "const bool reuse = " + cond + ";\n";
  }
  // Arguments that may hold one value per row (stride 0 along it) are read through q<r>: the
  // row's chunk itself, or a splat of its value filled once per chunk, so that the loop stays a
  // plain vector loop either way (a softmax gradient's saved row sum made the whole kernel take
  // strided columns: 3.3 ms against 0.4 for the forward on [8, 4, 128, 128]). The launch has at
  // most kRowSplatSlots such arguments; they take slots of their storage type's array in order.
  std::vector<std::string> splat_fill(a.splat.size()), slot_types;
  for (size_t r = 0; r < a.splat.size(); ++r) {
    if (!a.splat[r]) continue;
    const std::string R = S(int64_t(r)), ST = t.storage_type(p.arg_dtypes[r]);
    size_t ti = 0;
    while (ti < slot_types.size() && slot_types[ti] != ST) ++ti;
    if (ti == slot_types.size()) {
      slot_types.push_back(ST);
      s += I1 + "alignas(64) " + ST + " splats" + S(int64_t(ti)) + "[" + S(kRowSplatSlots) + "][" + S(kRowChunk) + "];\n" +
           I1 + "int used" + S(int64_t(ti)) + " = 0;\n";
    }
    s += I1 + ST + "* const splat" + R + " = st" + R + "[R - 1] == 0 && inner > 1 && used" + S(int64_t(ti)) + " < " +
         S(kRowSplatSlots) + " ? splats" + S(int64_t(ti)) + "[used" + S(int64_t(ti)) + "++] : nullptr;\n";
    splat_fill[r] = I4 + "const " + ST + "* q" + R + " = p" + R + " + o" + R + " + j0;\n" + I4 + "if (splat" + R +
                    ") {\n" + I4 + "  for (int64_t j = 0; j < j1 - j0; ++j) splat" + R + "[j] = p" + R + "[o" + R + "];\n" +
                    I4 + "  q" + R + " = splat" + R + ";\n" + I4 + "}\n";
  }
  // L->stream: the store-only passes write their chunk into w<r> and stream it out (emit_c.h).
  bool any_streamed = false;
  for (size_t r = 0; r < a.streamed.size(); ++r)
    if (a.streamed[r]) {
      s += I1 + "alignas(64) " + t.storage_type(p.arg_dtypes[r]) + " w" + S(int64_t(r)) + "[" + S(kRowChunk) + "];\n";
      any_streamed = true;
    }
  s += I1 + "for (int64_t t = t0; t < t1; ++t) {\n";
  // IOTA arguments are not among those whose stride the launch checks: use their real strides.
  const std::vector<uint8_t>& sp = a.splat;
  ArgRefs even{[&sp](int r) { return sp[size_t(r)] ? "q" + S(r) + "[j - j0]" : "p" + S(r) + "[o" + S(r) + " + j]"; },
               [](int r) { return "o" + S(r) + " + j * st" + S(r) + "[R - 1]"; }};
  ArgRefs even_h{[&sp](int r) { return sp[size_t(r)] ? "q" + S(r) + "[j + h - j0]" : "p" + S(r) + "[o" + S(r) + " + j + h]"; },
                 [](int r) { return "o" + S(r) + " + (j + h) * st" + S(r) + "[R - 1]"; }};
  ArgRefs odd{[](int r) { return "p" + S(r) + "[b" + S(r) + "]"; }, [](int r) { return "b" + S(r); }};
  const std::vector<uint8_t>& sw = a.streamed;
  auto buffered = [&sw](const ArgRefs& refs, const std::string& at) {
    return ArgRefs{[&sw, refs, at](int r) { return sw[size_t(r)] ? "w" + S(r) + "[" + at + " - j0]" : refs.ref(r); }, refs.index};
  };
  const ArgRefs even_w = buffered(even, "j"), even_hw = buffered(even_h, "j + h");
  for (int pass = 0; 2 * pass <= a.max_phase; ++pass) {
    const std::vector<int32_t> accs = accs_of(p, a, 2 * pass + 1);
    const std::vector<int32_t>& row = a.phase[size_t(2 * pass)];
    std::string clauses, decl, fold, combine, finish;
    // The pass's row instructions at point `at` (j or j + h): stores left out when `stores` is
    // false; kept values written to their arrays when `keep`, reloaded from them when `reload`.
    auto body = [&](const ArgRefs& refs, const std::string& indent, bool stores = true, const std::string& at = "j",
                    bool keep = false, bool reload = false) {
      std::string b;
      for (int32_t k : row) {
        const bool store = p.insts[k].op == EMBER_KIR_STORE;
        if (store && !stores) continue;
        const int32_t twin = a.twin[size_t(k)];
        const std::string value = reload && twin >= 0 ? "keep" + S(twin) + "[rr * inner + " + at + "]" : render_inst(p, t, refs, k, var);
        b += indent + (store ? "" : std::string("const ") + t.reg_type(p.insts[k].dtype) + " " + var(k) + " = ") + value +
             (store ? "\n" : ";\n");
        if (keep && a.kept[size_t(k)]) b += indent + "keep" + S(k) + "[rr * inner + " + at + "] = " + var(k) + ";\n";
      }
      return b;
    };
    bool reuses = false;  // the pass keeps or reloads values: two versions of its loop
    for (int32_t k : row) reuses = reuses || a.twin[size_t(k)] >= 0 || a.kept[size_t(k)];
    for (int32_t k : accs) {
      const ember_kir_inst& in = p.insts[k];
      if (is_arg(in.op)) {
        // argmax / argmin: the chunk's extreme by a SIMD max/min reduction; only when it beats the
        // running best (or the chunk holds the row's first NaN) a scalar search of the chunk for
        // the first position that has it. The best is NaN once a NaN was found: nothing beats it.
        const uint8_t vdt = p.insts[in.a].dtype;
        const std::string VT = t.reg_type(vdt), v = var(k), best = "best" + S(k), c = "c" + S(k), n = "n" + S(k),
                          x = var(in.a);
        const bool fl = float_reg(vdt), mx = in.op == EMBER_KIR_ACC_ARGMAX;
        const std::string cmp = mx ? " > " : " < ";
        s += I2 + "int64_t " + v + " = 0;\n" + I2 + VT + " " + best + " = " + arg_init(in.op, vdt) + ";\n";
        decl += I4 + VT + " " + c + " = " + arg_init(in.op, vdt) + ";\n";
        clauses += std::string(" reduction(") + (mx ? "max" : "min") + ":" + c + ")";
        fold += I4 + "  " + c + " = " + x + cmp + c + " ? " + x + " : " + c + ";\n";
        std::string beats = c + cmp + best, wanted = x + " == " + c, next = c;
        if (fl) {
          decl += I4 + "int32_t " + n + " = 0;\n";
          clauses += " reduction(|:" + n + ")";
          fold += I4 + "  " + n + " |= int32_t(" + x + " != " + x + ");\n";
          beats = best + " == " + best + " && (" + n + " || " + beats + ")";
          wanted = "(" + n + " ? " + x + " != " + x + " : " + wanted + ")";
          next = n + " ? " + VT + "(__builtin_nan(\"\")) : " + c;
        }
        combine += I4 + "if (" + beats + ") {\n" + I4 + "  for (int64_t j = j0; j < j1; ++j) {\n" +
                   body(even, I4 + "    ", false) + I4 + "    if (" + wanted + ") {\n" + I4 + "      " + v +
                   " = rr * inner + j;\n" + I4 + "      break;\n" + I4 + "    }\n" + I4 + "  }\n" + I4 + "  " +
                   best + " = " + next + ";\n" + I4 + "}\n";
        continue;
      }
      const uint8_t adt = acc_dtype(in.dtype);
      const std::string T = t.reg_type(adt), v = var(k), c = "c" + S(k), n = "n" + S(k);
      const bool fl = is_float(adt), minmax = in.op == EMBER_KIR_ACC_MAX || in.op == EMBER_KIR_ACC_MIN;
      const bool wrap = !fl && !minmax;
      const std::string CT = wrap ? wrap_type(adt) : T;
      s += I2 + T + " " + v + " = " + acc_init(in.op, adt) + ";\n";
      if (fl && minmax) s += I2 + "int32_t nan" + S(k) + " = 0;\n";
      decl += I4 + CT + " " + c + " = " + (wrap ? CT + "(" + acc_init(in.op, adt) + ")" : acc_init(in.op, adt)) + ";\n";
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
      s += I3 + "for (int64_t j0 = 0; j0 < inner; j0 += " + S(kRowChunk) + ") {\n";
      s += I4 + "const int64_t j1 = j0 + " + S(kRowChunk) + " < inner ? j0 + " + S(kRowChunk) + " : inner;\n" + decl;
      // The splats this pass reads.
      std::vector<uint8_t> reads(a.splat.size(), 0);
      for (int32_t k : row)
        if (p.insts[k].op == EMBER_KIR_LOAD && a.splat[size_t(p.insts[k].arg)]) reads[size_t(p.insts[k].arg)] = 1;
      for (size_t r = 0; r < reads.size(); ++r)
        if (reads[r]) s += splat_fill[r];
      bool pass_stores = false;
      for (int32_t k : row) pass_stores = pass_stores || (p.insts[k].op == EMBER_KIR_STORE && sw[size_t(p.insts[k].arg)]);
      auto chunk = [&](bool reuse, bool stream = false) {
        std::string c;
        if (accs.empty()) {
          // A pass that only stores (softmax's last): two independent points per iteration, half
          // the chunk apart, as in the elementwise kernels (emit_c.cpp): the math is latency-bound.
          const ArgRefs& lo = stream ? even_w : even;
          const ArgRefs& hi = stream ? even_hw : even_h;
          c += I4 + "const int64_t h = (j1 - j0) / 2;\n#pragma omp simd\n";
          c += I4 + "for (int64_t j = j0; j < j0 + h; ++j) {\n" + I4 + "  {\n" +
               body(lo, I4 + "    ", true, "j", reuse, reuse) + I4 + "  }\n" + I4 + "  {\n" +
               body(hi, I4 + "    ", true, "j + h", reuse, reuse) + I4 + "  }\n" + I4 + "}\n";
          c += I4 + "if ((j1 - j0) % 2 != 0) {\n" + I4 + "  const int64_t j = j1 - 1;\n" +
               body(lo, I4 + "  ", true, "j", reuse, reuse) + I4 + "}\n";
          if (stream)
            for (size_t r = 0; r < sw.size(); ++r)
              if (sw[r])
                c += I4 + "e_stream(p" + S(int64_t(r)) + " + o" + S(int64_t(r)) + " + j0, w" + S(int64_t(r)) +
                     ", (j1 - j0) * int64_t(sizeof(" + t.storage_type(p.arg_dtypes[r]) + ")));\n";
        } else {
          c += "#pragma omp simd" + clauses + "\n";
          c += I4 + "for (int64_t j = j0; j < j1; ++j) {\n" + body(even, I4 + "  ", true, "j", reuse, reuse) + fold + I4 + "}\n";
        }
        return c;
      };
      auto both = [&](bool stream) {
        return reuses ? I4 + "if (reuse) {\n" + chunk(true, stream) + I4 + "} else {\n" + chunk(false, stream) + I4 + "}\n"
                      : chunk(false, stream);
      };
      if (any_streamed && accs.empty() && pass_stores)
        s += I4 + "if (L->stream) {\n" + both(true) + I4 + "} else {\n" + both(false) + I4 + "}\n";
      else
        s += both(false);
      s += combine + I3 + "}\n" + I2 + "}\n";
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
// `strided`: the lanes are cs<r> elements apart in argument r (gathers and scatters; short reduce
// rows such as a softmax over 7 keys, where the rows scheme runs scalar tails), else adjacent.
std::string columns_body(const ember_kir_program& p, const ExprTable& t, const Analysis& a, bool strided) {
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
      if (p.insts[k].op != EMBER_KIR_STORE) {
        s += I2 + "alignas(64) " + t.reg_type(p.insts[k].dtype) + " " + var(k) + "[" + S(kMaxBlock) + "];\n";
        if (is_arg(p.insts[k].op))  // the running best value of each lane
          s += I2 + "alignas(64) " + t.reg_type(p.insts[p.insts[k].a].dtype) + " best" + S(k) + "[" + S(kMaxBlock) + "];\n";
      }
  const std::string lane = strided ? " * cs" : "";
  ArgRefs even{[lane](int r) { return "p" + S(r) + "[q" + S(r) + " + j" + (lane.empty() ? "" : lane + S(r)) + "]"; },
               [](int r) { return "q" + S(r) + " + j * st" + S(r) + "[ro - 1]"; }};
  ArgRefs odd{[lane](int r) { return "p" + S(r) + "[b" + S(r) + " + j" + (lane.empty() ? "" : lane + S(r)) + "]"; },
              [](int r) { return "b" + S(r) + " + j * st" + S(r) + "[ro - 1]"; }};
  for (int pass = 0; 2 * pass <= a.max_phase; ++pass) {
    const std::vector<int32_t> accs = accs_of(p, a, 2 * pass + 1);
    const std::vector<int32_t>& row = a.phase[size_t(2 * pass)];
    if (!accs.empty()) {
      s += "#pragma omp simd\n" + I2 + "for (int64_t j = 0; j < n; ++j) {\n";
      for (int32_t k : accs) {
        const ember_kir_inst& in = p.insts[k];
        if (is_arg(in.op)) s += I3 + var(k) + "[j] = 0;\n" + I3 + "best" + S(k) + "[j] = " + arg_init(in.op, p.insts[in.a].dtype) + ";\n";
        else s += I3 + var(k) + "[j] = " + acc_init(in.op, acc_dtype(in.dtype)) + ";\n";
      }
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
      for (int32_t k : accs) {
        const ember_kir_inst& in = p.insts[k];
        if (!is_arg(in.op)) {
          s += I5 + acc_fold(in.op, acc_dtype(in.dtype), var(k) + "[j]", name(in.a)) + "\n";
          continue;
        }
        // argmax / argmin per lane, branch-free (bitwise, not || and &&, so the loop vectorizes);
        // a NaN best value (the first NaN) is never replaced.
        const std::string x = name(in.a), b = "best" + S(k) + "[j]", cmp = in.op == EMBER_KIR_ACC_ARGMAX ? " > " : " < ";
        std::string better = "int32_t(" + x + cmp + b + ")";
        if (float_reg(p.insts[in.a].dtype))
          better = "(int32_t(" + b + " == " + b + ") & (int32_t(" + x + " != " + x + ") | " + better + "))";
        s += I5 + "{\n" + I5 + "  const int32_t better = " + better + ";\n" + I5 + "  " + b + " = better ? " + x + " : " + b +
             ";\n" + I5 + "  " + var(k) + "[j] = better ? rr * inner + r : " + var(k) + "[j];\n" + I5 + "}\n";
      }
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

std::vector<uint8_t> reduce_row_splat_args(const ember_kir_program& p) { return row_splat_args(arg_use(p)); }

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
  int32_t outer_rank, reduce_rank, columns, stream;
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
    src += "  const int64_t cs" + A + " = st" + A + "[ro - 1];\n";
    src += "  (void)cs" + A + ";\n";
  }
  src += "  if (!L->columns) {\n" + rows_body(p, t, a) + "  } else if (L->columns == 1) {\n" + columns_body(p, t, a, false) +
         "  } else {\n" + columns_body(p, t, a, true) + "  }\n" + "  if (L->stream) e_stream_fence();\n}\n";
  return true;
}

}  // namespace ember::emit
