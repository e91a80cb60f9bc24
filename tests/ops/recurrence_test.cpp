// lstm_recurrence and gru_recurrence (include/ember/ops_library.h) on every backend: values and
// gradients against the time loops written here from plain ops (matmul, chunk, sigmoid, tanh) and
// differentiated by autograd, in f64, in both directions (LSTM: gradients reaching h only, c only
// or both); NaN and infinities in the input projection; second derivatives (create_graph); f32,
// f16 and bf16 against f64; a batch large enough for oneDNN's products and the thread-split gate
// math; that nn::LSTM and nn::GRU take the library calls; and errors on bad arguments.
#include <cmath>
#include <limits>
#include <random>

#include "ember/autograd.h"
#include "ember/nn/recurrent.h"
#include "graph/node.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

class LstmRecurrenceTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

Array random_on(const Shape& shape, uint32_t seed, Device dev, DType dt = DType::F64, double lo = -1.0,
                double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(size_t(shape.numel()));
  for (double& x : v) x = u(gen);
  return cast(from_vector(v, shape, dev), dt);
}

// The time loop from plain ops, as nn::LSTM builds it without the library call.
LstmRecurrenceResult plain_lstm(const Array& gi, const Array& h0, const Array& c0, const Array& w_hh, bool reverse) {
  const int64_t L = gi.shape()[0];
  std::vector<Array> hs(static_cast<size_t>(L)), cs(static_cast<size_t>(L));
  Array h = h0, c = c0;
  for (int64_t s = 0; s < L; ++s) {
    const int64_t t = reverse ? L - 1 - s : s;
    std::vector<Array> a = chunk(add(select(gi, 0, t), matmul(h, transpose(w_hh, 0, 1))), 4, 1);
    c = add(mul(sigmoid(a[1]), c), mul(sigmoid(a[0]), tanh(a[2])));
    h = mul(sigmoid(a[3]), tanh(c));
    hs[size_t(t)] = h;
    cs[size_t(t)] = c;
  }
  return {stack(hs, 0), stack(cs, 0)};
}

struct Operands {
  Array gi, h0, c0, w;
};
Operands operands(int64_t L, int64_t N, int64_t H, Device dev, uint32_t seed, DType dt = DType::F64) {
  return {random_on({L, N, 4 * H}, seed, dev, dt, -2, 2), random_on({N, H}, seed + 1, dev, dt),
          random_on({N, H}, seed + 2, dev, dt), random_on({4 * H, H}, seed + 3, dev, dt, -0.6, 0.6)};
}

// Which outputs the loss reads: the whole h, the whole c, or only the final h (as nn's h_n).
enum class Loss { Both, HOnly, COnly, LastH };

Array loss_of(const LstmRecurrenceResult& r, Loss which, bool reverse) {
  const int64_t L = r.h.shape()[0];
  const Array wh = random_on(r.h.shape(), 91, r.h.device(), r.h.dtype());
  const Array wc = random_on(r.c.shape(), 92, r.c.device(), r.c.dtype());
  switch (which) {
    case Loss::HOnly: return sum(mul(r.h, wh));
    case Loss::COnly: return sum(mul(r.c, wc));
    case Loss::LastH: return sum(mul(select(r.h, 0, reverse ? 0 : L - 1), select(wh, 0, 0)));
    default: return add(sum(mul(r.h, wh)), sum(mul(r.c, wc)));
  }
}

// Values of both outputs and the gradients of all four operands, library call against plain ops.
void check_against_plain(const Operands& o, bool reverse, Loss which, double tol, const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<Array> leaves{o.gi.require_grad(), o.h0.require_grad(), o.c0.require_grad(), o.w.require_grad()};
  LstmRecurrenceResult got = lstm_recurrence(leaves[0], leaves[1], leaves[2], leaves[3], {.reverse = reverse});
  LstmRecurrenceResult want = plain_lstm(leaves[0], leaves[1], leaves[2], leaves[3], reverse);
  EXPECT_TRUE(all_close(got.h, want.h.to_vector<double>(), tol, tol)) << "h";
  EXPECT_TRUE(all_close(got.c, want.c.to_vector<double>(), tol, tol)) << "c";
  Gradients gg = loss_of(got, which, reverse).backward();
  Gradients gw = loss_of(want, which, reverse).backward();
  const char* names[] = {"gi", "h0", "c0", "w_hh"};
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_TRUE(all_close(leaves[i].grad(gg), leaves[i].grad(gw).to_vector<double>(), tol, tol)) << "d" << names[i];
}

