// The reference backend: a scalar KIR interpreter, written for clarity rather than speed. It is
// the oracle the tests compare the other backends against, so it evaluates every instruction
// one point at a time with the C++ standard library's math, in the semantics stated in abi.h.
// The plugin's C table, its queues and its test modes (asynchronous, weak) are in plugin.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backend/abi.h"
#include "backend/common/host_memory.h"
#include "backend/common/philox.h"
#include "ember/dtype.h"

using ember::DType;

namespace ember::ref {
// Convolution, pooling, sorting and scans (library.cpp).
int32_t library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                const void* attrs, ember_status* st);
}  // namespace ember::ref
using ember::host::set_status;

namespace {

bool is_float(uint8_t dt) {
  return dt == EMBER_F32 || dt == EMBER_F64 || dt == EMBER_F16 || dt == EMBER_BF16;
}

// A register: floating values in f, integer and bool values in i (u64: its 64 bits).
struct Value {
  double f = 0;
  int64_t i = 0;
};

// Rounds a computed floating value to the precision the dtype computes in (f16/bf16 compute in f32).
double round_to(uint8_t dt, double x) { return dt == EMBER_F64 ? x : double(float(x)); }

// Integer dtypes held in 64 bits (abi.h); the others compute in i32.
bool is_wide_int(uint8_t dt) { return dt == EMBER_I64 || dt == EMBER_U32 || dt == EMBER_U64; }

// Wraps an integer result to the register width of the dtype.
int64_t wrap_int(uint8_t dt, uint64_t x) {
  return is_wide_int(dt) ? int64_t(x) : int64_t(int32_t(uint32_t(x)));
}

// Wraps an integer to a logical dtype's range, as CAST does (u8 modulo 256, ...).
int64_t wrap_to(uint8_t dt, int64_t x) {
  switch (dt) {
    case EMBER_I32: return int32_t(uint32_t(uint64_t(x)));
    case EMBER_U8: return uint8_t(uint64_t(x));
    case EMBER_I8: return int8_t(uint8_t(uint64_t(x)));
    case EMBER_I16: return int16_t(uint16_t(uint64_t(x)));
    case EMBER_U16: return uint16_t(uint64_t(x));
    case EMBER_U32: return uint32_t(uint64_t(x));
    default: return x;  // i64, u64 (bits)
  }
}

struct Error {
  int32_t code;
  const char* what;
  long long value;
  long long extra;
};

Value load_value(const void* data, int64_t offset, uint8_t dt) {
  Value v;
  switch (dt) {
    case EMBER_F32: v.f = static_cast<const float*>(data)[offset]; break;
    case EMBER_F64: v.f = static_cast<const double*>(data)[offset]; break;
    case EMBER_F16: v.f = ember::half_to_float(static_cast<const uint16_t*>(data)[offset]); break;
    case EMBER_BF16: v.f = ember::bf16_to_float(static_cast<const uint16_t*>(data)[offset]); break;
    case EMBER_I32: v.i = static_cast<const int32_t*>(data)[offset]; break;
    case EMBER_I64: v.i = static_cast<const int64_t*>(data)[offset]; break;
    case EMBER_U8: v.i = static_cast<const uint8_t*>(data)[offset]; break;
    case EMBER_BOOL: v.i = static_cast<const uint8_t*>(data)[offset] != 0; break;
    case EMBER_I8: v.i = static_cast<const int8_t*>(data)[offset]; break;
    case EMBER_I16: v.i = static_cast<const int16_t*>(data)[offset]; break;
    case EMBER_U16: v.i = static_cast<const uint16_t*>(data)[offset]; break;
    case EMBER_U32: v.i = static_cast<const uint32_t*>(data)[offset]; break;
    case EMBER_U64: v.i = int64_t(static_cast<const uint64_t*>(data)[offset]); break;
  }
  return v;
}

void store_value(void* data, int64_t offset, uint8_t dt, Value v) {
  switch (dt) {
    case EMBER_F32: static_cast<float*>(data)[offset] = float(v.f); break;
    case EMBER_F64: static_cast<double*>(data)[offset] = v.f; break;
    case EMBER_F16: static_cast<uint16_t*>(data)[offset] = ember::float_to_half(float(v.f)); break;
    case EMBER_BF16: static_cast<uint16_t*>(data)[offset] = ember::float_to_bf16(float(v.f)); break;
    case EMBER_I32: static_cast<int32_t*>(data)[offset] = int32_t(v.i); break;
    case EMBER_I64: static_cast<int64_t*>(data)[offset] = v.i; break;
    case EMBER_U8: static_cast<uint8_t*>(data)[offset] = uint8_t(v.i); break;
    case EMBER_BOOL: static_cast<uint8_t*>(data)[offset] = v.i != 0; break;
    case EMBER_I8: static_cast<int8_t*>(data)[offset] = int8_t(v.i); break;
    case EMBER_I16: static_cast<int16_t*>(data)[offset] = int16_t(v.i); break;
    case EMBER_U16: static_cast<uint16_t*>(data)[offset] = uint16_t(v.i); break;
    case EMBER_U32: static_cast<uint32_t*>(data)[offset] = uint32_t(v.i); break;
    case EMBER_U64: static_cast<uint64_t*>(data)[offset] = uint64_t(v.i); break;
  }
}

// Float to integer: truncation toward zero; NaN and out-of-range values give the minimum of the
// register type (what x86 conversion instructions produce).
int64_t float_to_int(double x, uint8_t dt) {
  if (dt == EMBER_I64) {
    if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) return INT64_MIN;
    return int64_t(x);
  }
  if (!(x >= -2147483648.0 && x < 2147483648.0)) return INT32_MIN;
  return int64_t(int32_t(x));
}

