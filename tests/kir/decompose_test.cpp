// The KIR decomposition pass (src/kir/decompose.cpp): every rule gives the value of the
// instruction it replaces, bit for bit (a NaN stays a NaN), for every dtype, on pairs of values
// that include NaN, infinities, signed zeros and the integer extremes: the original program and
// the decomposed one run on the reference backend (and the decomposed one on the CPU backend)
// from the same inputs. A target that lacks a rule's building blocks is refused with the
// instruction named. On a device with a small KIR table (the reference device under
// EMBER_REFERENCE_WEAK=1, ctest backend.weak_device) fused kernels are compiled for the device
// instead of running on the host fallback.
#include "kir/decompose.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "backend/kir_harness.h"
#include "ember/ember.h"
#include "kir/builder.h"

namespace ember::testing {
namespace {

const std::set<uint16_t> kRuleOps = {EMBER_KIR_NEG, EMBER_KIR_ABS, EMBER_KIR_CEIL, EMBER_KIR_MAX,
                                     EMBER_KIR_MIN, EMBER_KIR_GT,  EMBER_KIR_GE,   EMBER_KIR_NE,
                                     EMBER_KIR_NOT, EMBER_KIR_AND, EMBER_KIR_OR};

// The values both operands range over, per dtype (written as that dtype stores them).
std::vector<uint8_t> values_of(DType dt, std::vector<double>* doubles = nullptr) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<uint8_t> bytes;
  auto add = [&](const void* p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  if (is_floating(dt)) {
    for (double v : {0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, -0.5, 3.0, -7.25, 1e30, -1e-30, inf, -inf, nan}) {
      if (doubles) doubles->push_back(v);
      if (dt == DType::F64) add(&v, 8);
      else if (dt == DType::F32) { float f = float(v); add(&f, 4); }
      else { uint16_t h = dt == DType::F16 ? float_to_half(float(v)) : float_to_bf16(float(v)); add(&h, 2); }
    }
    return bytes;
  }
  const std::vector<int64_t> ints = {0, 1, -1, 2, -7, 127, -128, 255, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX};
  for (int64_t v : ints) {
    switch (dt) {
      case DType::I64: case DType::U64: add(&v, 8); break;
      case DType::I32: { int32_t x = int32_t(v); add(&x, 4); break; }
      case DType::Bool: { uint8_t x = v != 0; add(&x, 1); break; }
      default: { uint8_t x = uint8_t(v); add(&x, 1); break; }  // u8
    }
  }
  return bytes;
}

// The program y = op(x0[, x1]) over every pair of values.
struct OpCase {
  std::vector<ember_kir_inst> insts;
  std::vector<uint8_t> arg_dtypes;
  HLaunch launch;
};
OpCase op_case(uint16_t op, DType dt) {
  const bool unary = op == EMBER_KIR_NEG || op == EMBER_KIR_ABS || op == EMBER_KIR_CEIL || op == EMBER_KIR_NOT;
  const bool compare = op == EMBER_KIR_GT || op == EMBER_KIR_GE || op == EMBER_KIR_NE;
  const DType out = compare ? DType::Bool : dt;
  const std::vector<uint8_t> vals = values_of(dt);
  const size_t es = dtype_size(dt), n = vals.size() / es;
  OpCase c;
  c.arg_dtypes = {uint8_t(out), uint8_t(dt), uint8_t(dt)};
  auto inst = [](uint16_t o, DType t, int32_t a, int32_t b, int32_t arg) {
    ember_kir_inst x{};
    x.op = o;
    x.dtype = uint8_t(t);
    x.a = a;
    x.b = b;
    x.c = -1;
    x.arg = arg;
    return x;
  };
  c.insts = {inst(EMBER_KIR_LOAD, dt, -1, -1, 1), inst(EMBER_KIR_LOAD, dt, -1, -1, 2),
             inst(op, out, 0, unary ? -1 : 1, -1), inst(EMBER_KIR_STORE, out, 2, -1, 0)};
  HLaunch& L = c.launch;
  L.outer_rank = 2;
  L.shape = {int64_t(n), int64_t(n)};
  HArg y, x0, x1;
  y.dtype = out;
  y.bytes.assign(n * n * dtype_size(out), 0);
  y.strides = {int64_t(n), 1};
  x0.dtype = x1.dtype = dt;
  x0.bytes = x1.bytes = vals;
  x0.strides = {1, 0};
  x1.strides = {0, 1};
  L.args = {y, x0, x1};
  return c;
}

// The ABI view of a case's program (valid while the case lives).
ember_kir_program program_of(const OpCase& c) {
  ember_kir_program prog{};
  prog.name = "decompose_test";
  prog.n_insts = int32_t(c.insts.size());
  prog.insts = c.insts.data();
  prog.n_args = int32_t(c.arg_dtypes.size());
  prog.arg_dtypes = c.arg_dtypes.data();
  return prog;
}

std::vector<std::vector<uint8_t>> run(Backend& be, const std::vector<ember_kir_inst>& insts,
                                      const std::vector<uint8_t>& arg_dtypes, const HLaunch& h, std::string* error) {
  Uploaded u = upload(be, h);
  ember_kir_program prog{};
  prog.name = "decompose_test";
  prog.n_insts = int32_t(insts.size());
  prog.insts = insts.data();
  prog.n_args = int32_t(arg_dtypes.size());
  prog.arg_dtypes = arg_dtypes.data();
  ember_program p = nullptr;
  ember_status st{};
  if (be.table().program_create(0, &prog, &p, &st) != EMBER_OK) {
    *error = st.message;
    return {};
  }
  const int32_t rc = be.table().program_run(be.queue(0), p, &u.launch, 0, &st);
  be.table().program_destroy(p);
  if (rc != EMBER_OK) {
    *error = st.message;
    return {};
  }
  return download(be, h, u);
}

// Equal element by element: the same bits, or both NaN.
::testing::AssertionResult same(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType dt) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  const size_t es = dtype_size(dt);
  for (size_t i = 0; i < got.size() / es; ++i) {
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) == 0) continue;
    if (is_floating(dt) && std::isnan(element(got, dt, i)) && std::isnan(element(want, dt, i))) continue;
    return ::testing::AssertionFailure() << "element " << i << ": " << element(got, dt, i) << " instead of "
                                         << element(want, dt, i);
  }
  return ::testing::AssertionSuccess();
}

