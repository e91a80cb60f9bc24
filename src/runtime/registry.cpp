// Plugin discovery and loading (dlopen), ABI checks, and the C-to-C++ error bridge.
#include "runtime/registry.h"

#include <dlfcn.h>
#include <unistd.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <deque>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "core/device_kinds.h"
#include "runtime/program_disk_cache.h"
#include "runtime/work_recorder.h"
#include "ember/dtype.h"
#include "ember/error.h"
#include "runtime/stats.h"
#include "kir/builder.h"
#include "kir/decompose.h"
#include "kir/kir_text.h"

namespace ember {

namespace fs = std::filesystem;

// The smallest table a v2 plugin may have: everything up to library_call; the fields after it
// (events, buffer_copy) are optional.
constexpr size_t kMinTableSize = offsetof(ember_backend_v2, library_call) + sizeof(void*);

std::unique_ptr<Backend> Backend::load_file(const std::string& path, const std::string& name) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw Error(fmt::format("backend '{}': cannot load {}: {}", name, path, dlerror()));
  auto entry = reinterpret_cast<ember_backend_entry_fn>(dlsym(lib, EMBER_BACKEND_ENTRY_SYMBOL));
  if (!entry) {
    dlclose(lib);
    throw Error(fmt::format("backend '{}': {} does not export {}", name, path,
                            EMBER_BACKEND_ENTRY_SYMBOL));
  }
  const ember_backend_v2* table = entry(EMBER_BACKEND_ABI_VERSION);
  // abi_version is the first field of every version's table: a plugin that does not serve this
  // version is asked for the older ones so that the message can name the version it was built for.
  uint32_t got = table ? table->abi_version : 0;
  for (uint32_t older = 1; !table && older < EMBER_BACKEND_ABI_VERSION && got == 0; ++older)
    if (const auto* t = reinterpret_cast<const uint32_t*>(entry(older)); t && *t == older) got = older;
  if (!table || table->abi_version != EMBER_BACKEND_ABI_VERSION) {
    dlclose(lib);
    throw Error(fmt::format(
        "backend '{}': plugin {} has ABI version {} but this Ember needs version {}; rebuild the "
        "plugin against this Ember",
        name, path, got == 0 ? std::string("unknown") : std::to_string(got), EMBER_BACKEND_ABI_VERSION));
  }
  if (table->struct_size < kMinTableSize) {
    uint32_t size = table->struct_size;
    dlclose(lib);
    throw Error(fmt::format("backend '{}': plugin {} has a {}-byte table, smaller than the {} bytes ABI "
                            "version {} requires",
                            name, path, size, kMinTableSize, EMBER_BACKEND_ABI_VERSION));
  }
  std::unique_ptr<Backend> b(new Backend());
  b->name_ = name;
  b->library_ = lib;
  // Fields beyond the plugin's table stay null: the optional features it does not have.
  std::memcpy(&b->table_, table, std::min<size_t>(table->struct_size, sizeof(ember_backend_v2)));
  if (b->table_.attach_host) b->table_.attach_host(program_disk_cache::host_services());
  b->device_states_ = std::max(0, b->table_.device_count());
  b->devices_ = std::make_unique<DeviceState[]>(size_t(b->device_states_));
  if (const char* env = std::getenv("EMBER_PROGRAM_CACHE"); env && std::atoi(env) > 0)
    b->program_capacity_ = size_t(std::atoi(env));
  return b;
}

namespace {
// EMBER_KIR_DUMP=dir: every program a device compiles is written to dir as <structure hash>-<n>.kir
// (kir/kir_text.h), before any decomposition: the CUDA code check compiles the programs the
// conformance suite produced (tests/backend/cuda_checks.sh). Called under the registry's lock.
void dump_kir(const ember_kir_program& program, uint64_t structure_hash) {
  static const char* dir = std::getenv("EMBER_KIR_DUMP");
  if (!dir || !*dir) return;
  static int serial = 0;
  const fs::path file = fs::path(dir) / fmt::format("{:016x}-{}-{}.kir", structure_hash, ::getpid(), serial++);
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (!f) throw Error(fmt::format("EMBER_KIR_DUMP: cannot write {}", file.string()));
  const std::string text = kir::program_text(program);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) throw Error(fmt::format("EMBER_KIR_DUMP: cannot write {}", file.string()));
}
}  // namespace