TEST_P(LstmRecurrenceTest, MatchesPlainOpsInBothDirections) {
  for (bool reverse : {false, true}) {
    const std::string dir = reverse ? "reverse" : "forward";
    check_against_plain(operands(5, 3, 4, dev, 1), reverse, Loss::Both, 1e-12, dir + " 5x3x4");
    check_against_plain(operands(1, 1, 1, dev, 5), reverse, Loss::Both, 1e-12, dir + " one step, one unit");
    check_against_plain(operands(7, 2, 9, dev, 9), reverse, Loss::HOnly, 1e-12, dir + " gradient of h only");
    check_against_plain(operands(4, 3, 5, dev, 13), reverse, Loss::COnly, 1e-12, dir + " gradient of c only");
    check_against_plain(operands(6, 2, 3, dev, 17), reverse, Loss::LastH, 1e-12, dir + " final h only");
  }
}

// Sizes the CPU backend runs with oneDNN's products and the gate math split over threads (64 rows
// of 256 units): f32 against f64 on the same device, and f64 against plain ops.
TEST_P(LstmRecurrenceTest, LargeBatchMatchesF64) {
  const Operands o = operands(3, 64, 256, dev, 21);
  LstmRecurrenceResult want = lstm_recurrence(o.gi, o.h0, o.c0, o.w);
  LstmRecurrenceResult got = lstm_recurrence(cast(o.gi, DType::F32), cast(o.h0, DType::F32), cast(o.c0, DType::F32),
                                             cast(o.w, DType::F32));
  EXPECT_EQ(got.h.dtype(), DType::F32);
  EXPECT_TRUE(all_close(got.h, want.h.to_vector<double>(), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(got.c, want.c.to_vector<double>(), 1e-4, 1e-5));
  if (dev.kind != DeviceKind::Reference)  // (the reference's scalar loops take seconds here)
    check_against_plain(o, true, Loss::Both, 1e-11, "64x256 f64");
}

// Infinities saturate the gates (sigmoid(inf) = 1, sigmoid(-inf) = 0, tanh(+-inf) = +-1) and a NaN
// poisons its row from its step on, in the library call as in the plain ops.
TEST_P(LstmRecurrenceTest, NanAndInfinityAsPlainOps) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dt : {DType::F64, DType::F32}) {
    const int64_t L = 3, N = 3, H = 2;
    std::vector<double> g = random_on({L, N, 4 * H}, 31, Device::reference()).to_vector<double>();
    g[0] = inf;           // t 0, row 0: i saturates to 1
    g[1 * 4 * H + 2] = -inf;  // t 0, row 1: f saturates to 0
    g[2 * 4 * H + 5] = inf;   // t 0, row 2: g = 1
    g[(1 * N + 0) * 4 * H + 6] = -inf;  // t 1, row 0: o = 0
    g[(2 * N + 2) * 4 * H + 3] = nan;   // t 2, row 2, unit 1: NaN in i
    Operands o = operands(L, N, H, dev, 33, dt);
    o.gi = cast(from_vector(g, {L, N, 4 * H}, dev), dt);
    for (bool reverse : {false, true})
      check_against_plain(o, reverse, Loss::Both, dt == DType::F64 ? 1e-12 : 1e-5,
                          std::string(dtype_name(dt)) + (reverse ? " reverse" : " forward"));
    LstmRecurrenceResult r = lstm_recurrence(o.gi, o.h0, o.c0, o.w);
    std::vector<double> h = r.h.to_vector<double>();
    EXPECT_TRUE(std::isnan(h[(2 * N + 2) * H + 1])) << "the NaN's own unit";
    EXPECT_FALSE(std::isnan(h[(2 * N + 1) * H + 1])) << "another row of the same step";
  }
}

// With create_graph the gradient is built from plain ops, so it can be differentiated again:
// second derivatives through the library call against those through the plain loop.
TEST_P(LstmRecurrenceTest, SecondDerivativesMatchPlainOps) {
  const Operands o = operands(3, 2, 3, dev, 41);
  for (bool reverse : {false, true}) {
    auto second = [&](bool library) {
      std::vector<Array> leaves{o.gi.require_grad(), o.h0.require_grad(), o.c0.require_grad(), o.w.require_grad()};
      LstmRecurrenceResult r = library ? lstm_recurrence(leaves[0], leaves[1], leaves[2], leaves[3], {.reverse = reverse})
                                       : plain_lstm(leaves[0], leaves[1], leaves[2], leaves[3], reverse);
      std::vector<Array> d = grad(loss_of(r, Loss::Both, reverse), leaves, {.create_graph = true});
      Array s = add(sum(mul(d[0], d[0])), add(sum(mul(d[3], sum(d[1]))), sum(d[2])));
      return grad(s, leaves, {.materialize_grads = true});
    };
    std::vector<Array> got = second(true), want = second(false);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(all_close(got[i], want[i].to_vector<double>(), 1e-11, 1e-11))
          << (reverse ? "reverse" : "forward") << " operand " << i;
  }
}

