// Internal entry points of the IDX and image readers, for the fuzz targets and tests: decoding IDX
// bytes held in memory (gzip or not) and decoding an image with an explicit pixel limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ember/data/idx.h"
#include "ember/data/image.h"

namespace ember::data::detail {

// Decodes IDX bytes as stored in a file: gzip-compressed (detected from 1f 8b; one or more
// members) or not. A gzip stream is inflated only up to the size its IDX header declares, plus
// one byte to detect excess; `name` (the path) starts every error message.
IdxArray decode_idx(const uint8_t* data, size_t size, const std::string& name);

// Images whose header declares more pixels are refused before decoding (decode bombs: a small
// file can declare gigabytes). 2^26 = 8192 x 8192.
inline constexpr int64_t kMaxImagePixels = int64_t(1) << 26;
// load_image with the pixel limit as a parameter.
Image load_image(const std::string& path, int channels, int64_t max_pixels);

}  // namespace ember::data::detail
