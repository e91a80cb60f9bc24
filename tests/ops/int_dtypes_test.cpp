// The integer dtypes int8, int16, uint16, uint32 and uint64 on every backend: wrapping
// arithmetic at the limits, uint64 above 2^63 (compares, division, reductions, sorting,
// conversions), float -> integer conversions out of range, indexing, matmul, printing and the
// safetensors bytes. Expected values are computed here with C++'s own fixed-width arithmetic
// (unsigned wrap-around, then truncation to the width), never by Ember.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/io/safetensors.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

constexpr uint64_t kTwo63 = uint64_t(1) << 63;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

class OpIntDtypes : public ::testing::TestWithParam<Device> {
 public:
  Device dev = GetParam();
  template <class T>
  Array arr(std::vector<T> v) {
    return from_vector(v, {int64_t(v.size())}, dev);
  }
};

template <class T>
std::vector<T> got(const Array& a) {
  EXPECT_EQ(a.dtype(), dtype_of<T>());
  return a.to_vector<T>();
}

// Wrapping + - * of T, as C++ computes it in the unsigned type of the same width.
template <class T, class F>
std::vector<T> wrap2(const std::vector<T>& x, const std::vector<T>& y, F f) {
  using U = std::make_unsigned_t<T>;
  std::vector<T> r;
  for (size_t i = 0; i < x.size(); ++i) r.push_back(T(U(f(uint64_t(U(x[i])), uint64_t(U(y[i]))))));
  return r;
}

template <class T>
void check_wrapping(OpIntDtypes& t, const char* name) {
  SCOPED_TRACE(name);
  using L = std::numeric_limits<T>;
  const std::vector<T> x = {L::max(), L::min(), T(5), T(100), L::max()};
  const std::vector<T> y = {T(1), T(1), T(3), T(3), L::max()};
  Array a = t.arr(x), b = t.arr(y);
  EXPECT_EQ(got<T>(add(a, b)), wrap2(x, y, [](uint64_t p, uint64_t q) { return p + q; }));
  EXPECT_EQ(got<T>(sub(a, b)), wrap2(x, y, [](uint64_t p, uint64_t q) { return p - q; }));
  EXPECT_EQ(got<T>(mul(a, b)), wrap2(x, y, [](uint64_t p, uint64_t q) { return p * q; }));
  // A fused chain: every op wraps to the width before the next one reads it.
  std::vector<T> ab = wrap2(x, y, [](uint64_t p, uint64_t q) { return p + q; });
  std::vector<T> want = wrap2(ab, y, [](uint64_t p, uint64_t q) { return p * q; });
  EXPECT_EQ(got<T>(mul(add(a, b), b)), want);
  // Scalars adopt the tensor's dtype: max + 1 wraps to the minimum.
  EXPECT_EQ(got<T>(add(t.arr(std::vector<T>{L::max()}), 1)), std::vector<T>{L::min()});
  EXPECT_EQ(got<T>(neg(t.arr(std::vector<T>{T(1), L::min()}))),
            (std::vector<T>{T(std::make_unsigned_t<T>(0) - 1), L::min()}));
}

TEST_P(OpIntDtypes, ArithmeticWrapsAtTheLimits) {
  check_wrapping<int8_t>(*this, "int8");
  check_wrapping<int16_t>(*this, "int16");
  check_wrapping<uint16_t>(*this, "uint16");
  check_wrapping<uint32_t>(*this, "uint32");
  check_wrapping<uint64_t>(*this, "uint64");
}