// f16 and bf16 compute in f32 and round once per stored value.
TEST_P(LstmRecurrenceTest, HalfDtypesCloseToF32) {
  const Operands o = operands(6, 3, 8, dev, 51, DType::F32);
  LstmRecurrenceResult want = lstm_recurrence(o.gi, o.h0, o.c0, o.w);
  for (DType dt : {DType::F16, DType::BF16}) {
    std::vector<Array> leaves{cast(o.gi, dt).require_grad(), cast(o.h0, dt).require_grad(),
                              cast(o.c0, dt).require_grad(), cast(o.w, dt).require_grad()};
    LstmRecurrenceResult got = lstm_recurrence(leaves[0], leaves[1], leaves[2], leaves[3]);
    EXPECT_EQ(got.h.dtype(), dt);
    const double tol = dt == DType::F16 ? 5e-3 : 3e-2;
    EXPECT_TRUE(all_close(got.h, want.h.to_vector<double>(), tol, tol)) << dtype_name(dt);
    EXPECT_TRUE(all_close(got.c, want.c.to_vector<double>(), tol, tol)) << dtype_name(dt);
    Gradients g = sum(got.h).backward();
    EXPECT_EQ(leaves[3].grad(g).dtype(), dt);
    EXPECT_TRUE(std::isfinite(sum(cast(leaves[3].grad(g), DType::F32)).item<double>()));
  }
}

TEST_P(LstmRecurrenceTest, EmptyBatchAndBadArguments) {
  LstmRecurrenceResult e = lstm_recurrence(zeros({3, 0, 8}, {.device = dev}), zeros({0, 2}, {.device = dev}),
                                           zeros({0, 2}, {.device = dev}), zeros({8, 2}, {.device = dev}));
  EXPECT_EQ(e.h.shape(), Shape({3, 0, 2}));
  EXPECT_EQ(e.h.to_vector<float>().size(), 0u);
  const Operands o = operands(2, 3, 4, dev, 61);
  EMBER_EXPECT_ERROR(lstm_recurrence(reshape(o.gi, {6, 16}), o.h0, o.c0, o.w), "lstm_recurrence", "[L, N, 4H]", "[6, 16]");
  EMBER_EXPECT_ERROR(lstm_recurrence(slice(o.gi, 2, 0, 15), o.h0, o.c0, o.w), "lstm_recurrence", "[2, 3, 15]");
  EMBER_EXPECT_ERROR(lstm_recurrence(o.gi, o.h0, o.c0, transpose(o.w, 0, 1)), "lstm_recurrence", "w_hh", "[16, 4]",
                   "[4, 16]");
  EMBER_EXPECT_ERROR(lstm_recurrence(o.gi, slice(o.h0, 0, 0, 2), o.c0, o.w), "lstm_recurrence", "h0", "[3, 4]", "[2, 4]");
  EMBER_EXPECT_ERROR(lstm_recurrence(o.gi, o.h0, reshape(o.c0, {4, 3}), o.w), "lstm_recurrence", "c0", "[4, 3]");
  EMBER_EXPECT_ERROR(lstm_recurrence(o.gi, o.h0, cast(o.c0, DType::F32), o.w), "lstm_recurrence", "c0", "float32", "float64");
  EMBER_EXPECT_ERROR(lstm_recurrence(cast(o.gi, DType::I32), cast(o.h0, DType::I32), cast(o.c0, DType::I32),
                                   cast(o.w, DType::I32)),
                   "lstm_recurrence", "floating", "int32");
}

EMBER_OP_SUITE(LstmRecurrenceTest);

// ---- GRU ----------------------------------------------------------------------------------------
class GruRecurrenceTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

// The GRU loop from plain ops, as nn::GRU builds it without the library call.
Array plain_gru(const Array& gi, const Array& h0, const Array& w_hh, const Array& b_hh, bool reverse) {
  const int64_t L = gi.shape()[0];
  std::vector<Array> hs(static_cast<size_t>(L));
  Array h = h0;
  for (int64_t s = 0; s < L; ++s) {
    const int64_t t = reverse ? L - 1 - s : s;
    std::vector<Array> a = chunk(select(gi, 0, t), 3, 1);
    std::vector<Array> b = chunk(add(matmul(h, transpose(w_hh, 0, 1)), b_hh), 3, 1);
    Array r = sigmoid(add(a[0], b[0])), z = sigmoid(add(a[1], b[1]));
    Array n = tanh(add(a[2], mul(r, b[2])));
    h = add(n, mul(z, sub(h, n)));
    hs[size_t(t)] = h;
  }
  return stack(hs, 0);
}

