// NumPy .npy files (ember/io/npy.h): files written by NumPy itself (tools/fuzz/make_npy_corpus.py)
// hold the values NumPy wrote, for every dtype, C and Fortran order, big-endian and format
// versions 1.0-3.0; Ember's files round-trip bit for bit (NaN, inf, -0.0 included) and have the
// byte layout the format specifies; malformed files are refused with a message naming the file.
#include <gtest/gtest.h>

#include <ember/ember.h>
#include <ember/io/npy.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/corpus_replay.h"
#include "nn/nn_test_util.h"

namespace ember {
namespace {

using ember::testing::tests_dir;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string corpus(const std::string& name) { return tests_dir() + "/io/data/npy_corpus/" + name + ".npy"; }

// What make_npy_corpus.py stored: arange(n) in the file's dtype (bool: odd positions True), as f64.
std::vector<double> arange(int64_t n, DType t) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(t == DType::Bool ? double(i % 2) : double(i));
  return v;
}

TEST(NpyTest, FilesWrittenByNumpyHoldTheirValuesForEveryDtype) {
  const std::pair<const char*, DType> cases[] = {
      {"float16", DType::F16}, {"float32", DType::F32}, {"float64", DType::F64}, {"int8", DType::I8},
      {"int16", DType::I16},   {"int32", DType::I32},   {"int64", DType::I64},   {"uint8", DType::U8},
      {"uint16", DType::U16},  {"uint32", DType::U32},  {"uint64", DType::U64},  {"bool", DType::Bool}};
  for (auto [name, dtype] : cases) {
    Array a = io::load_npy(corpus(std::string("valid_numpy_") + name + "_2x3"));
    EXPECT_EQ(a.dtype(), dtype) << name;
    EXPECT_EQ(a.shape(), Shape({2, 3})) << name;
    EXPECT_EQ(cast(a, DType::F64).to_vector<double>(), arange(6, dtype)) << name;
  }
}

TEST(NpyTest, FortranOrderBigEndianScalarEmptyAndLaterVersions) {
  Array f = io::load_npy(corpus("valid_numpy_float32_2x3x4_fortran"));
  EXPECT_EQ(f.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(cast(f, DType::F64).to_vector<double>(), arange(24, DType::F32));  // C order, as NumPy shows it
  Array be = io::load_npy(corpus("valid_numpy_float64_3x2_bigendian"));
  EXPECT_EQ(be.dtype(), DType::F64);
  EXPECT_EQ(be.to_vector<double>(), arange(6, DType::F64));
  EXPECT_EQ(io::load_npy(corpus("valid_numpy_int32_5_bigendian")).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  Array s = io::load_npy(corpus("valid_numpy_float32_scalar"));
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.item<float>(), 0.f);
  EXPECT_EQ(io::load_npy(corpus("valid_numpy_float32_0x3")).shape(), Shape({0, 3}));
  for (const char* v : {"valid_numpy_int64_4_v2", "valid_numpy_int64_4_v3"})
    EXPECT_EQ(io::load_npy(corpus(v)).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3})) << v;
  for (const char* v : {"valid_hand_double_quotes", "valid_hand_key_order"})
    EXPECT_EQ(io::load_npy(corpus(v)).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5})) << v;
}

// The layout numpy.lib.format specifies, checked byte by byte for one small array, and the very
// bytes numpy.save wrote for the same arrays.
TEST(NpyTest, WrittenFilesHaveTheSpecifiedLayout) {
  std::vector<uint8_t> b = io::serialize_npy(from_vector<int16_t>({1, -2, 3}, {3}));
  ASSERT_EQ(b.size(), 128u + 6u);
  EXPECT_EQ(std::memcmp(b.data(), "\x93NUMPY\x01\x00", 8), 0);
  EXPECT_EQ(size_t(b[8] | (b[9] << 8)), 128u - 10u);  // header length: data aligned to 64 bytes
  std::string header(b.begin() + 10, b.begin() + 128);
  EXPECT_EQ(header.rfind("{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }   ", 0), 0u) << header;
  EXPECT_EQ(header.back(), '\n');
  const uint8_t data[] = {1, 0, 0xFE, 0xFF, 3, 0};
  EXPECT_EQ(std::memcmp(b.data() + 128, data, 6), 0);
  EXPECT_EQ(b, read_bytes(corpus("valid_numpy_int16_3_layout")));
  EXPECT_EQ(io::serialize_npy(cast(from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}), DType::U8)),
            read_bytes(corpus("valid_numpy_uint8_2x3")));
  EXPECT_EQ(io::serialize_npy(full(Shape{}, 0.0)), read_bytes(corpus("valid_numpy_float32_scalar")));
}

