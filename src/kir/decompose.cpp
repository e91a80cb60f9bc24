// The KIR decomposition pass (decompose.h): each rule below spells one instruction with simpler
// ones, exactly (abi.h's semantics), and every instruction a rule emits goes through the same
// check, so rules build on each other.
#include "kir/decompose.h"

#include <fmt/format.h>

#include "ember/dtype.h"
#include "kir/builder.h"

namespace ember::kir {

namespace {

bool is_float_dtype(uint8_t dt) { return is_floating(DType(dt)); }

class Lowering {
 public:
  Lowering(const Spells& spells, std::vector<ember_kir_inst>& out) : spells_(spells), out_(out) {}

  // Appends `in` (operands already in the output's numbering), or its rule's instructions when
  // the target cannot spell it; the index of the value, or -1 (why_ says what failed).
  int32_t emit(const ember_kir_inst& in, int depth = 0) {
    if (spells_(in.op, in.dtype)) {
      out_.push_back(in);
      return int32_t(out_.size()) - 1;
    }
    if (depth < kMaxDepth)
      if (int32_t r = rule(in, depth + 1); r >= 0 || !why_.empty()) return r;
    if (why_.empty()) {
      why_ = fmt::format("no rule spells '{}' on {} with what the target has", op_name(ember_kir_op(in.op)),
                         dtype_name(DType(in.dtype)));
      blocker_ = in;
    }
    return -1;
  }

  const std::string& why() const { return why_; }
  const ember_kir_inst& blocker() const { return blocker_; }

 private:
  static constexpr int kMaxDepth = 6;

  // The rule for `in`, or -1 with why_ empty when there is none (or set when a part failed).
  int32_t rule(const ember_kir_inst& in, int depth) {
    phase_ = in.phase;
    depth_ = depth;
    const uint8_t dt = in.dtype;
    const int32_t a = in.a, b = in.b;
    const bool fl = is_float_dtype(dt);
    switch (in.op) {
      case EMBER_KIR_NEG:  // -0 - x keeps the signed zeros: -(+0) = -0, -(-0) = +0
        return op(EMBER_KIR_SUB, dt, fl ? fconst(dt, -0.0) : iconst(dt, 0), a);
      case EMBER_KIR_ABS: {
        if (dt == EMBER_U64) return a;
        // Floats: x <= 0 takes -0 to 0 - (-0) = +0; NaN compares false and stays.
        const int32_t zero = fl ? fconst(dt, 0.0) : iconst(dt, 0);
        const int32_t negative = op(fl ? EMBER_KIR_LE : EMBER_KIR_LT, EMBER_BOOL, a, zero);
        return op(EMBER_KIR_SELECT, dt, negative, op(EMBER_KIR_SUB, dt, zero, a), a);
      }
      case EMBER_KIR_CEIL: {
        if (!fl) return a;
        const int32_t minus = op(EMBER_KIR_NEG, dt, a);
        return op(EMBER_KIR_NEG, dt, op(EMBER_KIR_FLOOR, dt, minus));
      }
      case EMBER_KIR_MAX: case EMBER_KIR_MIN: {
        const bool max = in.op == EMBER_KIR_MAX;
        const int32_t pick = op(EMBER_KIR_SELECT, dt, op(max ? EMBER_KIR_GT : EMBER_KIR_LT, EMBER_BOOL, a, b), a, b);
        if (!fl) return pick;
        const int32_t b_or_pick = op(EMBER_KIR_SELECT, dt, op(EMBER_KIR_NE, EMBER_BOOL, b, b), b, pick);
        return op(EMBER_KIR_SELECT, dt, op(EMBER_KIR_NE, EMBER_BOOL, a, a), a, b_or_pick);
      }
      case EMBER_KIR_GT: return op(EMBER_KIR_LT, dt, b, a);
      case EMBER_KIR_GE: return op(EMBER_KIR_LE, dt, b, a);
      case EMBER_KIR_NE:
        return op(EMBER_KIR_SELECT, dt, op(EMBER_KIR_EQ, EMBER_BOOL, a, b), iconst(dt, 0), iconst(dt, 1));
      case EMBER_KIR_NOT: return op(EMBER_KIR_SELECT, dt, is_zero(a), iconst(dt, 1), iconst(dt, 0));
      case EMBER_KIR_AND: {
        const int32_t b_set = op(EMBER_KIR_SELECT, dt, is_zero(b), iconst(dt, 0), iconst(dt, 1));
        return op(EMBER_KIR_SELECT, dt, is_zero(a), iconst(dt, 0), b_set);
      }
      case EMBER_KIR_OR: {
        const int32_t b_set = op(EMBER_KIR_SELECT, dt, is_zero(b), iconst(dt, 0), iconst(dt, 1));
        return op(EMBER_KIR_SELECT, dt, is_zero(a), b_set, iconst(dt, 1));
      }
      default: return -1;
    }
  }