// Float to u64 (abi.h): (-2^63, 2^64) truncates and wraps; NaN and the rest give 2^63.
int64_t float_to_u64(double x) {
  if (x >= 0 && x < 18446744073709551616.0) return int64_t(uint64_t(x));
  if (x > -9223372036854775808.0 && x < 0) return int64_t(x);
  return INT64_MIN;
}

// A register's integer as a double (u64 registers hold unsigned bits).
double int_to_double(Value v, uint8_t dt) { return dt == EMBER_U64 ? double(uint64_t(v.i)) : double(v.i); }

Value cast_value(Value v, uint8_t from, uint8_t to) {
  Value r;
  if (to == EMBER_BOOL) {
    r.i = is_float(from) ? (v.f != 0 || std::isnan(v.f)) : v.i != 0;
  } else if (is_float(to)) {
    double x = is_float(from) ? v.f : int_to_double(v, from);
    switch (to) {
      case EMBER_F64: r.f = x; break;
      case EMBER_F32: r.f = float(x); break;
      case EMBER_F16: r.f = ember::half_to_float(ember::float_to_half(float(x))); break;
      default: r.f = ember::bf16_to_float(ember::float_to_bf16(float(x))); break;
    }
  } else {
    // Floats convert to the register type (i64 for u32, i32 for the narrow types), then wrap.
    int64_t x = v.i;
    if (is_float(from)) x = to == EMBER_U64 ? float_to_u64(v.f) : float_to_int(v.f, is_wide_int(to) ? EMBER_I64 : EMBER_I32);
    r.i = wrap_to(to, x);
  }
  return r;
}

int64_t ipow(int64_t base, uint64_t exp, uint8_t dt) {
  uint64_t result = 1, b = uint64_t(base);
  while (exp > 0) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return wrap_int(dt, result);
}

double fmax_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : (a > b ? a : b); }
double fmin_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? a : b); }

struct Program {
  std::vector<ember_kir_inst> insts;
  std::vector<uint8_t> arg_dtypes;
  std::string name;
};

