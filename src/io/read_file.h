// Reading a whole file into memory for the file readers (safetensors, IDX, CSV, images), with the
// checks they all need: the path must name a regular file (a directory, FIFO, socket or device
// is refused before anything is read, so a FIFO never blocks), and every error is an
// ember::Error naming the reader and the path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::io::detail {

// The bytes of the regular file at `path`. `reader` starts every error message ("load",
// "CsvDataset", ...). Files larger than max_bytes are refused (naming both sizes).
std::vector<uint8_t> read_regular_file(const std::string& path, const std::string& reader,
                                       uint64_t max_bytes = UINT64_MAX);

}  // namespace ember::io::detail
