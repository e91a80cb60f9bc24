// The IDX format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/): a magic number
// 00 00 <type> <rank>, rank big-endian u32 sizes, then the elements in big-endian row-major order.
// Files may be gzip-compressed (detected from their first bytes). Malformed input (wrong magic,
// unknown type, truncated data, trailing bytes) raises ember::Error naming the file and problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/dtype.h"

namespace ember::data {

struct IdxArray {
  DType dtype = DType::U8;     // u8 (0x08), i8 (0x09, read as i32), i16 (0x0B, as i32), i32, f32, f64
  std::vector<int64_t> dims{};   // sizes, outermost first
  std::vector<uint8_t> bytes{};  // elements in host byte order, dtype_size(dtype) bytes each
  int64_t numel() const;
  // The elements converted to T.
  template <class T>
  std::vector<T> values() const;
};

// Parses IDX bytes (already decompressed). `name` is used in error messages.
IdxArray parse_idx(const uint8_t* data, size_t size, const std::string& name = "IDX data");
// Reads an IDX file, gzip-compressed or not.
IdxArray read_idx(const std::string& path);
// The whole content of a file, gunzipped if it starts with the gzip magic (1f 8b).
std::vector<uint8_t> read_maybe_gzip(const std::string& path);

extern template std::vector<float> IdxArray::values<float>() const;
extern template std::vector<int64_t> IdxArray::values<int64_t>() const;

}  // namespace ember::data
