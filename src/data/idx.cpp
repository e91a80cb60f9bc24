// IDX parsing (MNIST's format) and gzip reading through zlib: files of one or more gzip members,
// inflated incrementally so a gzip-compressed IDX file is inflated only up to the size its IDX
// header declares (a decompression bomb is refused after at most that many bytes).
#include "ember/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "ember/error.h"
#include "data/readers_internal.h"
#include "io/read_file.h"

namespace ember::data {

namespace {
[[noreturn]] void fail(const std::string& name, const std::string& what) { throw Error(name + ": " + what); }

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

std::string hex2(uint8_t b) {
  const char* digits = "0123456789ABCDEF";
  return {digits[b >> 4], digits[b & 15]};
}
std::string fmt_hex_magic(const uint8_t* d) {
  return "wrong magic number " + hex2(d[0]) + " " + hex2(d[1]) + " " + hex2(d[2]) + " " + hex2(d[3]) +
         ": not an IDX file (IDX files start with 00 00 <type> <rank>)";
}
std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Element counts above this are refused, whatever the file holds: no MNIST-like data set comes
// close, and the product of the sizes (zero ones skipped) then fits every index computation.
constexpr uint64_t kMaxIdxElements = uint64_t(1) << 40;

struct IdxLayout {
  uint8_t type = 0;
  size_t in_size = 0;  // bytes per element in the file
  DType dtype = DType::U8;
  std::vector<int64_t> dims;
  uint64_t numel = 0;
  size_t header_bytes() const { return 4 + 4 * dims.size(); }
  uint64_t total_bytes() const { return header_bytes() + numel * in_size; }
};

// The element type and rank from the 4-byte magic number (size >= 4).
IdxLayout parse_magic(const uint8_t* data, const std::string& name) {
  if (data[0] != 0 || data[1] != 0) fail(name, fmt_hex_magic(data));
  IdxLayout l;
  l.type = data[2];
  switch (data[2]) {
    case 0x08: l.dtype = DType::U8; l.in_size = 1; break;
    case 0x09: l.dtype = DType::I32; l.in_size = 1; break;
    case 0x0B: l.dtype = DType::I32; l.in_size = 2; break;
    case 0x0C: l.dtype = DType::I32; l.in_size = 4; break;
    case 0x0D: l.dtype = DType::F32; l.in_size = 4; break;
    case 0x0E: l.dtype = DType::F64; l.in_size = 8; break;
    default: fail(name, "unknown IDX element type 0x" + hex2(data[2]) + " (expected 08, 09, 0B, 0C, 0D or 0E)");
  }
  if (data[3] == 0) fail(name, "IDX rank 0 (no dimensions)");
  l.dims.resize(data[3]);
  return l;
}

// The sizes after the magic number (data holds the whole header); overflow-checked and bounded.
void parse_dims(const uint8_t* data, IdxLayout& l, const std::string& name) {
  uint64_t extent = 1;  // the product of the non-zero sizes
  bool too_big = false;
  for (size_t d = 0; d < l.dims.size(); ++d) {
    uint32_t n = be32(data + 4 + 4 * d);
    l.dims[d] = int64_t(n);
    if (__builtin_mul_overflow(extent, uint64_t(n == 0 ? 1 : n), &extent) || extent > kMaxIdxElements) too_big = true;
  }
  if (too_big)
    fail(name, "IDX dimensions " + dims_str(l.dims) + " describe more than " + std::to_string(kMaxIdxElements) +
                   " elements (2^40, the limit)");
  l.numel = 1;
  for (int64_t n : l.dims) l.numel *= uint64_t(n);
}

// Inflates a gzip file of one or more members (as `cat a.gz b.gz` writes) on demand. Whatever
// follows the last member must be nothing: other bytes are an error, not silently ignored.
class Gunzip {
 public:
  Gunzip(const uint8_t* data, size_t size, const std::string& name) : next_(data), left_(size), name_(name) {
    if (inflateInit2(&zs_, 15 + 16) != Z_OK) fail(name_, "zlib initialization failed");
  }
  ~Gunzip() { inflateEnd(&zs_); }
  Gunzip(const Gunzip&) = delete;
  Gunzip& operator=(const Gunzip&) = delete;

  // Appends up to n inflated bytes to out (growing it as bytes arrive, never by n at once);
  // fewer only when the last member has ended.
  void read(std::vector<uint8_t>& out, uint64_t n) {
    uint64_t goal = out.size() + n;
    while (out.size() < goal && !done_) {
      size_t have = out.size();
      size_t room = size_t(std::min<uint64_t>({goal - have, std::max<uint64_t>(have, 1 << 16), 1u << 30}));
      out.resize(have + room);
      zs_.next_out = out.data() + have;
      zs_.avail_out = uInt(room);
      step();
      out.resize(have + (room - zs_.avail_out));
    }
  }