// The integer ops whose u64 meaning differs from i64's: unsigned compares and division (abi.h).
bool eval_u64(const ember_kir_inst& in, Value a, Value b, Value& out) {
  const uint64_t x = uint64_t(a.i), y = uint64_t(b.i);
  switch (in.op) {
    case EMBER_KIR_ABS: out.i = a.i; return true;
    case EMBER_KIR_DIV: case EMBER_KIR_FLOORDIV:
      if (y == 0) throw Error{EMBER_ERR_INVALID, "integer division by zero", a.i, 0};
      out.i = int64_t(x / y);
      return true;
    case EMBER_KIR_REM: case EMBER_KIR_FMOD:
      if (y == 0) throw Error{EMBER_ERR_INVALID, "integer remainder by zero", a.i, 0};
      out.i = int64_t(x % y);
      return true;
    case EMBER_KIR_POW: out.i = ipow(a.i, y, EMBER_U64); return true;
    case EMBER_KIR_MAX: out.i = int64_t(x > y ? x : y); return true;
    case EMBER_KIR_MIN: out.i = int64_t(x < y ? x : y); return true;
    case EMBER_KIR_LT: out.i = x < y; return true;
    case EMBER_KIR_LE: out.i = x <= y; return true;
    case EMBER_KIR_GT: out.i = x > y; return true;
    case EMBER_KIR_GE: out.i = x >= y; return true;
    default: return false;  // the same bits as for i64
  }
}

