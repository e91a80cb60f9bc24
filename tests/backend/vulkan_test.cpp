// The Vulkan plugin on the machine's Vulkan device (lavapipe in CI). The op conformance suites
// (Devices/*) run on vulkan:0 like on every device; these tests add what is Vulkan-specific:
// bit-exact NaN/inf/-0 behaviour of fused kernels against the reference backend, reductions
// longer than lavapipe's per-invocation loop cap (65535 iterations), kernel-side errors reported
// at the next read with the op's name, Philox streams identical to the CPU's, data movement of
// every dtype, and a small training run that matches the reference. Without a Vulkan device
// they skip and say why; with CI=true or EMBER_REQUIRE_VULKAN=1 a skip is a failure.
#include <gtest/gtest.h>

#include <chrono>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "runtime/program_disk_cache.h"
#include "runtime/registry.h"
#include "backend/vulkan_test_util.h"
#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;
using ember::testing::error_of;

const Device kVk = Device::vulkan(0);
const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

std::vector<uint32_t> bits(const Array& a) {
  std::vector<float> v = a.to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

// Same bits, except that any NaN matches any NaN (payloads are not specified).
void expect_same_bits(const Array& got, const Array& want, const char* what) {
  std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same = std::isnan(w[i]) ? std::isnan(g[i]) : std::memcmp(&g[i], &w[i], 4) == 0;
    EXPECT_TRUE(same) << what << " [" << i << "]: got " << g[i] << " (signbit " << std::signbit(g[i]) << "), want "
                      << w[i] << " (signbit " << std::signbit(w[i]) << ")";
  }
}

TEST(VulkanTest, DeviceIsListedWithItsProperties) {
  REQUIRE_VULKAN();
  Backend& b = Backend::get(DeviceKind::Vulkan);
  const ember_device_properties p = b.properties(0);
  EXPECT_EQ(p.async, 1u);
  EXPECT_GT(std::strlen(p.name), 0u);
  EXPECT_TRUE(p.dtypes & EMBER_DTYPE_BIT(EMBER_F32));
  EXPECT_GT(p.max_buffer_bytes, 0u);
  bool listed = false;
  for (Device d : available_devices()) listed |= d == kVk;
  EXPECT_TRUE(listed);
  EXPECT_EQ(Device::parse("vulkan:0"), kVk);
}

// A sum of many differently strided views of one tensor would fuse into one kernel reading each
// view as its own buffer binding: past the driver's per-shader limit (32 on lavapipe, whose queue
// thread crashed on 44 bindings; found by the ONNX corpus on Vulkan: a dilated 3-D average pool
// summed 125 slices). The planner keeps every kernel within max_kernel_args; the result is the
// reference's.
TEST(VulkanTest, KernelsStayWithinTheDevicesBindingLimit) {
  REQUIRE_VULKAN();
  const uint32_t limit = Backend::get(DeviceKind::Vulkan).properties(0).max_kernel_args;
  ASSERT_GT(limit, 0u);
  const int64_t n = 2 * int64_t(limit) + 8, len = 64;
  std::vector<float> host(size_t(n + len));
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i % 13) - 6.0f;
  auto run = [&](Device d) {
    Array x = from_vector<float>(host, {n + len}, d);
    Array acc;
    for (int64_t k = 0; k < n; ++k) {
      Array v = slice(x, 0, k, k + len);
      acc = acc.defined() ? add(acc, mul(v, double(k % 5 + 1))) : v;
    }
    return acc.to_vector<float>();
  };
  std::vector<float> want = run(Device::reference()), got = run(kVk);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
}