TEST(DecomposeTest, RulesGiveTheInstructionsValuesOnEveryDtype) {
  const kir::Spells small_table = [](uint16_t op, uint8_t) { return kRuleOps.count(op) == 0; };
  int checked = 0;
  for (uint16_t op : kRuleOps) {
    const bool logical = op == EMBER_KIR_NOT || op == EMBER_KIR_AND || op == EMBER_KIR_OR;
    for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U64, DType::U8,
                     DType::Bool}) {
      if (logical != (dt == DType::Bool || dt == DType::I32 || dt == DType::I64 || dt == DType::U8)) continue;
      if (dt == DType::Bool && !logical && op != EMBER_KIR_NE && op != EMBER_KIR_GT && op != EMBER_KIR_GE) continue;
      const std::string what = std::string(kir::op_name(ember_kir_op(op))) + " on " + std::string(dtype_name(dt));
      OpCase c = op_case(op, dt);
      const ember_kir_program prog = program_of(c);
      std::vector<ember_kir_inst> lowered;
      std::string why;
      ASSERT_TRUE(kir::decompose(prog, small_table, lowered, &why)) << what << ": " << why;
      for (const ember_kir_inst& in : lowered) ASSERT_TRUE(small_table(in.op, in.dtype)) << what;
      std::string e;
      const auto want = run(reference_backend(), c.insts, c.arg_dtypes, c.launch, &e);
      ASSERT_EQ(want.size(), 3u) << what << ": " << e;
      const DType out = DType(c.arg_dtypes[0]);
      const auto got = run(reference_backend(), lowered, c.arg_dtypes, c.launch, &e);
      ASSERT_EQ(got.size(), 3u) << what << ": " << e;
      EXPECT_TRUE(same(got[0], want[0], out)) << what << " (reference)";
      const auto on_cpu = run(cpu_backend(), lowered, c.arg_dtypes, c.launch, &e);
      ASSERT_EQ(on_cpu.size(), 3u) << what << ": " << e;
      EXPECT_TRUE(same(on_cpu[0], want[0], out)) << what << " (cpu)";
      ++checked;
    }
  }
  EXPECT_GE(checked, 50);
}

