// The .npy reader and writer (include/ember/io/npy.h). The header is a Python dict literal; the
// reader accepts what numpy.lib.format writes and other writers plausibly write (either quote,
// any spacing, keys in any order, a trailing comma) and refuses everything else by name.
#include "ember/io/npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "ember/ops.h"
#include "io/read_file.h"
#include "io/safetensors_internal.h"

namespace ember::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct NpyType {
  DType dtype;
  size_t size;
};

// '<f4' and friends: byte order, kind, item size.
struct Descr {
  NpyType type;
  bool big_endian;
};

Descr parse_descr(const std::string& d, const std::string& name) {
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("{}: unsupported dtype '{}' ({})", name, d, why));
  };
  if (d.size() < 3) throw bad("expected a byte order, a kind and a size such as '<f4'");
  char order = d[0], kind = d[1];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    throw bad("the byte order must be <, >, | or =");
  std::string bytes = d.substr(2);
  if (bytes.size() > 2 || !std::all_of(bytes.begin(), bytes.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw bad("expected an item size of 1 to 8 bytes");
  int size = std::stoi(bytes);
  std::optional<DType> t;
  if (kind == 'f') t = size == 2 ? DType::F16 : size == 4 ? DType::F32 : size == 8 ? DType::F64 : std::optional<DType>{};
  else if (kind == 'i')
    t = size == 1 ? DType::I8 : size == 2 ? DType::I16 : size == 4 ? DType::I32 : size == 8 ? DType::I64 : std::optional<DType>{};
  else if (kind == 'u')
    t = size == 1 ? DType::U8 : size == 2 ? DType::U16 : size == 4 ? DType::U32 : size == 8 ? DType::U64 : std::optional<DType>{};
  else if (kind == 'b' && size == 1) t = DType::Bool;
  if (!t)
    throw bad("Ember reads float16/32/64, int8-64, uint8-64 and bool; complex, strings, objects, dates and "
              "structured dtypes have no Ember dtype");
  return {{*t, size_t(size)}, order == '>' && size > 1};
}

// A cursor over the header's dict literal.
class HeaderParser {
 public:
  HeaderParser(std::string text, std::string name) : s_(std::move(text)), name_(std::move(name)) {}

  void parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape) {
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') {
        ++i_;
        break;
      }
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (peek() == '[') fail("structured dtypes (a list of fields) are not supported");
        descr = string_literal();
        seen_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        seen_fortran = true;
      } else if (key == "shape") {
        shape = tuple();
        seen_shape = true;
      } else {
        fail(fmt::format("unexpected key '{}' (expected descr, fortran_order and shape)", key));
      }
      skip_space();
      if (peek() == ',') ++i_;
      else if (peek() != '}') fail("expected ',' or '}'");
    }
    skip_space();
    if (i_ != s_.size()) fail("unexpected text after the dict");
    if (!seen_descr || !seen_fortran || !seen_shape)
      fail(fmt::format("the header lacks {}", !seen_descr ? "'descr'" : !seen_fortran ? "'fortran_order'" : "'shape'"));
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(fmt::format("{}: malformed .npy header at character {}: {} (header: {})", name_, i_, why,
                            s_.size() > 200 ? s_.substr(0, 200) + "..." : s_));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++i_;
  }
  std::string string_literal() {
    skip_space();
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') {
        ++i_;
        return dims;
      }
      if (peek() < '0' || peek() > '9') fail("expected a non-negative dimension");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (INT64_MAX - 9) / 10) fail("a dimension overflows int64");
        v = v * 10 + (peek() - '0');
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 longs
      dims.push_back(v);
      if (dims.size() > 64) fail("more than 64 dimensions");
      skip_space();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
  }

  std::string s_;
  std::string name_;
  size_t i_ = 0;
};

std::string descr_of(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::F16: return "<f2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "|u1";
    case DType::Bool: return "|b1";
    case DType::I8: return "|i1";
    case DType::I16: return "<i2";
    case DType::U16: return "<u2";
    case DType::U32: return "<u4";
    case DType::U64: return "<u8";
    case DType::BF16: break;
  }
  throw Error("save_npy: NumPy has no bfloat16 dtype; cast the array to float32 first");
}

uint32_t read_le(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}

}  // namespace