struct GruOperands {
  Array gi, h0, w, b;
};
GruOperands gru_operands(int64_t L, int64_t N, int64_t H, Device dev, uint32_t seed, DType dt = DType::F64) {
  return {random_on({L, N, 3 * H}, seed, dev, dt, -2, 2), random_on({N, H}, seed + 1, dev, dt),
          random_on({3 * H, H}, seed + 2, dev, dt, -0.6, 0.6), random_on({3 * H}, seed + 3, dev, dt)};
}

void check_gru_against_plain(const GruOperands& o, bool reverse, bool last_only, double tol, const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<Array> leaves{o.gi.require_grad(), o.h0.require_grad(), o.w.require_grad(), o.b.require_grad()};
  Array got = gru_recurrence(leaves[0], leaves[1], leaves[2], leaves[3], {.reverse = reverse});
  Array want = plain_gru(leaves[0], leaves[1], leaves[2], leaves[3], reverse);
  EXPECT_TRUE(all_close(got, want.to_vector<double>(), tol, tol)) << "h";
  const int64_t L = got.shape()[0];
  const Array wh = random_on(got.shape(), 93, got.device(), got.dtype());
  auto loss = [&](const Array& h) {
    return last_only ? sum(mul(select(h, 0, reverse ? 0 : L - 1), select(wh, 0, 0))) : sum(mul(h, wh));
  };
  Gradients gg = loss(got).backward(), gw = loss(want).backward();
  const char* names[] = {"gi", "h0", "w_hh", "b_hh"};
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_TRUE(all_close(leaves[i].grad(gg), leaves[i].grad(gw).to_vector<double>(), tol, tol)) << "d" << names[i];
}

TEST_P(GruRecurrenceTest, MatchesPlainOpsInBothDirections) {
  for (bool reverse : {false, true}) {
    const std::string dir = reverse ? "reverse" : "forward";
    check_gru_against_plain(gru_operands(5, 3, 4, dev, 101), reverse, false, 1e-12, dir + " 5x3x4");
    check_gru_against_plain(gru_operands(1, 1, 1, dev, 105), reverse, false, 1e-12, dir + " one step, one unit");
    check_gru_against_plain(gru_operands(7, 2, 17, dev, 109), reverse, false, 1e-12, dir + " 17 units (a tail)");
    check_gru_against_plain(gru_operands(6, 2, 3, dev, 113), reverse, true, 1e-12, dir + " final h only");
  }
}

TEST_P(GruRecurrenceTest, LargeBatchMatchesF64) {
  const GruOperands o = gru_operands(3, 64, 256, dev, 121);
  Array want = gru_recurrence(o.gi, o.h0, o.w, o.b);
  Array got = gru_recurrence(cast(o.gi, DType::F32), cast(o.h0, DType::F32), cast(o.w, DType::F32), cast(o.b, DType::F32));
  EXPECT_TRUE(all_close(got, want.to_vector<double>(), 1e-4, 1e-5));
  if (dev.kind != DeviceKind::Reference) check_gru_against_plain(o, true, false, 1e-11, "64x256 f64");
}

TEST_P(GruRecurrenceTest, NanAndInfinityAsPlainOps) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dt : {DType::F64, DType::F32}) {
    const int64_t L = 3, N = 3, H = 2;
    std::vector<double> g = random_on({L, N, 3 * H}, 131, Device::reference()).to_vector<double>();
    g[0] = inf;                         // t 0, row 0: r = 1
    g[1 * 3 * H + 2] = -inf;            // t 0, row 1: z = 0
    g[2 * 3 * H + 5] = inf;             // t 0, row 2: n = 1
    g[(2 * N + 2) * 3 * H + 1] = nan;   // t 2, row 2, unit 1: NaN in r
    GruOperands o = gru_operands(L, N, H, dev, 133, dt);
    o.gi = cast(from_vector(g, {L, N, 3 * H}, dev), dt);
    for (bool reverse : {false, true})
      check_gru_against_plain(o, reverse, false, dt == DType::F64 ? 1e-12 : 1e-5,
                              std::string(dtype_name(dt)) + (reverse ? " reverse" : " forward"));
    std::vector<double> h = gru_recurrence(o.gi, o.h0, o.w, o.b).to_vector<double>();
    EXPECT_TRUE(std::isnan(h[(2 * N + 2) * H + 1])) << "the NaN's own unit";
    EXPECT_FALSE(std::isnan(h[(2 * N + 1) * H + 1])) << "another row of the same step";
  }
}

