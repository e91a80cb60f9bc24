// Plugin discovery and loading (dlopen), ABI checks, and the C-to-C++ error bridge.
#include "backend/registry.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "ember/error.h"
#include "graph/stats.h"
#include "kir/builder.h"

namespace ember {

namespace fs = std::filesystem;

std::string plugin_file_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Cpu: return "libember_backend_cpu.so";
    case DeviceKind::Reference: return "libember_backend_reference.so";
    case DeviceKind::Vulkan: return "libember_backend_vulkan.so";
    case DeviceKind::Cuda: return "libember_backend_cuda.so";
  }
  return "?";
}

// A program linked with libember.a through the CMake package or ember-static.pc defines this as
// its prefix's plugin folder (include/ember/plugin_dir.h); weak, so it is null otherwise.
extern "C" __attribute__((weak)) const char* ember_static_plugin_dir;

// Directories searched for plugins: $EMBER_PLUGIN_PATH (':'-separated), then the directory of
// the Ember library itself and its ember/plugins subdirectory (the installed layout), then the
// plugin folder recorded by a statically linked program, then the plugin directory of the
// install prefix this library was configured for.
static std::vector<fs::path> plugin_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("EMBER_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) dirs.emplace_back(item);
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_file_name), &info) && info.dli_fname) {
    fs::path self = fs::path(info.dli_fname).parent_path();
    dirs.push_back(self / "ember" / "plugins");
    dirs.push_back(self);
  }
  if (&ember_static_plugin_dir != nullptr && ember_static_plugin_dir) dirs.emplace_back(ember_static_plugin_dir);
#ifdef EMBER_INSTALLED_PLUGIN_DIR
  dirs.emplace_back(EMBER_INSTALLED_PLUGIN_DIR);
#endif
  return dirs;
}

std::unique_ptr<Backend> Backend::load_file(const std::string& path, const std::string& name) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw Error(fmt::format("backend '{}': cannot load {}: {}", name, path, dlerror()));
  auto entry = reinterpret_cast<ember_backend_entry_fn>(dlsym(lib, EMBER_BACKEND_ENTRY_SYMBOL));
  if (!entry) {
    dlclose(lib);
    throw Error(fmt::format("backend '{}': {} does not export {}", name, path,
                            EMBER_BACKEND_ENTRY_SYMBOL));
  }
  const ember_backend_v1* table = entry(EMBER_BACKEND_ABI_VERSION);
  if (!table || table->abi_version != EMBER_BACKEND_ABI_VERSION ||
      table->struct_size < sizeof(ember_backend_v1)) {
    uint32_t got = table ? table->abi_version : 0;
    dlclose(lib);
    throw Error(fmt::format(
        "backend '{}': plugin {} has ABI version {} but this Ember needs version {}; rebuild the "
        "plugin against this Ember",
        name, path, got, EMBER_BACKEND_ABI_VERSION));
  }
  std::unique_ptr<Backend> b(new Backend());
  b->name_ = name;
  b->library_ = lib;
  b->table_ = table;
  if (const char* env = std::getenv("EMBER_PROGRAM_CACHE"); env && std::atoi(env) > 0)
    b->program_capacity_ = size_t(std::atoi(env));
  return b;
}

namespace {
struct Slot {
  std::once_flag once;
  std::unique_ptr<Backend> backend;
  std::string why;
};
// Loaded backends live until the process ends (never destroyed): arrays held in static objects
// may free their buffers during static destruction, after any destructor here would have run.
Slot& slot(DeviceKind kind) {
  static auto* slots = new std::array<Slot, 4>;
  return (*slots)[size_t(kind)];
}
const char* kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Reference: return "reference";
    case DeviceKind::Vulkan: return "vulkan";
    case DeviceKind::Cuda: return "cuda";
  }
  return "?";
}
}  // namespace

Backend* Backend::try_get(DeviceKind kind, std::string* why) {
  Slot& s = slot(kind);
  std::call_once(s.once, [&] {
    std::string tried;
    for (const auto& dir : plugin_dirs()) {
      fs::path file = dir / plugin_file_name(kind);
      std::error_code ec;
      if (!fs::exists(file, ec)) {
        tried += ' ';  // (not `" " + dir.string()`: g++ 12 warns falsely with -Wrestrict)
        tried += dir.string();
        continue;
      }
      try {
        s.backend = load_file(file.string(), kind_name(kind));
        if (s.backend->device_count() <= 0) {
          s.why = fmt::format("backend '{}' loaded from {} but found no device", kind_name(kind),
                              file.string());
          s.backend.reset();
        }
      } catch (const Error& e) {
        s.why = e.what();
      }
      return;
    }
    s.why = fmt::format("backend '{}': {} not found (searched:{}; set EMBER_PLUGIN_PATH)",
                        kind_name(kind), plugin_file_name(kind), tried);
  });
  if (!s.backend && why) *why = s.why;
  return s.backend.get();
}

Backend& Backend::get(DeviceKind kind) {
  std::string why;
  Backend* b = try_get(kind, &why);
  if (!b) throw Error(why);
  return *b;
}

Backend::~Backend() {
  programs_.clear();  // destroys the programs no launch still holds
  // The library stays loaded: buffers freed during static destruction may still call into it.
}

void Backend::check(int32_t code, const ember_status& st, const char* what) {
  if (code == EMBER_OK) return;
  throw Error(fmt::format("{} backend, {}: {}", name_, what, st.message));
}

BufferCache& Backend::cache(int device) {
  std::lock_guard lock(cache_mutex_);
  auto& c = caches_[device];
  if (!c) c = std::make_unique<BufferCache>();
  return *c;
}