TEST_P(OpIntDtypes, SignedDivisionRoundsTowardMinusInfinity) {
  // floor_div/rem follow Python (sign of the divisor), fmod follows C (sign of the dividend);
  // INT_MIN floor_div -1 wraps to INT_MIN.
  std::vector<int8_t> x = {-7, 7, -7, -128, 127}, y = {2, -2, -2, -1, 10};
  EXPECT_EQ(got<int8_t>(floor_div(arr(x), arr(y))), (std::vector<int8_t>{-4, -4, 3, -128, 12}));
  EXPECT_EQ(got<int8_t>(rem(arr(x), arr(y))), (std::vector<int8_t>{1, -1, -1, 0, 7}));
  EXPECT_EQ(got<int8_t>(fmod(arr(x), arr(y))), (std::vector<int8_t>{-1, 1, -1, 0, 7}));
  std::vector<int16_t> p = {-32768, 32767, -5}, q = {-1, 2, 3};
  EXPECT_EQ(got<int16_t>(floor_div(arr(p), arr(q))), (std::vector<int16_t>{-32768, 16383, -2}));
  EXPECT_EQ(got<int16_t>(rem(arr(p), arr(q))), (std::vector<int16_t>{0, 1, 1}));
  EXPECT_EQ(got<int16_t>(abs(arr(p))), (std::vector<int16_t>{-32768, 32767, 5}));  // |min| wraps
  // True division gives f32.
  EXPECT_TRUE(same(div(arr(std::vector<int8_t>{7}), arr(std::vector<int8_t>{2})), {3.5}));
  Array by_zero = floor_div(arr(x), arr(std::vector<int8_t>{1, 1, 0, 1, 1}));
  EMBER_EXPECT_ERROR(by_zero.to_vector<int8_t>(), "floor_div", "division by zero");
  Array r = rem(arr(std::vector<uint64_t>{kU64Max}), arr(std::vector<uint64_t>{0}));
  EMBER_EXPECT_ERROR(r.to_vector<uint64_t>(), "rem", "remainder by zero");
}

TEST_P(OpIntDtypes, Uint64AboveTwoToThe63IsUnsigned) {
  const std::vector<uint64_t> x = {kTwo63, 1, kU64Max, kTwo63 + 5, 10};
  const std::vector<uint64_t> y = {1, kTwo63, kU64Max, 3, kTwo63 + 1};
  Array a = arr(x), b = arr(y);
  EXPECT_TRUE(same(lt(a, b), {0, 1, 0, 0, 1}));
  EXPECT_TRUE(same(gt(a, b), {1, 0, 0, 1, 0}));
  EXPECT_TRUE(same(le(a, b), {0, 1, 1, 0, 1}));
  EXPECT_TRUE(same(ge(a, b), {1, 0, 1, 1, 0}));
  EXPECT_TRUE(same(eq(a, b), {0, 0, 1, 0, 0}));
  EXPECT_EQ(got<uint64_t>(maximum(a, b)), (std::vector<uint64_t>{kTwo63, kTwo63, kU64Max, kTwo63 + 5, kTwo63 + 1}));
  EXPECT_EQ(got<uint64_t>(minimum(a, b)), (std::vector<uint64_t>{1, 1, kU64Max, 3, 10}));
  std::vector<uint64_t> fd, rm;
  for (size_t i = 0; i < x.size(); ++i) {
    fd.push_back(x[i] / y[i]);
    rm.push_back(x[i] % y[i]);
  }
  EXPECT_EQ(got<uint64_t>(floor_div(a, b)), fd);
  EXPECT_EQ(got<uint64_t>(rem(a, b)), rm);
  EXPECT_EQ(got<uint64_t>(fmod(a, b)), rm);
  EXPECT_EQ(got<uint64_t>(abs(a)), x);
  // pow wraps modulo 2^64: 3^41 = 36472996377170786403, beyond 2^64.
  uint64_t p = 1;
  for (int i = 0; i < 41; ++i) p *= 3;
  EXPECT_EQ(got<uint64_t>(pow(arr(std::vector<uint64_t>{3}), arr(std::vector<uint64_t>{41}))), std::vector<uint64_t>{p});
  // Clamp's missing bound is the dtype's range.
  EXPECT_EQ(got<uint64_t>(clamp(a, uint64_t(5), std::nullopt)), (std::vector<uint64_t>{kTwo63, 5, kU64Max, kTwo63 + 5, 10}));
  EXPECT_EQ(got<uint64_t>(where(gt(a, b), a, b)), got<uint64_t>(maximum(a, b)));
}