namespace {
struct Slot {
  std::once_flag once;
  std::unique_ptr<Backend> backend;
  std::string why;
};
// One slot per device kind value (device_kinds.h), created on first use. Loaded backends live
// until the process ends (never destroyed): arrays held in static objects may free their
// buffers during static destruction, after any destructor here would have run.
Slot& slot(DeviceKind kind) {
  static auto* mutex = new std::mutex;
  static auto* slots = new std::deque<Slot>;  // grows without moving its elements
  std::lock_guard lock(*mutex);
  while (slots->size() <= size_t(kind)) slots->emplace_back();
  return (*slots)[size_t(kind)];
}
std::string kind_name(DeviceKind kind) { return device_kind_name(kind); }
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
          const auto reason_fn = s.backend->table().no_device_reason;
          const char* reason = reason_fn ? reason_fn() : nullptr;
          s.why = fmt::format("backend '{}' loaded from {} but found no device{}{}", kind_name(kind),
                              file.string(), reason ? ": " : "", reason ? reason : "");
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

// Only backends made by load_file (tests) are destroyed: the registry's live until the process
// ends. Their buffers are gone by now (a DeviceBuffer holds a plain pointer to its backend), so the
// cached ones go back to the plugin and the queues are drained and destroyed; the library stays
// loaded (another Backend may share it).
Backend::~Backend() {
  programs_.clear();  // destroys the programs no launch still holds
  for (auto& [device, c] : caches_)
    for (ember_buffer b : c->drain()) table_.buffer_free(queue(device), b);
  auto destroy = [&](ember_queue q) {
    ember_status st{};
    table_.queue_synchronize(q, &st);
    table_.queue_destroy(q);
  };
  for (int d = 0; d < device_states_; ++d)
    if (ember_queue q = devices_[size_t(d)].queue.load(std::memory_order_acquire)) destroy(q);
  for (auto* queues : {&queues_, &test_read_queues_})
    for (auto& [device, q] : *queues) destroy(q);
}

void Backend::check(int32_t code, const ember_status& st, const char* what) {
  if (code == EMBER_OK) return;
  throw Error(fmt::format("{} backend, {}: {}", name_, what, st.message));
}

std::string Backend::device_label(int device) const {
  return device == 0 ? name_ : fmt::format("{}:{}", name_, device);
}

// Every run, library call, read, write and release asks for its device's queue: after the first
// call for a device this is one atomic load.
ember_queue Backend::queue(int device) {
  if (device >= 0 && device < device_states_)
    if (ember_queue q = devices_[size_t(device)].queue.load(std::memory_order_acquire)) return q;
  return create_queue(device);
}

ember_queue Backend::create_queue(int device) {
  std::lock_guard lock(device_mutex_);
  const bool known = device >= 0 && device < device_states_;
  if (known) {  // another thread may have created it since queue() looked
    if (ember_queue q = devices_[size_t(device)].queue.load(std::memory_order_relaxed)) return q;
  } else if (auto it = queues_.find(device); it != queues_.end()) {
    return it->second;
  }
  ember_status st{};
  ember_queue created = nullptr;
  check(table_.queue_create(device, &created, &st), st, "creating a queue");
  if (known) devices_[size_t(device)].queue.store(created, std::memory_order_release);
  else queues_[device] = created;
  return created;
}

// What launches need from the device's properties, read once per device (a device index the
// plugin does not have gets its properties' error each time).
Backend::LaunchLimits Backend::limits(int device) {
  auto read = [&] {
    const ember_device_properties& p = properties(device);
    return LaunchLimits{.async = p.async != 0,
                        .index32 = p.index_bits == 32,
                        .max_binding = p.max_binding_bytes == 0 ? UINT64_MAX : p.max_binding_bytes};
  };
  if (device < 0 || device >= device_states_) return read();
  DeviceState& d = devices_[size_t(device)];
  std::call_once(d.limits_once, [&] { d.limits = read(); });
  return d.limits;
}

bool Backend::is_async(int device) { return limits(device).async; }
uint64_t Backend::max_binding(int device) { return limits(device).max_binding; }
bool Backend::index32(int device) { return limits(device).index32; }

const ember_device_properties& Backend::properties(int device) {
  std::lock_guard lock(device_mutex_);
  auto& p = properties_[device];
  if (!p) {
    auto props = std::make_unique<ember_device_properties>();
    props->struct_size = sizeof(ember_device_properties);
    ember_status st{};
    int32_t code = table_.device_properties(device, props.get(), &st);
    if (code != EMBER_OK) {
      properties_.erase(device);
      check(code, st, "reading device properties");
    }
    p = std::move(props);
  }
  return *p;
}

bool Backend::supports(int device, int32_t kind, int32_t op, int32_t dtype) {
  return table_.supports_op(device, kind, op, dtype) != 0;
}

std::string Backend::unsupported(int device, const ember_kir_program& program) {
  for (int32_t i = 0; i < program.n_insts; ++i) {
    const ember_kir_inst& in = program.insts[i];
    if (!supports(device, EMBER_SUPPORT_KIR, in.op, in.dtype))
      return fmt::format("device {} does not support the KIR instruction '{}' on {} (in {})", device_label(device),
                         kir::op_name(ember_kir_op(in.op)), dtype_name(DType(in.dtype)),
                         program.name ? program.name : "a kernel");
  }
  return {};
}

namespace {

// The bytes from a tensor's lowest to its highest element (0 when it has none; the largest value
// on overflow).
uint64_t tensor_span_bytes(const ember_tensor_desc& t) {
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < t.rank && d < 8; ++d) {
    if (t.shape[d] <= 0) return 0;
    int64_t span = 0;
    if (__builtin_mul_overflow(t.shape[d] - 1, t.strides[d], &span)) return UINT64_MAX;
    (span >= 0 ? hi : lo) += span;
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(uint64_t(hi - lo) + 1, uint64_t(ember_dtype_bytes(t.dtype)), &bytes)) return UINT64_MAX;
  return bytes;
}

}  // namespace

