// The safetensors reader accepts exactly what the format's reference implementation accepts:
// tensors cover the data section contiguously (no overlap, alias, gap or trailing byte), keys are
// unique, shape products cannot overflow, and each range holds dtype size x element count bytes.
// Every error names the tensor and, from load_file, the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>

#include "ember/io/safetensors.h"

namespace ember {
namespace {

// 8-byte little-endian header length, the JSON text, then `data` bytes of value 1, 2, 3, ...
std::vector<uint8_t> st_file(const std::string& json, size_t data) {
  std::vector<uint8_t> out(8 + json.size() + data);
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(uint64_t(json.size()) >> (8 * i));
  std::copy(json.begin(), json.end(), out.begin() + 8);
  for (size_t i = 0; i < data; ++i) out[8 + json.size() + i] = uint8_t(i + 1);
  return out;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    io::parse(bytes.data(), bytes.size());
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

std::string f32(const std::string& name, const std::string& shape, uint64_t b, uint64_t e) {
  return "\"" + name + "\": {\"dtype\": \"F32\", \"shape\": " + shape + ", \"data_offsets\": [" + std::to_string(b) + ", " +
         std::to_string(e) + "]}";
}

TEST(SafetensorsStrictTest, ContiguousTensorsInAnyHeaderOrderAreAccepted) {
  // Header order differs from data order; a zero-size tensor sits between the two.
  auto file = st_file("{" + f32("b", "[1]", 4, 8) + ", " + f32("z", "[0, 3]", 4, 4) + ", " + f32("a", "[1]", 0, 4) + "}", 8);
  io::SafetensorsFile f = io::parse(file.data(), file.size());
  ASSERT_EQ(f.tensors.size(), 3u);
  float a = 0, b = 0;
  uint8_t a_bytes[4] = {1, 2, 3, 4}, b_bytes[4] = {5, 6, 7, 8};
  std::memcpy(&a, a_bytes, 4);
  std::memcpy(&b, b_bytes, 4);
  EXPECT_EQ(f.tensors.at("a").to_vector<float>(), std::vector<float>{a});
  EXPECT_EQ(f.tensors.at("b").to_vector<float>(), std::vector<float>{b});
  EXPECT_EQ(f.tensors.at("z").shape(), (Shape{0, 3}));
}

TEST(SafetensorsStrictTest, OverlappingRangesAreRefused) {
  std::string msg = parse_error(st_file("{" + f32("a", "[2]", 0, 8) + ", " + f32("b", "[2]", 4, 12) + "}", 12));
  EXPECT_NE(msg.find("'a' [0, 8] and 'b' [4, 12] overlap"), std::string::npos) << msg;
}

TEST(SafetensorsStrictTest, AliasedRangesAreRefused) {
  std::string msg = parse_error(st_file("{" + f32("a", "[2]", 0, 8) + ", " + f32("b", "[2]", 0, 8) + "}", 8));
  EXPECT_NE(msg.find("'a' [0, 8] and 'b' [0, 8] overlap"), std::string::npos) << msg;
}

TEST(SafetensorsStrictTest, GapsAreRefused) {
  std::string gap = parse_error(st_file("{" + f32("a", "[1]", 0, 4) + ", " + f32("b", "[1]", 8, 12) + "}", 12));
  EXPECT_NE(gap.find("4 unused bytes [4, 8] between 'a' and 'b'"), std::string::npos) << gap;
  std::string lead = parse_error(st_file("{" + f32("a", "[1]", 4, 8) + "}", 8));
  EXPECT_NE(lead.find("4 unused bytes [0, 4] before 'a'"), std::string::npos) << lead;
}

TEST(SafetensorsStrictTest, TrailingBytesAreRefused) {
  std::string msg = parse_error(st_file("{" + f32("a", "[1]", 0, 4) + "}", 7));
  EXPECT_NE(msg.find("3 bytes after the last tensor 'a'"), std::string::npos) << msg;
  std::string empty = parse_error(st_file("{}", 2));
  EXPECT_NE(empty.find("2 bytes of data but no tensors"), std::string::npos) << empty;
}

TEST(SafetensorsStrictTest, DuplicateKeysAreRefused) {
  std::string tensor = parse_error(st_file("{" + f32("a", "[1]", 0, 4) + ", " + f32("a", "[1]", 0, 4) + "}", 4));
  EXPECT_NE(tensor.find("duplicate key 'a' in the header"), std::string::npos) << tensor;
  std::string meta = parse_error(st_file(R"({"__metadata__": {"k": "1"}, "__metadata__": {"k": "2"}})", 0));
  EXPECT_NE(meta.find("duplicate key '__metadata__' in the header"), std::string::npos) << meta;
  std::string inner = parse_error(st_file(R"({"__metadata__": {"k": "1", "k": "2"}})", 0));
  EXPECT_NE(inner.find("duplicate key 'k' in '__metadata__'"), std::string::npos) << inner;
  std::string field =
      parse_error(st_file(R"({"a": {"dtype": "F32", "dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", 4));
  EXPECT_NE(field.find("duplicate key 'dtype' in 'a'"), std::string::npos) << field;
}

TEST(SafetensorsStrictTest, ShapeProductsThatOverflowAreRefused) {
  // numel is 0, but the strides of [0, 2^62, 2^62] overflow int64.
  std::string zero = parse_error(st_file("{" + f32("a", "[0, 4611686018427387904, 4611686018427387904]", 0, 0) + "}", 0));
  EXPECT_NE(zero.find("entry 'a': shape [0, 4611686018427387904, 4611686018427387904] overflows"), std::string::npos)
      << zero;
  // Element count fits, the byte count does not.
  std::string bytes = parse_error(st_file("{" + f32("b", "[4611686018427387904]", 0, 4) + "}", 4));
  EXPECT_NE(bytes.find("entry 'b'"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("overflows"), std::string::npos) << bytes;
  // A single dimension above int64's range.
  std::string big = parse_error(st_file("{" + f32("c", "[9223372036854775808]", 0, 4) + "}", 4));
  EXPECT_NE(big.find("entry 'c'"), std::string::npos) << big;
}

TEST(SafetensorsStrictTest, HeaderMustStartWithABrace) {
  std::string msg = parse_error(st_file(" {}", 0));
  EXPECT_NE(msg.find("header must start with '{'"), std::string::npos) << msg;
}

TEST(SafetensorsStrictTest, LoadFileErrorsNameTheFileAndTheTensor) {
  std::string path = ::testing::TempDir() + "/ember_overlap.safetensors";
  auto bytes = st_file("{" + f32("w", "[2]", 0, 8) + ", " + f32("v", "[1]", 4, 8) + "}", 8);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
  std::string msg;
  try {
    io::load_file(path);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("'w' [0, 8] and 'v' [4, 8] overlap"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ember
