// Program analysis for the CPU backend: validates a KIR program against abi.h (operand order,
// phases, argument indices, dtypes) and splits it into the instruction lists the tile
// interpreter runs: uniform values (computed once per thread), phase 0, phase 1 and the ACCs.
#include <algorithm>
#include <cstdio>

#include "backend/common/host_memory.h"
#include "backend/cpu/program.h"

namespace ember::cpu {

using ember::host::set_status;

namespace {

bool uses_arg(uint16_t op) {
  return op == EMBER_KIR_LOAD || op == EMBER_KIR_LOAD_GATHER || op == EMBER_KIR_IOTA || op == EMBER_KIR_STORE ||
         op == EMBER_KIR_LOAD_UNIFORM || op == EMBER_KIR_LOAD_SCALAR;
}

// Number of operands (a, b, c) an instruction reads.
int operand_count(const ember_kir_inst& in) {
  const uint16_t op = in.op;
  if (op == EMBER_KIR_RAND_UNIFORM) return in.b >= 0 ? 2 : 1;  // b: the key, when not immediate
  switch (op) {
    case EMBER_KIR_CONST: case EMBER_KIR_LOAD: case EMBER_KIR_IOTA: case EMBER_KIR_LOAD_UNIFORM:
    case EMBER_KIR_LOAD_SCALAR:
      return 0;
    case EMBER_KIR_SELECT: return 3;
    default:
      if (op >= EMBER_KIR_ADD && op <= EMBER_KIR_OR) return 2;
      return 1;
  }
}

bool is_int_kind(uint8_t k) { return k == kI32 || k == kI64 || k == kU64; }

// Register kinds of the operands must be what the kernels read (abi.h: operands of arithmetic
// share the result's dtype, comparisons give bool, transcendentals are floating).
bool kinds_ok(const Program& p, const ember_kir_inst& in, uint8_t kind) {
  auto K = [&](int32_t o) { return p.kind[size_t(o)]; };
  switch (in.op) {
    case EMBER_KIR_NEG: case EMBER_KIR_ABS: case EMBER_KIR_FLOOR: case EMBER_KIR_CEIL:
      return K(in.a) == kind;
    case EMBER_KIR_EXP: case EMBER_KIR_LOG: case EMBER_KIR_SQRT: case EMBER_KIR_TANH: case EMBER_KIR_ERF:
    case EMBER_KIR_SIN: case EMBER_KIR_COS:
      return !is_int_kind(kind) && K(in.a) == kind;
    case EMBER_KIR_NOT: return is_int_kind(kind) && K(in.a) == kind;
    case EMBER_KIR_AND: case EMBER_KIR_OR: return is_int_kind(kind) && K(in.a) == kind && K(in.b) == kind;
    case EMBER_KIR_LT: case EMBER_KIR_LE: case EMBER_KIR_GT: case EMBER_KIR_GE: case EMBER_KIR_EQ: case EMBER_KIR_NE:
      return kind == kI32 && K(in.a) == K(in.b);
    case EMBER_KIR_SELECT: return is_int_kind(K(in.a)) && K(in.b) == kind && K(in.c) == kind;
    case EMBER_KIR_RAND_UNIFORM: return !is_int_kind(kind);
    default:
      if (in.op >= EMBER_KIR_ADD && in.op <= EMBER_KIR_MIN) return K(in.a) == kind && K(in.b) == kind;
      return true;
  }
}

bool is_pure_alu(uint16_t op) {
  return !uses_arg(op) && op != EMBER_KIR_RAND_UNIFORM && !is_acc_op(op);
}

}  // namespace

int32_t compile_program(const ember_kir_program& src, Program& p, ember_status* st) {
  p.name = src.name ? src.name : "kernel";
  const char* name = p.name.c_str();
  if (src.n_insts < 0 || src.n_args < 0 || (src.n_insts > 0 && !src.insts) || (src.n_args > 0 && !src.arg_dtypes))
    return set_status(st, EMBER_ERR_INVALID, "%s: malformed KIR program", name);
  p.insts.assign(src.insts, src.insts + src.n_insts);
  p.arg_dtypes.assign(src.arg_dtypes, src.arg_dtypes + src.n_args);
  for (uint8_t dt : p.arg_dtypes)
    if (dt >= EMBER_NUM_DTYPES) return set_status(st, EMBER_ERR_INVALID, "%s: argument of unknown dtype %d", name, dt);
  size_t n = p.insts.size();
  p.kind.resize(n);
  p.arg_in_phase[0].assign(p.arg_dtypes.size(), 0);
  p.arg_in_phase[1].assign(p.arg_dtypes.size(), 0);
  p.arg_stored.assign(p.arg_dtypes.size(), 0);
  p.arg_uniform.assign(p.arg_dtypes.size(), 0);
  p.max_phase = 0;
  for (const ember_kir_inst& in : p.insts) p.max_phase = std::max(p.max_phase, int(in.phase));
  p.phase.assign(size_t(std::max(p.max_phase, 1) + 1), {});
  std::vector<uint8_t> uniform(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const ember_kir_inst& in = p.insts[k];
    if (in.op >= EMBER_KIR_NUM_OPS)
      return set_status(st, EMBER_ERR_UNSUPPORTED, "%s: instruction %zu has unknown op %d", name, k, in.op);
    if (in.dtype >= EMBER_NUM_DTYPES)
      return set_status(st, EMBER_ERR_INVALID, "%s: instruction %zu has unknown dtype %d", name, k, in.dtype);
    p.kind[k] = reg_kind(in.dtype);
    int nops = operand_count(in);
    const int32_t ops[3] = {in.a, in.b, in.c};
    bool all_uniform = true;
    for (int j = 0; j < nops; ++j) {
      int32_t o = ops[j];
      if (o < 0 || size_t(o) >= k)
        return set_status(st, EMBER_ERR_INVALID, "%s: instruction %zu reads operand %d, not an earlier instruction",
                          name, k, o);
      const ember_kir_inst& op = p.insts[size_t(o)];
      if (op.op == EMBER_KIR_STORE)
        return set_status(st, EMBER_ERR_INVALID, "%s: instruction %zu reads a store", name, k);
      if (is_acc_op(in.op)) {
        if (in.phase % 2 != 1 || op.phase != in.phase - 1)
          return set_status(st, EMBER_ERR_INVALID,
                            "%s: accumulation %zu must be in an odd phase over a value of the phase before", name, k);
      } else if (op.phase != in.phase && !uniform[size_t(o)] && !(op.phase % 2 == 1 && op.phase < in.phase)) {
        // Besides its own phase, an instruction sees only the per-outer-point values of earlier
        // odd phases (abi.h).
        return set_status(st, EMBER_ERR_INVALID, "%s: phase-%d instruction %zu reads phase-%d value %d", name,
                          in.phase, k, op.phase, o);
      }
      all_uniform = all_uniform && uniform[size_t(o)];
    }
    if (!kinds_ok(p, in, p.kind[k]))
      return set_status(st, EMBER_ERR_UNSUPPORTED, "%s: instruction %zu (op %d) has operands of unexpected dtypes",
                        name, k, in.op);
    if (uses_arg(in.op)) {
      if (in.arg < 0 || size_t(in.arg) >= p.arg_dtypes.size())
        return set_status(st, EMBER_ERR_INVALID, "%s: instruction %zu uses argument %d of %zu", name, k, in.arg,
                          p.arg_dtypes.size());
      // IOTA only computes offsets and LOAD_SCALAR reads the launch: their arguments have no buffer.
      if (in.op == EMBER_KIR_LOAD_UNIFORM) p.arg_uniform[size_t(in.arg)] = 1;
      else if (in.op != EMBER_KIR_IOTA && in.op != EMBER_KIR_LOAD_SCALAR) p.arg_in_phase[in.phase % 2][size_t(in.arg)] = 1;
      if (in.op == EMBER_KIR_STORE) p.arg_stored[size_t(in.arg)] = 1;
    }
    if (in.op == EMBER_KIR_LOAD_GATHER && p.kind[size_t(in.a)] != kI64)
      return set_status(st, EMBER_ERR_INVALID, "%s: gather index %d is not i64", name, in.a);
    if ((in.op == EMBER_KIR_RAND_UNIFORM) && p.kind[size_t(in.a)] != kI64)
      return set_status(st, EMBER_ERR_INVALID, "%s: random counter %d is not i64", name, in.a);
    if (in.op == EMBER_KIR_RAND_UNIFORM && in.b >= 0 && p.kind[size_t(in.b)] != kI64)
      return set_status(st, EMBER_ERR_INVALID, "%s: random key %d is not i64", name, in.b);
    if (in.op == EMBER_KIR_IOTA && in.dtype != EMBER_I64)
      return set_status(st, EMBER_ERR_INVALID, "%s: iota must be i64", name);
    if (in.op == EMBER_KIR_LOAD_SCALAR && (in.dtype != EMBER_I64 || p.arg_dtypes[size_t(in.arg)] != EMBER_I64))
      return set_status(st, EMBER_ERR_INVALID, "%s: launch scalar %zu must be i64", name, k);
    if (is_acc_op(in.op)) {
      p.has_reduction = true;
      p.accs.push_back(int32_t(k));
      bool arg = is_arg_acc(in.op);
      if (arg ? p.kind[k] != kI64 : p.kind[k] != p.kind[size_t(in.a)])
        return set_status(st, EMBER_ERR_INVALID, "%s: accumulation %zu has an unexpected result dtype", name, k);
      continue;
    }
    if (in.op == EMBER_KIR_STORE) {
      p.phase[in.phase].push_back(int32_t(k));
      continue;
    }
    if ((is_pure_alu(in.op) && all_uniform) || in.op == EMBER_KIR_LOAD_UNIFORM || in.op == EMBER_KIR_LOAD_SCALAR) {
      uniform[k] = 1;
      p.uniform.push_back(int32_t(k));
    } else {
      p.phase[in.phase].push_back(int32_t(k));
    }
  }
  // A load may alias the memory a later store writes (in-place ops); reading it in place is
  // only safe if no store runs while its value is still needed. ACCs read their operand after
  // all of phase 0.
  std::vector<size_t> last_use(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const ember_kir_inst& in = p.insts[k];
    for (int32_t o : {in.a, in.b, in.c})
      if (o >= 0 && o < int32_t(k)) last_use[size_t(o)] = is_acc_op(in.op) ? n : std::max(last_use[size_t(o)], k);
  }
  p.zero_copy.assign(n, 0);
  for (size_t k = 0; k < n; ++k) {
    if (p.insts[k].op != EMBER_KIR_LOAD) continue;
    const size_t end = std::min(last_use[k], n);  // stores strictly before the last use matter
    bool ok = true;
    for (size_t s = k + 1; s < end && ok; ++s)
      ok = !(p.insts[s].op == EMBER_KIR_STORE && (last_use[k] < n || p.insts[s].phase % 2 == 0));
    p.zero_copy[k] = ok;
  }
  // Phase-1 instructions without any ACC still run once per outer point, after the reduce loop.
  p.has_reduction = p.has_reduction || p.max_phase > 0;
  return EMBER_OK;
}

}  // namespace ember::cpu