Array parse_npy(const uint8_t* data, size_t size, Device device, const std::string& name) {
  if (size < 10 || std::memcmp(data, kMagic, kMagicSize) != 0)
    throw Error(fmt::format("{}: not a .npy file (it does not start with \\x93NUMPY)", name));
  int major = data[6], minor = data[7];
  if (major < 1 || major > 3)
    throw Error(fmt::format("{}: .npy format version {}.{} is not supported (1.0 to 3.0 are)", name, major, minor));
  size_t preamble = major == 1 ? 10 : 12;
  if (size < preamble) throw Error(fmt::format("{}: truncated .npy preamble ({} bytes)", name, size));
  size_t header_len = read_le(data + 8, major == 1 ? 2 : 4);
  if (header_len > size - preamble)
    throw Error(fmt::format("{}: the .npy header declares {} bytes, the file has {} after the preamble", name,
                            header_len, size - preamble));
  std::string header(reinterpret_cast<const char*>(data + preamble), header_len);
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> dims;
  HeaderParser(header, name).parse(descr, fortran, dims);
  Descr d = parse_descr(descr, name);

  uint64_t numel = 1;
  for (int64_t v : dims)
    if (__builtin_mul_overflow(numel, uint64_t(v), &numel))
      throw Error(fmt::format("{}: the shape in the header overflows: {}", name, header));
  uint64_t bytes = 0;
  const uint64_t available = size - preamble - header_len;
  bool overflow = __builtin_mul_overflow(numel, uint64_t(d.type.size), &bytes);
  if (overflow || bytes != available)
    throw Error(fmt::format("{}: the header's {} {} needs {} bytes of data, the file has {}", name, descr,
                            Shape(dims).str(), overflow ? std::string("more than 2^64") : std::to_string(bytes),
                            available));
  const uint8_t* payload = data + preamble + header_len;
  std::vector<uint8_t> fixed;  // a copy when bytes need swapping or bools normalizing
  if (d.big_endian || d.type.dtype == DType::Bool) {
    fixed.assign(payload, payload + bytes);
    if (d.big_endian)
      for (size_t at = 0; at < fixed.size(); at += d.type.size) std::reverse(fixed.begin() + long(at), fixed.begin() + long(at + d.type.size));
    if (d.type.dtype == DType::Bool)
      for (uint8_t& b : fixed) b = b != 0;  // any non-zero byte is True, as NumPy reads it
    payload = fixed.data();
  }
  static const uint8_t kNothing = 0;
  if (!fortran || dims.size() < 2) return from_buffer(numel ? payload : &kNothing, Shape(dims), d.type.dtype, device);
  // Fortran order: the data is the transpose's C order.
  std::vector<int64_t> reversed(dims.rbegin(), dims.rend());
  std::vector<int> order;
  for (int k = int(dims.size()) - 1; k >= 0; --k) order.push_back(k);
  return contiguous(permute(from_buffer(numel ? payload : &kNothing, Shape(reversed), d.type.dtype, device), order));
}

std::vector<uint8_t> serialize_npy(const Array& x) {
  if (!x.defined()) throw Error("save_npy: the array is undefined");
  // Python's tuple repr, as NumPy writes it: (), (3,), (2, 3).
  std::string shape = "(";
  for (int k = 0; k < x.rank(); ++k) shape += (k ? ", " : "") + std::to_string(x.shape()[k]);
  shape += x.rank() == 1 ? ",)" : ")";
  // numpy.lib.format's layout: the dict, then spaces and a newline so that the data starts at a
  // multiple of 64 bytes.
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr_of(x.dtype()), shape);
  size_t preamble = header.size() + 1 + 10 > 65535 ? 12 : 10;
  size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ');
  header.push_back('\n');
  std::vector<uint8_t> out(kMagic, kMagic + kMagicSize);
  out.push_back(preamble == 10 ? 1 : 2);
  out.push_back(0);
  uint32_t len = uint32_t(header.size());
  for (size_t b = 0; b < preamble - 8; ++b) out.push_back(uint8_t(len >> (8 * b)));
  out.insert(out.end(), header.begin(), header.end());
  std::vector<uint8_t> values = x.to_bytes();
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

Array load_npy(const std::string& path, Device device) {
  std::vector<uint8_t> bytes = detail::read_regular_file(path, "load_npy");
  return parse_npy(bytes.data(), bytes.size(), device, "load_npy: " + path);
}

void save_npy(const std::string& path, const Array& x) {
  std::vector<uint8_t> bytes = serialize_npy(x);
  detail::write_atomically(path, bytes.data(), bytes.size());
}

}  // namespace ember::io
