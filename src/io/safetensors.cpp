// The safetensors reader and writer, atomic file writes and model/optimizer records
// (include/ember/io/safetensors.h).
#include "ember/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>

#include "io/read_file.h"
#include "io/safetensors_internal.h"

namespace ember::io {

using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation

const char* st_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::Bool: return "BOOL";
    case DType::I8: return "I8";
    case DType::I16: return "I16";
    case DType::U16: return "U16";
    case DType::U32: return "U32";
    case DType::U64: return "U64";
  }
  return "?";
}

std::optional<DType> st_dtype(const std::string& s) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (s == st_name(DType(i))) return DType(i);
  return std::nullopt;
}

[[noreturn]] void bad(const std::string& what) { throw Error("safetensors: " + what); }

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t get_uint(const json& j, const std::string& what) {
  if (!j.is_number_unsigned()) {
    if (j.is_number_integer() && j.get<int64_t>() >= 0) return uint64_t(j.get<int64_t>());
    bad(what + " must be a non-negative integer, not " + j.dump());
  }
  return j.get<uint64_t>();
}

std::string dims_str(const std::vector<uint64_t>& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

// Parses the header text, refusing duplicate keys at any level (nlohmann::json would silently keep
// the last one): a parser callback sees every key before it is stored.
json parse_unique_keys(const uint8_t* begin, const uint8_t* end) {
  struct Level {
    std::string name;  // the key this object is the value of ("" for the header itself)
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<Level> levels;
  std::string duplicate;
  auto check = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      levels.push_back({levels.empty() ? std::string() : levels.back().last_key, {}, {}});
    } else if (event == json::parse_event_t::object_end) {
      if (!levels.empty()) levels.pop_back();
    } else if (event == json::parse_event_t::key && !levels.empty() && duplicate.empty()) {
      Level& level = levels.back();
      level.last_key = parsed.get<std::string>();
      if (!level.keys.insert(level.last_key).second)
        duplicate = fmt::format("duplicate key '{}' in {}", level.last_key,
                                levels.size() == 1 ? std::string("the header") : "'" + level.name + "'");
    }
    return true;
  };
  json j;
  try {
    j = json::parse(begin, end, check);
  } catch (const json::exception& e) {
    bad(std::string("header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) bad(duplicate);
  return j;
}

// One tensor entry of the header, checked on its own: dtype, shape (every product overflow-
// checked), byte range within the data section and its size.
TensorInfo parse_entry(const std::string& key, const json& v, uint64_t data_size) {
  if (!v.is_object()) bad(fmt::format("entry '{}' is not an object", key));
  auto dt = v.find("dtype");
  auto sh = v.find("shape");
  auto off = v.find("data_offsets");
  if (dt == v.end() || sh == v.end() || off == v.end())
    bad(fmt::format("entry '{}' needs dtype, shape and data_offsets", key));
  if (!dt->is_string()) bad(fmt::format("entry '{}': dtype is not a string", key));
  std::optional<DType> dtype = st_dtype(dt->get<std::string>());
  if (!dtype)
    bad(fmt::format("entry '{}': unsupported dtype '{}' (Ember reads F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 "
                    "BOOL; it has no float8, float6, float4 or complex dtype)",
                    key, dt->get<std::string>()));
  if (!sh->is_array()) bad(fmt::format("entry '{}': shape is not an array", key));
  if (sh->size() > size_t(kMaxRank)) bad(fmt::format("entry '{}': rank {} exceeds {}", key, sh->size(), kMaxRank));
  std::vector<uint64_t> dims;
  for (const json& d : *sh) dims.push_back(get_uint(d, fmt::format("entry '{}': a shape entry", key)));
  // The element count, and the product of the non-zero sizes (the largest stride, which Shape
  // computes even for an empty tensor), must both fit in int64.
  uint64_t numel = 1, extent = 1;
  for (uint64_t d : dims) {
    if (d > uint64_t(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(extent, d == 0 ? 1 : d, &extent) || extent > uint64_t(std::numeric_limits<int64_t>::max()))
      bad(fmt::format("entry '{}': shape {} overflows int64 (its sizes multiply past 2^63 - 1)", key, dims_str(dims)));
    numel *= d;  // cannot overflow: numel <= extent
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, uint64_t(dtype_size(*dtype)), &nbytes))
    bad(fmt::format("entry '{}': {} {} overflows 64-bit byte counts", key, st_name(*dtype), dims_str(dims)));
  if (!off->is_array() || off->size() != 2) bad(fmt::format("entry '{}': data_offsets must be [begin, end]", key));
  uint64_t b = get_uint((*off)[0], fmt::format("entry '{}': data_offsets", key));
  uint64_t e = get_uint((*off)[1], fmt::format("entry '{}': data_offsets", key));
  if (b > e || e > data_size)
    bad(fmt::format("entry '{}': data_offsets [{}, {}] outside the data section ({} bytes)", key, b, e, data_size));
  if (nbytes != e - b)
    bad(fmt::format("entry '{}': {} {} needs {} bytes, data_offsets give {}", key, st_name(*dtype), dims_str(dims), nbytes,
                    e - b));
  std::vector<int64_t> sdims(dims.begin(), dims.end());
  return {key, *dtype, Shape(std::move(sdims)), b, e};
}

// As the reference implementation: the byte ranges, in order, must tile the data section exactly
// (no overlap or alias, no unused byte between, before or after them).
void check_tiling(const std::vector<TensorInfo>& tensors, uint64_t data_size) {
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  uint64_t covered = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : order) {
    if (t->begin < covered)
      bad(fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", prev->name, prev->begin, prev->end, t->name,
                      t->begin, t->end));
    if (t->begin > covered)
      bad(prev ? fmt::format("{} unused bytes [{}, {}] between '{}' and '{}'", t->begin - covered, covered, t->begin,
                             prev->name, t->name)
               : fmt::format("{} unused bytes [0, {}] before '{}', the first tensor", t->begin, t->begin, t->name));
    covered = t->end;
    prev = t;
  }
  if (covered != data_size)
    bad(prev ? fmt::format("{} bytes after the last tensor '{}' (it ends at {}, the data section holds {})",
                           data_size - covered, prev->name, covered, data_size)
             : fmt::format("{} bytes of data but no tensors", data_size));
}

// Raw little-endian bytes of an array in its own dtype.
std::vector<uint8_t> array_bytes(const Array& a) {
  return a.to_bytes();
}

}  // namespace

