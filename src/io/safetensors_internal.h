// Internal hooks of the safetensors writer, for tests (crash simulation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::io::detail {

// Writes `size` bytes to `path` atomically (temporary file in the same folder, fsync, rename).
// With crash_after >= 0 the process exits abruptly (std::_Exit) after that many bytes, as a
// crash would: tests run it in a forked child.
void write_atomically(const std::string& path, const uint8_t* data, size_t size, int64_t crash_after = -1);

}  // namespace ember::io::detail
