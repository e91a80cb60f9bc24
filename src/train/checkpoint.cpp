// The run folder's checkpoint files: durable atomic writes with checksums, the cleanup of leftover
// temporary files, and finding (and repairing) the newest complete checkpoint on resume.
#include "train/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "ember/error.h"

namespace ember::train::checkpoint {

using json = nlohmann::json;

namespace {

// The N of EMBER_TEST_CHECKPOINT_KILL_AFTER, or -1.
int64_t kill_after() {
  static const int64_t n = [] {
    const char* env = std::getenv("EMBER_TEST_CHECKPOINT_KILL_AFTER");
    return env && *env ? std::strtoll(env, nullptr, 10) : int64_t(-1);
  }();
  return n;
}

std::string errno_text() { return std::strerror(errno); }

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error("checkpoint: cannot open the folder " + dir.string() + " to sync it: " + errno_text());
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error("checkpoint: syncing the folder " + dir.string() + " failed: " + errno_text());
}

bool is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// NAME.tmp-XXXXXX with six letters or digits (mkstemp's pattern, used by every Ember writer).
bool is_temporary_name(const std::string& name) {
  const std::string tag = ".tmp-";
  if (name.size() < tag.size() + 7) return false;
  size_t at = name.size() - 6 - tag.size();
  if (name.compare(at, tag.size(), tag) != 0) return false;
  return std::all_of(name.end() - 6, name.end(), is_alnum);
}

std::string random_suffix() {
  static std::atomic<uint64_t> counter{0};
  uint64_t x = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ (uint64_t(::getpid()) << 32) ^
               (counter++ * 0x9e3779b97f4a7c15ULL);
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s;
  for (int i = 0; i < 6; ++i) {
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    s += kChars[x % 62];
  }
  return s;
}

void write_all(int fd, const uint8_t* data, size_t size, const std::string& name) {
  while (size > 0) {
    ssize_t w = ::write(fd, data, std::min<size_t>(size, 1 << 20));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error("checkpoint: writing " + name + " failed: " + errno_text());
    }
    data += w;
    size -= size_t(w);
  }
}

}  // namespace

void step(const char* what, const fs::path& file) {
  static std::atomic<int64_t> count{0};
  int64_t limit = kill_after();
  if (limit < 0) return;
  if (++count == limit) {
    std::string line = "ember: test hook: killed after checkpoint step " + std::to_string(limit) + " (" + what + " " +
                       file.string() + ")\n";
    [[maybe_unused]] ssize_t ignored = ::write(2, line.data(), line.size());
    ::_exit(kKilledExitCode);
  }
}

uint32_t crc32(const uint8_t* data, size_t size) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  while (size > 0) {
    uInt chunk = uInt(std::min<size_t>(size, 1u << 30));
    crc = ::crc32(crc, data, chunk);
    data += chunk;
    size -= chunk;
  }
  return uint32_t(crc);
}

json to_json(const FileEntry& f) { return {{"path", f.path}, {"size", f.size}, {"crc32", f.crc32}}; }

FileEntry file_entry(const json& j) {
  FileEntry f;
  f.path = j.at("path").get<std::string>();
  f.size = j.at("size").get<uint64_t>();
  f.crc32 = j.at("crc32").get<uint32_t>();
  if (f.path.empty() || fs::path(f.path).is_absolute() || f.path.find("..") != std::string::npos)
    throw Error("checkpoint: file entry '" + f.path + "' is not a path inside the run folder");
  return f;
}

FileEntry write_file(const fs::path& run_dir, const std::string& rel, const Bytes& bytes) {
  fs::path target = run_dir / rel;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = target.string() + ".tmp-" + random_suffix();
    // 0666: the process umask applies, as for any file the user's programs create.
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) throw Error("checkpoint: cannot create " + tmp + ": " + errno_text());
  }
  if (fd < 0) throw Error("checkpoint: cannot create a temporary file next to " + target.string());
  try {
    size_t half = bytes.size() / 2;
    write_all(fd, bytes.data(), half, tmp);
    step("wrote part of", tmp);
    write_all(fd, bytes.data() + half, bytes.size() - half, tmp);
    if (::fsync(fd) != 0) throw Error("checkpoint: syncing " + tmp + " failed: " + errno_text());
    int rc = ::close(fd);
    fd = -1;
    if (rc != 0) throw Error("checkpoint: closing " + tmp + " failed: " + errno_text());
    step("wrote", tmp);
    if (std::rename(tmp.c_str(), target.c_str()) != 0)
      throw Error("checkpoint: renaming " + tmp + " to " + target.string() + " failed: " + errno_text());
  } catch (...) {
    if (fd >= 0) ::close(fd);
    std::remove(tmp.c_str());
    throw;
  }
  fsync_dir(target.parent_path());
  step("renamed", target);
  return {rel, bytes.size(), crc32(bytes.data(), bytes.size())};
}

