// Image decoding limits: an image whose header declares more pixels than the limit (a decode bomb:
// a tiny file that would expand to gigabytes) is refused from its header, naming the file and the
// size, before anything is decoded; images within the limit decode to known pixels.
#include <gtest/gtest.h>
#include <zlib.h>

#include <ember/ember.h>

#include <filesystem>
#include <fstream>

#include "data/readers_internal.h"

namespace ember::data {
namespace {

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(v >> s));
}

void chunk(std::vector<uint8_t>& png, const char* type, const std::vector<uint8_t>& body) {
  put32(png, uint32_t(body.size()));
  std::vector<uint8_t> typed(type, type + 4);
  typed.insert(typed.end(), body.begin(), body.end());
  png.insert(png.end(), typed.begin(), typed.end());
  put32(png, uint32_t(crc32(0, typed.data(), uInt(typed.size()))));
}

// An 8-bit grey PNG of width x height whose rows are `pixels` (zlib-compressed with filter 0).
std::vector<uint8_t> grey_png(uint32_t width, uint32_t height, const std::vector<uint8_t>& pixels) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put32(ihdr, width);
  put32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 0, 0, 0, 0});
  chunk(png, "IHDR", ihdr);
  std::vector<uint8_t> raw;
  for (size_t y = 0; y * width < pixels.size(); ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), pixels.begin() + long(y * width), pixels.begin() + long((y + 1) * width));
  }
  std::vector<uint8_t> z(compressBound(uLong(raw.size())));
  uLongf zn = uLongf(z.size());
  compress(z.data(), &zn, raw.data(), uLong(raw.size()));
  z.resize(zn);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", {});
  return png;
}

std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
  return path;
}

TEST(ImageLoadTest, DecodesKnownPixels) {
  Image img = load_image(write_file("ember_small.png", grey_png(3, 2, {0, 51, 102, 153, 204, 255})));
  EXPECT_EQ(img.channels, 1);
  EXPECT_EQ(img.height, 2);
  EXPECT_EQ(img.width, 3);
  EXPECT_FLOAT_EQ(img.at(0, 1, 0), 153.0f / 255.0f);
  EXPECT_FLOAT_EQ(img.at(0, 1, 2), 1.0f);
}

TEST(ImageLoadTest, DecodeBombIsRefusedFromItsHeader) {
  // 20,000 x 20,000 declared (400 M pixels, within stb_image's own limit of 2^30 bytes); the data
  // holds one row.
  std::string path = write_file("ember_bomb.png", grey_png(20000, 20000, std::vector<uint8_t>(20000, 0)));
  try {
    load_image(path);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": 20000 x 20000 pixels is more than the limit of 67108864 pixels"),
              std::string::npos)
        << e.what();
  }
  // The limit is a parameter.
  std::string small = write_file("ember_small2.png", grey_png(3, 2, {0, 51, 102, 153, 204, 255}));
  EXPECT_THROW(detail::load_image(small, 0, 5), Error);
  EXPECT_EQ(detail::load_image(small, 0, 6).width, 3);
}

}  // namespace
}  // namespace ember::data