  // An instruction of the rule being expanded (in its phase); -1 propagates a failure.
  int32_t op(uint16_t code, uint8_t dt, int32_t a, int32_t b = -1, int32_t c = -1) {
    if (a == -1 || (b == -1 && needs_b(code)) || (c == -1 && code == EMBER_KIR_SELECT)) return -1;  // a part failed
    ember_kir_inst x{};
    x.op = code;
    x.dtype = dt;
    x.phase = phase_;
    x.a = a;
    x.b = b;
    x.c = c;
    x.arg = -1;
    const uint8_t phase = phase_;
    const int depth = depth_;
    const int32_t r = emit(x, depth);
    phase_ = phase;  // a nested rule set them
    depth_ = depth;
    if (r < 0 && why_.empty()) why_ = "a rule's instruction failed";
    return r;
  }
  static bool needs_b(uint16_t code) {
    return code == EMBER_KIR_SELECT || (code >= EMBER_KIR_ADD && code <= EMBER_KIR_OR);
  }
  // A constant of dtype dt: `f` for floating dtypes, `i` for the others.
  int32_t constant(uint8_t dt, double f, int64_t i) {
    ember_kir_inst x{};
    x.op = EMBER_KIR_CONST;
    x.dtype = dt;
    x.phase = phase_;
    x.a = x.b = x.c = x.arg = -1;
    x.fimm = is_float_dtype(dt) ? f : 0.0;
    x.iimm = is_float_dtype(dt) ? 0 : i;
    return emit(x, depth_);
  }
  int32_t fconst(uint8_t dt, double v) { return constant(dt, v, 0); }
  int32_t iconst(uint8_t dt, int64_t v) { return constant(dt, double(v), v); }
  // v == 0 (bool), with a zero of v's dtype.
  int32_t is_zero(int32_t v) {
    if (v < 0) return -1;
    const uint8_t dt = out_[size_t(v)].dtype;
    return op(EMBER_KIR_EQ, EMBER_BOOL, v, iconst(dt, 0));
  }

  const Spells& spells_;
  std::vector<ember_kir_inst>& out_;
  std::string why_;
  ember_kir_inst blocker_{};
  uint8_t phase_ = 0;
  int depth_ = 0;
};

}  // namespace

bool decompose(const ember_kir_program& program, const Spells& spells, std::vector<ember_kir_inst>& out,
               std::string* why, ember_kir_inst* blocker) {
  out.clear();
  out.reserve(size_t(program.n_insts) * 2);
  std::vector<int32_t> index(size_t(program.n_insts), -1);  // input instruction -> output value
  Lowering lowering(spells, out);
  auto renumber = [&](int32_t o) { return o >= 0 && o < int32_t(index.size()) ? index[size_t(o)] : o; };
  for (int32_t k = 0; k < program.n_insts; ++k) {
    ember_kir_inst in = program.insts[k];
    in.a = renumber(in.a);
    in.b = renumber(in.b);
    in.c = renumber(in.c);
    const int32_t r = lowering.emit(in);
    if (r < 0) {
      if (why)
        *why = fmt::format("instruction {} ('{}' on {}): {}", k, op_name(ember_kir_op(program.insts[k].op)),
                           dtype_name(DType(program.insts[k].dtype)), lowering.why());
      if (blocker) *blocker = lowering.blocker();
      return false;
    }
    index[size_t(k)] = r;
  }
  return true;
}

}  // namespace ember::kir
