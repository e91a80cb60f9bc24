// The C-like KIR emitter: renders KIR programs (abi.h) as source code: single-pass elementwise
// programs here (emit_c.cpp), reductions and multi-pass programs in emit_c_reduce.cpp.
// Self-contained (no libember): compiled into the backend plugins that use it.
//
// Two parts, kept apart so that other backends can reuse the first with their own spelling and
// loop structure:
//  - ExprTable: how a language spells register types and every scalar KIR op (C++ for the CPU;
//    a GPU backend overrides what differs, e.g. its math intrinsics);
//  - emit_body: the per-point statements of a program (one SSA variable per instruction) over
//    argument references supplied by the loop structure;
//  - emit_cpu_kernel: the CPU loop structure around it, a translation unit defining
//    `extern "C" void ember_kernel(const ember_c_launch*, int64_t t0, int64_t t1)`.
// Values are held widened as the tier-0 interpreter holds them (f32, f64, i32 for i32/u8/bool,
// i64) and every op follows the interpreter's formulas, so results agree within the rounding
// of the math library (libmvec here, Highway/SLEEF there).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/abi.h"

extern "C" {
// The launch a compiled CPU kernel receives (the emitted source declares the same struct).
// Dims are coalesced by the caller; the innermost dim is cut into blocks of `block` points and
// task t covers block t % nblk of row t / nblk (rows: the outer dims in row-major order).
typedef struct ember_c_launch {
  int32_t rank;           // >= 1
  int32_t contiguous;     // 1: every loaded/stored argument has innermost stride 1; 2: stored
                          // ones have 1, loaded ones 1 or 0 (a value per row); 3: as 1, with
                          // streaming stores (below)
  int64_t block, nblk;
  const int64_t* shape;   // [rank]
  void* const* data;      // per argument (null if unused)
  const int64_t* offset;  // per argument, elements
  const int64_t* strides; // [n_args * rank], elements
} ember_c_launch;

typedef void (*ember_c_kernel_fn)(const ember_c_launch* launch, int64_t t0, int64_t t1);

// The launch a compiled CPU reduction kernel receives (programs with ACC_* or several phases).
// Outer and reduce dims are each coalesced by the caller (each at least one dim). Three schemes:
//  - rows (columns = 0): task t is outer point t; each pass runs a SIMD loop along the innermost
//    reduce dim, which has stride 1 in every argument an even phase touches, or stride 0 in a
//    read-only one that reduce_row_splat_args marks (a value per row: a softmax's saved row sum
//    in its gradient), read from a splat of that value;
//  - columns (columns = 1): task t is block t % nblk (of `block` <= 256 outer points) of outer
//    row t / nblk; lanes are consecutive outer points (stride 1 along the innermost outer dim in
//    every argument used), each with its own accumulator, and the reduce dims are walked in order;
//  - strided columns (columns = 2): the same with lanes at any stride along the innermost outer
//    dim (gathers): for short reduce rows (a softmax over a few keys) and layouts neither of the
//    others takes.
typedef struct ember_c_reduce_launch {
  int32_t outer_rank, reduce_rank;
  int32_t columns;
  int32_t stream;         // rows: the passes that only store use streaming stores (below)
  int64_t block, nblk;
  const int64_t* shape;   // [outer_rank + reduce_rank]
  void* const* data;      // per argument (null if unused)
  const int64_t* offset;  // per argument, elements
  const int64_t* strides; // [n_args * (outer_rank + reduce_rank)], elements
} ember_c_reduce_launch;

typedef void (*ember_c_reduce_fn)(const ember_c_reduce_launch* launch, int64_t t0, int64_t t1);

// Streaming stores (contiguous == 3, stream = 1): the kernel computes a chunk of its outputs into
// a stack buffer and writes it with non-temporal stores (the prelude's e_stream), so an output far
// larger than the cache is written without first reading each of its lines from memory. The
// caller asks for it by output size (src/backend/cpu/tier1.cpp); a kernel whose stored arguments
// are also loaded ignores the request (a buffered store must not be read back).
}