std::string Backend::unsupported_library(int device, int32_t op, const ember_tensor_desc* inputs, int n_inputs,
                                         const ember_tensor_desc* outputs, int n_outputs) {
  const int32_t dtype = n_inputs > 0 ? inputs[0].dtype : n_outputs > 0 ? outputs[0].dtype : EMBER_F32;
  if (!supports(device, EMBER_SUPPORT_LIBRARY, op, dtype))
    return fmt::format("device {} does not support library call {} on {}", device_label(device), op,
                       dtype_name(DType(dtype)));
  // A device that indexes in 32 bits runs a library call whose tensors each span and hold fewer
  // than about 2^30 elements (its shaders' point index runs to twice the points: Vulkan,
  // kernels.cpp); larger ones take the host fallback.
  if (index32(device)) {
    constexpr uint64_t kMaxElements = (uint64_t(1) << 30) - (uint64_t(1) << 16);
    for (int i = 0; i < n_inputs + n_outputs; ++i) {
      const ember_tensor_desc& t = i < n_inputs ? inputs[i] : outputs[i - n_inputs];
      const uint64_t elems = tensor_span_bytes(t) / std::max<uint64_t>(1, ember_dtype_bytes(t.dtype));
      uint64_t numel = 1;
      for (int d = 0; d < t.rank && d < 8; ++d) numel *= uint64_t(std::max<int64_t>(t.shape[d], 0));
      if (elems > kMaxElements || numel > kMaxElements)
        return fmt::format("{} {} of library call {} spans {} elements, more than device {} indexes in 32 bits ({})",
                           i < n_inputs ? "input" : "output", i < n_inputs ? i : i - n_inputs, op,
                           std::max(elems, numel), device_label(device), kMaxElements);
    }
  }
  // A GPU binds each tensor of a library call as one storage range (KIR launches are split by the
  // plugin instead).
  const uint64_t max_binding = this->max_binding(device);
  if (max_binding == UINT64_MAX) return {};
  if (op == EMBER_LIB_MATMUL && n_inputs == 2 && n_outputs == 1 && inputs[0].rank >= 2) {
    // A plugin whose binding is smaller than its buffers splits a matmul by output rows and
    // columns (Vulkan: kernels.cpp): what must fit is one row of a and one column of b.
    const ember_tensor_desc &a = inputs[0], &b = inputs[1];
    const int r = a.rank;
    const double k = double(std::max<int64_t>(a.shape[r - 1] - 1, 0));
    const double row = (k * std::fabs(double(a.strides[r - 1])) + 1) * double(ember_dtype_bytes(a.dtype));
    const double col = (k * std::fabs(double(b.strides[r - 2])) + 1) * double(ember_dtype_bytes(b.dtype));
    if (std::max(row, col) <= double(max_binding)) return {};
    return fmt::format("library call {}: one {} spans {:.0f} bytes, more than device {} binds at once ({} bytes)", op,
                       row > col ? "row of its first operand" : "column of its second operand", std::max(row, col),
                       device_label(device), max_binding);
  }
  for (int i = 0; i < n_inputs + n_outputs; ++i) {
    const uint64_t bytes = tensor_span_bytes(i < n_inputs ? inputs[i] : outputs[i - n_inputs]);
    if (bytes > max_binding)
      return fmt::format("{} {} of library call {} spans {} bytes, more than device {} binds at once ({} bytes)",
                         i < n_inputs ? "input" : "output", i < n_inputs ? i : i - n_inputs, op, bytes,
                         device_label(device), max_binding);
  }
  return {};
}

