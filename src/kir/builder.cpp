// KIR builder: emits instructions, folds scalar operands into constants, prints programs.
#include "kir/builder.h"

#include <fmt/format.h>

#include <cassert>
#include <cmath>

namespace ember::kir {

int Builder::add_arg(DType storage_dtype) {
  arg_dtypes_.push_back(uint8_t(storage_dtype));
  return int(arg_dtypes_.size()) - 1;
}

Val Builder::emit(ember_kir_op op, DType dtype, Val a, Val b, Val c) {
  ember_kir_inst inst{};
  inst.op = uint16_t(op);
  inst.dtype = uint8_t(dtype);
  inst.phase = uint8_t(phase);
  inst.a = a.id;
  inst.b = b.id;
  inst.c = c.id;
  inst.arg = -1;
  insts_.push_back(inst);
  return Val{this, int32_t(insts_.size()) - 1, dtype};
}

// A constant holds a value of its dtype's compute precision (f16/bf16 compute in f32, so an
// expression constant such as gelu's 1/sqrt(2) keeps f32 precision there) and integers wrap to
// the dtype's width, as CAST would.
static double round_float_constant(double v, DType dtype) {
  return dtype == DType::F64 ? v : double(float(v));
}
static int64_t wrap_int_constant(int64_t v, DType dtype) {
  switch (dtype) {
    case DType::Bool: return v != 0;
    case DType::U8: return int64_t(uint8_t(uint64_t(v)));
    case DType::I8: return int64_t(int8_t(uint8_t(uint64_t(v))));
    case DType::I16: return int64_t(int16_t(uint16_t(uint64_t(v))));
    case DType::U16: return int64_t(uint16_t(uint64_t(v)));
    case DType::I32: return int64_t(int32_t(uint32_t(uint64_t(v))));
    case DType::U32: return int64_t(uint32_t(uint64_t(v)));
    default: return v;  // i64; u64 keeps the bits
  }
}

Val Builder::constant(double v, DType dtype) {
  Val r = emit(EMBER_KIR_CONST, dtype);
  if (is_floating(dtype)) {
    insts_.back().fimm = round_float_constant(v, dtype);
  } else if (dtype == DType::Bool) {
    insts_.back().iimm = v != 0;
  } else {
    insts_.back().iimm = wrap_int_constant(int64_t(v), dtype);
  }
  return r;
}

Val Builder::constant_int(int64_t v, DType dtype) {
  if (is_floating(dtype)) return constant(double(v), dtype);
  Val r = emit(EMBER_KIR_CONST, dtype);
  insts_.back().iimm = wrap_int_constant(v, dtype);
  return r;
}

Val Builder::constant_like(Scalar2 v, DType dtype) {
  return is_floating(dtype) ? constant(v.f, dtype) : constant_int(v.i, dtype);
}

Val Builder::load(int arg) {
  Val r = emit(EMBER_KIR_LOAD, arg_dtype(arg));
  insts_.back().arg = arg;
  return r;
}

Val Builder::load_uniform(int arg) {
  Val r = emit(EMBER_KIR_LOAD_UNIFORM, arg_dtype(arg));
  insts_.back().arg = arg;
  return r;
}

Val Builder::load_scalar(int arg) {
  assert(arg_dtype(arg) == DType::I64);
  Val r = emit(EMBER_KIR_LOAD_SCALAR, DType::I64);
  insts_.back().arg = arg;
  return r;
}

Val Builder::load_gather(int arg, Val index) {
  assert(index.dtype == DType::I64);
  Val r = emit(EMBER_KIR_LOAD_GATHER, arg_dtype(arg), index);
  insts_.back().arg = arg;
  return r;
}

Val Builder::iota(int arg) {
  Val r = emit(EMBER_KIR_IOTA, DType::I64);
  insts_.back().arg = arg;
  return r;
}

void Builder::store(int arg, Val v) {
  assert(v.dtype == arg_dtype(arg));
  emit(EMBER_KIR_STORE, v.dtype, v);
  insts_.back().arg = arg;
}

Val Builder::cast(Val v, DType dtype) {
  if (v.dtype == dtype) return v;
  return emit(EMBER_KIR_CAST, dtype, v);
}

Val Builder::round_to_dtype(Val v) {
  // The dtypes held in a wider register (abi.h); i32, i64 and u64 wrap in their own width.
  switch (v.dtype) {
    case DType::F16: case DType::BF16: case DType::U8: case DType::I8: case DType::I16: case DType::U16:
    case DType::U32:
      break;
    default: return v;
  }
  return emit(EMBER_KIR_CAST, v.dtype, v);
}

Val Builder::rand_uniform(Val counter, uint64_t seed, int stream, DType dtype) {
  Val r = emit(EMBER_KIR_RAND_UNIFORM, dtype, counter, runtime_key);
  insts_.back().iimm = runtime_key.id >= 0 ? 0 : int64_t(seed);
  insts_.back().aux = stream;
  return r;
}

// An accumulator lives in the phase after its operand's pass (see abi.h).
static Val accumulate(Builder& b, ember_kir_op op, Val v, DType result) {
  int saved = b.phase;
  b.phase = saved + 1;
  Val r = b.emit(op, result, v);
  b.phase = saved;
  return r;
}
Val Builder::acc_sum(Val v) { has_reduction_ = true; return accumulate(*this, EMBER_KIR_ACC_SUM, v, v.dtype); }
Val Builder::acc_prod(Val v) { has_reduction_ = true; return accumulate(*this, EMBER_KIR_ACC_PROD, v, v.dtype); }
Val Builder::acc_max(Val v) { has_reduction_ = true; return accumulate(*this, EMBER_KIR_ACC_MAX, v, v.dtype); }
Val Builder::acc_min(Val v) { has_reduction_ = true; return accumulate(*this, EMBER_KIR_ACC_MIN, v, v.dtype); }
Val Builder::acc_argmax(Val v) {
  has_reduction_ = true;
  return accumulate(*this, EMBER_KIR_ACC_ARGMAX, v, DType::I64);
}
Val Builder::acc_argmin(Val v) {
  has_reduction_ = true;
  return accumulate(*this, EMBER_KIR_ACC_ARGMIN, v, DType::I64);
}

ember_kir_program Builder::program(const std::string& name) {
  name_ = name;
  return program_view(name_);
}

ember_kir_program Builder::program_view(const std::string& name) const {
  ember_kir_program p{};
  p.name = name.c_str();
  p.n_insts = int32_t(insts_.size());
  p.insts = insts_.data();
  p.n_args = int32_t(arg_dtypes_.size());
  p.arg_dtypes = arg_dtypes_.data();
  p.has_reduction = has_reduction_ ? 1 : 0;
  return p;
}

uint64_t Builder::structure_hash() const {
  // FNV-1a over the instruction fields and argument dtypes (padding bytes are skipped).
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t n) {
    auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  };
  for (const auto& in : insts_) {
    mix(&in.op, sizeof in.op);
    mix(&in.dtype, sizeof in.dtype);
    mix(&in.phase, sizeof in.phase);
    mix(&in.a, sizeof in.a);
    mix(&in.b, sizeof in.b);
    mix(&in.c, sizeof in.c);
    mix(&in.arg, sizeof in.arg);
    mix(&in.aux, sizeof in.aux);
    mix(&in.fimm, sizeof in.fimm);
    mix(&in.iimm, sizeof in.iimm);
  }
  mix(arg_dtypes_.data(), arg_dtypes_.size());
  return h;
}

