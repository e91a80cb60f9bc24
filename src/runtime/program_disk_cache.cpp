// The compiled-program cache on disk (program_disk_cache.h): entry format, checked loads, atomic
// stores, the size bound with least-recently-used eviction, and the C services table for plugins.
#include "runtime/program_disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

namespace ember::program_disk_cache {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'P', 'C', '1'};
constexpr uint32_t kFormat = 1;
constexpr uint64_t kDefaultMaxBytes = uint64_t(1) << 30;
constexpr uint64_t kLargestEntry = uint64_t(1) << 30;  // a larger file is not read
// A temporary file this old is left over from a process that died while storing.
constexpr auto kStaleTemp = std::chrono::minutes(10);

// The start of every entry file; the plugin's name, the key and the payload follow.
struct Header {
  char magic[8];
  uint32_t format;
  uint32_t plugin_bytes;
  uint64_t key_bytes;
  uint64_t payload_bytes;
  uint64_t checksum;  // FNV-1a over the plugin's name, the key and the payload
};
static_assert(sizeof(Header) == 40);

std::atomic<int64_t> g_hits{0}, g_misses{0}, g_stores{0};

uint64_t fnv1a(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= c[i];
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t checksum(std::string_view plugin, std::string_view key, const void* payload, size_t bytes) {
  return fnv1a(payload, bytes, fnv1a(key.data(), key.size(), fnv1a(plugin.data(), plugin.size())));
}

// Plugin names become file-name prefixes: lower-case letters, digits and '_' only.
bool valid_plugin(std::string_view p) {
  if (p.empty() || p.size() > 32) return false;
  return std::all_of(p.begin(), p.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

bool make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos < dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return ::access(dir.c_str(), W_OK) == 0;
}

// "12345", "64K", "512M", "1G" -> bytes; nullopt if it is none of those.
std::optional<uint64_t> parse_size(const char* s) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || errno != 0 || *s == '-') return std::nullopt;
  uint64_t scale = 1;
  if (*end == 'K' || *end == 'k') scale = uint64_t(1) << 10;
  else if (*end == 'M' || *end == 'm') scale = uint64_t(1) << 20;
  else if (*end == 'G' || *end == 'g') scale = uint64_t(1) << 30;
  if (scale != 1) ++end;
  if (*end != '\0' || v > UINT64_MAX / scale) return std::nullopt;
  return uint64_t(v) * scale;
}

enum class FileKind { Entry, Legacy, Temp, Other };