BufferCache& Backend::cache(int device) {
  std::lock_guard lock(cache_mutex_);
  auto& c = caches_[device];
  if (!c) c = std::make_unique<BufferCache>();
  return *c;
}

std::shared_ptr<DeviceBuffer> Backend::alloc(Device device, size_t bytes) {
  ember_buffer handle = buffer_cache_limit() > 0 ? cache(device.index).take(bytes) : nullptr;
  if (!handle) {
    ember_status st{};
    int32_t code = table_.buffer_alloc(device.index, bytes, &handle, &st);
    if (code == EMBER_ERR_OUT_OF_MEMORY) {  // cached memory may be what is missing
      empty_cache(device.index);
      st = ember_status{};
      code = table_.buffer_alloc(device.index, bytes, &handle, &st);
    }
    check(code, st, "allocating memory");
  }
  auto buf = std::make_shared<DeviceBuffer>();
  buf->backend = this;
  buf->handle = handle;
  buf->bytes = bytes;
  buf->device = device;
  account(device.index, int64_t(bytes), +1);
  return buf;
}

DeviceBuffer::~DeviceBuffer() {
  if (!handle) return;
  backend->account(device.index, -int64_t(bytes), -1);
  backend->release(device.index, handle, bytes);
}

// A cached handle is reused only on the same device's queue, whose order keeps the reuse after
// every earlier use; handles given back to the plugin are freed in that order too.
void Backend::release(int device, ember_buffer handle, size_t bytes) {
  if (buffer_cache_limit() == 0 || !cache(device).give(handle, bytes))
    table_.buffer_free(queue(device), handle);
}

