// The text form of KIR programs (kir_text.h).
#include "kir/kir_text.h"

#include <fmt/format.h>

#include <cstring>
#include <sstream>

#include "ember/error.h"

namespace ember::kir {

std::string program_text(const ember_kir_program& p) {
  std::string name = p.name ? p.name : "";
  for (char& c : name)
    if (c == '\n' || c == '\r') c = ' ';
  std::string s = fmt::format("kir 1\nname {}\nargs {}", name, p.n_args);
  for (int32_t a = 0; a < p.n_args; ++a) s += fmt::format(" {}", int(p.arg_dtypes[a]));
  s += fmt::format("\nreduction {}\ninsts {}\n", p.has_reduction, p.n_insts);
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    uint64_t bits = 0;
    std::memcpy(&bits, &in.fimm, sizeof bits);
    s += fmt::format("{} {} {} {} {} {} {} {} {:x} {}\n", in.op, int(in.dtype), int(in.phase), in.a, in.b, in.c, in.arg,
                     in.aux, bits, in.iimm);
  }
  return s;
}

TextProgram parse_program_text(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  auto bad = [&](const std::string& what) -> Error {
    return Error(fmt::format("KIR text {}: line {}: {}", source, line_no, what));
  };
  auto next = [&](const char* keyword) {
    if (!std::getline(in, line)) throw bad(fmt::format("ends before the '{}' line", keyword));
    ++line_no;
    const size_t n = std::strlen(keyword);
    if (line.compare(0, n, keyword) != 0 || (line.size() > n && line[n] != ' '))
      throw bad(fmt::format("expected '{}', got '{}'", keyword, line));
    return line.size() > n ? line.substr(n + 1) : std::string();
  };
  auto count = [&](std::istringstream& fields, int64_t limit) {
    int64_t v = -1;
    if (!(fields >> v) || v < 0 || v > limit) throw bad(fmt::format("expected a count from 0 to {}", limit));
    return v;
  };
  TextProgram p;
  if (next("kir") != "1") throw bad("unknown version (this reader knows 'kir 1')");
  p.name = next("name");
  std::istringstream args(next("args"));
  const int64_t n_args = count(args, 1 << 16);
  for (int64_t a = 0; a < n_args; ++a) {
    int dt = -1;
    if (!(args >> dt) || dt < 0 || dt >= EMBER_NUM_DTYPES) throw bad(fmt::format("argument {}: bad dtype", a));
    p.arg_dtypes.push_back(uint8_t(dt));
  }
  std::istringstream red(next("reduction"));
  p.has_reduction = int32_t(count(red, 1));
  std::istringstream insts(next("insts"));
  const int64_t n = count(insts, 1 << 20);
  for (int64_t k = 0; k < n; ++k) {
    if (!std::getline(in, line)) throw bad(fmt::format("ends after {} of {} instructions", k, n));
    ++line_no;
    std::istringstream f(line);
    int op = -1, dtype = -1, phase = -1;
    ember_kir_inst x{};
    uint64_t bits = 0;
    if (!(f >> op >> dtype >> phase >> x.a >> x.b >> x.c >> x.arg >> x.aux >> std::hex >> bits >> std::dec >> x.iimm))
      throw bad("expected 10 fields: op dtype phase a b c arg aux fimm-bits iimm");
    if (op < 0 || op >= EMBER_KIR_NUM_OPS) throw bad(fmt::format("unknown op {}", op));
    if (dtype < 0 || dtype >= EMBER_NUM_DTYPES) throw bad(fmt::format("unknown dtype {}", dtype));
    if (phase < 0 || phase > 255) throw bad(fmt::format("phase {} out of range", phase));
    for (int32_t operand : {x.a, x.b, x.c})
      if (operand < -1 || operand >= k) throw bad(fmt::format("operand {} is not an earlier instruction", operand));
    const bool uses_arg = op == EMBER_KIR_LOAD || op == EMBER_KIR_LOAD_GATHER || op == EMBER_KIR_IOTA ||
                          op == EMBER_KIR_STORE || op == EMBER_KIR_LOAD_UNIFORM || op == EMBER_KIR_LOAD_SCALAR;
    if (uses_arg && (x.arg < 0 || x.arg >= n_args)) throw bad(fmt::format("argument {} out of range", x.arg));
    x.op = uint16_t(op);
    x.dtype = uint8_t(dtype);
    x.phase = uint8_t(phase);
    std::memcpy(&x.fimm, &bits, sizeof bits);
    p.insts.push_back(x);
  }
  return p;
}

}  // namespace ember::kir