// ---- operators ------------------------------------------------------------------------------
static Val binary(ember_kir_op op, Val x, Val y) {
  assert(x.b && x.dtype == y.dtype);
  return x.b->emit(op, x.dtype, x, y);
}
static Val compare(ember_kir_op op, Val x, Val y) {
  assert(x.b && x.dtype == y.dtype);
  return x.b->emit(op, DType::Bool, x, y);
}
static Val unary(ember_kir_op op, Val x) { return x.b->emit(op, x.dtype, x); }
static Val k(Val like, double v) { return like.b->constant(v, like.dtype); }

Val operator+(Val x, Val y) { return binary(EMBER_KIR_ADD, x, y); }
Val operator-(Val x, Val y) { return binary(EMBER_KIR_SUB, x, y); }
Val operator*(Val x, Val y) { return binary(EMBER_KIR_MUL, x, y); }
Val operator/(Val x, Val y) { return binary(EMBER_KIR_DIV, x, y); }
Val operator-(Val x) { return unary(EMBER_KIR_NEG, x); }
Val operator+(Val x, double y) { return x + k(x, y); }
Val operator+(double x, Val y) { return k(y, x) + y; }
Val operator-(Val x, double y) { return x - k(x, y); }
Val operator-(double x, Val y) { return k(y, x) - y; }
Val operator*(Val x, double y) { return x * k(x, y); }
Val operator*(double x, Val y) { return k(y, x) * y; }
Val operator/(Val x, double y) { return x / k(x, y); }
Val operator/(double x, Val y) { return k(y, x) / y; }