TEST_P(OpIntDtypes, Reductions) {
  // sum of uint64 stays uint64 and wraps; the narrower integers sum to int64 (as PyTorch).
  Array u = arr(std::vector<uint64_t>{kTwo63, kTwo63, 5, 3});
  EXPECT_EQ(got<uint64_t>(sum(u)), std::vector<uint64_t>{8});
  EXPECT_EQ(got<uint64_t>(max(u)), std::vector<uint64_t>{kTwo63});
  EXPECT_EQ(got<uint64_t>(min(u)), std::vector<uint64_t>{3});
  EXPECT_EQ(argmax(arr(std::vector<uint64_t>{1, kTwo63 + 7, 2, kTwo63 + 7}), 0).item<int64_t>(), 1);
  EXPECT_EQ(argmin(arr(std::vector<uint64_t>{kU64Max, kTwo63, 9, 9}), 0).item<int64_t>(), 2);
  EXPECT_EQ(got<int64_t>(sum(arr(std::vector<int8_t>{127, 127, -128}))), std::vector<int64_t>{126});
  EXPECT_EQ(got<int64_t>(sum(arr(std::vector<uint32_t>{4000000000u, 4000000000u}))), std::vector<int64_t>{8000000000});
  EXPECT_EQ(got<int64_t>(sum(arr(std::vector<uint16_t>{65535, 65535}))), std::vector<int64_t>{131070});
  EXPECT_EQ(got<int16_t>(max(arr(std::vector<int16_t>{-32768, -5, -300}))), std::vector<int16_t>{-5});
  EXPECT_EQ(got<uint32_t>(min(arr(std::vector<uint32_t>{4294967295u, 7, 4000000000u}))), std::vector<uint32_t>{7});
  // Rows of a 2-D tensor (a reduction kernel with outer points).
  Array m = from_vector(std::vector<uint64_t>{1, kU64Max, 3, kTwo63, 2, 1}, {2, 3}, dev);
  EXPECT_EQ(got<uint64_t>(max(m, {1})), (std::vector<uint64_t>{kU64Max, kTwo63}));
  EXPECT_EQ(got<uint64_t>(sum(m, {1})), (std::vector<uint64_t>{3, kTwo63 + 3}));
}

TEST_P(OpIntDtypes, FloatsConvertThroughTheRegisterTypeAndWrap) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Array f = f64({-1.5, 3.7, 300, -129, 70000, 1e10, nan, inf}, {8}, dev);
  // int8/int16/uint16: truncate to i32 (NaN and out of range: INT32_MIN), then wrap.
  EXPECT_EQ(got<int8_t>(cast(f, DType::I8)), (std::vector<int8_t>{-1, 3, 44, 127, 112, 0, 0, 0}));
  EXPECT_EQ(got<int16_t>(cast(f, DType::I16)), (std::vector<int16_t>{-1, 3, 300, -129, 4464, 0, 0, 0}));
  EXPECT_EQ(got<uint16_t>(cast(f, DType::U16)), (std::vector<uint16_t>{65535, 3, 300, 65407, 4464, 0, 0, 0}));
  // uint32: truncate to i64 (NaN and out of range: INT64_MIN), then wrap.
  EXPECT_EQ(got<uint32_t>(cast(f, DType::U32)),
            (std::vector<uint32_t>{4294967295u, 3, 300, 4294967167u, 70000, 1410065408u, 0, 0}));
  // uint64: (-2^63, 2^64) truncates and wraps; NaN and the rest give 2^63.
  Array g = f64({-1.5, 1e10, 1.8e19, 18446744073709551616.0, -1e19, nan, inf, -inf}, {8}, dev);
  EXPECT_EQ(got<uint64_t>(cast(g, DType::U64)), (std::vector<uint64_t>{kU64Max, 10000000000u, 18000000000000000000u,
                                                                      kTwo63, kTwo63, kTwo63, kTwo63, kTwo63}));
  EXPECT_EQ(got<uint64_t>(cast(f32({3.9f, -2}, {2}, dev), DType::U64)), (std::vector<uint64_t>{3, kU64Max - 1}));
  // To floats: the unsigned value, rounded once.
  Array big = arr(std::vector<uint64_t>{kU64Max, kTwo63 + 1, 12345});
  EXPECT_EQ(cast(big, DType::F64).to_vector<double>(), (std::vector<double>{18446744073709551616.0, 9223372036854775808.0, 12345}));
  EXPECT_EQ(cast(big, DType::F32).to_vector<float>(), (std::vector<float>{18446744073709551616.0f, 9223372036854775808.0f, 12345}));
  EXPECT_EQ(cast(arr(std::vector<uint32_t>{4294967295u}), DType::F64).to_vector<double>(), std::vector<double>{4294967295.0});
  EXPECT_EQ(cast(arr(std::vector<int8_t>{-128}), DType::F16).to_vector<float>(), std::vector<float>{-128});
}