// Evaluates instruction k (not an ACC, STORE or LOAD) on register values.
Value eval_alu(const ember_kir_inst& in, const std::vector<Value>& r, const std::vector<uint8_t>& rdt) {
  Value out;
  uint8_t dt = in.dtype;
  const Value a = in.a >= 0 ? r[size_t(in.a)] : Value{};
  const Value b = in.b >= 0 ? r[size_t(in.b)] : Value{};
  uint8_t adt = in.a >= 0 ? rdt[size_t(in.a)] : dt;
  bool fl = is_float(dt);
  if ((dt == EMBER_U64 || (adt == EMBER_U64 && dt == EMBER_BOOL)) && eval_u64(in, a, b, out)) return out;
  switch (in.op) {
    case EMBER_KIR_CONST:
      if (fl) out.f = round_to(dt, in.fimm);
      else out.i = in.iimm;
      break;
    case EMBER_KIR_CAST: out = cast_value(a, adt, dt); break;
    case EMBER_KIR_NEG: if (fl) out.f = -a.f; else out.i = wrap_int(dt, 0 - uint64_t(a.i)); break;
    case EMBER_KIR_ABS: if (fl) out.f = std::fabs(a.f); else out.i = wrap_int(dt, a.i < 0 ? 0 - uint64_t(a.i) : uint64_t(a.i)); break;
    case EMBER_KIR_EXP: out.f = round_to(dt, std::exp(a.f)); break;
    case EMBER_KIR_LOG: out.f = round_to(dt, std::log(a.f)); break;
    case EMBER_KIR_SQRT: out.f = round_to(dt, std::sqrt(a.f)); break;
    case EMBER_KIR_TANH: out.f = round_to(dt, std::tanh(a.f)); break;
    case EMBER_KIR_ERF: out.f = round_to(dt, std::erf(a.f)); break;
    case EMBER_KIR_SIN: out.f = round_to(dt, std::sin(a.f)); break;
    case EMBER_KIR_COS: out.f = round_to(dt, std::cos(a.f)); break;
    case EMBER_KIR_FLOOR: if (fl) out.f = std::floor(a.f); else out.i = a.i; break;
    case EMBER_KIR_CEIL: if (fl) out.f = std::ceil(a.f); else out.i = a.i; break;
    case EMBER_KIR_NOT: out.i = !a.i; break;
    case EMBER_KIR_ADD: if (fl) out.f = round_to(dt, a.f + b.f); else out.i = wrap_int(dt, uint64_t(a.i) + uint64_t(b.i)); break;
    case EMBER_KIR_SUB: if (fl) out.f = round_to(dt, a.f - b.f); else out.i = wrap_int(dt, uint64_t(a.i) - uint64_t(b.i)); break;
    case EMBER_KIR_MUL: if (fl) out.f = round_to(dt, a.f * b.f); else out.i = wrap_int(dt, uint64_t(a.i) * uint64_t(b.i)); break;
    case EMBER_KIR_DIV:
      if (fl) out.f = round_to(dt, a.f / b.f);
      else if (b.i == 0) throw Error{EMBER_ERR_INVALID, "integer division by zero", a.i, 0};
      else if (b.i == -1) out.i = wrap_int(dt, 0 - uint64_t(a.i));
      else out.i = a.i / b.i;
      break;
    case EMBER_KIR_FLOORDIV:
      if (fl) {
        out.f = round_to(dt, std::floor(a.f / b.f));
      } else {
        if (b.i == 0) throw Error{EMBER_ERR_INVALID, "integer division by zero", a.i, 0};
        if (b.i == -1) { out.i = wrap_int(dt, 0 - uint64_t(a.i)); break; }
        int64_t q = a.i / b.i;
        if ((a.i % b.i != 0) && ((a.i < 0) != (b.i < 0))) --q;
        out.i = q;
      }
      break;
    case EMBER_KIR_REM:
      if (fl) {
        double m = std::fmod(a.f, b.f);
        if (m != 0 && ((m < 0) != (b.f < 0))) m += b.f;
        out.f = round_to(dt, m);
      } else {
        if (b.i == 0) throw Error{EMBER_ERR_INVALID, "integer remainder by zero", a.i, 0};
        if (b.i == -1) { out.i = 0; break; }
        int64_t m = a.i % b.i;
        if (m != 0 && ((m < 0) != (b.i < 0))) m += b.i;
        out.i = m;
      }
      break;
    case EMBER_KIR_FMOD:  // C's fmod: the sign of the dividend (exact, so rounding once suffices)
      if (fl) {
        out.f = round_to(dt, std::fmod(a.f, b.f));
      } else {
        if (b.i == 0) throw Error{EMBER_ERR_INVALID, "integer remainder by zero", a.i, 0};
        out.i = b.i == -1 ? 0 : a.i % b.i;
      }
      break;
    case EMBER_KIR_POW:
      if (fl) out.f = round_to(dt, std::pow(a.f, b.f));
      else if (b.i < 0) throw Error{EMBER_ERR_INVALID, "integer raised to a negative power", b.i, 0};
      else out.i = ipow(a.i, uint64_t(b.i), dt);
      break;
    case EMBER_KIR_MAX: if (fl) out.f = fmax_nan(a.f, b.f); else out.i = a.i > b.i ? a.i : b.i; break;
    case EMBER_KIR_MIN: if (fl) out.f = fmin_nan(a.f, b.f); else out.i = a.i < b.i ? a.i : b.i; break;
    case EMBER_KIR_LT: out.i = is_float(adt) ? a.f < b.f : a.i < b.i; break;
    case EMBER_KIR_LE: out.i = is_float(adt) ? a.f <= b.f : a.i <= b.i; break;
    case EMBER_KIR_GT: out.i = is_float(adt) ? a.f > b.f : a.i > b.i; break;
    case EMBER_KIR_GE: out.i = is_float(adt) ? a.f >= b.f : a.i >= b.i; break;
    case EMBER_KIR_EQ: out.i = is_float(adt) ? a.f == b.f : a.i == b.i; break;
    case EMBER_KIR_NE: out.i = is_float(adt) ? a.f != b.f : a.i != b.i; break;
    case EMBER_KIR_AND: out.i = a.i && b.i; break;
    case EMBER_KIR_OR: out.i = a.i || b.i; break;
    case EMBER_KIR_SELECT: out = a.i ? b : r[size_t(in.c)]; break;
    case EMBER_KIR_RAND_UNIFORM: {
      const uint64_t key = in.b >= 0 ? uint64_t(b.i) : uint64_t(in.iimm);  // operand b: a run-time key
      if (dt == EMBER_F64) out.f = ember::philox::uniform_f64(uint64_t(a.i), uint32_t(in.aux), key);
      else out.f = ember::philox::uniform_f32(uint64_t(a.i), uint32_t(in.aux), key);
      break;
    }
    default: throw Error{EMBER_ERR_UNSUPPORTED, "unsupported instruction", in.op, 0};
  }
  return out;
}

