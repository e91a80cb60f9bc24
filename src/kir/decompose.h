// The KIR decomposition pass: rewrites the instructions a target cannot spell into ones it can,
// so that a device with a small instruction table still runs a fused kernel instead of sending it
// to the host fallback. Each rule gives the instruction's exact result (abi.h's semantics: NaN
// propagation, signed zeros, infinities, integer wrapping) from simpler instructions:
//   NEG x       floats: -0 - x; integers: 0 - x (wrapping)
//   ABS x       floats: x <= 0 ? 0 - x : x (|-0| = +0); integers: x < 0 ? 0 - x : x; u64: x
//   CEIL x      floats: -floor(-x) (ceil(-0.5) = -0); integers: x
//   MAX/MIN     floats: a != a ? a : b != b ? b : (a > b ? a : b) (NaN wins); integers: a > b ? a : b
//   GT, GE      LT, LE with the operands swapped
//   NE          a == b ? false : true
//   NOT, AND, OR  selects on `== 0`, giving 0 or 1 in the instruction's dtype
// A rule's instructions may themselves be decomposed (MAX uses NE and GT). The one difference
// from the instruction it replaces: a NaN result may carry another sign bit (a NaN stays a NaN).
// Not decomposed, because the simpler forms round differently: transcendentals, POW, REM, FMOD,
// FLOORDIV (f32's floor(a / b) is computed in f64 by the reference).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/abi.h"

namespace ember::kir {

// Whether a target can spell instruction `op` with result dtype `dtype` (abi.h's supports_op).
using Spells = std::function<bool(uint16_t op, uint8_t dtype)>;

// `program`'s instructions with every one `spells` rejects replaced by a rule's; false when that
// is impossible, with *why (the program's instruction that failed, and the instruction no rule
// spells) and *blocker (that instruction: the one the device lacks). Operand indices, phases and
// arguments stay consistent; instructions the target spells are kept as they are, in order.
bool decompose(const ember_kir_program& program, const Spells& spells, std::vector<ember_kir_inst>& out,
               std::string* why, ember_kir_inst* blocker = nullptr);

}  // namespace ember::kir