TEST_P(GruRecurrenceTest, SecondDerivativesMatchPlainOps) {
  const GruOperands o = gru_operands(3, 2, 3, dev, 141);
  for (bool reverse : {false, true}) {
    auto second = [&](bool library) {
      std::vector<Array> leaves{o.gi.require_grad(), o.h0.require_grad(), o.w.require_grad(), o.b.require_grad()};
      Array h = library ? gru_recurrence(leaves[0], leaves[1], leaves[2], leaves[3], {.reverse = reverse})
                        : plain_gru(leaves[0], leaves[1], leaves[2], leaves[3], reverse);
      std::vector<Array> d = grad(sum(mul(h, h)), leaves, {.create_graph = true});
      Array s = add(sum(mul(d[0], d[0])), add(sum(mul(d[2], sum(d[1]))), sum(mul(d[3], d[3]))));
      return grad(s, leaves, {.materialize_grads = true});
    };
    std::vector<Array> got = second(true), want = second(false);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(all_close(got[i], want[i].to_vector<double>(), 1e-11, 1e-11))
          << (reverse ? "reverse" : "forward") << " operand " << i;
  }
}

TEST_P(GruRecurrenceTest, HalfDtypesCloseToF32AndBadArguments) {
  const GruOperands o = gru_operands(6, 3, 8, dev, 151, DType::F32);
  Array want = gru_recurrence(o.gi, o.h0, o.w, o.b);
  for (DType dt : {DType::F16, DType::BF16}) {
    Array got = gru_recurrence(cast(o.gi, dt), cast(o.h0, dt), cast(o.w, dt), cast(o.b, dt));
    EXPECT_EQ(got.dtype(), dt);
    const double tol = dt == DType::F16 ? 5e-3 : 3e-2;
    EXPECT_TRUE(all_close(got, want.to_vector<double>(), tol, tol)) << dtype_name(dt);
  }
  EMBER_EXPECT_ERROR(gru_recurrence(slice(o.gi, 2, 0, 23), o.h0, o.w, o.b), "gru_recurrence", "[L, N, 3H]", "[6, 3, 23]");
  EMBER_EXPECT_ERROR(gru_recurrence(o.gi, o.h0, slice(o.w, 0, 0, 16), o.b), "gru_recurrence", "w_hh", "[24, 8]", "[16, 8]");
  EMBER_EXPECT_ERROR(gru_recurrence(o.gi, o.h0, o.w, slice(o.b, 0, 0, 8)), "gru_recurrence", "b_hh", "[24]", "[8]");
  EMBER_EXPECT_ERROR(gru_recurrence(o.gi, o.h0, o.w, cast(o.b, DType::F64)), "gru_recurrence", "b_hh", "float64");
}

EMBER_OP_SUITE(GruRecurrenceTest);

// nn::LSTM and nn::GRU run their time loops as the library calls where the device has them (the
// modules' PyTorch references are in tests/nn/recurrent_test.cpp).
TEST(RecurrenceModule, NnLstmAndGruTakeTheLibraryCalls) {
  for (const Device& d : test_devices()) {
    if (!lstm_recurrence_available(d, DType::F32)) continue;
    nn::LSTM lstm({.input_size = 3, .hidden_size = 5, .device = d});
    nn::RecurrentOutput r = lstm.forward(random_on({4, 2, 3}, 71, d, DType::F32));
    EXPECT_EQ(r.output.node()->op, Op::LstmRecurrence) << d.str();
    nn::GRU gru({.input_size = 3, .hidden_size = 5, .device = d});
    EXPECT_EQ(gru.forward(random_on({4, 2, 3}, 72, d, DType::F32)).output.node()->op, Op::GruRecurrence) << d.str();
    nn::GRU no_bias({.input_size = 3, .hidden_size = 5, .bias = false, .device = d});
    EXPECT_EQ(no_bias.forward(random_on({4, 2, 3}, 73, d, DType::F32)).output.node()->op, Op::GruRecurrence);
  }
  EXPECT_TRUE(lstm_recurrence_available(Device::reference(), DType::F64));
  EXPECT_FALSE(lstm_recurrence_available(Device::reference(), DType::I32));
}

}  // namespace
}  // namespace ember::testing