Bytes read_file(const fs::path& path) {
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw Error("checkpoint: " + path.string() + " does not exist");
  if (!fs::is_regular_file(st)) throw Error("checkpoint: " + path.string() + " is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("checkpoint: cannot open " + path.string());
  Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("checkpoint: cannot read " + path.string());
  return bytes;
}

bool matches(const fs::path& run_dir, const FileEntry& f, Bytes* bytes, std::string* why) {
  auto fail = [&](const std::string& text) {
    if (why) *why = text;
    return false;
  };
  fs::path p = run_dir / f.path;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return fail(f.path + " is missing");
  uint64_t size = fs::file_size(p, ec);
  if (ec || size != f.size)
    return fail(f.path + " has " + std::to_string(size) + " bytes, not " + std::to_string(f.size));
  Bytes content = read_file(p);
  if (content.size() != f.size || crc32(content.data(), content.size()) != f.crc32)
    return fail(f.path + " does not match its checksum");
  if (bytes) *bytes = std::move(content);
  return true;
}

std::vector<std::string> remove_temporaries(const fs::path& run_dir) {
  std::vector<std::string> removed;
  for (const fs::path& dir : {run_dir, run_dir / "checkpoints"}) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      std::string name = e.path().filename().string();
      if (!is_temporary_name(name) || !e.is_regular_file(ec)) continue;
      if (fs::remove(e.path(), ec)) removed.push_back(fs::relative(e.path(), run_dir, ec).string());
    }
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

std::string epoch_stem(int64_t epoch) {
  char stem[64];
  std::snprintf(stem, sizeof stem, "checkpoints/epoch-%04lld", (long long)epoch);
  return stem;
}

std::vector<int64_t> epochs_on_disk(const fs::path& run_dir) {
  std::set<int64_t> epochs;
  std::error_code ec;
  fs::path dir = run_dir / "checkpoints";
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("epoch-", 0) != 0 || is_temporary_name(name)) continue;
    size_t end = name.find('.', 6);
    std::string digits = name.substr(6, end == std::string::npos ? std::string::npos : end - 6);
    if (digits.empty() || digits.size() > 12 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    epochs.insert(std::stoll(digits));
  }
  return {epochs.begin(), epochs.end()};
}

void remove_epoch(const fs::path& run_dir, int64_t epoch) {
  std::string stem = epoch_stem(epoch);
  // The state file first: an epoch whose data files are gone would fail to verify anyway.
  for (const char* ext : {".json", ".model.safetensors", ".optim.safetensors"}) {
    fs::path p = run_dir / (stem + ext);
    std::error_code ec;
    if (fs::remove(p, ec)) step("removed", p);
  }
}

namespace {

struct Candidate {
  int64_t epoch = 0;
  json state;
  std::string raw;     // the bytes of the state file
  std::string source;  // its path in the run folder
};

// Parses a state file; on failure appends a note naming the file and returns false.
bool parse_state(const fs::path& run_dir, const std::string& rel, Candidate& c, std::vector<std::string>& notes) {
  try {
    Bytes b = read_file(run_dir / rel);
    c.raw.assign(b.begin(), b.end());
    if (c.raw.empty()) {
      notes.push_back(rel + " is empty");
      return false;
    }
    c.state = json::parse(c.raw);
    c.epoch = c.state.at("epoch").get<int64_t>();
    c.source = rel;
    return true;
  } catch (const json::exception& e) {
    notes.push_back(rel + " is not a valid checkpoint state (" + e.what() + ")");
  } catch (const Error& e) {
    notes.push_back(e.what());
  }
  return false;
}

}  // namespace

