// A host emulation of a CUDA GPU, for testing the CUDA plugin (src/backend/cuda/) on machines
// without one: the driver API entry points the plugin loads (driver.h) and NVRTC's (nvrtc.h),
// in one library that the plugin is pointed at with EMBER_CUDA_DRIVER and EMBER_NVRTC.
//
// - "NVRTC" compiles the generated CUDA C as C++ with the system compiler under the host shim of
//   tests/backend/cuda_host_shim.h (precompiled once; a shared object per program); its "cubin"
//   is that object's bytes behind a small header, so the plugin's cache of compiled images works
//   unchanged.
// - The "driver" keeps device memory in host memory (filled with 0xCD on allocation, as real
//   device memory is not zeroed), checks every copy against the allocation it touches, loads
//   modules with dlopen and runs cuLaunchKernel with the block's threads as fibers on the calling
//   thread, the blocks one after another. Work runs when it is enqueued, one launch at a time in the
//   process, so streams and events are trivially ordered; what this checks is everything the
//   plugin computes itself (launch words, grids, pointers, error slots, stream-ordered frees,
//   deferred errors and their tags), not the asynchrony of a real device.
// Device attributes are a small GPU's: blocks of at most 64 threads (the plugin then builds
// 64-thread kernels: two warps, so the cross-warp tree of reductions runs), one multiprocessor.
// EMBER_FAKE_CUDA_DEVICES=N lists N devices (default 1).
#include <dlfcn.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda_host_shim.h"

namespace {

namespace fs = std::filesystem;

constexpr int kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kInvalidImage = 200, kNotFound = 500;
constexpr char kImageMagic[8] = {'E', 'M', 'B', 'F', 'A', 'K', 'E', '1'};
constexpr size_t kMemory = size_t(1) << 30;

std::mutex g_mutex;  // allocations, and one launch at a time (the shim's shared state is global)
std::map<uintptr_t, size_t> g_allocations;  // base -> bytes
size_t g_allocated = 0;

// Whether [ptr, ptr + bytes) lies within one allocation.
bool in_allocation(unsigned long long ptr, size_t bytes) {
  std::lock_guard lock(g_mutex);
  auto it = g_allocations.upper_bound(uintptr_t(ptr));
  if (it == g_allocations.begin()) return false;
  --it;
  return uintptr_t(ptr) >= it->first && uintptr_t(ptr) + bytes <= it->first + it->second;
}

int allocate(unsigned long long* out, size_t bytes) {
  std::lock_guard lock(g_mutex);
  if (g_allocated + bytes > kMemory) return kOutOfMemory;
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) return kOutOfMemory;
  std::memset(p, 0xCD, bytes);
  g_allocations[uintptr_t(p)] = bytes;
  g_allocated += bytes;
  *out = uintptr_t(p);
  return kSuccess;
}

int release(unsigned long long ptr) {
  std::lock_guard lock(g_mutex);
  auto it = g_allocations.find(uintptr_t(ptr));
  if (it == g_allocations.end()) return kInvalidValue;
  g_allocated -= it->second;
  g_allocations.erase(it);
  std::free(reinterpret_cast<void*>(ptr));
  return kSuccess;
}

// ---- NVRTC -------------------------------------------------------------------------------------

struct Program {
  std::string source, name, log, image;
};

// The kernels' signatures in `src`: name and parameter types of each `__global__` function.
struct Signature {
  std::string name;
  std::vector<std::string> types;
};
std::vector<Signature> signatures(const std::string& src) {
  std::vector<Signature> out;
  for (size_t at = src.find("__global__ void "); at != std::string::npos; at = src.find("__global__ void ", at + 1)) {
    size_t p = at + std::strlen("__global__ void ");
    if (src.compare(p, 18, "__launch_bounds__(") == 0) p = src.find(')', p) + 2;
    const size_t open = src.find('(', p), close = src.find(')', open);
    Signature s;
    s.name = src.substr(p, open - p);
    const std::string params = src.substr(open + 1, close - open - 1);
    for (size_t b = 0; b < params.size();) {
      size_t e = params.find(',', b);
      if (e == std::string::npos) e = params.size();
      std::string param = params.substr(b, e - b);
      while (!param.empty() && param.front() == ' ') param.erase(0, 1);
      const size_t last = param.find_last_of(" *");  // the type ends before the parameter's name
      s.types.push_back(param.substr(0, last + 1));
      b = e + 1;
    }
    out.push_back(s);
  }
  return out;
}