void Backend::empty_cache(int device) {
  ember_queue q = queue(device);
  for (ember_buffer b : cache(device).drain()) table_.buffer_free(q, b);
}

void Backend::write(DeviceBuffer& dst, size_t offset_bytes, const void* src, size_t bytes) {
  ember_status st{};
  check(table_.buffer_write(queue(dst.device.index), dst.handle, offset_bytes, src, bytes, &st), st,
        "writing memory");
}

void Backend::read(const DeviceBuffer& src, size_t offset_bytes, void* dst, size_t bytes) {
  if (WorkRecorder* r = active_work_recorder()) r->refuse("it reads device data on the host");
  ember_status st{};
  const int device = src.device.index;
  ember_queue q = queue(device);
  if (unordered_reads_for_testing_) {
    std::lock_guard lock(device_mutex_);
    ember_queue& other = test_read_queues_[device];
    if (!other) check(table_.queue_create(device, &other, &st), st, "creating a queue");
    q = other;
  }
  if (!is_async(device)) {
    check(table_.buffer_read(q, src.handle, offset_bytes, dst, bytes, &st), st, "reading memory");
    return;
  }
  std::lock_guard sync(sync_mutex_);
  if (any_pending(checks_of(src))) resolve_checks_locked(device, "reading memory");
  if (const KernelCheck* failed = failed_check(checks_of(src))) throw Error(failed->error);
  const int32_t code = table_.buffer_read(q, src.handle, offset_bytes, dst, bytes, &st);
  if (code == EMBER_OK) return;
  // Deferred errors of other kernels, taken by this read: recorded for the buffers that depend on
  // them, and the read (which the device may have skipped) once more.
  ember_status other{};
  if (!settle(device, code, st, {}, &other)) check(other.code, other, "reading memory");
  st = ember_status{};
  check(table_.buffer_read(q, src.handle, offset_bytes, dst, bytes, &st), st, "reading memory");
}

const unsigned char* Backend::host_bytes(const DeviceBuffer& src) {
  if (WorkRecorder* r = active_work_recorder()) r->refuse("it reads device data on the host");
  if (!table_.buffer_host_address || unordered_reads_for_testing_) return nullptr;
  const void* address = table_.buffer_host_address(src.handle);
  if (!address) return nullptr;
  const int device = src.device.index;
  if (!is_async(device)) {
    ember_status st{};
    check(table_.queue_synchronize(queue(device), &st), st, "reading memory");
    return static_cast<const unsigned char*>(address);
  }
  std::lock_guard sync(sync_mutex_);
  resolve_checks_locked(device, "reading memory");
  if (const KernelCheck* failed = failed_check(checks_of(src))) throw Error(failed->error);
  return static_cast<const unsigned char*>(address);
}

void Backend::copy(DeviceBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset, size_t bytes) {
  if (bytes == 0) return;
  if (WorkRecorder* r = active_work_recorder()) r->refuse("it copies between devices");
  if (!table_.buffer_copy) {
    std::vector<unsigned char> staged(bytes);
    read(src, src_offset, staged.data(), bytes);
    write(dst, dst_offset, staged.data(), bytes);
    return;
  }
  ember_queue src_q = queue(src.device.index), dst_q = queue(dst.device.index);
  ember_status st{};
  // The copy runs on the source's queue: after the destination's earlier work (an event, or
  // the whole queue without events), and the destination's later work after the copy.
  auto order = [&](ember_queue before, int before_device, ember_queue after) {
    if (before == after) return;
    if (!table_.event_create) {
      synchronize(before_device);
      return;
    }
    ember_event ev = nullptr;
    check(table_.event_create(before_device, &ev, &st), st, "creating an event");
    int32_t code = table_.event_record(ev, before, &st);
    if (code == EMBER_OK) code = table_.queue_wait_event(after, ev, &st);
    table_.event_destroy(ev);  // a recorded event may be destroyed once waited on (abi.h)
    check(code, st, "ordering a copy between devices");
  };
  order(dst_q, dst.device.index, src_q);
  check(table_.buffer_copy(src_q, dst.handle, dst_offset, src.handle, src_offset, bytes, &st), st,
        "copying between devices");
  order(src_q, src.device.index, dst_q);
  carry_checks(dst, checks_of(src));
}