bool find_resume_point(const fs::path& run_dir, ResumePoint& out) {
  std::vector<std::string> problems;
  std::vector<Candidate> candidates;
  bool any = false;
  Candidate main_state;
  bool main_ok = false;
  std::error_code ec;
  bool main_exists = fs::exists(fs::symlink_status(run_dir / "checkpoint.json", ec)), any_epoch_state = false;
  if (main_exists) {
    any = true;
    main_ok = parse_state(run_dir, "checkpoint.json", main_state, problems);
    if (main_ok) candidates.push_back(main_state);
  }
  std::vector<int64_t> epochs = epochs_on_disk(run_dir);
  for (int64_t e : epochs) {
    any = true;
    std::string rel = epoch_stem(e) + ".json";
    if (!fs::exists(run_dir / rel, ec)) {
      problems.push_back("epoch " + std::to_string(e) + " has no " + rel + " (its checkpoint was not completed)");
      continue;
    }
    any_epoch_state = true;
    Candidate c;
    if (parse_state(run_dir, rel, c, problems)) candidates.push_back(std::move(c));
  }
  if (!any) return false;
  // Newest first; checkpoint.json before an epoch file of the same epoch.
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) { return a.epoch > b.epoch; });

  const Candidate* chosen = nullptr;
  for (const Candidate& c : candidates) {
    try {
      FileEntry model = file_entry(c.state.at("files").at("model"));
      FileEntry optim = file_entry(c.state.at("files").at("optimizer"));
      std::string why;
      if (matches(run_dir, model, &out.model, &why) && matches(run_dir, optim, &out.optimizer, &why)) {
        chosen = &c;
        break;
      }
      problems.push_back(c.source + " (epoch " + std::to_string(c.epoch) + "): " + why);
    } catch (const json::exception& e) {
      problems.push_back(c.source + " does not name its files (" + e.what() + ")");
    } catch (const Error& e) {
      problems.push_back(c.source + ": " + e.what());
    }
  }
  if (!chosen && candidates.empty() && !main_exists && !any_epoch_state) {
    // Only data files of a first epoch whose checkpoint never completed: nothing to resume.
    for (const auto& p : problems) out.notes.push_back("checkpoint: " + p);
    return false;
  }
  if (!chosen) {
    std::string text = "cannot resume from " + run_dir.string() + ": no complete checkpoint";
    for (const auto& p : problems) text += "\n  " + p;
    throw Error(text);
  }
  out.state = chosen->state;
  int64_t epoch = chosen->epoch;
  bool fell_back = !main_ok || main_state.epoch != epoch || main_state.raw != chosen->raw;
  for (const auto& p : problems) out.notes.push_back("checkpoint: " + p);

  // Repairs: the folder is made to match the chosen epoch.
  if (fell_back) {
    write_file(run_dir, "checkpoint.json", Bytes(chosen->raw.begin(), chosen->raw.end()));
    out.notes.push_back("checkpoint: resuming from epoch " + std::to_string(epoch) + " (" + chosen->source +
                        "), the newest complete checkpoint; rewrote checkpoint.json from it");
  }
  if (out.state.contains("last")) {
    FileEntry last = file_entry(out.state.at("last"));
    std::string why;
    if (!matches(run_dir, last, nullptr, &why)) {
      write_file(run_dir, last.path, out.model);
      out.notes.push_back("checkpoint: " + why + " (an interrupted checkpoint write); rewrote it from " +
                          out.state.at("files").at("model").at("path").get<std::string>());
    }
  }
  for (int64_t e : epochs)
    if (e < epoch - 1) {  // an interrupted removal after the last commit: only two epochs are kept
      remove_epoch(run_dir, e);
      out.notes.push_back("checkpoint: removed the files of epoch " + std::to_string(e) + " (only the last two are kept)");
    } else if (e > epoch) {
      remove_epoch(run_dir, e);
      out.notes.push_back("checkpoint: removed the incomplete files of epoch " + std::to_string(e) +
                          " (that epoch is trained again)");
    }
  return true;
}

}  // namespace ember::train::checkpoint
