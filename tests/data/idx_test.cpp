// IDX parsing: the real Fashion-MNIST files (when installed), hand-made files gzip-compressed or
// not, and malformed input (wrong magic, unknown type, truncated, trailing bytes) -> clear errors.
#include <gtest/gtest.h>
#include <zlib.h>

#include <ember/ember.h>

#include <filesystem>
#include <fstream>

#include "data/idx_test_util.h"

namespace ember::data {
namespace {

using ember::data::testing::idx_bytes;

std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes, bool gzip) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
  }
  return path;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(IdxTest, ParsesPlainAndGzip) {
  auto bytes = idx_bytes(0x08, {2, 3}, {1, 2, 3, 4, 5, 6});
  for (bool gz : {false, true}) {
    IdxArray a = read_idx(write_file(gz ? "ember_idx.gz" : "ember_idx", bytes, gz));
    EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.values<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  }
  // Big-endian i32 and f32.
  IdxArray i = parse_idx(idx_bytes(0x0C, {2}, {0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe}).data(), 16);
  EXPECT_EQ(i.values<int64_t>(), (std::vector<int64_t>{258, -2}));
  IdxArray f = parse_idx(idx_bytes(0x0D, {1}, {0x3f, 0xc0, 0, 0}).data(), 12);
  EXPECT_EQ(f.values<float>(), (std::vector<float>{1.5f}));
}

TEST(IdxTest, MalformedFilesGiveClearErrors) {
  auto good = idx_bytes(0x08, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto bad_magic = good;
  bad_magic[0] = 0x1f;
  bad_magic[1] = 0x00;
  EXPECT_NE(error_of([&] { parse_idx(bad_magic.data(), bad_magic.size(), "x"); }).find("wrong magic number"), std::string::npos);
  auto bad_type = good;
  bad_type[2] = 0x07;
  EXPECT_NE(error_of([&] { parse_idx(bad_type.data(), bad_type.size(), "x"); }).find("unknown IDX element type 0x07"),
            std::string::npos);
  std::string trunc = error_of([&] { parse_idx(good.data(), good.size() - 2, "x"); });
  EXPECT_NE(trunc.find("truncated: expected 6 bytes of data for shape [2, 3], got 4"), std::string::npos) << trunc;
  EXPECT_NE(error_of([&] { parse_idx(good.data(), 6, "x"); }).find("truncated"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_idx(good.data(), 2, "x"); }).find("truncated"), std::string::npos);
  auto extra = good;
  extra.push_back(9);
  EXPECT_NE(error_of([&] { parse_idx(extra.data(), extra.size(), "x"); }).find("unexpected bytes"), std::string::npos);
  // A gzip file cut short.
  std::string gz = write_file("ember_idx_full.gz", idx_bytes(0x08, {1000}, std::vector<uint8_t>(1000, 7)), true);
  std::ifstream in(gz, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint8_t> cut(raw.begin(), raw.begin() + long(raw.size() / 2));
  std::string cut_path = write_file("ember_idx_cut.gz", cut, false);
  EXPECT_NE(error_of([&] { read_idx(cut_path); }).find("truncated gzip"), std::string::npos);
  EXPECT_NE(error_of([&] { read_idx("/nonexistent/file"); }).find("cannot open"), std::string::npos);
}

TEST(IdxTest, FashionMnistFiles) {
  std::string dir = FashionMnist::resolve_dir({});
  if (!std::filesystem::exists(dir + "/t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto test = FashionMnist::test();
  ASSERT_EQ(test->size(), 10000u);
  LabeledImage s = test->get(0);
  EXPECT_EQ(s.image.height, 28);
  EXPECT_EQ(s.label, 9);  // the first test image is an ankle boot
  std::vector<int> counts(10);
  for (size_t i = 0; i < test->size(); ++i) counts[size_t(test->get(i).label)]++;
  for (int c : counts) EXPECT_EQ(c, 1000);
  std::string missing = error_of([] { FashionMnist::train({.dir = "/nonexistent"}); });
  EXPECT_NE(missing.find("dataset-fashion-mnist"), std::string::npos) << missing;
}

}  // namespace
}  // namespace ember::data
