// Helpers for the op-conformance suite (tests/ops): building inputs of any dtype from doubles,
// reading results back, checking ember::Error messages, and deterministic random inputs.
// Expected values in the suite never come from Ember itself: they are hand-computed constants or
// computed here in double precision with <cmath>.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "ember/ops.h"
#include "test_util.h"

namespace ember::testing {

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32,
                                       DType::I64, DType::U8,  DType::Bool, DType::I8,   DType::I16,
                                       DType::U16, DType::U32, DType::U64};
  return v;
}
inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v = {DType::F32, DType::F64, DType::F16, DType::BF16};
  return v;
}
inline const std::vector<DType>& numeric_dtypes() {
  static const std::vector<DType> v = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64,
                                       DType::U8,  DType::I8,  DType::I16, DType::U16,  DType::U32, DType::U64};
  return v;
}

// Integers of type T from doubles (negative values wrap for the unsigned types, as a cast would).
template <class T>
Array make_as(const std::vector<double>& v, const Shape& shape, Device dev) {
  std::vector<T> h;
  for (double x : v) h.push_back(T(int64_t(x)));
  return from_vector(h, shape, dev);
}

// Builds a tensor of `dtype` on `dev` from doubles, converting on the host. Callers choose values
// that the dtype represents exactly (so the conversion is not what is being tested).
inline Array make(const std::vector<double>& v, const Shape& shape, DType dtype, Device dev) {
  switch (dtype) {
    case DType::F32: return from_vector(std::vector<float>(v.begin(), v.end()), shape, dev);
    case DType::F64: return from_vector(v, shape, dev);
    case DType::F16: {
      std::vector<Half> h;
      for (double x : v) h.push_back(Half(float(x)));
      return from_vector(h, shape, dev);
    }
    case DType::BF16: {
      std::vector<BFloat16> h;
      for (double x : v) h.push_back(BFloat16(float(x)));
      return from_vector(h, shape, dev);
    }
    case DType::I32: {
      std::vector<int32_t> h;
      for (double x : v) h.push_back(int32_t(x));
      return from_vector(h, shape, dev);
    }
    case DType::I64: {
      std::vector<int64_t> h;
      for (double x : v) h.push_back(int64_t(x));
      return from_vector(h, shape, dev);
    }
    case DType::U8: {
      std::vector<uint8_t> h;
      for (double x : v) h.push_back(uint8_t(x));
      return from_vector(h, shape, dev);
    }
    case DType::Bool: {
      std::vector<bool> h;
      for (double x : v) h.push_back(x != 0);
      return from_vector(h, shape, dev);
    }
    case DType::I8: return make_as<int8_t>(v, shape, dev);
    case DType::I16: return make_as<int16_t>(v, shape, dev);
    case DType::U16: return make_as<uint16_t>(v, shape, dev);
    case DType::U32: return make_as<uint32_t>(v, shape, dev);
    case DType::U64: return make_as<uint64_t>(v, shape, dev);
  }
  return {};
}

inline Array f32(const std::vector<double>& v, const Shape& shape, Device dev) { return make(v, shape, DType::F32, dev); }
inline Array f64(const std::vector<double>& v, const Shape& shape, Device dev) { return make(v, shape, DType::F64, dev); }
inline Array i32(const std::vector<double>& v, const Shape& shape, Device dev) { return make(v, shape, DType::I32, dev); }
inline Array i64(const std::vector<double>& v, const Shape& shape, Device dev) { return make(v, shape, DType::I64, dev); }

inline std::vector<double> vals(const Array& a) { return a.to_vector<double>(); }
inline std::vector<int64_t> ivals(const Array& a) { return a.to_vector<int64_t>(); }

// 0, 1, ..., n-1 as doubles.
inline std::vector<double> iota_d(int64_t n, double start = 0, double step = 1) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + double(i) * step;
  return v;
}

// Deterministic pseudo-random doubles in [lo, hi) (std::mt19937_64, independent of Ember).
inline std::vector<double> rand_d(int64_t n, double lo, double hi, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}
// Same, rounded to f32 (so that an f32 tensor holds exactly these values).
inline std::vector<double> rand_f32(int64_t n, double lo, double hi, uint64_t seed) {
  std::vector<double> v = rand_d(n, lo, hi, seed);
  for (auto& x : v) x = double(float(x));
  return v;
}
// Random integers in [lo, hi].
inline std::vector<double> rand_int(int64_t n, int64_t lo, int64_t hi, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = double(d(g));
  return v;
}

// Applies f elementwise (the expected value computed in double).
inline std::vector<double> map_d(const std::vector<double>& v, const std::function<double(double)>& f) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = f(v[i]);
  return r;
}
inline std::vector<double> zip_d(const std::vector<double>& a, const std::vector<double>& b,
                                 const std::function<double(double, double)>& f) {
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = f(a[i], b[i]);
  return r;
}

// Exact equality (NaN == NaN), reporting the first difference.
inline ::testing::AssertionResult same(const std::vector<double>& got, const std::vector<double>& want) {
  return all_close(got, want, 0.0, 0.0);
}
inline ::testing::AssertionResult same(const Array& got, const std::vector<double>& want) {
  return all_close(got.to_vector<double>(), want, 0.0, 0.0);
}
inline ::testing::AssertionResult same_shape(const Array& a, const Shape& s) {
  if (a.shape() == s) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "shape " << a.shape().str() << ", expected " << s.str();
}

// Relative tolerance that fits the precision a dtype computes and stores in.
inline double rtol_for(DType t) {
  switch (t) {
    case DType::F64: return 1e-12;
    case DType::F32: return 2e-6;
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    default: return 0;
  }
}

// error_of(f): test_util.h.

// The message contains every one of `parts`.
inline ::testing::AssertionResult has_all(const std::string& msg, std::initializer_list<std::string> parts) {
  if (msg == "<no error>") return ::testing::AssertionFailure() << "no ember::Error was thrown";
  if (msg.rfind("<not an ember::Error>", 0) == 0) return ::testing::AssertionFailure() << msg;
  for (const auto& p : parts)
    if (msg.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << p << "\"";
  return ::testing::AssertionSuccess();
}

// EXPECT_ERROR(statement, "part", "part", ...): the statement throws ember::Error whose message
// contains every part.
#define EMBER_EXPECT_ERROR(stmt, ...) \
  EXPECT_TRUE(::ember::testing::has_all(::ember::testing::error_of([&] { stmt; }), {__VA_ARGS__}))

// Devices other than the reference oracle (what the cross-backend test compares).
inline std::vector<Device> non_reference_devices() {
  std::vector<Device> out;
  for (const Device& d : test_devices())
    if (d.kind != DeviceKind::Reference) out.push_back(d);
  return out;
}

}  // namespace ember::testing

namespace ember {
// Lets gtest print a device parameter by name instead of its bytes.
inline void PrintTo(const Device& d, std::ostream* os) { *os << d.str(); }
}  // namespace ember

#define EMBER_OP_SUITE(Suite) \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::ValuesIn(::ember::testing::test_devices()), \
                           ::ember::testing::device_test_name)
