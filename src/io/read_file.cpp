// read_regular_file (src/io/read_file.h): open without blocking, check the type with fstat, then
// read to the end.
#include "io/read_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "ember/error.h"

namespace ember::io::detail {

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Closes the descriptor on every path out of read_regular_file.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::vector<uint8_t> read_regular_file(const std::string& path, const std::string& reader, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever; fstat then refuses it.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) throw Error(fmt::format("{}: cannot open {}: {}", reader, path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw Error(fmt::format("{}: cannot stat {}: {}", reader, path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    throw Error(fmt::format("{}: cannot read {}: it is {}, not a regular file", reader, path, file_kind(st.st_mode)));
  uint64_t size = uint64_t(st.st_size);
  if (size > max_bytes)
    throw Error(fmt::format("{}: {} has {} bytes, more than the limit of {} bytes", reader, path, size, max_bytes));
  std::vector<uint8_t> bytes;
  auto read_some = [&](uint8_t* to, size_t n) -> size_t {
    for (;;) {
      ssize_t got = ::read(f.fd, to, n);
      if (got >= 0) return size_t(got);
      if (errno != EINTR) throw Error(fmt::format("{}: cannot read {}: {}", reader, path, std::strerror(errno)));
    }
  };
  try {
    bytes.resize(size_t(size));
    size_t have = 0;
    while (have < bytes.size()) {
      size_t got = read_some(bytes.data() + have, bytes.size() - have);
      if (got == 0) break;  // the file shrank while being read
      have += got;
    }
    bytes.resize(have);
    // st_size is a hint (the file may grow, /proc files report 0): read on to the end of file.
    uint8_t chunk[65536];
    while (size_t got = read_some(chunk, sizeof chunk)) {
      if (bytes.size() + got > max_bytes)
        throw Error(fmt::format("{}: {} grew past the limit of {} bytes while being read", reader, path, max_bytes));
      bytes.insert(bytes.end(), chunk, chunk + got);
    }
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("{}: {} ({} bytes) does not fit in memory", reader, path, size));
  }
  return bytes;
}

}  // namespace ember::io::detail