struct Accumulator {
  Value v;
  int64_t index = -1;  // argmax/argmin
  bool nan = false;
};

void acc_init(Accumulator& acc, const ember_kir_inst& in, uint8_t operand_dt) {
  bool fl = is_float(operand_dt);
  acc = Accumulator{};
  switch (in.op) {
    case EMBER_KIR_ACC_SUM: break;
    case EMBER_KIR_ACC_PROD: acc.v.f = 1; acc.v.i = 1; break;
    case EMBER_KIR_ACC_MAX: case EMBER_KIR_ACC_ARGMAX:
      if (fl) acc.v.f = -INFINITY; else acc.v.i = operand_dt == EMBER_U64 ? 0 : INT64_MIN;
      break;
    default:
      if (fl) acc.v.f = INFINITY; else acc.v.i = operand_dt == EMBER_U64 ? -1 : INT64_MAX;  // -1: 2^64-1
      break;
  }
}

void acc_update(Accumulator& acc, const ember_kir_inst& in, uint8_t dt, Value x, int64_t index) {
  bool fl = is_float(dt);
  switch (in.op) {
    case EMBER_KIR_ACC_SUM:
      if (fl) acc.v.f = round_to(dt, acc.v.f + x.f); else acc.v.i = wrap_int(dt, uint64_t(acc.v.i) + uint64_t(x.i));
      break;
    case EMBER_KIR_ACC_PROD:
      if (fl) acc.v.f = round_to(dt, acc.v.f * x.f); else acc.v.i = wrap_int(dt, uint64_t(acc.v.i) * uint64_t(x.i));
      break;
    case EMBER_KIR_ACC_MAX: case EMBER_KIR_ACC_MIN: {
      bool is_max = in.op == EMBER_KIR_ACC_MAX;
      if (fl) acc.v.f = is_max ? fmax_nan(acc.v.f, x.f) : fmin_nan(acc.v.f, x.f);
      else if (dt == EMBER_U64)
        acc.v.i = int64_t(is_max ? std::max(uint64_t(acc.v.i), uint64_t(x.i)) : std::min(uint64_t(acc.v.i), uint64_t(x.i)));
      else acc.v.i = is_max ? std::max(acc.v.i, x.i) : std::min(acc.v.i, x.i);
      break;
    }
    default: {  // argmax / argmin: the first extreme value; the first NaN beats everything
      bool is_max = in.op == EMBER_KIR_ACC_ARGMAX;
      if (acc.nan) break;
      bool better;
      if (fl) {
        if (std::isnan(x.f)) { acc.nan = true; acc.index = index; break; }
        better = is_max ? x.f > acc.v.f : x.f < acc.v.f;
      } else if (dt == EMBER_U64) {
        better = is_max ? uint64_t(x.i) > uint64_t(acc.v.i) : uint64_t(x.i) < uint64_t(acc.v.i);
      } else {
        better = is_max ? x.i > acc.v.i : x.i < acc.v.i;
      }
      if (better || acc.index < 0) { acc.v = x; acc.index = index; }
      break;
    }
  }
}