// Exact arithmetic (no transcendental functions) must give the reference's bits, including NaN
// propagation through max/min/relu, infinities and the sign of zero, fused into one kernel.
TEST(VulkanTest, FusedExactArithmeticMatchesTheReferenceBitForBit) {
  REQUIRE_VULKAN();
  const std::vector<float> xs = {0.0f, -0.0f, 1.5f, -2.25f, kNan, kInf, -kInf, 3.0f, -1e-30f, 7.0f, 1e30f, -0.5f};
  const std::vector<float> ys = {-0.0f, 0.0f, kNan, 2.0f, 1.0f, -kInf, kInf, 0.0f, 1e30f, -3.0f, -1e30f, 0.25f};
  auto run = [&](Device d) {
    Array x = from_vector(xs, {12}, d), y = from_vector(ys, {12}, d);
    std::vector<Array> out;
    out.push_back(add(mul(x, y), neg(x)));
    out.push_back(div(x, y));
    out.push_back(relu(sub(x, y)));
    out.push_back(maximum(x, y));
    out.push_back(minimum(abs(x), y));
    out.push_back(where(gt(x, y), x, mul(y, -0.0)));
    out.push_back(floor(div(x, 2.0)));
    out.push_back(sqrt(abs(x)));
    out.push_back(rem(x, y));
    out.push_back(cast(cast(x, DType::F16), DType::F32));
    out.push_back(cast(cast(x, DType::BF16), DType::F32));
    out.push_back(cast(cast(x, DType::I32), DType::F32));
    return out;
  };
  std::vector<Array> got = run(kVk), want = run(Device::reference());
  for (size_t i = 0; i < got.size(); ++i) expect_same_bits(got[i], want[i], ("expression " + std::to_string(i)).c_str());
}

// lavapipe ends a shader invocation after 65535 loop iterations without a word; reductions of
// more points than that must still be complete (a workgroup per output).
TEST(VulkanTest, ReductionsLongerThanTheDriversLoopCapAreComplete) {
  REQUIRE_VULKAN();
  const int64_t n = 200003;
  EXPECT_EQ(sum(ones({n}, {.device = kVk})).item<double>(), double(n));
  EXPECT_EQ(sum(ones({3, n}, {.dtype = DType::I64, .device = kVk}), {1}).to_vector<int64_t>(),
            std::vector<int64_t>(3, n));
  std::vector<float> v(size_t(n), 1.0f);
  v[100] = 5.0f;
  v[150000] = 5.0f;  // a tie later: argmax is the first
  EXPECT_EQ(argmax(from_vector(v, {n}, kVk), 0).item<int64_t>(), 100);
  v[199999] = kNan;  // the first NaN wins
  EXPECT_EQ(argmax(from_vector(v, {n}, kVk), 0).item<int64_t>(), 199999);
  Array x = uniform({2, 70001}, -3, 3, {.seed = 5, .device = kVk});
  Array xr = to_device(x, Device::reference());
  EXPECT_TRUE(all_close(softmax(x, 1).to_vector<double>(), softmax(xr, 1).to_vector<double>(), 1e-5, 1e-9));
  EXPECT_NEAR(sum(x).item<double>(), sum(xr).item<double>(), 1e-2);
}