 private:
  // zlib counts input in 32 bits: the file is fed in slices.
  void refill() {
    if (zs_.avail_in > 1 || left_ == 0) return;
    size_t keep = zs_.avail_in;  // 0 or 1 byte not yet consumed, just before next_
    size_t take = std::min<size_t>(left_, 1u << 30);
    zs_.next_in = const_cast<uint8_t*>(next_ - keep);
    zs_.avail_in = uInt(keep + take);
    next_ += take;
    left_ -= take;
  }
  void step() {
    refill();
    int rc = inflate(&zs_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      refill();
      size_t rest = zs_.avail_in + left_;
      if (rest == 0) {
        done_ = true;
      } else if (zs_.avail_in < 2 || zs_.next_in[0] != 0x1f || zs_.next_in[1] != 0x8b) {
        fail(name_, std::to_string(rest) + " bytes after the end of the gzip stream are not a gzip member");
      } else if (inflateReset(&zs_) != Z_OK) {
        fail(name_, "zlib reset failed");
      }
      return;
    }
    if (rc == Z_OK) return;
    if (rc == Z_BUF_ERROR && zs_.avail_in == 0 && left_ == 0)
      fail(name_, "truncated gzip stream (the compressed file ends early)");
    fail(name_, "corrupt gzip data: " + std::string(zs_.msg ? zs_.msg : "zlib error " + std::to_string(rc)));
  }

  z_stream zs_{};
  const uint8_t* next_;
  size_t left_;
  bool done_ = false;
  const std::string& name_;
};
}  // namespace

int64_t IdxArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

template <class T>
std::vector<T> IdxArray::values() const {
  std::vector<T> out(static_cast<size_t>(this->numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (dtype) {
      case DType::U8: out[i] = T(bytes[i]); break;
      case DType::I32: { int32_t v; std::memcpy(&v, &bytes[i * 4], 4); out[i] = T(v); break; }
      case DType::F32: { float v; std::memcpy(&v, &bytes[i * 4], 4); out[i] = T(v); break; }
      case DType::F64: { double v; std::memcpy(&v, &bytes[i * 8], 8); out[i] = T(v); break; }
      default: throw Error("IdxArray::values: unexpected dtype");
    }
  }
  return out;
}
template std::vector<float> IdxArray::values<float>() const;
template std::vector<int64_t> IdxArray::values<int64_t>() const;

IdxArray parse_idx(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 4) fail(name, "truncated: " + std::to_string(size) + " bytes, shorter than the 4-byte IDX magic number");
  IdxLayout l = parse_magic(data, name);
  int rank = int(l.dims.size());
  if (size < l.header_bytes())
    fail(name, "truncated: the header names " + std::to_string(rank) + " dimensions but the file has " +
                   std::to_string(size) + " bytes");
  parse_dims(data, l, name);
  IdxArray a;
  a.dtype = l.dtype;
  a.dims = l.dims;
  size_t offset = l.header_bytes(), in_size = l.in_size;
  uint64_t numel = l.numel, want = numel * in_size, have = size - offset;
  if (have < want)
    fail(name, "truncated: expected " + std::to_string(want) + " bytes of data for shape " + dims_str(a.dims) + ", got " +
                   std::to_string(have));
  if (have > want) fail(name, std::to_string(have - want) + " unexpected bytes after the data of shape " + dims_str(a.dims));
  const uint8_t* p = data + offset;
  size_t out_size = dtype_size(a.dtype);
  a.bytes.resize(numel * out_size);
  for (uint64_t i = 0; i < numel; ++i) {
    const uint8_t* e = p + i * in_size;
    uint8_t* o = &a.bytes[i * out_size];
    if (l.type == 0x08) {
      o[0] = e[0];
    } else if (l.type == 0x09) {
      int32_t v = int8_t(e[0]);
      std::memcpy(o, &v, 4);
    } else if (l.type == 0x0B) {
      int32_t v = int16_t(uint16_t(e[0] << 8 | e[1]));
      std::memcpy(o, &v, 4);
    } else {
      for (size_t k = 0; k < in_size; ++k) o[k] = e[in_size - 1 - k];  // big-endian to little-endian
    }
  }
  return a;
}

IdxArray detail::decode_idx(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) return parse_idx(data, size, name);
  // Inflate the magic number, then the sizes, then exactly the data they declare, and one byte
  // more to detect excess: memory and time stay bounded by the declared size.
  Gunzip gz(data, size, name);
  std::vector<uint8_t> out;
  gz.read(out, 4);
  if (out.size() < 4) return parse_idx(out.data(), out.size(), name);
  IdxLayout l = parse_magic(out.data(), name);
  gz.read(out, l.header_bytes() - 4);
  if (out.size() < l.header_bytes()) return parse_idx(out.data(), out.size(), name);
  parse_dims(out.data(), l, name);
  uint64_t total = l.total_bytes();
  gz.read(out, total - out.size());
  if (out.size() == total) {
    gz.read(out, 1);
    if (out.size() > total)
      fail(name, "the gzip stream holds more than the " + std::to_string(total) + " bytes its IDX header declares (" +
                     std::to_string(l.header_bytes()) + " header + " + std::to_string(total - l.header_bytes()) + " data)");
  }
  return parse_idx(out.data(), out.size(), name);
}

std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  constexpr uint64_t max_bytes = uint64_t(1) << 32;  // compressed or not
  std::vector<uint8_t> raw = io::detail::read_regular_file(path, "read_maybe_gzip", max_bytes);
  if (raw.size() < 2 || raw[0] != 0x1f || raw[1] != 0x8b) return raw;
  Gunzip gz(raw.data(), raw.size(), path);
  std::vector<uint8_t> out;
  gz.read(out, max_bytes);
  size_t n = out.size();
  gz.read(out, 1);
  if (out.size() > n) fail(path, "decompresses to more than " + std::to_string(max_bytes) + " bytes (the limit)");
  return out;
}

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> bytes = io::detail::read_regular_file(path, "read_idx");
  return detail::decode_idx(bytes.data(), bytes.size(), path);
}

}  // namespace ember::data
