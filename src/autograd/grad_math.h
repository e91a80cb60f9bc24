// Arithmetic operators on Array for writing backward rules as formulas (`g * (1.0 - out * out)`).
// Internal: the public typed API has its own operators on Tensor<D, K>.
#pragma once

#include "ember/ops.h"

namespace ember::autograd::math {

inline Array operator+(const Array& a, const Array& b) { return add(a, b); }
inline Array operator-(const Array& a, const Array& b) { return sub(a, b); }
inline Array operator*(const Array& a, const Array& b) { return mul(a, b); }
inline Array operator/(const Array& a, const Array& b) { return div(a, b); }
inline Array operator-(const Array& a) { return neg(a); }
inline Array operator+(const Array& a, double b) { return add(a, b); }
inline Array operator+(double a, const Array& b) { return add(a, b); }
inline Array operator-(const Array& a, double b) { return sub(a, b); }
inline Array operator-(double a, const Array& b) { return sub(a, b); }
inline Array operator*(const Array& a, double b) { return mul(a, b); }
inline Array operator*(double a, const Array& b) { return mul(a, b); }
inline Array operator/(const Array& a, double b) { return div(a, b); }
inline Array operator/(double a, const Array& b) { return div(a, b); }

}  // namespace ember::autograd::math