// Rows longer than 64 points reduce with a workgroup each: on devices with subgroup shuffles the
// partials combine by a butterfly inside each subgroup, then through shared memory. The results
// must be the reference's bits wherever the order cannot matter: a NaN anywhere in a row (at every
// lane position of a subgroup and of a workgroup), +inf and -inf in one row (NaN), rows of -0
// (max, min and sum keep the sign), exact integer-valued sums, and int32 sums that wrap; argmax
// and argmin give the reference's indices (first NaN, first of ties).
TEST(VulkanTest, WorkgroupReductionsKeepNaNInfAndSignedZero) {
  REQUIRE_VULKAN();
  const int64_t rows = 40, cols = 1000;
  std::vector<float> v(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) v[size_t(r * cols + c)] = float((r * 7 + c * 13) % 101) - 50.0f;
  for (int64_t r = 0; r < 24; ++r) v[size_t(r * cols + r * 41 % cols)] = kNan;  // NaN at 24 positions
  v[size_t(24 * cols + 3)] = kInf;
  v[size_t(25 * cols + 999)] = -kInf;
  v[size_t(26 * cols + 500)] = kInf;
  v[size_t(26 * cols + 501)] = -kInf;  // inf + -inf: NaN; max inf, min -inf
  for (int64_t c = 0; c < cols; ++c) v[size_t(27 * cols + c)] = -0.0f;
  for (int64_t c = 0; c < cols; ++c) v[size_t(28 * cols + c)] = c % 2 ? -0.0f : 0.0f;
  auto run = [&](Device d) {
    Array x = from_vector(v, {rows, cols}, d);
    return std::vector<Array>{sum(x, {1}), max(x, {1}), min(x, {1}), prod(sign(x), {1})};
  };
  const std::vector<Array> got = run(kVk), want = run(Device::reference());
  const char* names[] = {"sum", "max", "min", "prod"};
  for (size_t i = 0; i < got.size(); ++i) expect_same_bits(got[i], want[i], names[i]);
  // Arg reductions: the first NaN, else the first of equal extremes (every row has ties; rows of
  // zeros of both signs give index 0).
  Array xv = from_vector(v, {rows, cols}, kVk), xr = from_vector(v, {rows, cols}, Device::reference());
  EXPECT_EQ(argmax(xv, 1).to_vector<int64_t>(), argmax(xr, 1).to_vector<int64_t>());
  EXPECT_EQ(argmin(xv, 1).to_vector<int64_t>(), argmin(xr, 1).to_vector<int64_t>());
  std::vector<int32_t> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = int32_t(uint32_t(i) * 2654435761u);  // sums wrap
  Array xi = from_vector(w, {rows, cols}, kVk);
  EXPECT_EQ(sum(xi, {1}).to_vector<int32_t>(), sum(to_device(xi, Device::reference()), {1}).to_vector<int32_t>());
  EXPECT_EQ(max(xi, {1}).to_vector<int32_t>(), max(to_device(xi, Device::reference()), {1}).to_vector<int32_t>());
  EXPECT_EQ(argmin(xi, 1).to_vector<int64_t>(), argmin(to_device(xi, Device::reference()), 1).to_vector<int64_t>());
}