// The source as a host C++ unit: the shim (a precompiled header, see compile()), the kernels in its
// namespace, and a C entry per kernel that takes cuLaunchKernel's parameter array.
std::string host_unit(const std::string& src) {
  std::string unit = "#include \"cuda_emu_shim.h\"\nnamespace cuda_emu {\n" + src + "\n";
  for (const Signature& s : signatures(src)) {
    unit += "extern \"C\" void " + s.name + "__host(void** p) {\n  " + s.name + "(";
    for (size_t i = 0; i < s.types.size(); ++i)
      unit += (i ? ", *(" : "*(") + s.types[i] + "*)p[" + std::to_string(i) + "]";
    unit += ");\n}\n";
  }
  unit += "}  // namespace cuda_emu\n";
  return unit;
}

fs::path scratch_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("ember_fake_cuda_" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::atexit([] { std::error_code ec; fs::remove_all(fs::temp_directory_path() / ("ember_fake_cuda_" + std::to_string(::getpid())), ec); });
    return d;
  }();
  return dir;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The compiler and the options of every unit (-ffp-contract=off as NVRTC's --fmad=false).
std::string compiler() {
  const char* cxx = std::getenv("CXX");
  return std::string(cxx && *cxx ? cxx : "c++") + " -std=c++20 -O1 -ffp-contract=off -w -fPIC";
}

// The shim as a header in the scratch folder, precompiled once per process: the units' own code
// then compiles in about 0.1 s instead of 0.24 s (1,800 kernels in the conformance suite). If
// precompiling fails, the compiler reads the header itself.
void precompile_shim() {
  static std::once_flag once;
  std::call_once(once, [] {
    const fs::path header = scratch_dir() / "cuda_emu_shim.h";
    // The fibers of a block share the calling thread, which sets each one's indices when it
    // resumes: plain globals (a module with thread-local storage would also leave glibc's TLS
    // bookkeeping behind at dlclose, which LeakSanitizer reports).
    std::ofstream(header) << "#define CUDA_EMU_THREAD_LOCAL\n" << ember::testing::kCudaHostShim;
    const std::string cmd = compiler() + " -x c++-header " + header.string() + " -o " + header.string() + ".gch > /dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "fake_cuda: the shim does not precompile; going on without\n");
  });
}

int compile(Program& prog) {
  precompile_shim();
  static std::atomic<int> serial{0};
  const fs::path base = scratch_dir() / ("prog" + std::to_string(serial++));
  const fs::path cpp = base.string() + ".cpp", so = base.string() + ".so", log = base.string() + ".log";
  std::ofstream(cpp) << host_unit(prog.source);
  const std::string cmd = compiler() + " -shared -I " + scratch_dir().string() + " -o " + so.string() + " " +
                          cpp.string() + " > " + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  prog.log = read_file(log);
  if (rc != 0) return 6;  // NVRTC_ERROR_COMPILATION
  const std::string bytes = read_file(so);
  const uint64_t size = bytes.size();
  prog.image.assign(kImageMagic, sizeof kImageMagic);
  prog.image.append(reinterpret_cast<const char*>(&size), sizeof size);
  prog.image += bytes;
  std::error_code ec;
  fs::remove(cpp, ec), fs::remove(so, ec), fs::remove(log, ec);
  return 0;
}

// ---- modules and launches ------------------------------------------------------------------------

using HostKernel = void (*)(void**);

struct Function {
  HostKernel kernel = nullptr;
  ember::testing::CudaEmuSetupFn setup = nullptr;
};
struct Module {
  void* lib = nullptr;
  fs::path file;
  std::vector<std::unique_ptr<Function>> functions;  // handed out by cuModuleGetFunction
};

// ---- a block's threads as fibers -------------------------------------------------------------------
// The threads of a block run as fibers (ucontext) on the calling thread: __syncthreads switches to
// the next fiber, round robin, so when fiber 0 runs again every other one has reached the barrier
// (kernels call it uniformly, as CUDA requires). Real threads would need a context switch of the
// OS per thread and barrier, which on two cores made a softmax over 1024 rows take minutes.

constexpr unsigned kMaxBlock = 64;
constexpr size_t kFiberStack = 256 * 1024;

struct BlockRun {
  const Function* f = nullptr;
  void** params = nullptr;
  unsigned block = 0, grid = 0, bid = 0;
  ucontext_t scheduler;
  ucontext_t fibers[kMaxBlock];
  unsigned running = 0;  // the fiber on the CPU
};
thread_local BlockRun* t_run = nullptr;

// Gives every fiber its turn at the barrier: the next one runs; back here when the round is done.
void fiber_sync(void* arg) {
  BlockRun& r = *static_cast<BlockRun*>(arg);
  const unsigned me = r.running;
  r.running = (me + 1) % r.block;
  swapcontext(&r.fibers[me], &r.fibers[r.running]);
  r.running = me;
  r.f->setup(fiber_sync, &r, me, r.bid, r.grid, r.block);  // this fiber's indices again
}

void fiber_main() {
  BlockRun& r = *t_run;
  const unsigned me = r.running;
  r.f->setup(fiber_sync, &r, me, r.bid, r.grid, r.block);
  r.f->kernel(r.params);
  // Done: the next fiber finishes its part (each returns here in turn), the last one goes back.
  if (me + 1 < r.block) {
    r.running = me + 1;
    setcontext(&r.fibers[me + 1]);
  }
  setcontext(&r.scheduler);
}

void run_blocks(const Function& f, unsigned grid, unsigned block, void** params) {
  static thread_local std::vector<char> stacks(size_t(kMaxBlock) * kFiberStack);
  BlockRun r;
  r.f = &f, r.params = params, r.block = block, r.grid = grid;
  t_run = &r;
  for (r.bid = 0; r.bid < grid; ++r.bid) {
    for (unsigned t = 0; t < block; ++t) {
      getcontext(&r.fibers[t]);
      r.fibers[t].uc_stack.ss_sp = stacks.data() + size_t(t) * kFiberStack;
      r.fibers[t].uc_stack.ss_size = kFiberStack;
      r.fibers[t].uc_link = nullptr;
      makecontext(&r.fibers[t], fiber_main, 0);
    }
    r.running = 0;
    swapcontext(&r.scheduler, &r.fibers[0]);
  }
  t_run = nullptr;
}

}  // namespace

