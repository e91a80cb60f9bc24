// kir::Builder builds KIR programs (see backend/abi.h for the instruction set). Values are
// kir::Val handles with overloaded operators, so the op table (op_table/ops.def) can write KIR
// expressions as ordinary C++ formulas: `0.5 * x * (1.0 + erf(x * 0.7071))`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/abi.h"
#include "ember/dtype.h"

namespace ember::kir {

class Builder;

struct Val {
  Builder* b = nullptr;
  int32_t id = -1;
  DType dtype = DType::F32;
};

class Builder {
 public:
  // Instructions emitted from now on belong to this phase (0: every point, 1: after reduction).
  int phase = 0;

  int add_arg(DType storage_dtype);
  DType arg_dtype(int arg) const { return DType(arg_dtypes_[size_t(arg)]); }

  Val emit(ember_kir_op op, DType dtype, Val a = {}, Val b = {}, Val c = {});
  Val constant(double v, DType dtype);
  Val constant_int(int64_t v, DType dtype);
  // A scalar given both as double and as int64 (exact for large integers).
  struct Scalar2 { double f; int64_t i; };
  Val constant_like(Scalar2 v, DType dtype);
  Val load(int arg);
  Val load_gather(int arg, Val index);
  // The element at the argument's offset, the same at every point (a scalar on the device).
  Val load_uniform(int arg);
  // A launch-time scalar (abi.h LOAD_SCALAR): i64 argument `arg` has no buffer, and each launch
  // passes its value (in the launch's offset field), so a new value keeps the same program.
  Val load_scalar(int arg);
  Val iota(int arg);
  void store(int arg, Val v);
  Val cast(Val v, DType dtype);
  // Rounds/wraps a value to its own dtype when registers hold it wider (u8, f16, bf16): what
  // storing and reloading it would do. Fused kernels apply it after every op.
  Val round_to_dtype(Val v);
  Val rand_uniform(Val counter, uint64_t seed, int stream, DType dtype);
  // While set (an i64 value), rand_uniform takes its key from it instead of the `seed` immediate:
  // the scheduler passes a generator's seed as a launch-time scalar (load_scalar), so drawing
  // with a new seed (dropout every step) reuses the program. Unset with a default Val.
  Val runtime_key;
  Val acc_sum(Val v);
  Val acc_prod(Val v);
  Val acc_max(Val v);
  Val acc_min(Val v);
  Val acc_argmax(Val v);
  Val acc_argmin(Val v);

  // The finished program; pointers stay valid while the builder lives.
  ember_kir_program program(const std::string& name);
  // The same without storing the name: it points into `name`, which must outlive it (a builder
  // shared by launches, as a replayed fused kernel's is, is not written to).
  ember_kir_program program_view(const std::string& name) const;
  const std::vector<ember_kir_inst>& insts() const { return insts_; }
  const std::vector<uint8_t>& arg_dtypes() const { return arg_dtypes_; }
  // Hash of the structure (instructions and argument dtypes), the key of program caches.
  uint64_t structure_hash() const;

 private:
  std::vector<ember_kir_inst> insts_;
  std::vector<uint8_t> arg_dtypes_;
  std::string name_;
  bool has_reduction_ = false;
};

// Arithmetic: operands must share a dtype; doubles become constants of the other operand's dtype.
Val operator+(Val x, Val y);
Val operator-(Val x, Val y);
Val operator*(Val x, Val y);
Val operator/(Val x, Val y);
Val operator-(Val x);
Val operator+(Val x, double y);
Val operator+(double x, Val y);
Val operator-(Val x, double y);
Val operator-(double x, Val y);
Val operator*(Val x, double y);
Val operator*(double x, Val y);
Val operator/(Val x, double y);
Val operator/(double x, Val y);

Val abs(Val x);
Val exp(Val x);
Val log(Val x);
Val sqrt(Val x);
Val tanh(Val x);
Val erf(Val x);
Val sin(Val x);
Val cos(Val x);
Val sign(Val x);  // -1, 0 or 1 in x's dtype (0 for NaN)
Val floor(Val x);
Val ceil(Val x);
Val floor_div(Val x, Val y);
Val rem(Val x, Val y);
Val fmod(Val x, Val y);  // C's fmod: the sign of x
Val pow(Val x, Val y);
Val max(Val x, Val y);
Val min(Val x, Val y);
Val eq(Val x, Val y);
Val ne(Val x, Val y);
Val lt(Val x, Val y);
Val le(Val x, Val y);
Val gt(Val x, Val y);
Val ge(Val x, Val y);
Val logical_and(Val x, Val y);
Val logical_or(Val x, Val y);
Val logical_not(Val x);
Val select(Val cond, Val x, Val y);

// Printable form of a program, for EMBER_LOG=kir and test failure messages.
std::string to_string(const ember_kir_program& program);
const char* op_name(ember_kir_op op);

}  // namespace ember::kir