std::shared_ptr<Buffer> Backend::alloc(Device device, size_t bytes) {
  ember_buffer handle = buffer_cache_limit() > 0 ? cache(device.index).take(bytes) : nullptr;
  if (!handle) {
    ember_status st{};
    int32_t code = table_->buffer_alloc(device.index, bytes, &handle, &st);
    if (code == EMBER_ERR_OUT_OF_MEMORY) {  // cached memory may be what is missing
      empty_cache(device.index);
      st = ember_status{};
      code = table_->buffer_alloc(device.index, bytes, &handle, &st);
    }
    check(code, st, "allocating memory");
  }
  auto buf = std::make_shared<Buffer>();
  buf->backend = this;
  buf->handle = handle;
  buf->bytes = bytes;
  buf->device = device;
  account(device.index, int64_t(bytes), +1);
  return buf;
}

Buffer::~Buffer() {
  if (!handle) return;
  backend->account(device.index, -int64_t(bytes), -1);
  backend->release(device.index, handle, bytes);
}

void Backend::release(int device, ember_buffer handle, size_t bytes) {
  if (buffer_cache_limit() == 0 || !cache(device).give(handle, bytes))
    table_->buffer_free(handle);
}

void Backend::empty_cache(int device) {
  for (ember_buffer b : cache(device).drain()) table_->buffer_free(b);
}

void Backend::write(Buffer& dst, size_t offset_bytes, const void* src, size_t bytes) {
  ember_status st{};
  check(table_->buffer_write(dst.handle, offset_bytes, src, bytes, &st), st, "writing memory");
}

void Backend::read(const Buffer& src, size_t offset_bytes, void* dst, size_t bytes) {
  ember_status st{};
  check(table_->buffer_read(src.handle, offset_bytes, dst, bytes, &st), st, "reading memory");
}

std::shared_ptr<const CompiledProgram> Backend::program(const ember_kir_program& program,
                                                        uint64_t structure_hash) {
  std::lock_guard lock(mutex_);
  auto it = programs_.find(structure_hash);
  if (it != programs_.end()) {
    recency_.splice(recency_.begin(), recency_, it->second.recency);
    return it->second.program;
  }
  if (table_->supports_op)
    for (int32_t i = 0; i < program.n_insts; ++i)
      if (!table_->supports_op(EMBER_SUPPORT_KIR, program.insts[i].op))
        throw Error(fmt::format("{} backend does not support the KIR instruction '{}' (in {})", name_,
                                kir::op_name(ember_kir_op(program.insts[i].op)), program.name ? program.name : "a kernel"));
  ember_status st{};
  ember_program prog = nullptr;
  check(table_->program_create(&program, &prog, &st), st, "compiling a kernel");
  ember::stats().programs_created.fetch_add(1, std::memory_order_relaxed);
  auto compiled = std::make_shared<const CompiledProgram>(table_, prog);
  recency_.push_front(structure_hash);
  programs_.emplace(structure_hash, CachedProgram{compiled, recency_.begin()});
  evict_programs();
  return compiled;
}

void Backend::evict_programs() {
  while (programs_.size() > program_capacity_) {
    programs_.erase(recency_.back());  // a launch holding it keeps it alive until it is done
    recency_.pop_back();
  }
}

void Backend::set_program_capacity(size_t n) {
  std::lock_guard lock(mutex_);
  program_capacity_ = std::max<size_t>(n, 1);
  evict_programs();
}

size_t Backend::program_capacity() {
  std::lock_guard lock(mutex_);
  return program_capacity_;
}

size_t Backend::program_count() {
  std::lock_guard lock(mutex_);
  return programs_.size();
}

void Backend::run(const CompiledProgram& program, const ember_kir_launch& launch) {
  ember::stats().kernels.fetch_add(1, std::memory_order_relaxed);
  ember_status st{};
  int32_t code = table_->program_run(program.handle, &launch, &st);
  if (code != EMBER_OK) throw Error(st.message);
}

void Backend::library_call(int32_t op, const ember_tensor_desc* inputs, int n_inputs,
                           const ember_tensor_desc* outputs, int n_outputs, const void* attrs) {
  ember::stats().library_calls.fetch_add(1, std::memory_order_relaxed);
  if (table_->supports_op && !table_->supports_op(EMBER_SUPPORT_LIBRARY, op))
    throw Error(fmt::format("{} backend does not support library call {} (an op needing it cannot run on this device)",
                            name_, op));
  ember_status st{};
  int32_t code = table_->library_call(op, inputs, n_inputs, outputs, n_outputs, attrs, &st);
  if (code != EMBER_OK) throw Error(st.message);
}

void Backend::synchronize(int device) {
  ember_status st{};
  check(table_->synchronize(device, &st), st, "synchronizing");
}

void Backend::account(int device, int64_t delta, int delta_buffers) {
  std::lock_guard lock(mutex_);
  Counters& c = counters_[device];
  c.live += delta;
  c.buffers += delta_buffers;
  c.peak = std::max(c.peak, c.live);
}

MemoryStats Backend::stats(int device) {
  MemoryStats m;
  {
    std::lock_guard lock(mutex_);
    Counters& c = counters_[device];
    m = MemoryStats{c.live, c.peak, 0, c.buffers};
  }
  m.cached_bytes = cache(device).cached_bytes();
  return m;
}

void Backend::reset_peak(int device) {
  std::lock_guard lock(mutex_);
  Counters& c = counters_[device];
  c.peak = c.live;
}

}  // namespace ember