TEST_P(OpIntDtypes, IntegersConvertByWrapping) {
  Array x = from_vector(std::vector<int64_t>{-1, 300, 65541, -32769, int64_t(1) << 40}, {5}, dev);
  EXPECT_EQ(got<int8_t>(cast(x, DType::I8)), (std::vector<int8_t>{-1, 44, 5, -1, 0}));
  EXPECT_EQ(got<uint8_t>(cast(x, DType::U8)), (std::vector<uint8_t>{255, 44, 5, 255, 0}));
  EXPECT_EQ(got<int16_t>(cast(x, DType::I16)), (std::vector<int16_t>{-1, 300, 5, 32767, 0}));
  EXPECT_EQ(got<uint16_t>(cast(x, DType::U16)), (std::vector<uint16_t>{65535, 300, 5, 32767, 0}));
  EXPECT_EQ(got<uint32_t>(cast(x, DType::U32)), (std::vector<uint32_t>{4294967295u, 300, 65541, 4294934527u, 0}));
  EXPECT_EQ(got<uint64_t>(cast(x, DType::U64)),
            (std::vector<uint64_t>{kU64Max, 300, 65541, kU64Max - 32768, uint64_t(1) << 40}));
  Array u = arr(std::vector<uint64_t>{kTwo63, kTwo63 + 255, kU64Max});
  EXPECT_EQ(got<int64_t>(cast(u, DType::I64)), (std::vector<int64_t>{INT64_MIN, INT64_MIN + 255, -1}));
  EXPECT_EQ(got<int8_t>(cast(u, DType::I8)), (std::vector<int8_t>{0, -1, -1}));
  EXPECT_EQ(got<uint32_t>(cast(u, DType::U32)), (std::vector<uint32_t>{0, 255, 4294967295u}));
  EXPECT_TRUE(same(cast(u, DType::Bool), {1, 1, 1}));
  EXPECT_EQ(got<int16_t>(cast(arr(std::vector<uint16_t>{40000, 7}), DType::I16)), (std::vector<int16_t>{-25536, 7}));
}

template <class T>
void check_bits(OpIntDtypes& t, const char* name) {
  SCOPED_TRACE(name);
  using L = std::numeric_limits<T>;
  const std::vector<T> x = {L::max(), L::min(), T(0x55), T(-1), T(6)};
  const std::vector<T> y = {T(0x0f), T(0x33), T(0x0f), T(0x3c), T(3)};
  std::vector<T> a, o, e, n;
  for (size_t i = 0; i < x.size(); ++i) {
    a.push_back(T(x[i] & y[i]));
    o.push_back(T(x[i] | y[i]));
    e.push_back(T(x[i] ^ y[i]));
    n.push_back(T(~x[i]));
  }
  EXPECT_EQ(got<T>(bitwise_and(t.arr(x), t.arr(y))), a);
  EXPECT_EQ(got<T>(bitwise_or(t.arr(x), t.arr(y))), o);
  EXPECT_EQ(got<T>(bitwise_xor(t.arr(x), t.arr(y))), e);
  EXPECT_EQ(got<T>(bitwise_not(t.arr(x))), n);
  // Shifts: the top bit moves out on the left; right shifts fill with the sign (0 if unsigned).
  const int w = int(sizeof(T)) * 8;
  const std::vector<T> s = {T(1), L::min(), L::max(), T(-1)};
  const std::vector<T> k = {T(w - 1), T(1), T(1), T(2)};
  std::vector<T> l, r;
  for (size_t i = 0; i < s.size(); ++i) {
    l.push_back(T(std::make_unsigned_t<T>(s[i]) << k[i]));
    r.push_back(T(s[i] >> k[i]));  // arithmetic for signed (C++20)
  }
  EXPECT_EQ(got<T>(shift_left(t.arr(s), t.arr(k))), l);
  EXPECT_EQ(got<T>(shift_right(t.arr(s), t.arr(k))), r);
}

