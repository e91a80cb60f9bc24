// The text form of KIR programs (src/kir/kir_text.h): written and read back bit for bit (NaN
// payloads, -0, 64-bit immediates, phases, names with odd characters), and malformed text
// rejected with the source and line named.
#include "kir/kir_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ember/error.h"
#include "kir/builder.h"

namespace ember::testing {
namespace {

bool same_bits(const ember_kir_inst& x, const ember_kir_inst& y) {
  return x.op == y.op && x.dtype == y.dtype && x.phase == y.phase && x.a == y.a && x.b == y.b && x.c == y.c &&
         x.arg == y.arg && x.aux == y.aux && x.iimm == y.iimm && std::memcmp(&x.fimm, &y.fimm, sizeof x.fimm) == 0;
}

TEST(KirTextTest, ProgramsRoundTripBitForBit) {
  kir::Builder b;
  const int x = b.add_arg(DType::F32), idx = b.add_arg(DType::I64), out = b.add_arg(DType::F64), s = b.add_arg(DType::U8);
  double payload_nan;
  const uint64_t nan_bits = 0x7ff4000000000123ull;  // a signalling NaN with a payload
  std::memcpy(&payload_nan, &nan_bits, sizeof payload_nan);
  kir::Val v = b.load(x);
  v = kir::max(v, b.constant(payload_nan, DType::F32));
  v = v + b.constant(-0.0, DType::F32);
  kir::Val big = b.constant_int(std::numeric_limits<int64_t>::min(), DType::I64);
  kir::Val g = b.load_gather(x, b.load(idx) + big);
  kir::Val total = b.acc_sum(b.cast(v * g, DType::F64));
  b.phase = 1;
  b.store(out, total + b.constant(std::numeric_limits<double>::infinity(), DType::F64));
  b.store(s, b.cast(b.load_uniform(s), DType::U8));
  const ember_kir_program built = b.program("fused: mul, sum\nsecond line");
  // The builder keeps NaN constants as it likes; the text form must keep any bits, so the NaN
  // constant gets a payload here.
  std::vector<ember_kir_inst> insts(built.insts, built.insts + built.n_insts);
  for (ember_kir_inst& in : insts)
    if (in.op == EMBER_KIR_CONST && std::isnan(in.fimm)) std::memcpy(&in.fimm, &nan_bits, sizeof nan_bits);
  ember_kir_program p = built;
  p.insts = insts.data();

  const std::string text = kir::program_text(p);
  const kir::TextProgram back = kir::parse_program_text(text, "test");
  EXPECT_EQ(back.name, "fused: mul, sum second line");  // a line break in a name becomes a space
  EXPECT_EQ(back.has_reduction, 1);
  ASSERT_EQ(back.arg_dtypes, std::vector<uint8_t>(p.arg_dtypes, p.arg_dtypes + p.n_args));
  ASSERT_EQ(back.insts.size(), size_t(p.n_insts));
  for (int32_t k = 0; k < p.n_insts; ++k) EXPECT_TRUE(same_bits(back.insts[size_t(k)], p.insts[k])) << "instruction " << k;
  EXPECT_EQ(kir::program_text(back.view()), text) << "printing the program read back gives the same text";
  // The NaN payload and -0 survive.
  bool payload = false, negative_zero = false;
  for (const ember_kir_inst& in : back.insts) {
    uint64_t bits;
    std::memcpy(&bits, &in.fimm, sizeof bits);
    payload |= in.op == EMBER_KIR_CONST && bits == 0x7ff4000000000123ull;
    negative_zero |= in.op == EMBER_KIR_CONST && bits == 0x8000000000000000ull;
  }
  EXPECT_TRUE(payload);
  EXPECT_TRUE(negative_zero);
}

TEST(KirTextTest, MalformedTextIsRejectedWithTheLine) {
  const std::string good = "kir 1\nname t\nargs 2 0 0\nreduction 0\ninsts 2\n1 0 0 -1 -1 -1 0 0 0 0\n4 0 0 0 -1 -1 1 0 0 0\n";
  EXPECT_NO_THROW(kir::parse_program_text(good, "good"));
  const std::pair<std::string, std::string> bad[] = {
      {"kir 2\n", "line 1: unknown version"},
      {"kir 1\nname t\n", "line 2: ends before the 'args' line"},
      {"kir 1\nname t\nargs 1 99\n", "line 3: argument 0: bad dtype"},
      {"kir 1\nname t\nargs 1 0\nreduction 0\ninsts 3\n1 0 0 -1 -1 -1 0 0 0 0\n", "ends after 1 of 3 instructions"},
      {"kir 1\nname t\nargs 1 0\nreduction 0\ninsts 1\n4 0 0 0 -1 -1 0 0 0 0\n", "line 6: operand 0 is not an earlier"},
      {"kir 1\nname t\nargs 1 0\nreduction 0\ninsts 1\n999 0 0 -1 -1 -1 0 0 0 0\n", "line 6: unknown op 999"},
      {"kir 1\nname t\nargs 1 0\nreduction 0\ninsts 1\n1 0 0 -1 -1 -1 5 0 0 0\n", "line 6: argument 5 out of range"},
      {"kir 1\nname t\nargs 1 0\nreduction 0\ninsts 1\n1 0 0\n", "line 6: expected 10 fields"},
      {"kir 1\nname t\nargs 1 0\nreduction 2\n", "line 4: expected a count from 0 to 1"},
  };
  for (const auto& [text, want] : bad) {
    try {
      kir::parse_program_text(text, "dump/x.kir");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("KIR text dump/x.kir"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what() << "\nwanted: " << want;
    }
  }
}

}  // namespace
}  // namespace ember::testing