std::shared_ptr<const CompiledProgram> Backend::program(int device, const ember_kir_program& program,
                                                        uint64_t structure_hash, std::string* unsupported_out) {
  auto same = [&](const CachedProgram& c) {
    if (c.device != device || c.insts.size() != size_t(program.n_insts) ||
        c.arg_dtypes.size() != size_t(program.n_args))
      return false;
    for (int32_t i = 0; i < program.n_insts; ++i) {
      const ember_kir_inst &x = c.insts[size_t(i)], &y = program.insts[i];
      if (x.op != y.op || x.dtype != y.dtype || x.phase != y.phase || x.a != y.a || x.b != y.b || x.c != y.c ||
          x.arg != y.arg || x.aux != y.aux || x.iimm != y.iimm ||
          std::memcmp(&x.fimm, &y.fimm, sizeof x.fimm) != 0)  // bit for bit: NaN payloads, -0
        return false;
    }
    if (!c.error_name.empty() && c.error_name != (program.name ? program.name : "")) return false;
    return std::equal(c.arg_dtypes.begin(), c.arg_dtypes.end(), program.arg_dtypes);
  };
  std::lock_guard lock(mutex_);
  for (auto [it, end] = program_index_.equal_range(structure_hash); it != end; ++it)
    if (same(*it->second)) {
      programs_.splice(programs_.begin(), programs_, it->second);
      return it->second->program;
    }
  // What the device cannot spell is decomposed into what it can (kir/decompose.h); the entry
  // keeps the original instructions, so later launches of the program find it without the pass.
  ember_kir_program to_compile = program;
  std::vector<ember_kir_inst> lowered;
  if (std::string why = unsupported(device, program); !why.empty()) {
    ember_kir_inst blocker{};
    const bool decomposed = kir::decompose(
        program, [&](uint16_t op, uint8_t dtype) { return supports(device, EMBER_SUPPORT_KIR, op, dtype); }, lowered,
        nullptr, &blocker);
    if (decomposed) {
      to_compile.insts = lowered.data();
      to_compile.n_insts = int32_t(lowered.size());
    } else {
      // The instruction that stopped the decomposition is the one the device lacks.
      why = fmt::format("device {} does not support the KIR instruction '{}' on {} (in {})", device_label(device),
                        kir::op_name(ember_kir_op(blocker.op)), dtype_name(DType(blocker.dtype)),
                        program.name ? program.name : "a kernel");
      if (!unsupported_out) throw Error(why);
      *unsupported_out = std::move(why);
      return nullptr;
    }
  }
  dump_kir(program, structure_hash);
  ember_status st{};
  ember_program prog = nullptr;
  check(table_.program_create(device, &to_compile, &prog, &st), st, "compiling a kernel");
  ember::stats().programs_created.fetch_add(1, std::memory_order_relaxed);
  CachedProgram entry;
  entry.device = device;
  entry.hash = structure_hash;
  entry.insts.assign(program.insts, program.insts + program.n_insts);
  entry.arg_dtypes.assign(program.arg_dtypes, program.arg_dtypes + program.n_args);
  bool checked = false;
  for (int32_t i = 0; i < to_compile.n_insts; ++i) {
    const ember_kir_inst& in = to_compile.insts[i];
    const bool integer = in.dtype != EMBER_F32 && in.dtype != EMBER_F64 && in.dtype != EMBER_F16 && in.dtype != EMBER_BF16;
    checked |= in.op == EMBER_KIR_LOAD_GATHER ||
               (integer && (in.op == EMBER_KIR_DIV || in.op == EMBER_KIR_FLOORDIV || in.op == EMBER_KIR_REM ||
                            in.op == EMBER_KIR_FMOD || in.op == EMBER_KIR_POW));
  }
  if (checked) entry.error_name = program.name ? program.name : "";
  entry.program = std::make_shared<const CompiledProgram>(&table_, prog, device, checked, entry.error_name);
  programs_.push_front(std::move(entry));
  program_index_.emplace(structure_hash, programs_.begin());
  evict_programs();
  return programs_.front().program;
}