int32_t run(const Program& p, const ember_kir_launch& l, ember_status* st) {
  int outer = l.outer_rank, total = l.outer_rank + l.reduce_rank;
  int64_t n_outer = 1, n_reduce = 1;
  for (int d = 0; d < outer; ++d) n_outer *= l.shape[d];
  for (int d = outer; d < total; ++d) n_reduce *= l.shape[d];
  size_t n = p.insts.size();
  std::vector<Value> reg(n);
  std::vector<uint8_t> rdt(n);
  for (size_t k = 0; k < n; ++k) rdt[k] = p.insts[k].dtype;
  std::vector<Accumulator> acc(n);
  std::vector<int64_t> idx(size_t(total), 0);
  int max_phase = 0;
  for (const auto& in : p.insts) max_phase = std::max(max_phase, int(in.phase));

  auto offset_of = [&](int arg, bool with_reduce) {
    const ember_kir_arg& a = l.args[arg];
    int64_t off = a.offset;
    for (int d = 0; d < (with_reduce ? total : outer); ++d) off += idx[size_t(d)] * a.strides[d];
    return off;
  };
  // Runs the instructions of one phase at the current index.
  auto run_phase = [&](int phase, int64_t reduce_index) {
    for (size_t k = 0; k < n; ++k) {
      const ember_kir_inst& in = p.insts[k];
      if (in.phase != phase) continue;
      bool full = phase % 2 == 0;
      switch (in.op) {
        case EMBER_KIR_LOAD:
          reg[k] = load_value(l.args[in.arg].buffer->data, offset_of(in.arg, full), p.arg_dtypes[size_t(in.arg)]);
          break;
        case EMBER_KIR_LOAD_GATHER: {
          const ember_kir_arg& a = l.args[in.arg];
          int64_t g = reg[size_t(in.a)].i;
          if (g < 0 || g >= a.gather_size)
            throw Error{EMBER_ERR_INVALID, "index out of range", g, a.gather_size};
          reg[k] = load_value(a.buffer->data, offset_of(in.arg, full) + g * a.gather_stride,
                              p.arg_dtypes[size_t(in.arg)]);
          break;
        }
        case EMBER_KIR_IOTA: reg[k].i = offset_of(in.arg, full); break;
        case EMBER_KIR_LOAD_SCALAR: reg[k].i = l.args[in.arg].offset; break;
        case EMBER_KIR_LOAD_UNIFORM:
          reg[k] = load_value(l.args[in.arg].buffer->data, l.args[in.arg].offset, p.arg_dtypes[size_t(in.arg)]);
          break;
        case EMBER_KIR_STORE:
          store_value(l.args[in.arg].buffer->data, offset_of(in.arg, full), p.arg_dtypes[size_t(in.arg)],
                      cast_value(reg[size_t(in.a)], rdt[size_t(in.a)], p.arg_dtypes[size_t(in.arg)]));
          break;
        case EMBER_KIR_ACC_SUM: case EMBER_KIR_ACC_PROD: case EMBER_KIR_ACC_MAX: case EMBER_KIR_ACC_MIN:
        case EMBER_KIR_ACC_ARGMAX: case EMBER_KIR_ACC_ARGMIN:
          {  // read out the finished accumulator (this is its phase, after its pass)
            reg[k] = in.op == EMBER_KIR_ACC_ARGMAX || in.op == EMBER_KIR_ACC_ARGMIN ? Value{0, acc[k].index}
                                                                                    : acc[k].v;
          }
          break;
        default: reg[k] = eval_alu(in, reg, rdt); break;
      }
    }
    // Accumulate this pass's operands into the next phase's accumulators.
    if (phase % 2 == 0)
      for (size_t k = 0; k < n; ++k) {
        const ember_kir_inst& in = p.insts[k];
        if (in.phase == phase + 1 && in.op >= EMBER_KIR_ACC_SUM && in.op <= EMBER_KIR_ACC_ARGMIN)
          acc_update(acc[k], in, rdt[size_t(in.a)], reg[size_t(in.a)], reduce_index);
      }
  };

  try {
    for (int64_t o = 0; o < n_outer; ++o) {
      int64_t rem = o;
      for (int d = outer - 1; d >= 0; --d) {
        idx[size_t(d)] = rem % l.shape[d];
        rem /= l.shape[d];
      }
      for (size_t k = 0; k < n; ++k)
        if (p.insts[k].op >= EMBER_KIR_ACC_SUM && p.insts[k].op <= EMBER_KIR_ACC_ARGMIN)
          acc_init(acc[k], p.insts[k], rdt[size_t(p.insts[k].a)]);
      for (int pass = 0; 2 * pass <= max_phase; ++pass) {
        for (int64_t r = 0; r < n_reduce; ++r) {
          int64_t rr = r;
          for (int d = total - 1; d >= outer; --d) {
            idx[size_t(d)] = rr % l.shape[d];
            rr /= l.shape[d];
          }
          run_phase(2 * pass, r);
        }
        for (int d = outer; d < total; ++d) idx[size_t(d)] = 0;
        run_phase(2 * pass + 1, 0);
      }
    }
  } catch (const Error& e) {
    if (e.extra)
      return set_status(st, e.code, "%s: %s (%lld for a dimension of size %lld)", p.name.c_str(), e.what, e.value, e.extra);
    return set_status(st, e.code, "%s: %s", p.name.c_str(), e.what);
  }
  return EMBER_OK;
}