// index_add (the gradient of an embedding lookup) runs as a library shader: duplicates summed in
// index order, so the reference's bits, NaN, infinities and -0 included, along either dim and
// past one pass's chunk of the index (600000 indices: two passes); an index out of range fails
// the reads of the result with the op, the value and the size, every time it is read.
TEST(VulkanTest, IndexAddMatchesTheReferenceBitForBit) {
  REQUIRE_VULKAN();
  const Device ref = Device::reference();
  std::vector<float> v(300 * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int64_t(i * 37 % 1001) - 500) / 7.0f;
  v[5] = kNan;
  v[70] = kInf;
  v[200] = -kInf;
  v[64 * 3 + 1] = -0.0f;
  std::vector<int64_t> rows(300);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = int64_t(i * 7 % 13);  // many duplicates, unsorted
  Array src = from_vector(v, {300, 64}, kVk), index = from_vector(rows, {300}, kVk);
  Array base = zeros({13, 64}, {.device = kVk});
  expect_same_bits(index_add(base, 0, index, src), index_add(to_device(base, ref), 0, to_device(index, ref), to_device(src, ref)),
                   "index_add along dim 0");
  Array src_t = transpose(src, 0, 1);  // [64, 300], strided: the index runs along dim 1
  Array base_t = full({64, 13}, -0.0, {.device = kVk});
  expect_same_bits(index_add(base_t, 1, index, src_t),
                   index_add(to_device(base_t, ref), 1, to_device(index, ref), to_device(src_t, ref)), "along dim 1");
  const int64_t n = 600000;
  std::vector<int64_t> long_rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) long_rows[size_t(i)] = i * 31 % 5;
  Array long_src = uniform({n, 2}, -1, 1, {.seed = 31, .device = kVk});
  Array long_index = from_vector(long_rows, {n}, kVk), long_base = zeros({5, 2}, {.device = kVk});
  const Array long_got = index_add(long_base, 0, long_index, long_src);
  const Array long_want = index_add(to_device(long_base, ref), 0, to_device(long_index, ref), to_device(long_src, ref));
  // SwiftShader (no int64) has no index_add shader.
  const bool shader = Backend::get(DeviceKind::Vulkan).supports(0, EMBER_SUPPORT_LIBRARY, EMBER_LIB_INDEX_ADD, EMBER_F32);
  if (shader)
    expect_same_bits(long_got, long_want, "600000 indices");
  else  // no shader (SwiftShader has no int64): the core's dense form, whose sums run in another order
    EXPECT_TRUE(all_close(long_got, long_want.to_vector<double>(), 1e-4, 1e-3));
  std::vector<int64_t> bad_rows(300, 2);
  bad_rows[150] = 13;  // S = 13
  Array bad = index_add(base, 0, from_vector(bad_rows, {300}, kVk), src);
  for (int read = 0; read < 2; ++read) {  // the front end's index check names the user's line
    const std::string e = error_of([&] { (void)bad.to_vector<float>(); });
    EXPECT_NE(e.find("vulkan_test.cpp"), std::string::npos) << e;
    EXPECT_NE(e.find("13"), std::string::npos) << e;
    EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  }
  // The shader checks its indices too (a call made without the front end): the plugin's error.
  if (!shader) return;
  Backend& vk = Backend::get(DeviceKind::Vulkan);
  auto src_buf = vk.alloc(kVk, 4 * sizeof(float)), idx_buf = vk.alloc(kVk, 2 * sizeof(int64_t)),
       out_buf = vk.alloc(kVk, 6 * sizeof(float));
  const float src_vals[4] = {1, 2, 3, 4};
  const int64_t idx_vals[2] = {0, 7};
  vk.write(*src_buf, 0, src_vals, sizeof src_vals);
  vk.write(*idx_buf, 0, idx_vals, sizeof idx_vals);
  const ember_tensor_desc in[2] = {{src_buf->handle, 0, EMBER_F32, 2, {2, 2}, {2, 1}},
                                   {idx_buf->handle, 0, EMBER_I64, 1, {2}, {1}}};
  const ember_tensor_desc out = {out_buf->handle, 0, EMBER_F32, 2, {3, 2}, {2, 1}};
  const ember_index_attrs attrs{0};
  const std::string e = error_of([&] {
    vk.library_call(0, EMBER_LIB_INDEX_ADD, in, 2, &out, 1, &attrs);
    vk.synchronize(0);
  });
  EXPECT_NE(e.find("index_add: index out of range (7 for a dimension of size 3)"), std::string::npos) << e;
}

// lavapipe (Mesa 22.3) miscompiles a comparison of a sign-extended 32-bit value: int64_t(i) < 3
// was false for i = 0, 1, 2, so arange(7) < 3 gave all false (the emitter widens without the
// sign-extension instruction, e_i2l).
TEST(VulkanTest, WidenedIntegersCompareCorrectly) {
  REQUIRE_VULKAN();
  Array i = arange(0, 7, 1, DType::I64, kVk);
  EXPECT_EQ(lt(i, 3).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 0, 0, 0, 0}));
  Array n = from_vector(std::vector<int32_t>{-2, 0, 1, 2, 3, 4, -5}, {7}, kVk);
  EXPECT_EQ(lt(cast(n, DType::I64), 3).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1, 0, 0, 1}));
  EXPECT_EQ(cast(n, DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{-2, 0, 1, 2, 3, 4, -5}));
  EXPECT_EQ(linspace(0.1, 0.7, 7, {DType::F64, kVk}).to_vector<double>().front(), 0.1);
}