void Backend::evict_programs() {
  while (programs_.size() > program_capacity_) {
    auto last = std::prev(programs_.end());
    for (auto [it, end] = program_index_.equal_range(last->hash); it != end; ++it)
      if (it->second == last) {
        program_index_.erase(it);
        break;
      }
    programs_.pop_back();  // a launch holding the program keeps it alive until it is done
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

void Backend::run(const CompiledProgram& program, const ember_kir_launch& launch, uint64_t tag) {
  ember::stats().kernels.fetch_add(1, std::memory_order_relaxed);
  if (program.checked && is_async(program.device))
    return enqueue_checked(program.device, program.name, [&](uint64_t tag, ember_status* st) {
      return table_.program_run(queue(program.device), program.handle, &launch, tag, st);
    });
  tag = timed_tag(program.device, tag);
  ember_status st{};
  if (table_.program_run(queue(program.device), program.handle, &launch, tag, &st) != EMBER_OK)
    throw Error(st.message);
}

// A kernel or library call that can fail while it runs, on an asynchronous device. Inside a
// CheckScope it is not waited for: its check goes to the scope, and its error to the reads of the
// buffers that depend on it. Outside one it is waited for here, so its error is this call's.
void Backend::enqueue_checked(int device, const std::string& kernel,
                              const std::function<int32_t(uint64_t tag, ember_status* st)>& enqueue) {
  // Pending checks hold their attribution strings until the device next synchronizes: a program
  // that never reads anything back synchronizes every kMaxPending checked launches.
  constexpr size_t kMaxPending = 256;
  CheckScope* scope = CheckScope::current();
  auto check = std::make_shared<KernelCheck>();
  check->tag = timed_tag(device, next_check_tag_.fetch_add(1, std::memory_order_relaxed));
  check->kernel = kernel;
  if (scope) scope->attribute(*check);
  bool full;
  {
    std::lock_guard lock(checks_mutex_);
    pending_.emplace(check->tag, PendingCheck{check, device, false});
    full = ++pending_count_[device] > kMaxPending;
  }
  ember_status st{};
  const int32_t code = enqueue(check->tag, &st);
  {
    std::lock_guard lock(checks_mutex_);
    if (auto it = pending_.find(check->tag); it != pending_.end()) {
      if (code == EMBER_OK) {
        it->second.enqueued = true;
      } else {
        pending_.erase(it);
        --pending_count_[device];
      }
    }
  }
  if (code != EMBER_OK) throw Error(st.message);
  if (scope && !full) {
    scope->add(std::move(check));
    return;
  }
  {
    std::lock_guard sync(sync_mutex_);
    resolve_checks_locked(device, "running a kernel");
  }
  if (check->failed() && !scope) throw Error(check->error);
  if (scope) scope->add(std::move(check));  // failed: the step's outputs carry the error
}

std::vector<uint64_t> Backend::enqueued_checks(int device) {
  std::vector<uint64_t> tags;
  std::lock_guard lock(checks_mutex_);
  if (pending_count_[device] == 0) return tags;
  for (const auto& [tag, p] : pending_)
    if (p.device == device && p.enqueued) tags.push_back(tag);
  return tags;
}

bool Backend::settle(int device, int32_t code, ember_status st, const std::vector<uint64_t>& passed,
                     ember_status* other) {
  auto drop = [&](std::unordered_map<uint64_t, PendingCheck>::iterator it) {
    --pending_count_[it->second.device];
    return pending_.erase(it);
  };
  bool attributed = true, lost = false;
  std::string first_error;
  // The queue returns its deferred errors one per call, oldest first (abi.h): take them all.
  while (code != EMBER_OK) {
    lost |= (st.reserved & EMBER_STATUS_ERRORS_LOST) != 0;
    {
      std::lock_guard lock(checks_mutex_);
      if (auto it = st.tag ? pending_.find(st.tag) : pending_.end(); it != pending_.end()) {
        KernelCheck& failed = *it->second.check;
        failed.fail(failed.attribute(st.message));
        if (first_error.empty()) first_error = failed.error;
        drop(it);
      } else if (st.tag != 0 && !(st.tag & kTimingTagBit) && st.tag < next_check_tag_.load(std::memory_order_relaxed)) {
        // Another error of a call whose check failed already: a launch the device ran in pieces.
      } else if (attributed) {  // not a check's: the caller throws it
        attributed = false;
        st.code = code;
        *other = st;
      }
    }
    st = ember_status{};
    code = table_.queue_synchronize(queue(device), &st);
  }
  std::lock_guard lock(checks_mutex_);
  // The device dropped errors (it says so): none of its enqueued checks without an error of its
  // own can be trusted, so none passes: each fails as "not verified" (never a silent pass of a
  // call whose error was dropped).
  if (!lost)
    for (uint64_t tag : passed)
      if (auto it = pending_.find(tag); it != pending_.end()) {
        it->second.check->pass();
        drop(it);
      }
  if (lost)
    for (auto p = pending_.begin(); p != pending_.end();) {
      if (p->second.device != device || !p->second.enqueued) {
        ++p;
        continue;
      }
      KernelCheck& c = *p->second.check;
      c.fail(c.attribute(fmt::format("{}: not verified: {} dropped kernel errors after this one: {}", c.kernel,
                                     device_label(device), first_error)));
      p = drop(p);
    }
  return attributed;
}

// An error that belongs to no check is thrown, prefixed with `what` ("reading memory"), or as the
// device worded it when `what` is null (synchronize).
void Backend::resolve_checks_locked(int device, const char* what) {
  const std::vector<uint64_t> passed = enqueued_checks(device);
  ember_status st{}, other{};
  const int32_t code = table_.queue_synchronize(queue(device), &st);
  if (settle(device, code, st, passed, &other)) return;
  if (!what) throw Error(other.message);
  check(other.code, other, what);
}

size_t Backend::pending_checks(int device) {
  std::lock_guard lock(checks_mutex_);
  return pending_count_[device];
}

void Backend::library_call(int device, int32_t op, const ember_tensor_desc* inputs, int n_inputs,
                           const ember_tensor_desc* outputs, int n_outputs, const void* attrs, uint64_t tag) {
  ember::stats().library_calls.fetch_add(1, std::memory_order_relaxed);
  if (std::string why = unsupported_library(device, op, inputs, n_inputs, outputs, n_outputs); !why.empty())
    throw Error(why);
  auto call = [&](uint64_t call_tag, ember_status* st) {
    return table_.library_call(queue(device), op, inputs, n_inputs, outputs, n_outputs, attrs, call_tag, st);
  };
  // The one library call that checks its indices while it runs (the others cannot fail then).
  if (op == EMBER_LIB_INDEX_ADD && is_async(device)) return enqueue_checked(device, "index_add", call);
  ember_status st{};
  if (call(timed_tag(device, tag), &st) != EMBER_OK) throw Error(st.message);
}

void Backend::synchronize(int device) {
  if (is_async(device)) {
    std::lock_guard sync(sync_mutex_);
    resolve_checks_locked(device, nullptr);
    return;
  }
  ember_status st{};
  int32_t code = table_.queue_synchronize(queue(device), &st);
  if (code != EMBER_OK) throw Error(st.message);
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