// A target without LT or GT cannot spell MAX: refused, naming the instruction and what is missing.
TEST(DecomposeTest, ATargetWithoutARulesPartsIsRefused) {
  OpCase c = op_case(EMBER_KIR_MAX, DType::F32);
  const ember_kir_program prog = program_of(c);
  std::vector<ember_kir_inst> lowered;
  std::string why;
  const kir::Spells no_order = [](uint16_t op, uint8_t) {
    return op != EMBER_KIR_MAX && op != EMBER_KIR_GT && op != EMBER_KIR_LT;
  };
  EXPECT_FALSE(kir::decompose(prog, no_order, lowered, &why));
  EXPECT_EQ(why, "instruction 2 ('max' on float32): no rule spells 'lt' on bool with what the target has");
  // Instructions the target spells are kept as they are.
  ASSERT_TRUE(kir::decompose(prog, [](uint16_t, uint8_t) { return true; }, lowered, &why));
  ASSERT_EQ(lowered.size(), c.insts.size());
  for (size_t i = 0; i < lowered.size(); ++i) EXPECT_EQ(std::memcmp(&lowered[i], &c.insts[i], sizeof lowered[i]), 0);
}

// The reference device with a small KIR table (ctest backend.weak_device): kernels with the
// instructions it lacks are compiled for it, decomposed, and give the CPU's values.
TEST(DecomposeTest, ADeviceWithASmallKirTableRunsTheKernels) {
  const Device dev = Device::reference();
  Backend& be = Backend::get(dev.kind);
  if (be.supports(0, EMBER_SUPPORT_KIR, EMBER_KIR_NEG, EMBER_F32)) {
    if (std::getenv("EMBER_REFERENCE_WEAK")) FAIL() << "EMBER_REFERENCE_WEAK is set but the device spells NEG";
    GTEST_SKIP() << "the reference device spells every instruction; ctest backend.weak_device runs this with "
                    "EMBER_REFERENCE_WEAK=1";
  }
  kir::Builder b;
  int y = b.add_arg(DType::F32), x = b.add_arg(DType::F32);
  b.store(y, b.emit(EMBER_KIR_NEG, DType::F32, b.load(x)));
  std::string unsupported;
  EXPECT_NE(be.program(0, b.program("neg"), b.structure_hash(), &unsupported), nullptr) << unsupported;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  auto compute = [&](Device d) {
    Array a = from_vector(std::vector<float>{1.5f, -0.0f, 0.0f, float(nan), float(inf), float(-inf), -2.5f, 0.5f},
                          {2, 4}, d);
    Array c = from_vector(std::vector<float>{-0.0f, 0.0f, float(nan), 1.0f, 3.0f, float(-inf), -2.5f, -0.5f}, {2, 4}, d);
    return std::vector<Array>{neg(a), abs(a), ceil(a), maximum(a, c), minimum(a, c), gt(a, c), ge(a, c), ne(a, c),
                              logical_not(gt(a, c)), logical_and(ge(a, c), ne(a, c)), logical_or(gt(a, c), lt(a, c)),
                              relu(neg(a))};
  };
  const std::vector<Array> on_dev = compute(dev), on_cpu = compute(Device::cpu());
  for (size_t i = 0; i < on_dev.size(); ++i) {
    const std::vector<double> g = on_dev[i].to_vector<double>(), w = on_cpu[i].to_vector<double>();
    ASSERT_EQ(g.size(), w.size());
    for (size_t j = 0; j < g.size(); ++j) {
      if (std::isnan(g[j]) && std::isnan(w[j])) continue;
      EXPECT_TRUE(g[j] == w[j] && std::signbit(g[j]) == std::signbit(w[j]))
          << "result " << i << " element " << j << ": " << g[j] << " vs " << w[j];
    }
  }
}

}  // namespace
}  // namespace ember::testing