TEST(VulkanTest, KernelErrorsNameTheOpAndTheValues) {
  REQUIRE_VULKAN();
  Array x = from_vector(std::vector<float>{1, 2, 3}, {3}, kVk);
  Array idx = from_vector(std::vector<int64_t>{0, 7}, {2}, kVk);
  const std::string gather_error = error_of([&] { (void)index_select(x, 0, idx).to_vector<float>(); });
  EXPECT_NE(gather_error.find("index out of range (7 for a dimension of size 3)"), std::string::npos) << gather_error;
  Array a = from_vector(std::vector<int32_t>{4, 5}, {2}, kVk), z = from_vector(std::vector<int32_t>{2, 0}, {2}, kVk);
  const std::string div_error = error_of([&] { (void)floor_div(a, z).to_vector<int32_t>(); });
  EXPECT_NE(div_error.find("integer division by zero"), std::string::npos) << div_error;
  // The queue stays usable after an error.
  EXPECT_EQ(floor_div(a, 2).to_vector<int32_t>(), (std::vector<int32_t>{2, 2}));
}

// Several checked kernels in one batch, two of them failing, none waited for (deferred kernel
// checks, runtime/kernel_checks.h): each launch has its own error word, so each failed array
// throws its own error, and the good results, computed between and after them, read as usual.
TEST(VulkanTest, EveryFailingKernelOfABatchReportsItsOwnError) {
  REQUIRE_VULKAN();
  Array x = from_vector(std::vector<float>{1, 2, 3}, {3}, kVk);
  Array a = from_vector(std::vector<int32_t>{4, 5}, {2}, kVk), z = from_vector(std::vector<int32_t>{2, 0}, {2}, kVk);
  Array bad_gather = index_select(x, 0, from_vector(std::vector<int64_t>{1, 9}, {2}, kVk));
  Array good_gather = index_select(x, 0, from_vector(std::vector<int64_t>{2, 0}, {2}, kVk));
  Array bad_division = add(floor_div(a, z), 1);
  Array good_division = floor_div(a, 2);
  eval({bad_gather, good_gather, bad_division, good_division});
  EXPECT_EQ(good_division.to_vector<int32_t>(), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(good_gather.to_vector<float>(), (std::vector<float>{3, 1}));
  const std::string gather_error = error_of([&] { (void)bad_gather.to_vector<float>(); });
  EXPECT_NE(gather_error.find("index_select: index out of range (9 for a dimension of size 3)"), std::string::npos)
      << gather_error;
  const std::string div_error = error_of([&] { (void)mul(bad_division, 2).to_vector<int32_t>(); });
  EXPECT_NE(div_error.find("floor_div (at vulkan_test.cpp:"), std::string::npos) << div_error;
  EXPECT_NE(div_error.find("floor_div: integer division by zero"), std::string::npos) << div_error;
}

// A gather with two bad indices far apart: with small bindings (the small-bindings configuration,
// EMBER_VULKAN_MAX_BINDING=4096) the device runs it in pieces, each of which reports the error.
// The read names it once, and reads of other arrays are not disturbed by the second report.
TEST(VulkanTest, AGatherRunInPiecesReportsItsErrorOnce) {
  REQUIRE_VULKAN();
  Array x = from_vector(std::vector<float>{1, 2, 3}, {3}, kVk);
  std::vector<int64_t> idx(4096, 1);
  idx.front() = 11;
  idx.back() = 12;
  Array bad = index_select(x, 0, from_vector(idx, {4096}, kVk));
  Array other = mul(x, 2.0);
  eval({bad, other});
  EXPECT_NO_THROW(synchronize(kVk));  // takes both reports: one fails the gather's check
  EXPECT_EQ(other.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  const std::string error = error_of([&] { (void)bad.to_vector<float>(); });
  EXPECT_NE(error.find("index_select: index out of range"), std::string::npos) << error;
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(VulkanTest, RandomNumbersAreTheCpusBitForBit) {
  REQUIRE_VULKAN();
  Array u = uniform({1000}, -1, 1, {.seed = 42, .device = kVk});
  Array uc = uniform({1000}, -1, 1, {.seed = 42, .device = Device::cpu()});
  EXPECT_EQ(bits(u), bits(uc));
  Array b = bernoulli({777}, 0.3, {.seed = 9, .device = kVk});
  Array bc = bernoulli({777}, 0.3, {.seed = 9, .device = Device::cpu()});
  EXPECT_EQ(b.to_vector<double>(), bc.to_vector<double>());
}

TEST(VulkanTest, EveryDtypeMovesBetweenDevicesUnchanged) {
  REQUIRE_VULKAN();
  const std::vector<double> vals = {0.0, -0.0, 1.0, -3.0, 255.0, 65504.0, 1e-3, 7.5};
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::Bool}) {
    SCOPED_TRACE(dtype_name(dt));
    Array c = cast(from_vector(vals, {8}, Device::cpu()), dt);
    Array v = to_device(c, kVk);
    EXPECT_EQ(v.device(), kVk);
    Array back = to_device(v, Device::cpu());
    std::vector<double> want = c.to_vector<double>(), got = back.to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(std::memcmp(&got[i], &want[i], 8) == 0) << i << ": " << got[i] << " vs " << want[i];
    // A kernel on the device reads and writes the dtype too.
    Array twice = dt == DType::Bool ? logical_or(v, v) : add(v, cast(zeros({8}, {.device = kVk}), dt));
    EXPECT_EQ(to_device(twice, Device::cpu()).to_vector<double>(), want);
  }
}

TEST(VulkanTest, MatmulMatchesTheReference) {
  REQUIRE_VULKAN();
  // The last three take the tiled shader (both output dims >= 32), with partial tiles.
  for (auto [m, k, n] : {std::tuple{1, 1, 1}, {7, 13, 5}, {33, 64, 17}, {2, 300, 3}, {64, 16, 64}, {70, 41, 66},
                         {130, 300, 33}}) {
    Array a = uniform({3, int64_t(m), int64_t(k)}, -1, 1, {.seed = 1, .device = kVk});
    Array b = uniform({int64_t(n), int64_t(k)}, -1, 1, {.seed = 2, .device = kVk});
    Array got = matmul(a, transpose(b, 0, 1));  // batch broadcast and a strided operand
    Array want = matmul(to_device(a, Device::reference()), transpose(to_device(b, Device::reference()), 0, 1));
    EXPECT_TRUE(all_close(got.to_vector<double>(), want.to_vector<double>(), 1e-5, 1e-5)) << m << "x" << k << "x" << n;
  }
  Array ia = from_vector(std::vector<int64_t>{1, 2, 3, 4}, {2, 2}, kVk);
  EXPECT_EQ(matmul(ia, ia).to_vector<int64_t>(), (std::vector<int64_t>{7, 10, 15, 22}));
}

// The tiled matmul on every floating dtype, with NaN and infinities in some rows and columns:
// each output sums k in order as the reference does, so NaN, inf and their absence land where
// the reference puts them, and finite values agree to rounding.
TEST(VulkanTest, TiledMatmulMatchesTheReferenceOnEveryFloatDtypeWithNonFiniteValues) {
  REQUIRE_VULKAN();
  const int64_t m = 67, k = 35, n = 70;
  std::vector<double> av(size_t(m * k)), bv(size_t(k * n));
  for (size_t i = 0; i < av.size(); ++i) av[i] = double(int64_t(i * 7919 % 97) - 48) / 16.0;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = double(int64_t(i * 104729 % 89) - 44) / 16.0;
  av[size_t(3 * k + 5)] = kNan;   // row 3 of the output: NaN
  av[size_t(66 * k + 34)] = kInf;  // row 66 (the last, a partial tile): +-inf or NaN
  bv[size_t(2 * n + 69)] = -kInf;  // column 69 (partial tile)
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    if (!(Backend::get(DeviceKind::Vulkan).properties(0).dtypes & EMBER_DTYPE_BIT(int(dt)))) continue;
    Array a = cast(from_vector(av, {m, k}, Device::cpu()), dt), b = cast(from_vector(bv, {k, n}, Device::cpu()), dt);
    Array got = matmul(to_device(a, kVk), to_device(b, kVk));
    Array want = matmul(to_device(a, Device::reference()), to_device(b, Device::reference()));
    const double tol = dt == DType::F64 ? 1e-12 : dt == DType::F32 ? 1e-5 : 1e-2;
    EXPECT_TRUE(all_close(got.to_vector<double>(), want.to_vector<double>(), tol, tol)) << dtype_name(dt);
  }
}