// ---- matmul: f64 (floats) or i64 (integers) accumulation, one output element at a time -----
int32_t matmul(const ember_tensor_desc* in, const ember_tensor_desc* out, ember_status* st) {
  const ember_tensor_desc &a = in[0], &b = in[1], &c = *out;
  int r = c.rank;
  int64_t M = c.shape[r - 2], N = c.shape[r - 1], K = a.shape[r - 1];
  int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) batches *= c.shape[d];
  uint8_t dt = uint8_t(c.dtype);
  for (int64_t bt = 0; bt < batches; ++bt) {
    int64_t oa = a.offset, ob = b.offset, oc = c.offset, rem = bt;
    for (int d = r - 3; d >= 0; --d) {
      int64_t i = rem % c.shape[d];
      rem /= c.shape[d];
      oa += i * a.strides[d];
      ob += i * b.strides[d];
      oc += i * c.strides[d];
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        Value acc;
        for (int64_t k = 0; k < K; ++k) {
          Value x = load_value(a.buffer->data, oa + i * a.strides[r - 2] + k * a.strides[r - 1], dt);
          Value y = load_value(b.buffer->data, ob + k * b.strides[r - 2] + j * b.strides[r - 1], dt);
          if (is_float(dt)) acc.f += x.f * y.f;
          else acc.i = int64_t(uint64_t(acc.i) + uint64_t(x.i) * uint64_t(y.i));
        }
        store_value(c.buffer->data, oc + i * c.strides[r - 2] + j * c.strides[r - 1], dt, acc);
      }
  }
  (void)st;
  return EMBER_OK;
}

// ---- epilogues: the post-ops on each stored output element, each result rounded to the dtype as
// the separate elementwise ops would round it --------------------------------------------------
int32_t post_ops(const ember_epilogue_attrs& e, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& y,
                 ember_status* st) {
  const uint8_t dt = uint8_t(y.dtype);
  if (e.n_ops < 1 || e.n_ops > EMBER_MAX_POST_OPS || (dt != EMBER_F32 && dt != EMBER_F64))
    return set_status(st, EMBER_ERR_INVALID, "epilogue: %d post-ops on dtype %d", e.n_ops, int(dt));
  for (int k = 0; k < e.n_ops; ++k) {
    const ember_post_op& op = e.ops[k];
    if (op.kind < 0 || op.kind >= EMBER_POST_NUM_KINDS) return set_status(st, EMBER_ERR_INVALID, "epilogue: post-op kind %d", op.kind);
    if (!ember_post_has_operand(op.kind)) continue;
    if (op.input < 0 || op.input >= n_in || in[op.input].rank != y.rank || in[op.input].dtype != y.dtype)
      return set_status(st, EMBER_ERR_INVALID, "epilogue: bad operand for post-op %d", k);
    for (int d = 0; d < y.rank; ++d)
      if (in[op.input].shape[d] != y.shape[d]) return set_status(st, EMBER_ERR_INVALID, "epilogue: operand shape");
  }
  int64_t total = 1;
  for (int d = 0; d < y.rank; ++d) total *= y.shape[d];
  for (int64_t p = 0; p < total; ++p) {
    int64_t rem = p, oy = y.offset;
    int64_t idx[8] = {};
    for (int d = y.rank - 1; d >= 0; --d) {
      idx[d] = rem % y.shape[d];
      rem /= y.shape[d];
      oy += idx[d] * y.strides[d];
    }
    double v = load_value(y.buffer->data, oy, dt).f;
    for (int k = 0; k < e.n_ops; ++k) {
      const ember_post_op& op = e.ops[k];
      switch (op.kind) {
        case EMBER_POST_ADD:
        case EMBER_POST_MUL: {
          const ember_tensor_desc& t = in[op.input];
          int64_t ot = t.offset;
          for (int d = 0; d < t.rank; ++d) ot += idx[d] * t.strides[d];
          const double o = load_value(t.buffer->data, ot, dt).f;
          v = op.kind == EMBER_POST_ADD ? v + o : v * o;
          break;
        }
        case EMBER_POST_MASK_POSITIVE: {  // where(gt(o, 0), v, +0)
          const ember_tensor_desc& t = in[op.input];
          int64_t ot = t.offset;
          for (int d = 0; d < t.rank; ++d) ot += idx[d] * t.strides[d];
          if (!(load_value(t.buffer->data, ot, dt).f > 0.0)) v = 0.0;
          break;
        }
        case EMBER_POST_LINEAR: v = op.alpha * v + op.beta; break;
        case EMBER_POST_RELU: v = fmax_nan(v, 0.0); break;  // as KIR MAX: relu(-0) = +0
        case EMBER_POST_TANH: v = std::tanh(v); break;
        case EMBER_POST_SIGMOID: v = 1.0 / (1.0 + std::exp(-v)); break;
        case EMBER_POST_GELU_ERF: v = 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)); break;
        case EMBER_POST_GELU_TANH: v = 0.5 * v * (1.0 + std::tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v))); break;
        default: break;
      }
      v = round_to(dt, v);
    }
    Value out;
    out.f = v;
    store_value(y.buffer->data, oy, dt, out);
  }
  return EMBER_OK;
}

}  // namespace