Header parse_header(const uint8_t* data, size_t size) {
  if (size < 8) bad(fmt::format("file too short ({} bytes): no header length", size));
  uint64_t n = read_u64_le(data);
  if (n > kMaxHeaderBytes) bad(fmt::format("header length {} exceeds the limit of {} bytes", n, kMaxHeaderBytes));
  if (n > size - 8) bad(fmt::format("header length {} runs past the end of the file ({} bytes)", n, size));
  if (n == 0 || data[8] != '{') bad("header must start with '{'");
  json j = parse_unique_keys(data + 8, data + 8 + n);
  if (!j.is_object()) bad("header must be a JSON object");
  Header h;
  h.data_offset = 8 + n;
  uint64_t data_size = uint64_t(size) - h.data_offset;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) bad("__metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) bad(fmt::format("__metadata__ value of '{}' is not a string", m.key()));
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(key, v, data_size));
  }
  check_tiling(h.tensors, data_size);
  return h;
}

SafetensorsFile parse(const uint8_t* data, size_t size, Device device) {
  Header h = parse_header(data, size);
  SafetensorsFile f;
  f.metadata = h.metadata;
  for (const TensorInfo& t : h.tensors) {
    const uint8_t* p = data + h.data_offset + t.begin;
    size_t bytes = size_t(t.end - t.begin);
    std::vector<uint8_t> aligned(p, p + bytes);  // copy: the data section need not be aligned
    if (t.dtype == DType::Bool)
      for (uint8_t& c : aligned) c = c != 0;
    f.tensors[t.name] = from_buffer(aligned.data(), t.shape, t.dtype, device);
  }
  return f;
}