// The same small model trained on vulkan:0 and on the reference backend (f32 forward,
// backward and Adam): the parameters agree to rounding.
TEST(VulkanTest, TrainingMatchesTheReference) {
  REQUIRE_VULKAN();
  auto train = [](Device dev) {
    nn::Sequential m(nn::Linear({.in = 6, .out = 8, .seed = 3, .device = dev}), nn::ReLU(),
                     nn::Linear({.in = 8, .out = 3, .seed = 4, .device = dev}));
    optim::Adam opt(m, {.lr = 0.01});
    Array in = uniform({16, 6}, -1, 1, {.seed = 5, .device = dev});
    Array target = from_vector(std::vector<int64_t>{0, 1, 2, 1, 0, 2, 2, 1, 0, 0, 1, 2, 2, 1, 1, 0}, {16}, dev);
    std::vector<double> losses;
    for (int step = 0; step < 5; ++step) {
      Array loss = nn::cross_entropy(m.forward(in), target);
      losses.push_back(loss.item<double>());
      opt.step(loss.backward());
    }
    for (auto& np : m.named_parameters())
      for (double v : np.param.array().to_vector<double>()) losses.push_back(v);
    return losses;
  };
  EXPECT_TRUE(all_close(train(kVk), train(Device::reference()), 1e-4, 1e-5));
}