// What a file in the cache folder is, by its name: an entry (`cpu-0123456789abcdef.bin`), a file
// of the per-plugin caches this one replaced (`ember_<hash>.so|.cpp`, `vulkan_<hash>.spv` and
// their temporaries), a store in progress or left over (`<entry>.<pid>.<n>.tmp`), or something
// else, which the cache never touches.
FileKind kind_of(const std::string& name) {
  const size_t dash = name.find('-');
  const bool entry_like = dash != std::string::npos && valid_plugin(std::string_view(name).substr(0, dash)) &&
                          name.size() >= dash + 21 && name.compare(dash + 17, 4, ".bin") == 0 &&
                          std::all_of(name.begin() + long(dash) + 1, name.begin() + long(dash) + 17,
                                      [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (entry_like && name.size() == dash + 21) return FileKind::Entry;
  if (entry_like && name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) return FileKind::Temp;
  if (name.rfind("ember_", 0) == 0 || name.rfind("vulkan_", 0) == 0) return FileKind::Legacy;
  return FileKind::Other;
}

struct CacheFile {
  fs::path path;
  FileKind kind;
  uint64_t bytes;
  fs::file_time_type used;  // last write: stores, and loads touch their entry
};

std::vector<CacheFile> list_files(const std::string& dir) {
  std::vector<CacheFile> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    const FileKind k = kind_of(it->path().filename().string());
    if (k == FileKind::Other) continue;
    const uint64_t bytes = it->file_size(e2);
    if (e2) continue;  // removed meanwhile
    const fs::file_time_type t = it->last_write_time(e2);
    if (e2) continue;
    files.push_back({it->path(), k, bytes, t});
  }
  return files;
}

// Bytes each folder is thought to hold (entries and legacy files), so that a store rescans the
// folder only when the bound may be passed.
std::mutex g_usage_mutex;
std::map<std::string, uint64_t>& usage() {
  static auto* m = new std::map<std::string, uint64_t>;  // never destroyed (plugins may store late)
  return *m;
}

// Removes the least recently used files until the folder holds at most three quarters of `cap`
// (so that the next stores do not each rescan it), and stale temporaries; returns what is left.
uint64_t evict(const std::string& dir, uint64_t cap) {
  std::vector<CacheFile> files = list_files(dir);
  const auto now = fs::file_time_type::clock::now();
  uint64_t total = 0;
  std::vector<CacheFile> counted;
  for (CacheFile& f : files) {
    if (f.kind == FileKind::Temp) {
      std::error_code ec;
      if (now - f.used > kStaleTemp) fs::remove(f.path, ec);
      continue;
    }
    total += f.bytes;
    counted.push_back(std::move(f));
  }
  if (total <= cap) return total;
  std::sort(counted.begin(), counted.end(), [](const CacheFile& a, const CacheFile& b) { return a.used < b.used; });
  const uint64_t target = cap / 4 * 3;
  for (const CacheFile& f : counted) {
    if (total <= target) break;
    std::error_code ec;
    if (fs::remove(f.path, ec) || !fs::exists(f.path, ec)) total -= f.bytes;
  }
  return total;
}

void account(const std::string& dir, uint64_t added) {
  const uint64_t cap = max_bytes();
  std::lock_guard lock(g_usage_mutex);
  auto it = usage().find(dir);
  if (it == usage().end()) {
    uint64_t total = 0;
    for (const CacheFile& f : list_files(dir))
      if (f.kind != FileKind::Temp) total += f.bytes;
    it = usage().emplace(dir, total).first;  // the scan already counts the new entry
  } else {
    it->second += added;
  }
  if (it->second > cap) it->second = evict(dir, cap);
}

bool write_all(int fd, const void* p, size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= size_t(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= size_t(r);
  }
  return true;
}

// ---- the C table for plugins ----------------------------------------------------------------

int32_t c_load(const char* plugin, const void* key, size_t key_bytes, void** data, size_t* bytes) {
  try {
    if (!plugin || !key || !data || !bytes) return 0;
    std::optional<std::vector<uint8_t>> got = load(plugin, std::string_view(static_cast<const char*>(key), key_bytes));
    if (!got) return 0;
    void* p = std::malloc(std::max<size_t>(got->size(), 1));
    if (!p) return 0;
    std::memcpy(p, got->data(), got->size());
    *data = p;
    *bytes = got->size();
    return 1;
  } catch (...) {
    return 0;
  }
}

void c_free(void* data) { std::free(data); }

int32_t c_store(const char* plugin, const void* key, size_t key_bytes, const void* data, size_t bytes) {
  try {
    if (!plugin || !key || (!data && bytes)) return 0;
    return store(plugin, std::string_view(static_cast<const char*>(key), key_bytes), data, bytes) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

}  // namespace

uint64_t max_bytes() {
  const char* e = std::getenv("EMBER_CACHE_MAX_BYTES");
  if (!e || !*e) return kDefaultMaxBytes;
  if (std::optional<uint64_t> v = parse_size(e)) return *v;
  static std::once_flag warned;
  std::call_once(warned, [&] {
    std::fprintf(stderr,
                 "ember: EMBER_CACHE_MAX_BYTES=%s is not a size (bytes, or a number followed by K, M or G); "
                 "using 1G\n",
                 e);
  });
  return kDefaultMaxBytes;
}

std::string folder(std::string* tried) {
  std::string dir;
  if (const char* e = std::getenv("EMBER_CACHE_DIR"); e && *e) dir = e;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/ember/kernels";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/ember/kernels";
  if (tried) *tried = dir;
  if (max_bytes() == 0) return "";
  return !dir.empty() && make_dirs(dir) ? dir : std::string();
}

std::string entry_path(std::string_view plugin, std::string_view key) {
  const std::string dir = folder();
  if (dir.empty() || !valid_plugin(plugin)) return "";
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a(key.data(), key.size()));
  return dir + "/" + std::string(plugin) + "-" + hash + ".bin";
}

std::optional<std::vector<uint8_t>> load(std::string_view plugin, std::string_view key) {
  const std::string path = entry_path(plugin, key);
  auto miss = [] {
    ++g_misses;
    return std::nullopt;
  };
  if (path.empty()) return miss();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return miss();
  struct stat st{};
  std::vector<uint8_t> buf;
  bool ok = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) >= sizeof(Header) && uint64_t(st.st_size) <= kLargestEntry;
  if (ok) {
    buf.resize(size_t(st.st_size));
    ok = read_all(fd, buf.data(), buf.size());
  }
  ::close(fd);
  if (!ok) return miss();
  Header h;
  std::memcpy(&h, buf.data(), sizeof h);
  const uint64_t body = uint64_t(buf.size()) - sizeof h;
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.format != kFormat || h.plugin_bytes != plugin.size() ||
      h.key_bytes != key.size() || uint64_t(plugin.size()) + key.size() > body ||
      h.payload_bytes != body - plugin.size() - key.size())
    return miss();
  const auto* p = reinterpret_cast<const char*>(buf.data()) + sizeof h;
  if (std::string_view(p, plugin.size()) != plugin || std::string_view(p + plugin.size(), key.size()) != key)
    return miss();  // another key with the same hash, or another plugin's
  const size_t payload_at = sizeof h + plugin.size() + key.size();
  if (checksum(plugin, key, buf.data() + payload_at, size_t(h.payload_bytes)) != h.checksum) return miss();
  buf.erase(buf.begin(), buf.begin() + long(payload_at));
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // used now (least-recently-used eviction)
  ++g_hits;
  return buf;
}