TEST_P(OpIntDtypes, BitwiseOpsAndShifts) {
  check_bits<int8_t>(*this, "int8");
  check_bits<int16_t>(*this, "int16");
  check_bits<uint16_t>(*this, "uint16");
  check_bits<uint32_t>(*this, "uint32");
  check_bits<uint64_t>(*this, "uint64");
}

TEST_P(OpIntDtypes, SortingIndexingAndMovement) {
  Array u = arr(std::vector<uint64_t>{kTwo63 + 1, 3, kU64Max, 0, kTwo63});
  EXPECT_EQ(argsort(u).to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 4, 0, 2}));
  ValuesIndices top = topk(u, 2);
  EXPECT_EQ(got<uint64_t>(top.values), (std::vector<uint64_t>{kU64Max, kTwo63 + 1}));
  EXPECT_EQ(top.indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(argsort(arr(std::vector<int8_t>{5, -128, 127, -1}), -1, true).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 0, 3, 1}));
  // Gather, cat and a transposed copy move the bits unchanged.
  Array idx = from_vector(std::vector<int64_t>{2, 0, 4}, {3}, dev);
  EXPECT_EQ(got<uint64_t>(gather(u, 0, idx)), (std::vector<uint64_t>{kU64Max, kTwo63 + 1, kTwo63}));
  Array c = cat({arr(std::vector<uint16_t>{65535}), arr(std::vector<uint16_t>{1, 2})}, 0);
  EXPECT_EQ(got<uint16_t>(c), (std::vector<uint16_t>{65535, 1, 2}));
  Array m = from_vector(std::vector<int8_t>{-128, 1, 2, 127, -1, 0}, {2, 3}, dev);
  EXPECT_EQ(got<int8_t>(contiguous(transpose(m, 0, 1))), (std::vector<int8_t>{-128, 127, 1, -1, 2, 0}));
  // cumsum: narrow integers accumulate in int64 (as sum), uint64 wraps in uint64.
  EXPECT_EQ(got<int64_t>(cumsum(arr(std::vector<uint32_t>{4294967295u, 1, 2}), 0)),
            (std::vector<int64_t>{4294967295, 4294967296, 4294967298}));
  EXPECT_EQ(got<uint64_t>(cumsum(arr(std::vector<uint64_t>{kU64Max, 2, kTwo63}), 0)),
            (std::vector<uint64_t>{kU64Max, 1, kTwo63 + 1}));
}

TEST_P(OpIntDtypes, MatmulWraps) {
  Array a = from_vector(std::vector<int8_t>{1, 2, 3, 4}, {2, 2}, dev);
  Array b = from_vector(std::vector<int8_t>{127, 1, 1, 1}, {2, 2}, dev);
  // 1*127 + 2*1 = 129 -> -127; 3*127 + 4 = 385 -> -127.
  EXPECT_EQ(got<int8_t>(matmul(a, b)), (std::vector<int8_t>{-127, 3, -127, 7}));
  Array p = from_vector(std::vector<uint64_t>{kTwo63, 1}, {1, 2}, dev);
  Array q = from_vector(std::vector<uint64_t>{3, 5}, {2, 1}, dev);
  EXPECT_EQ(got<uint64_t>(matmul(p, q)), std::vector<uint64_t>{kTwo63 * 3 + 5});
}

INSTANTIATE_TEST_SUITE_P(Devices, OpIntDtypes, ::testing::ValuesIn(test_devices()), device_test_name);