// Compiled SPIR-V is kept in the core's compiled-program cache (EMBER_CACHE_DIR) and read back
// when the kernel is compiled again; a damaged entry (truncated, or one word changed) is compiled
// again and replaced, never handed to the driver.
TEST(VulkanTest, ShadersAreCachedOnDiskAndDamagedFilesAreCompiledAgain) {
  REQUIRE_VULKAN();
  char templ[] = "/tmp/ember_spirv_cache.XXXXXX";
  ASSERT_NE(mkdtemp(templ), nullptr);
  const std::string dir = templ;
  setenv("EMBER_CACHE_DIR", dir.c_str(), 1);
  Backend& be = Backend::get(DeviceKind::Vulkan);
  const size_t capacity = be.program_capacity();
  auto entries = [&] {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename().string().rfind("vulkan-", 0) == 0 && e.path().extension() == ".bin")
        files.push_back(e.path().string());
    return files;
  };
  auto contents = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  // A kernel no other test compiles (its constant is baked into the shader): (x + 1234.5) * x.
  auto run = [] {
    Array x = from_vector(std::vector<float>{1.5f, -2.0f, 0.0f}, {3}, kVk);
    return mul(add(x, full({3}, 1234.5, {.device = kVk})), x).to_vector<float>();
  };
  auto evict = [&] {  // the core's program cache forgets the kernel: the next use compiles it
    be.set_program_capacity(1);
    (void)neg(from_vector(std::vector<float>{1.0f}, {1}, kVk)).to_vector<float>();
    be.set_program_capacity(capacity);
  };
  const std::vector<float> want = {1.5f * 1236.0f, -2.0f * 1232.5f, 0.0f};
  const program_disk_cache::Counters c0 = program_disk_cache::counters();
  EXPECT_EQ(run(), want);
  evict();  // compiles evict's own kernel too, before the files are listed
  std::vector<std::string> files = entries();
  ASSERT_FALSE(files.empty()) << "no SPIR-V stored in " << dir;
  EXPECT_GE(program_disk_cache::counters().stores, c0.stores + int64_t(files.size()));
  std::vector<std::string> original;
  for (const std::string& f : files) original.push_back(contents(f));
  const program_disk_cache::Counters c1 = program_disk_cache::counters();
  EXPECT_EQ(run(), want) << "from the cache";
  EXPECT_EQ(entries().size(), files.size()) << "a cached kernel was compiled into a new entry";
  EXPECT_GT(program_disk_cache::counters().hits, c1.hits);
  EXPECT_EQ(program_disk_cache::counters().stores, c1.stores) << "a cached kernel was stored again";
  // Damage every entry: the first truncated, the others with one word flipped in the middle.
  for (size_t i = 0; i < files.size(); ++i) {
    std::string d = original[i];
    if (i == 0) d.resize(d.size() / 2);
    else d[d.size() / 2] ^= 0x01;
    std::ofstream(files[i], std::ios::binary | std::ios::trunc) << d;
  }
  evict();
  EXPECT_EQ(run(), want) << "after the cache entries were damaged";
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(contents(files[i]), original[i]) << files[i] << " was not replaced";
  unsetenv("EMBER_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

// The profiler records the device's own times (timestamp queries, src/backend/vulkan/timing.cpp),
// not the time to enqueue: a 384 x 384 x 384 matmul, measured after a first run compiled its
// shaders, takes most of the wall time from its enqueue to the end of synchronize() as the host
// measures it; the records of the device's in-order queue do not overlap; the result is right.
// Work the device does not run (a host fallback) keeps the host's time.
TEST(VulkanTest, TheProfilerTimesKernelsOnTheDevice) {
  REQUIRE_VULKAN();
  Array a = uniform({384, 384}, -1, 1, {.seed = 21, .device = kVk});
  Array b = uniform({384, 384}, -1, 1, {.seed = 22, .device = kVk});
  (void)add(exp(matmul(a, b)), 1.0).to_vector<float>();  // compiles the pipelines
  profiler_start();
  const auto t0 = std::chrono::steady_clock::now();
  Array y = matmul(a, b);
  y.eval();
  Array z = add(exp(y), 1.0);
  z.eval();
  synchronize();
  const double wall_ns =
      double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  std::vector<KernelRecord> records = profiler_stop();
  // With bindings smaller than the operands (EMBER_VULKAN_MAX_BINDING) the matmul takes the host
  // fallback, which the host times; the elementwise kernel still runs on the device, in pieces.
  const bool matmul_on_device =
      Backend::get(DeviceKind::Vulkan).properties(0).max_binding_bytes >= uint64_t(384) * 384 * 4;
  std::vector<KernelRecord> device;
  const KernelRecord* mm = nullptr;
  for (const KernelRecord& r : records) {
    if (r.device != kVk.str()) continue;
    EXPECT_GE(r.duration_ns, 0) << r.name;
    if (r.name == "matmul") {
      mm = &r;
      if (!matmul_on_device) {
        EXPECT_FALSE(r.device_timed) << "a host fallback's time is the host's";
        continue;
      }
    }
    EXPECT_TRUE(r.device_timed) << r.name << " (" << r.ops << ") kept the host's time";
    device.push_back(r);
  }
  ASSERT_NE(mm, nullptr) << profile_summary(records);
  ASSERT_GE(device.size(), 1u) << profile_summary(records);
  if (matmul_on_device) {
    EXPECT_GT(double(mm->duration_ns), 0.25 * wall_ns)
        << "the matmul's device time " << mm->duration_ns << " ns is not most of the " << wall_ns << " ns waited";
    EXPECT_LE(double(mm->duration_ns), wall_ns);
  }
  for (size_t i = 1; i < device.size(); ++i)
    EXPECT_GE(device[i].start_ns, device[i - 1].start_ns + device[i - 1].duration_ns)
        << device[i - 1].name << " and " << device[i].name << " overlap on one in-order queue";
  const Device cpu = Device::cpu();
  const Array want = add(exp(matmul(to_device(a, cpu), to_device(b, cpu))), 1.0);
  EXPECT_TRUE(all_close(to_device(z, cpu), want.to_vector<double>(), 1e-4, 1e-4));
}

}  // namespace
}  // namespace ember