std::vector<uint8_t> serialize(const TensorMap& tensors, const Metadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::vector<uint8_t>> blobs;
  uint64_t offset = 0;
  for (const auto& [name, a] : tensors) {
    if (name == "__metadata__") bad("a tensor cannot be named __metadata__");
    if (!a.defined()) bad(fmt::format("tensor '{}' is undefined", name));
    blobs.push_back(array_bytes(a));
    header[name] = {{"dtype", st_name(a.dtype())},
                    {"shape", a.shape().dims()},
                    {"data_offsets", {offset, offset + blobs.back().size()}}};
    offset += blobs.back().size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';  // the data section starts 8-byte aligned
  std::vector<uint8_t> out(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  size_t pos = 8 + text.size();
  for (const auto& b : blobs) {
    if (!b.empty()) std::memcpy(out.data() + pos, b.data(), b.size());
    pos += b.size();
  }
  return out;
}

namespace detail {

// The mode every file the program creates gets: 0666 less the umask. mkstemp creates 0600, which
// hid saved models from the user's group even where the umask allows it. The umask is read from
// /proc/self/status: umask() itself sets it, racing other threads; 022 where that is unreadable.
mode_t created_file_mode() {
  mode_t mask = 022;
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "Umask:", 6) == 0) {
        mask = mode_t(std::strtoul(line + 6, nullptr, 8));
        break;
      }
    std::fclose(f);
  }
  return mode_t(0666) & ~mask;
}