TEST(IntDtypes, NamesSizesAndPrinting) {
  EXPECT_EQ(dtype_name(DType::I8), "int8");
  EXPECT_EQ(dtype_name(DType::U64), "uint64");
  EXPECT_EQ(dtype_size(DType::I16), 2u);
  EXPECT_EQ(dtype_size(DType::U32), 4u);
  EXPECT_TRUE(is_unsigned(DType::U16));
  EXPECT_FALSE(is_unsigned(DType::I8));
  EXPECT_EQ(from_vector(std::vector<uint64_t>{kU64Max, 0}, {2}).str(),
            "tensor([18446744073709551615,                    0], dtype=ember.uint64)");
  EXPECT_EQ(from_vector(std::vector<int8_t>{-128, 127}, {2}).str(), "tensor([-128,  127], dtype=ember.int8)");
}

TEST(IntDtypes, SafetensorsStoresTheRawLittleEndianBytes) {
  io::TensorMap m;
  const std::vector<uint64_t> u64 = {kU64Max, 1};
  const std::vector<int8_t> i8 = {-128, 127, 0};
  const std::vector<int16_t> i16 = {-2, 300};
  const std::vector<uint16_t> u16 = {65535};
  const std::vector<uint32_t> u32 = {4294967295u, 2};
  m["a"] = from_vector(u64, {2});
  m["b"] = from_vector(i8, {3});
  m["c"] = from_vector(i16, {2});
  m["d"] = from_vector(u16, {1});
  m["e"] = from_vector(u32, {2});
  std::vector<uint8_t> bytes = io::serialize(m);
  std::string text(bytes.begin(), bytes.end());
  for (const char* tag : {"\"U64\"", "\"I8\"", "\"I16\"", "\"U16\"", "\"U32\""}) EXPECT_NE(text.find(tag), std::string::npos) << tag;
  io::SafetensorsFile back = io::parse(bytes.data(), bytes.size());
  EXPECT_EQ(back.tensors.at("a").to_vector<uint64_t>(), u64);
  EXPECT_EQ(back.tensors.at("b").to_vector<int8_t>(), i8);
  EXPECT_EQ(back.tensors.at("c").to_vector<int16_t>(), i16);
  EXPECT_EQ(back.tensors.at("d").to_vector<uint16_t>(), u16);
  EXPECT_EQ(back.tensors.at("e").to_vector<uint32_t>(), u32);
  // The u64 payload is the raw bytes (a header, then the data section in key order: "a" first).
  io::Header h = io::parse_header(bytes.data(), bytes.size());
  ASSERT_EQ(h.tensors[0].name, "a");
  std::vector<uint8_t> raw(16);
  std::memcpy(raw.data(), u64.data(), 16);
  EXPECT_TRUE(std::equal(raw.begin(), raw.end(), bytes.begin() + std::ptrdiff_t(h.data_offset + h.tensors[0].begin)));
  EMBER_EXPECT_ERROR(io::parse_header(reinterpret_cast<const uint8_t*>("x"), 1), "safetensors");
}

TEST(IntDtypes, PromotionHasNoSilentUint64Rule) {
  EXPECT_EQ(promote_types(DType::U8, DType::I8), DType::I16);
  EXPECT_EQ(promote_types(DType::U16, DType::I16), DType::I32);
  EXPECT_EQ(promote_types(DType::U32, DType::I32), DType::I64);
  EXPECT_EQ(promote_types(DType::U32, DType::I64), DType::I64);
  EXPECT_EQ(promote_types(DType::U16, DType::I8), DType::I32);
  EXPECT_EQ(promote_types(DType::U8, DType::U64), DType::U64);
  EXPECT_EQ(promote_types(DType::I8, DType::I16), DType::I16);
  EXPECT_EQ(promote_types(DType::U16, DType::F16), DType::F16);
  EXPECT_EQ(promote_types(DType::Bool, DType::U32), DType::U32);
  EMBER_EXPECT_ERROR(promote_types(DType::U64, DType::I64), "uint64", "int64", "cast");
  EMBER_EXPECT_ERROR(add(from_vector(std::vector<uint64_t>{1}, {1}), from_vector(std::vector<int8_t>{1}, {1})), "uint64",
                     "int8");
}

}  // namespace
}  // namespace ember::testing
