// What the GPU targets of the KIR emitter (GLSL for Vulkan, CUDA C) share: the launch-word
// layout, the error-word codes, the survey of a program before its loops are written, the
// unraveling of a flat point index into argument offsets, and the order arg reductions combine
// their (value, index, NaN) triples in. Self-contained (no libember).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/abi.h"

namespace ember::emit {

class ExprTable;

// Layout of the launch parameters: int64 words (a Vulkan storage buffer at binding 0; a CUDA
// kernel argument passed by value). Generated code reads them as P[...].
struct GpuLaunchWords {
  static constexpr int kPoints = 0;      // elementwise: all points; reductions: outer points
  static constexpr int kRank = 1;        // outer + reduce dims
  static constexpr int kOuterRank = 2;
  static constexpr int kLaunchId = 3;    // written to the error word by a failing point
  static constexpr int kMode = 4;        // reductions: 0 = an invocation per outer point, 1 = a workgroup
  static constexpr int kZero = 5;        // always 0: hides special float constants from the compiler
  static constexpr int kShape = 6;       // [EMBER_MAX_ITER_RANK]
  static constexpr int kArgs = kShape + EMBER_MAX_ITER_RANK;
  static constexpr int kPerArg = EMBER_MAX_ITER_RANK + 4;
  // Within an argument's words: offset, strides[EMBER_MAX_ITER_RANK], gather stride, gather size.
  static constexpr int kOffset = 0, kStrides = 1, kGatherStride = 1 + EMBER_MAX_ITER_RANK,
                       kGatherSize = 2 + EMBER_MAX_ITER_RANK;
  static constexpr int words(int n_args) { return kArgs + kPerArg * n_args; }
};

// The error word (uint[8]): [0] code (0 = none), [1] launch id, [2..3] value (lo, hi), [4..5]
// extra (lo, hi). The first failing point wins (an atomic compare-and-swap on [0]).
enum : uint32_t { kErrNone = 0, kErrGather = 1, kErrDivZero = 2, kErrRemZero = 3, kErrNegativePow = 4 };
constexpr int kErrWords = 8;
// "index out of range" and so on: the interpreter's wording of each code.
const char* gpu_error_text(uint32_t code);
// The text of a written error word: "index out of range (5 for a dimension of size 3)".
std::string gpu_error_message(const uint32_t* word);

inline bool is_acc_op(uint16_t op) { return op >= EMBER_KIR_ACC_SUM && op <= EMBER_KIR_ACC_ARGMIN; }
inline bool is_arg_reduction(uint16_t op) { return op == EMBER_KIR_ACC_ARGMAX || op == EMBER_KIR_ACC_ARGMIN; }

// What a program needs from the loop structure around it.
struct KernelSurvey {
  int max_phase = 0;
  bool reduce = false;        // ACC_* instructions or several phases: the reduction structure
  bool can_fail = false;      // it may write the error word (gathers, integer division, power)
  std::vector<uint8_t> used;  // per argument: addressed at each point (load, gather, iota, store)
};

// Checks the program's instructions (known ops, dtypes `table` holds, accumulations of an odd
// phase over an earlier operand of their dtype) and surveys it; false and *why if it fails.
bool survey_kernel(const ember_kir_program& prog, const ExprTable& table, KernelSurvey& out, std::string* why);

// Statements that advance the offsets `<prefix><arg>` of the used arguments over dims [lo, hi)
// of the flat index `idx` (the launch words' shape and strides, index type IX), indented by
// `indent`: one multiply where the range is one dim, else a division per dim.
std::string unravel_offsets(const std::vector<uint8_t>& used, const std::string& idx, const std::string& lo,
                            const std::string& hi, const std::string& prefix, const std::string& indent);

// Whether the pair (b2, i2, n2) beats (b1, i1, n1) in an arg reduction (argmax when `mx`): a
// valid index over none, then the first NaN, then the extreme value, then (equal values) the
// first index. A strict order, so both lanes of a shuffle pair pick the same one.
std::string arg_reduction_wins(bool mx, const std::string& b2, const std::string& i2, const std::string& n2,
                               const std::string& b1, const std::string& i1, const std::string& n1);

}  // namespace ember::emit