// ---- entry points for the plugin's C table (plugin.cpp) -----------------------------------
namespace ember::ref {

int32_t create_program(const ember_kir_program* prog, ember_program* out, ember_status*) {
  auto* p = new Program;
  p->insts.assign(prog->insts, prog->insts + prog->n_insts);
  p->arg_dtypes.assign(prog->arg_dtypes, prog->arg_dtypes + prog->n_args);
  p->name = prog->name ? prog->name : "kernel";
  *out = reinterpret_cast<ember_program>(p);
  return EMBER_OK;
}
void destroy_program(ember_program p) { delete reinterpret_cast<Program*>(p); }
int32_t run_program(ember_program p, const ember_kir_launch* l, ember_status* st) {
  return run(*reinterpret_cast<const Program*>(p), *l, st);
}
int32_t call_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                     int32_t n_out, const void* attrs, ember_status* st) {
  if (op == EMBER_LIB_MATMUL) return matmul(in, out, st);
  if (op == EMBER_LIB_MATMUL_EPILOGUE || op == EMBER_LIB_CONV2D_EPILOGUE || op == EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE) {
    if (!attrs || !in || !out || n_out != 1) return set_status(st, EMBER_ERR_INVALID, "epilogue: bad arguments");
    const auto& e = *static_cast<const ember_epilogue_attrs*>(attrs);
    const int32_t base = op == EMBER_LIB_CONV2D_EPILOGUE && e.has_bias ? 3 : 2;
    if (n_in < base) return set_status(st, EMBER_ERR_INVALID, "epilogue: %d inputs", n_in);
    int32_t rc = op == EMBER_LIB_MATMUL_EPILOGUE ? matmul(in, out, st)
                 : op == EMBER_LIB_CONV2D_EPILOGUE
                     ? ember::ref::library(EMBER_LIB_CONV2D, in, base, out, 1, &e.conv, st)
                     : ember::ref::library(EMBER_LIB_MAX_POOL2D_BACKWARD, in, base, out, 1, &e.pool, st);
    return rc == EMBER_OK ? post_ops(e, in, n_in, *out, st) : rc;
  }
  return ember::ref::library(op, in, n_in, out, n_out, attrs, st);  // library.cpp
}

}  // namespace ember::ref