extern "C" {

// ---- NVRTC entry points --------------------------------------------------------------------------
// A version no real NVRTC has, so that the plugin's cached images of the two never mix.
int nvrtcVersion(int* major, int* minor) {
  *major = 0, *minor = 1;
  return 0;
}
const char* nvrtcGetErrorString(int rc) { return rc == 6 ? "NVRTC_ERROR_COMPILATION (host emulation)" : "NVRTC error (host emulation)"; }
int nvrtcCreateProgram(Program** out, const char* src, const char* name, int, const char* const*, const char* const*) {
  *out = new Program{src, name ? name : "", "", ""};
  return 0;
}
int nvrtcCompileProgram(Program* p, int, const char* const*) { return compile(*p); }
int nvrtcGetProgramLogSize(Program* p, size_t* n) {
  *n = p->log.size() + 1;
  return 0;
}
int nvrtcGetProgramLog(Program* p, char* out) {
  std::memcpy(out, p->log.c_str(), p->log.size() + 1);
  return 0;
}
int nvrtcGetCUBINSize(Program* p, size_t* n) {
  *n = p->image.size();
  return p->image.empty() ? 7 : 0;
}
int nvrtcGetCUBIN(Program* p, char* out) {
  std::memcpy(out, p->image.data(), p->image.size());
  return 0;
}
int nvrtcGetPTXSize(Program* p, size_t* n) { return nvrtcGetCUBINSize(p, n); }
int nvrtcGetPTX(Program* p, char* out) { return nvrtcGetCUBIN(p, out); }
int nvrtcDestroyProgram(Program** p) {
  delete *p;
  *p = nullptr;
  return 0;
}

// ---- driver entry points ----------------------------------------------------------------------------
int cuInit(unsigned) { return kSuccess; }
int cuDriverGetVersion(int* v) {
  *v = 13000;
  return kSuccess;
}
int cuDeviceGetCount(int* n) {
  const char* e = std::getenv("EMBER_FAKE_CUDA_DEVICES");
  *n = e && *e ? std::atoi(e) : 1;
  return kSuccess;
}
int cuDeviceGet(int* d, int ordinal) {
  *d = ordinal;
  return kSuccess;
}
int cuDeviceGetName(char* out, int len, int d) {
  std::snprintf(out, size_t(len), "Ember host emulation of a GPU %d", d);
  return kSuccess;
}
int cuDeviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 1: *v = 64; break;   // max threads per block
    case 10: *v = 32; break;  // warp size
    case 16: *v = 1; break;   // multiprocessors
    case 75: *v = 9; break;   // compute capability 9.0
    case 76: *v = 0; break;
    case 115: *v = 1; break;  // memory pools
    default: return kInvalidValue;
  }
  return kSuccess;
}
int cuDeviceTotalMem_v2(size_t* bytes, int) {
  *bytes = kMemory;
  return kSuccess;
}
int cuDevicePrimaryCtxRetain(void** ctx, int d) {
  *ctx = reinterpret_cast<void*>(uintptr_t(d) + 1);
  return kSuccess;
}
int cuCtxSetCurrent(void*) { return kSuccess; }
int cuCtxSynchronize() { return kSuccess; }
int cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  std::lock_guard lock(g_mutex);
  *free_bytes = kMemory - g_allocated, *total = kMemory;
  return kSuccess;
}
int cuMemAlloc_v2(unsigned long long* p, size_t bytes) { return allocate(p, bytes); }
int cuMemFree_v2(unsigned long long p) { return release(p); }
int cuMemAllocAsync(unsigned long long* p, size_t bytes, void*) { return allocate(p, bytes); }
int cuMemFreeAsync(unsigned long long p, void*) { return release(p); }
int cuDeviceGetDefaultMemPool(void** pool, int d) {
  *pool = reinterpret_cast<void*>(uintptr_t(d) + 1);
  return kSuccess;
}
int cuMemPoolSetAttribute(void*, int, void*) { return kSuccess; }
int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src, size_t bytes, void*) {
  if (!in_allocation(dst, bytes)) return kInvalidValue;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return kSuccess;
}
int cuMemcpyDtoHAsync_v2(void* dst, unsigned long long src, size_t bytes, void*) {
  if (!in_allocation(src, bytes)) return kInvalidValue;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}
int cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t bytes, void*) {
  if (!in_allocation(dst, bytes) || !in_allocation(src, bytes)) return kInvalidValue;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}
int cuMemcpyPeerAsync(unsigned long long dst, void*, unsigned long long src, void*, size_t bytes, void* s) {
  return cuMemcpyDtoDAsync_v2(dst, src, bytes, s);
}
int cuMemsetD32Async(unsigned long long dst, unsigned value, size_t n, void*) {
  if (!in_allocation(dst, n * 4)) return kInvalidValue;
  auto* p = reinterpret_cast<uint32_t*>(dst);
  for (size_t i = 0; i < n; ++i) p[i] = value;
  return kSuccess;
}
int cuStreamCreate(void** s, unsigned) {
  *s = new int(0);
  return kSuccess;
}
int cuStreamDestroy_v2(void* s) {
  delete static_cast<int*>(s);
  return kSuccess;
}
int cuStreamSynchronize(void*) { return kSuccess; }
int cuStreamWaitEvent(void*, void*, unsigned) { return kSuccess; }
int cuEventCreate(void** e, unsigned) {
  *e = new int(0);
  return kSuccess;
}
int cuEventDestroy_v2(void* e) {
  delete static_cast<int*>(e);
  return kSuccess;
}
int cuEventRecord(void*, void*) { return kSuccess; }
int cuEventSynchronize(void*) { return kSuccess; }
int cuEventQuery(void*) { return kSuccess; }

int cuModuleLoadData(void** out, const void* image) {
  const char* bytes = static_cast<const char*>(image);
  if (std::memcmp(bytes, kImageMagic, sizeof kImageMagic) != 0) return kInvalidImage;
  uint64_t size = 0;
  std::memcpy(&size, bytes + sizeof kImageMagic, sizeof size);
  static std::atomic<int> serial{0};
  auto m = std::make_unique<Module>();
  m->file = scratch_dir() / ("module" + std::to_string(serial++) + ".so");
  std::ofstream(m->file, std::ios::binary).write(bytes + sizeof kImageMagic + sizeof size, std::streamsize(size));
  m->lib = dlopen(m->file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m->lib) return kInvalidImage;
  *out = m.release();
  return kSuccess;
}
int cuModuleUnload(void* module) {
  auto* m = static_cast<Module*>(module);
  dlclose(m->lib);
  std::error_code ec;
  fs::remove(m->file, ec);
  delete m;
  return kSuccess;
}
int cuModuleGetFunction(void** out, void* module, const char* name) {
  auto* m = static_cast<Module*>(module);
  auto f = std::make_unique<Function>();
  f->kernel = reinterpret_cast<HostKernel>(dlsym(m->lib, (std::string(name) + "__host").c_str()));
  f->setup = reinterpret_cast<ember::testing::CudaEmuSetupFn>(dlsym(m->lib, "cuda_emu_setup"));
  if (!f->kernel || !f->setup) return kNotFound;
  *out = f.get();
  std::lock_guard lock(g_mutex);
  m->functions.push_back(std::move(f));
  return kSuccess;
}
int cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned,
                   void*, void** params, void**) {
  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || gx == 0 || bx == 0 || bx > kMaxBlock) return kInvalidValue;
  std::lock_guard lock(g_mutex);
  run_blocks(*static_cast<Function*>(fn), gx, bx, params);
  return kSuccess;
}
int cuGetErrorString(int rc, const char** s) {
  switch (rc) {
    case kSuccess: *s = "no error"; break;
    case kInvalidValue: *s = "invalid argument (host emulation)"; break;
    case kOutOfMemory: *s = "out of memory (host emulation)"; break;
    case kInvalidImage: *s = "device kernel image is invalid (host emulation)"; break;
    case kNotFound: *s = "named symbol not found (host emulation)"; break;
    default: *s = "unknown error (host emulation)";
  }
  return kSuccess;
}

}  // extern "C"