void write_atomically(const std::string& path, const uint8_t* data, size_t size, int64_t crash_after) {
  std::string tmpl = path + ".tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = mkstemp(name.data());
  if (fd < 0) throw Error(fmt::format("save: cannot create a temporary file next to {}: {}", path, std::strerror(errno)));
  std::string tmp(name.data());
  auto fail = [&](const char* what) {
    int err = errno;
    ::close(fd);
    std::remove(tmp.c_str());
    throw Error(fmt::format("save: {} {} failed: {}", what, tmp, std::strerror(err)));
  };
  if (::fchmod(fd, created_file_mode()) != 0) fail("setting the permissions of");
  size_t written = 0;
  while (written < size) {
    size_t chunk = std::min<size_t>(size - written, 1 << 20);
    if (crash_after >= 0 && int64_t(written + chunk) > crash_after) {
      chunk = size_t(crash_after) - written;
      if (chunk > 0 && ::write(fd, data + written, chunk) < 0) fail("writing");
      std::_Exit(3);  // a crash: no cleanup, no rename
    }
    ssize_t w = ::write(fd, data + written, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("writing");
    }
    written += size_t(w);
  }
  if (::fsync(fd) != 0) fail("syncing");
  if (::close(fd) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("save: closing {} failed: {}", tmp, std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw Error(fmt::format("save: renaming {} to {} failed: {}", tmp, path, std::strerror(err)));
  }
  // Make the rename itself durable.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace detail

void save_file(const std::string& path, const TensorMap& tensors, const Metadata& metadata) {
  std::vector<uint8_t> bytes = serialize(tensors, metadata);
  detail::write_atomically(path, bytes.data(), bytes.size());
}

SafetensorsFile load_file(const std::string& path, Device device) {
  std::vector<uint8_t> bytes = detail::read_regular_file(path, "load");
  try {
    return parse(bytes.data(), bytes.size(), device);
  } catch (const Error& e) {
    throw Error(fmt::format("{} (in {})", e.what(), path));
  }
}

KeyMap rename_prefixes(std::vector<std::pair<std::string, std::string>> rules) {
  return [rules = std::move(rules)](const std::string& key) -> std::optional<std::string> {
    for (const auto& [from, to] : rules)
      if (key.compare(0, from.size(), from) == 0) return to + key.substr(from.size());
    return key;
  };
}

}  // namespace ember::io

namespace ember {

namespace {

using json = nlohmann::json;

// The type and options of every leaf module (one without submodules; containers' options are
// their children's) by dotted name, "" for the model itself: "Linear {\"bias\":true,...}",
// without the options that loading converts anyway (dtype, device) and seeds.
std::map<std::string, std::string> leaf_configs(nn::Module& model) {
  std::vector<std::pair<std::string, nn::Module*>> all{{"", &model}};
  model.walk_modules([&](const std::string& name, nn::Module& m) { all.emplace_back(name, &m); });
  std::map<std::string, std::string> out;
  for (const auto& [name, m] : all) {
    const std::string prefix = name.empty() ? "" : name + ".";
    const bool leaf = std::none_of(all.begin(), all.end(), [&](const auto& other) {
      return other.first.size() > prefix.size() && other.first.compare(0, prefix.size(), prefix) == 0;
    });
    if (!leaf) continue;
    std::string options = m->config();
    json j = json::parse(options, nullptr, false);
    if (j.is_object()) {
      for (const char* key : {"dtype", "device", "seed"}) j.erase(key);
      options = j.dump();
    }
    out[name] = m->type_name() + " " + options;
  }
  return out;
}

std::string module_label(const std::string& name) { return name.empty() ? "the model" : "module '" + name + "'"; }

// Throws when a module recorded in the file has another type or other options in `model`.
void check_configs(nn::Module& model, const io::Metadata& metadata, const std::string& path) {
  auto it = metadata.find("ember.config");
  if (it == metadata.end()) return;
  json saved = json::parse(it->second, nullptr, false);
  // A record that is not an object of strings is refused, not skipped (it would silently turn
  // the check off).
  const bool well_formed =
      saved.is_object() && std::all_of(saved.begin(), saved.end(), [](const json& v) { return v.is_string(); });
  if (!well_formed) throw Error(fmt::format("load: {} has a malformed 'ember.config' record", path));
  std::string mismatches;
  int count = 0;
  for (const auto& [name, now] : leaf_configs(model)) {
    auto s = saved.find(name);
    if (s == saved.end() || s->get<std::string>() == now) continue;
    if (++count <= 3)
      mismatches += fmt::format("\n  {}: saved as {}, this model has {}", module_label(name), s->get<std::string>(), now);
  }
  if (count)
    throw Error(fmt::format("load: {} was saved from a model with other module options ({} module{} differ):{}{}\n"
                            "Build the model with the saved options, or pass check_config = false to load the values "
                            "anyway.",
                            path, count, count == 1 ? "" : "s", mismatches, count > 3 ? "\n  ..." : ""));
}

}  // namespace

void save(nn::Module& model, const std::string& path) {
  io::save_file(path, model.state_dict(),
                {{"format", "pt"}, {"ember.module", model.type_name()}, {"ember.config", json(leaf_configs(model)).dump()}});
}

void load(nn::Module& model, const std::string& path, const io::LoadOptions& opts) {
  io::SafetensorsFile f = io::load_file(path);
  if (opts.check_config && !opts.remap) check_configs(model, f.metadata, path);
  nn::StateDict state;
  for (auto& [key, value] : f.tensors) {
    std::optional<std::string> name = opts.remap ? opts.remap(key) : std::optional<std::string>(key);
    if (!name) continue;
    if (!state.emplace(*name, value).second)
      throw Error(fmt::format("load: two keys of {} map to '{}'", path, *name));
  }
  try {
    model.load_state_dict(state, opts.strict);
  } catch (const Error& e) {
    throw Error(fmt::format("{} (loading {})", e.what(), path));
  }
}

void save(optim::Optimizer& optimizer, const std::string& path) {
  io::save_file(path, optimizer.state_dict(), {{"ember.optimizer", optimizer.type_name()}});
}

void load(optim::Optimizer& optimizer, const std::string& path) {
  io::SafetensorsFile f = io::load_file(path);
  auto it = f.metadata.find("ember.optimizer");
  if (it != f.metadata.end() && it->second != optimizer.type_name())
    throw Error(fmt::format("load: {} holds {} state, not {}", path, it->second, optimizer.type_name()));
  optimizer.load_state_dict(f.tensors);
}

}  // namespace ember
