// IDX parsing (MNIST's format) and gzip reading through zlib.
#include "ember/data/idx.h"

#include <zlib.h>

#include <cstring>
#include <fstream>

#include "ember/error.h"

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
  if (data[0] != 0 || data[1] != 0)
    fail(name, fmt_hex_magic(data));
  IdxArray a;
  size_t in_size = 0;  // bytes per element in the file
  switch (data[2]) {
    case 0x08: a.dtype = DType::U8; in_size = 1; break;
    case 0x09: a.dtype = DType::I32; in_size = 1; break;
    case 0x0B: a.dtype = DType::I32; in_size = 2; break;
    case 0x0C: a.dtype = DType::I32; in_size = 4; break;
    case 0x0D: a.dtype = DType::F32; in_size = 4; break;
    case 0x0E: a.dtype = DType::F64; in_size = 8; break;
    default: fail(name, "unknown IDX element type 0x" + hex2(data[2]) + " (expected 08, 09, 0B, 0C, 0D or 0E)");
  }
  int rank = data[3];
  if (rank == 0) fail(name, "IDX rank 0 (no dimensions)");
  if (size < 4 + 4 * size_t(rank))
    fail(name, "truncated: the header names " + std::to_string(rank) + " dimensions but the file has " +
                   std::to_string(size) + " bytes");
  uint64_t numel = 1;
  for (int d = 0; d < rank; ++d) {
    uint32_t n = be32(data + 4 + 4 * d);
    a.dims.push_back(int64_t(n));
    numel *= n;
    if (numel > (uint64_t(1) << 40)) fail(name, "IDX dimensions are implausibly large");
  }
  size_t offset = 4 + 4 * size_t(rank);
  uint64_t want = numel * in_size, have = size - offset;
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
    if (data[2] == 0x08) {
      o[0] = e[0];
    } else if (data[2] == 0x09) {
      int32_t v = int8_t(e[0]);
      std::memcpy(o, &v, 4);
    } else if (data[2] == 0x0B) {
      int32_t v = int16_t(uint16_t(e[0] << 8 | e[1]));
      std::memcpy(o, &v, 4);
    } else {
      for (size_t k = 0; k < in_size; ++k) o[k] = e[in_size - 1 - k];  // big-endian to little-endian
    }
  }
  return a;
}

std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, "cannot open the file");
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (raw.size() < 2 || raw[0] != 0x1f || raw[1] != 0x8b) return raw;
  // gzip: inflate with zlib (windowBits 15 + 32 detects the gzip header).
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) fail(path, "zlib initialization failed");
  std::vector<uint8_t> out;
  out.resize(raw.size() * 4 + 1024);
  zs.next_in = raw.data();
  zs.avail_in = uInt(raw.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs.total_out == out.size()) out.resize(out.size() * 2);
    zs.next_out = out.data() + zs.total_out;
    zs.avail_out = uInt(out.size() - zs.total_out);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
      inflateEnd(&zs);
      fail(path, "truncated gzip stream (the compressed file ends early)");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      fail(path, "corrupt gzip data: " + msg);
    }
  }
  out.resize(zs.total_out);
  inflateEnd(&zs);
  return out;
}

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> bytes = read_maybe_gzip(path);
  return parse_idx(bytes.data(), bytes.size(), path);
}

}  // namespace ember::data