Val abs(Val x) { return unary(EMBER_KIR_ABS, x); }
Val exp(Val x) { return unary(EMBER_KIR_EXP, x); }
Val log(Val x) { return unary(EMBER_KIR_LOG, x); }
Val sqrt(Val x) { return unary(EMBER_KIR_SQRT, x); }
Val tanh(Val x) { return unary(EMBER_KIR_TANH, x); }
Val erf(Val x) { return unary(EMBER_KIR_ERF, x); }
Val sin(Val x) { return unary(EMBER_KIR_SIN, x); }
Val cos(Val x) { return unary(EMBER_KIR_COS, x); }
Val sign(Val x) {
  Val zero = x.b->constant(0, x.dtype);
  return x.b->cast(gt(x, zero), x.dtype) - x.b->cast(lt(x, zero), x.dtype);
}
Val floor(Val x) { return unary(EMBER_KIR_FLOOR, x); }
Val ceil(Val x) { return unary(EMBER_KIR_CEIL, x); }
Val floor_div(Val x, Val y) { return binary(EMBER_KIR_FLOORDIV, x, y); }
Val rem(Val x, Val y) { return binary(EMBER_KIR_REM, x, y); }
Val fmod(Val x, Val y) { return binary(EMBER_KIR_FMOD, x, y); }
Val pow(Val x, Val y) { return binary(EMBER_KIR_POW, x, y); }
Val max(Val x, Val y) { return binary(EMBER_KIR_MAX, x, y); }
Val min(Val x, Val y) { return binary(EMBER_KIR_MIN, x, y); }
Val eq(Val x, Val y) { return compare(EMBER_KIR_EQ, x, y); }
Val ne(Val x, Val y) { return compare(EMBER_KIR_NE, x, y); }
Val lt(Val x, Val y) { return compare(EMBER_KIR_LT, x, y); }
Val le(Val x, Val y) { return compare(EMBER_KIR_LE, x, y); }
Val gt(Val x, Val y) { return compare(EMBER_KIR_GT, x, y); }
Val ge(Val x, Val y) { return compare(EMBER_KIR_GE, x, y); }
Val logical_and(Val x, Val y) { return binary(EMBER_KIR_AND, x, y); }
Val logical_or(Val x, Val y) { return binary(EMBER_KIR_OR, x, y); }
Val logical_not(Val x) { return unary(EMBER_KIR_NOT, x); }
Val select(Val cond, Val x, Val y) {
  assert(cond.dtype == DType::Bool && x.dtype == y.dtype);
  return x.b->emit(EMBER_KIR_SELECT, x.dtype, cond, x, y);
}

// ---- printing -------------------------------------------------------------------------------
const char* op_name(ember_kir_op op) {
  static const char* names[] = {
      "const", "load", "load_gather", "iota", "store", "cast", "neg", "abs", "exp", "log",
      "sqrt", "tanh", "erf", "sin", "cos", "floor", "ceil", "not", "add", "sub", "mul", "div",
      "floordiv", "rem", "fmod", "pow", "max", "min", "lt", "le", "gt", "ge", "eq", "ne", "and", "or",
      "select", "rand_uniform", "acc_sum", "acc_prod", "acc_max", "acc_min", "acc_argmax",
      "acc_argmin", "load_uniform", "load_scalar"};
  static_assert(sizeof(names) / sizeof(names[0]) == EMBER_KIR_NUM_OPS);
  return op < EMBER_KIR_NUM_OPS ? names[op] : "?";
}

std::string to_string(const ember_kir_program& p) {
  std::string s = fmt::format("kir {} ({} args)\n", p.name ? p.name : "", p.n_args);
  for (int i = 0; i < p.n_insts; ++i) {
    const auto& in = p.insts[i];
    s += fmt::format("  p{} %{} = {}.{}", in.phase, i, op_name(ember_kir_op(in.op)),
                     dtype_name(DType(in.dtype)));
    for (int32_t o : {in.a, in.b, in.c})
      if (o >= 0) s += fmt::format(" %{}", o);
    if (in.arg >= 0) s += fmt::format(" arg{}", in.arg);
    if (in.op == EMBER_KIR_CONST)
      s += is_floating(DType(in.dtype)) ? fmt::format(" {}", in.fimm) : fmt::format(" {}", in.iimm);
    s += "\n";
  }
  return s;
}

}  // namespace ember::kir