bool store(std::string_view plugin, std::string_view key, const void* data, size_t bytes) {
  const std::string path = entry_path(plugin, key);
  if (path.empty()) return false;
  static std::atomic<uint64_t> sequence{0};
  const std::string tmp = path + "." + std::to_string(::getpid()) + "." + std::to_string(sequence++) + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.format = kFormat;
  h.plugin_bytes = uint32_t(plugin.size());
  h.key_bytes = key.size();
  h.payload_bytes = bytes;
  h.checksum = checksum(plugin, key, data, bytes);
  bool ok = write_all(fd, &h, sizeof h) && write_all(fd, plugin.data(), plugin.size()) &&
            write_all(fd, key.data(), key.size()) && write_all(fd, data, bytes);
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  ++g_stores;
  account(path.substr(0, path.rfind('/')), sizeof h + plugin.size() + key.size() + bytes);
  return true;
}

Summary summary() {
  Summary s;
  s.folder = folder(&s.tried);
  s.max_bytes = max_bytes();
  if (s.folder.empty()) return s;
  for (const CacheFile& f : list_files(s.folder)) {
    if (f.kind == FileKind::Entry) {
      ++s.entries;
      s.entry_bytes += f.bytes;
    } else if (f.kind == FileKind::Legacy) {
      ++s.legacy_files;
      s.legacy_bytes += f.bytes;
    }
  }
  return s;
}

uint64_t clear() {
  std::string tried;
  const std::string dir = folder(&tried);
  if (dir.empty()) return 0;
  uint64_t freed = 0;
  std::lock_guard lock(g_usage_mutex);
  for (const CacheFile& f : list_files(dir)) {
    std::error_code ec;
    if (fs::remove(f.path, ec)) freed += f.bytes;
  }
  usage().erase(dir);
  return freed;
}

Counters counters() { return {g_hits.load(), g_misses.load(), g_stores.load()}; }

const ember_host_services* host_services() {
  static const ember_host_services services = {sizeof(ember_host_services), c_load, c_free, c_store};
  return &services;
}

}  // namespace ember::program_disk_cache