TEST(NpyTest, RoundTripsEveryDtypeBitForBit) {
  std::string path = (std::filesystem::temp_directory_path() / ("ember_npy_" + std::to_string(::getpid()) + ".npy")).string();
  std::vector<float> special{0.f, -0.f, INFINITY, -INFINITY, NAN, 1e-40f};
  Array f = from_vector(special, {2, 3});
  io::save_npy(path, f);
  Array back = io::load_npy(path);
  EXPECT_EQ(back.dtype(), DType::F32);
  EXPECT_EQ(back.shape(), Shape({2, 3}));
  std::vector<float> got = back.to_vector<float>();
  EXPECT_EQ(std::memcmp(got.data(), special.data(), sizeof(float) * special.size()), 0);
  for (DType t : {DType::F64, DType::F16, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16,
                  DType::U32, DType::U64, DType::Bool}) {
    Array x = cast(from_vector<float>({0, 1, 0, 5, 7, 1, 2, 0}, {2, 2, 2}), t);
    io::save_npy(path, x);
    Array y = io::load_npy(path);
    EXPECT_EQ(y.dtype(), t);
    EXPECT_EQ(y.shape(), x.shape());
    EXPECT_EQ(y.to_bytes(), x.to_bytes()) << dtype_name(t);
  }
  io::save_npy(path, zeros(Shape{}));
  EXPECT_EQ(io::load_npy(path).rank(), 0);
  io::save_npy(path, zeros({4, 0}));
  EXPECT_EQ(io::load_npy(path).shape(), Shape({4, 0}));
  // A view (transposed) is written in its logical C order.
  io::save_npy(path, permute(from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}), {1, 0}));
  EXPECT_EQ(io::load_npy(path).to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  std::filesystem::remove(path);
}

TEST(NpyTest, ErrorsNameTheFileAndTheProblem) {
  auto message = [](const std::string& name) -> std::string {
    try {
      io::load_npy(corpus(name));
    } catch (const Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_NE(message("bad_magic").find("bad_magic.npy: not a .npy file"), std::string::npos) << message("bad_magic");
  EXPECT_NE(message("bad_version").find("version 9.0 is not supported"), std::string::npos);
  EXPECT_NE(message("bad_complex").find("unsupported dtype '<c8'"), std::string::npos);
  EXPECT_NE(message("bad_structured").find("structured dtypes"), std::string::npos);
  EXPECT_NE(message("bad_truncated_data").find("needs 24 bytes of data, the file has 23"), std::string::npos)
      << message("bad_truncated_data");
  EXPECT_NE(message("bad_trailing_data").find("the file has 25"), std::string::npos);
  EXPECT_NE(message("bad_missing_shape").find("lacks 'shape'"), std::string::npos);
  EXPECT_NE(message("bad_overflowing_shape").find("overflows"), std::string::npos) << message("bad_overflowing_shape");
  EXPECT_NE(message("bad_header_length").find("declares 60000 bytes"), std::string::npos);
  try {
    io::save_npy("/tmp/never.npy", ones({2}, {.dtype = DType::BF16}));
    FAIL() << "bfloat16 was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NumPy has no bfloat16"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists("/tmp/never.npy"));
  EXPECT_THROW(io::load_npy(tests_dir() + "/io/data/npy_corpus"), Error);  // a folder
}

TEST(NpyTest, FuzzCorpusReplaysWithoutCrashing) {
  // tools/fuzz/npy_fuzz.cpp's committed corpus: valid_* parse, fuzz_* parse or raise
  // ember::Error, every other file raises ember::Error.
  auto counts = ember::testing::replay_corpus(tests_dir() + "/io/data/npy_corpus", [](const std::vector<uint8_t>& b) {
    (void)io::parse_npy(b.data(), b.size()).to_bytes();
  });
  EXPECT_GE(counts.parsed, 20);
  EXPECT_GE(counts.refused, 18);
}

}  // namespace
}  // namespace ember