namespace ember::emit {

class ExprTable {
 public:
  virtual ~ExprTable() = default;
  // Helper definitions every kernel needs (declarations of math functions, conversions...).
  virtual std::string prelude() const;
  // Register type of a value of logical dtype dt; storage type of an argument of dtype dt.
  virtual const char* reg_type(uint8_t dt) const;
  virtual const char* storage_type(uint8_t dt) const;
  // Each returns the expression, or "" if the op/dtype combination is not supported (the
  // program then stays on the interpreter). Operands are variable names.
  virtual std::string constant(const ember_kir_inst& in) const;
  virtual std::string unary(uint16_t op, uint8_t dt, const std::string& a) const;
  virtual std::string binary(uint16_t op, uint8_t dt, const std::string& a, const std::string& b) const;
  virtual std::string compare(uint16_t op, uint8_t operand_dt, const std::string& a, const std::string& b) const;
  virtual std::string cast(uint8_t from, uint8_t to, const std::string& a) const;
  virtual std::string select(const std::string& c, const std::string& a, const std::string& b) const;
  // key: a uint64_t expression (a literal or an i64 variable converted).
  virtual std::string rand_uniform(uint8_t dt, const std::string& counter, uint32_t stream, const std::string& key) const;
  // A stored element (expression `ref` of the storage type) as a register value, and back.
  virtual std::string load(uint8_t storage_dt, const std::string& ref) const;
  virtual std::string store_value(uint8_t storage_dt, uint8_t value_dt, const std::string& v) const;
};

// The C++ table of the CPU backend (GCC; vector math through glibc's libmvec).
const ExprTable& cpp_table();

// The unsigned C type of the register an integer dtype is held in (abi.h): integer + - * and
// the ACC sums and products wrap in it.
const char* wrap_type(uint8_t dt);

// How the loop structure addresses argument `arg` at the current point: an lvalue of its
// storage type, and its element offset (for IOTA).
struct ArgRefs {
  std::function<std::string(int arg)> ref;
  std::function<std::string(int arg)> index;
};

// The expression of instruction k (not an ACC_*; for a STORE the whole statement) with operands
// named by `name`; "" if the table does not support it.
std::string render_inst(const ember_kir_program& prog, const ExprTable& table, const ArgRefs& refs, int32_t k,
                        const std::function<std::string(int32_t)>& name);

// "" if the program is a single-pass elementwise program every instruction of which the table
// supports, else why not.
std::string unsupported_reason(const ember_kir_program& prog, const ExprTable& table);

// Per-point statements of the program, indented by `indent`; false and *why if unsupported.
bool emit_body(const ember_kir_program& prog, const ExprTable& table, const ArgRefs& refs, const std::string& indent,
               std::string& out, std::string* why);

// The whole CPU translation unit; false and *why if unsupported.
bool emit_cpu_kernel(const ember_kir_program& prog, std::string& src, std::string* why);

// The CPU translation unit of a reduction / multi-phase program (emit_c_reduce.cpp), defining
// `extern "C" void ember_kernel_reduce(const ember_c_reduce_launch*, int64_t t0, int64_t t1)`;
// false and *why if unsupported (argmax/argmin, gathers, 16-bit floats).
bool emit_cpu_reduce_kernel(const ember_kir_program& prog, std::string& src, std::string* why);

// How a program uses each of its arguments, one flag per argument: `stored` where a STORE writes
// it (`stored_even`: one of an even phase, the passes of the rows scheme that only write), `read`
// where a LOAD or LOAD_GATHER reads its memory (`loaded_even`: a LOAD of an even phase). IOTA
// reads only an argument's shape. An argument both stored and read rules out what assumes its
// memory does not change within a launch or is read only after the launch: streaming stores
// through chunk buffers and the reuse of one loaded value in two passes.
struct ArgUse {
  std::vector<uint8_t> stored, stored_even, read, loaded_even;
  bool stored_and_read() const;  // some argument is both
};
ArgUse arg_use(const ember_kir_program& prog);

// Per argument: 1 where the rows scheme of emit_cpu_reduce_kernel takes a stride of 0 along the
// innermost reduce dim: arguments loaded in an even phase and never stored. Such a row value is
// read from a splat filled once per row chunk; a launch may have up to kRowSplatSlots of them
// (the splats are stack arrays of kRowChunk values per storage type).
constexpr int64_t kRowChunk = 4096;  // rows: points of a row summed as one chunk
constexpr int kRowSplatSlots = 4;
std::vector<uint8_t> reduce_row_splat_args(const ember_kir_program& prog);

}  // namespace ember::emit
