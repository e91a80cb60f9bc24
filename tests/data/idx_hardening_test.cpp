// IDX and gzip edge cases: dimension products that overflow or are implausibly large, multi-member
// gzip files, garbage after the gzip stream, decompression bombs (refused after at most the size
// the IDX header declares), and labels outside the class range of an MNIST-like dataset.
#include <gtest/gtest.h>
#include <zlib.h>

#include <ember/ember.h>

#include <filesystem>
#include <fstream>

#include "data/idx_test_util.h"
#include "test_util.h"

namespace ember::data {
namespace {

using ember::data::testing::idx_bytes;

// One complete gzip member holding `bytes` (zlib's deflate with the gzip wrapper).
std::vector<uint8_t> gzip(const std::vector<uint8_t>& bytes) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<uint8_t> out(deflateBound(&zs, uLong(bytes.size())) + 64);
  zs.next_in = const_cast<uint8_t*>(bytes.data());
  zs.avail_in = uInt(bytes.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::vector<uint8_t> operator+(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
  return path;
}

using ember::testing::error_of;

TEST(IdxHardeningTest, DimensionProductsThatWrapAreRefused) {
  // 2^20 * 2^20 * 2^24 = 2^64 wraps to 0, which matched the empty payload.
  std::string path = write_file("ember_idx_wrap", idx_bytes(0x08, {1u << 20, 1u << 20, 1u << 24}, {}));
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find(path + ": IDX dimensions [1048576, 1048576, 16777216]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("more than 1099511627776 elements"), std::string::npos) << msg;
  // A zero dimension does not hide huge others (their product still sizes rows and images).
  std::string zero = error_of([&] { read_idx(write_file("ember_idx_zero", idx_bytes(0x08, {0, 0xffffffffu, 0xffffffffu}, {}))); });
  EXPECT_NE(zero.find("IDX dimensions [0, 4294967295, 4294967295]"), std::string::npos) << zero;
  // Within the bound and consistent: accepted.
  IdxArray ok = read_idx(write_file("ember_idx_empty", idx_bytes(0x08, {0, 28, 28}, {})));
  EXPECT_EQ(ok.numel(), 0);
  EXPECT_EQ(ok.dims, (std::vector<int64_t>{0, 28, 28}));
}

TEST(IdxHardeningTest, MultiMemberGzipIsAccepted) {
  // As `cat a.gz b.gz`: the IDX header and half the data in one member, the rest in another.
  std::vector<uint8_t> payload(300);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i * 7);
  std::vector<uint8_t> whole = idx_bytes(0x08, {3, 100}, payload);
  std::vector<uint8_t> first(whole.begin(), whole.begin() + 150), second(whole.begin() + 150, whole.end());
  IdxArray a = read_idx(write_file("ember_idx_multi.gz", gzip(first) + gzip(second)));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 100}));
  EXPECT_EQ(a.bytes, payload);
  // An empty member in between is fine too.
  IdxArray b = read_idx(write_file("ember_idx_multi3.gz", gzip(first) + gzip({}) + gzip(second)));
  EXPECT_EQ(b.bytes, payload);
}

TEST(IdxHardeningTest, GarbageAfterTheGzipStreamIsRefused) {
  std::vector<uint8_t> whole = idx_bytes(0x08, {4}, {1, 2, 3, 4});
  std::string path = write_file("ember_idx_garbage.gz", gzip(whole) + std::vector<uint8_t>{'j', 'u', 'n', 'k'});
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find(path + ": 4 bytes after the end of the gzip stream are not a gzip member"), std::string::npos) << msg;
  // A corrupt second member is corrupt data, not trailing garbage.
  std::vector<uint8_t> second = gzip({});
  second[second.size() - 5] ^= 0xff;  // its CRC
  std::string crc = error_of([&] { read_idx(write_file("ember_idx_badcrc.gz", gzip(whole) + second)); });
  EXPECT_NE(crc.find("corrupt gzip data"), std::string::npos) << crc;
}

TEST(IdxHardeningTest, DecompressionBombIsRefusedAtTheDeclaredSize) {
  // The header declares 16 bytes of data; the stream inflates to 64 MiB.
  std::vector<uint8_t> bomb = idx_bytes(0x08, {16}, std::vector<uint8_t>(64u << 20, 0));
  std::string path = write_file("ember_idx_bomb.gz", gzip(bomb));
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find(path + ": the gzip stream holds more than the 24 bytes its IDX header declares (8 header + 16 data)"),
            std::string::npos)
      << msg;
  // Truncated inside the IDX header and inside the data.
  std::vector<uint8_t> small = gzip(idx_bytes(0x08, {2, 2}, {1, 2, 3, 4}));
  std::vector<uint8_t> cut(small.begin(), small.begin() + 12);
  EXPECT_NE(error_of([&] { read_idx(write_file("ember_idx_cut.gz", cut)); }).find("truncated gzip"), std::string::npos);
  std::string short_data = error_of([&] { read_idx(write_file("ember_idx_short.gz", gzip(idx_bytes(0x08, {2, 2}, {1, 2})))); });
  EXPECT_NE(short_data.find("truncated: expected 4 bytes of data for shape [2, 2], got 2"), std::string::npos) << short_data;
}

TEST(IdxHardeningTest, LabelsOutsideTheClassRangeAreRefused) {
  std::string images = write_file("ember_lbl_images", idx_bytes(0x08, {3, 2, 2}, std::vector<uint8_t>(12, 5)));
  std::string labels = write_file("ember_lbl_labels", idx_bytes(0x08, {3}, {10, 10, 10}));
  std::string msg = error_of([&] { FashionMnist ds(images, labels); });
  EXPECT_NE(msg.find(labels + ": label 10 at index 0 is outside [0, 10)"), std::string::npos) << msg;
  std::string good_labels = write_file("ember_lbl_good", idx_bytes(0x08, {3}, {0, 9, 4}));
  FashionMnist ds(images, good_labels);
  EXPECT_EQ(ds.get(1).label, 9);
  // Images with a zero-sized side are refused.
  std::string flat = write_file("ember_lbl_flat", idx_bytes(0x08, {3, 0, 2}, {}));
  std::string flat_msg = error_of([&] { FashionMnist bad(flat, good_labels); });
  EXPECT_NE(flat_msg.find(flat + ": images of 0 x 2 pixels"), std::string::npos) << flat_msg;
}

}  // namespace
}  // namespace ember::data
