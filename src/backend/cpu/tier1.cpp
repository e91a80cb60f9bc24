// Tier-1 CPU kernels (see tier1.h): compiler discovery, compiling through the core's
// compiled-program cache, the background compile thread, the switch from the interpreter and the
// parallel launch of a compiled kernel.
//
// Compiler: $EMBER_CXX, else `c++` or `g++` on PATH, run with -O3 -march=native -fopenmp-simd
// -fno-math-errno -ffp-contract=off (no contraction into FMAs, as the interpreter computes each op
// on its own) and linked against libmvec. Each compile runs in a private temporary folder; the
// shared object is stored in the core's cache (backend/common/host_services.h) under a key of the
// source, the compiler (path and version), its flags and the CPU's feature flags, and a later
// process loads it from there. EMBER_CPU_DUMP=DIR keeps each kernel's source there. Any failure
// (no compiler, compile error, no temporary folder, dlopen error) leaves the program on tier 0;
// EMBER_LOG=tier prints why.
#include "backend/cpu/tier1.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <omp.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/common/host_services.h"
#include "backend/cpu/program.h"

extern char** environ;

namespace ember::cpu {

namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The last-level cache (L3, else L2) from sysconf; 8 MiB when it does not say.
int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return int64_t(l3 > 0 ? l3 : l2 > 0 ? l2 : 8L << 20);
  }();
  return bytes;
}

// Streaming stores (emit_c.h) for launches that write at least this many bytes. Measured here
// (Xeon, 2 cores, 48 MiB L3 shared with other machines; docs/performance.md): a copy that
// writes 8 MiB took 1.30 ms with plain stores and 0.64 ms with streaming ones, and reading the
// output back afterwards cost 0.16 ms more; at 4 MiB the two were within 20 %. Settable with
// EMBER_CPU_STREAM_BYTES (0: always, -1: never) and by the tests' hook below.
constexpr int64_t kStreamBytes = int64_t(8) << 20;
std::atomic<int64_t> g_stream_bytes{INT64_MIN};  // INT64_MIN: not read from the environment yet

int64_t stream_bytes() {
  int64_t v = g_stream_bytes.load(std::memory_order_relaxed);
  if (v == INT64_MIN) {
    const char* e = std::getenv("EMBER_CPU_STREAM_BYTES");
    v = e && *e ? std::strtoll(e, nullptr, 10) : kStreamBytes;
    int64_t expected = INT64_MIN;
    g_stream_bytes.compare_exchange_strong(expected, v);
  }
  return v;
}

// Whether a launch that writes `bytes` streams its stores.
bool streams(int64_t bytes) {
  const int64_t limit = stream_bytes();
  return limit >= 0 && bytes >= limit;
}

// Bytes the launch's points write: points x the element sizes of the arguments stored in
// phase 0 (the rows' passes).
int64_t row_store_bytes(const Program& p, int64_t points) {
  int64_t per_point = 0;
  for (size_t a = 0; a < p.arg_stored.size(); ++a)
    if (p.arg_stored[a] && p.arg_in_phase[0][a]) per_point += int64_t(ember_dtype_bytes(p.arg_dtypes[a]));
  return points * per_point;
}

// ---- statistics (exported for tests and benchmarks) -------------------------------------------
std::atomic<int64_t> g_compiles{0}, g_cache_hits{0}, g_failures{0}, g_launches{0};
std::atomic<int64_t> g_streamed{0};  // launches that asked for streaming stores
// Reduce launches by scheme (emit_c.h): rows, columns, strided columns.
std::atomic<int64_t> g_reduce_schemes[3] = {0, 0, 0};

bool log_on() {
  static const bool on = [] {
    const char* s = std::getenv("EMBER_LOG");
    return s && (std::strstr(s, "tier") || std::strstr(s, "all"));
  }();
  return on;
}

#define TIER_LOG(...)                              \
  do {                                             \
    if (log_on()) {                                \
      std::fprintf(stderr, "[ember tier] " __VA_ARGS__); \
      std::fputc('\n', stderr);                    \
    }                                              \
  } while (0)

std::atomic<int> g_mode{-1};

int env_mode() {
  const char* s = std::getenv("EMBER_CPU_TIER");
  if (!s || !*s || std::strcmp(s, "auto") == 0) return 2;
  if (std::strcmp(s, "0") == 0) return 0;
  if (std::strcmp(s, "1") == 0) return 1;
  return 2;
}

// ---- helpers -----------------------------------------------------------------------------------
bool executable(const std::string& path) {
  struct stat sb;
  return ::stat(path.c_str(), &sb) == 0 && S_ISREG(sb.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string find_compiler() {
  if (const char* e = std::getenv("EMBER_CXX")) {
    std::string c = e;
    if (c.find('/') != std::string::npos) return executable(c) ? c : std::string();
    // A bare name: look it up on PATH below.
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    size_t pos = 0;
    while (pos <= dirs.size()) {
      size_t end = dirs.find(':', pos);
      if (end == std::string::npos) end = dirs.size();
      std::string cand = dirs.substr(pos, end - pos) + "/" + c;
      if (executable(cand)) return cand;
      pos = end + 1;
    }
    return "";
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (const char* name : {"c++", "g++"}) {
    size_t pos = 0;
    while (pos <= dirs.size()) {
      size_t end = dirs.find(':', pos);
      if (end == std::string::npos) end = dirs.size();
      std::string cand = dirs.substr(pos, end - pos) + "/" + name;
      if (end > pos && executable(cand)) return cand;
      pos = end + 1;
    }
  }
  return "";
}

// Runs argv (no shell) with stdout+stderr into `log` (a file path); returns the exit status.
int run_process(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_file(const std::string& path, size_t max = 4096) {
  std::ifstream f(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (s.size() > max) s.resize(max);
  return s;
}

// The statics the compile thread uses are never destroyed: it may still be compiling while exit
// handlers destroy function-local statics created after the Compiler (ThreadSanitizer saw the
// thread read `flags` and lock `m` after their destruction).
std::string cpu_flags() {
  static const std::string& flags = *new std::string([] {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("flags", 0) == 0) return line;
    return std::string("unknown");
  }());
  return flags;
}

// On x86, GCC uses 256-bit vectors by default even where AVX-512 is present; full-width vectors
// (and libmvec's 16-lane exp) make a fused softmax row ~25% faster (4.2 -> 3.2 ms for 4096x1024,
// one thread). The option only states a preference: without AVX-512 it changes nothing.
const char* const kFlags[] = {"-O3", "-march=native",
#if defined(__x86_64__)
                              "-mprefer-vector-width=512",
#endif
                              "-fopenmp-simd", "-fno-math-errno", "-ffp-contract=off",
                              "-fno-semantic-interposition", "-shared", "-fPIC", "-w"};

// Compiler path -> "version" (its --version output), computed once per path.
std::string compiler_id(const std::string& cxx) {
  static std::mutex& m = *new std::mutex;  // never destroyed (see cpu_flags)
  static std::string& last_path = *new std::string;
  static std::string& last_id = *new std::string;
  std::lock_guard<std::mutex> lock(m);
  if (cxx == last_path) return last_id;
  const char* tmp = std::getenv("TMPDIR");
  std::string log = std::string(tmp && *tmp ? tmp : "/tmp") + "/ember_cxx_version." + std::to_string(::getpid()) + ".txt";
  int rc = run_process({cxx, "--version"}, log);
  std::string v = rc == 0 ? read_file(log, 1024) : std::string();
  ::unlink(log.c_str());
  last_path = cxx;
  last_id = v.empty() ? std::string() : cxx + "\n" + v;
  return last_id;
}

// A private folder for one compile (removed by the caller), or "" if none can be made.
std::string make_scratch_dir() {
  const char* t = std::getenv("TMPDIR");
  std::string templ = std::string(t && *t ? t : "/tmp") + "/ember_kernel.XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  return ::mkdtemp(buf.data()) ? std::string(buf.data()) : std::string();
}

bool write_file(const std::string& path, const void* data, size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), std::streamsize(bytes));
  return bool(f.flush());
}

// EMBER_CPU_DUMP=DIR: each compiled kernel's source as DIR/ember_<hash>.cpp, to read what ran.
void dump_source(const Tier1& t, const char* hex) {
  const char* dir = std::getenv("EMBER_CPU_DUMP");
  if (dir && *dir) write_file(std::string(dir) + "/ember_" + hex + ".cpp", t.source.data(), t.source.size());
}

void* load_kernel(const std::string& so, const char* symbol) {
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    TIER_LOG("dlopen %s failed: %s", so.c_str(), ::dlerror());
    return nullptr;
  }
  // Kernels stay loaded for the life of the process (a program may be running one).
  void* fn = ::dlsym(h, symbol);
  if (!fn) TIER_LOG("%s has no %s", so.c_str(), symbol);
  return fn;
}

// A file name for a shared object that no earlier dlopen in this process has used: the dynamic
// loader returns the object already loaded under a name instead of loading a new file, so a
// reused name (a recycled temporary folder, /proc/self/fd/N) could run another program's kernel.
std::string unique_object_name(const char* hex) {
  static std::atomic<uint64_t> sequence{0};
  return std::string("ember_") + hex + "_" + std::to_string(sequence.fetch_add(1)) + ".so";
}

// Loads a shared object held in memory (from the cache) through a temporary file; nullptr if it
// does not load.
void* load_kernel_bytes(const std::vector<uint8_t>& so, const char* hex, const char* symbol) {
  const std::string dir = make_scratch_dir();
  if (dir.empty()) return nullptr;
  const std::string path = dir + "/" + unique_object_name(hex);
  void* fn = write_file(path, so.data(), so.size()) ? load_kernel(path, symbol) : nullptr;
  ::unlink(path.c_str());  // the loaded copy stays mapped
  ::rmdir(dir.c_str());
  return fn;
}

// Compiles (or loads from the core's cache) the program's kernel and publishes it. Never throws.
void compile(Tier1& t) {
  void* fn = nullptr;
  const char* symbol = t.reduce ? "ember_kernel_reduce" : "ember_kernel";
  std::string dir;
  try {
    const std::string cxx = find_compiler();
    const std::string id = cxx.empty() ? std::string() : compiler_id(cxx);
    if (cxx.empty()) {
      TIER_LOG("%s: no C++ compiler found (EMBER_CXX, c++, g++): staying on tier 0", t.name.c_str());
    } else if (id.empty()) {
      TIER_LOG("%s: compiler %s unusable: staying on tier 0", t.name.c_str(), cxx.c_str());
    } else {
      std::string key = t.source + "\n" + id + "\n" + cpu_flags();
      for (const char* f : kFlags) key += std::string(" ") + f;
      char hex[32];
      std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a(key));
      dump_source(t, hex);
      if (std::optional<std::vector<uint8_t>> cached = plugin::cache_load("cpu", key)) {
        if ((fn = load_kernel_bytes(*cached, hex, symbol))) {
          ++g_cache_hits;
          TIER_LOG("%s: tier 1 from the cache", t.name.c_str());
        }
      }
      if (!fn && (dir = make_scratch_dir()).empty()) {
        TIER_LOG("%s: no temporary folder to compile in: staying on tier 0", t.name.c_str());
      } else if (!fn) {  // not cached, or the cached object did not load: compile, and replace the entry
        const std::string so = dir + "/" + unique_object_name(hex);
        const std::string cpp = dir + "/ember_" + hex + ".cpp", log = dir + "/ember_" + hex + ".log";
        write_file(cpp, t.source.data(), t.source.size());
        std::vector<std::string> argv = {cxx};
        for (const char* f : kFlags) argv.push_back(f);
        argv.insert(argv.end(), {cpp, "-o", so, "-Wl,-z,defs", "-lmvec", "-lm"});
        const int rc = run_process(argv, log);
        if (rc != 0) {
          TIER_LOG("%s: compiler failed (exit %d): %s", t.name.c_str(), rc, read_file(log, 2000).c_str());
        } else if ((fn = load_kernel(so, symbol))) {
          ++g_compiles;
          const std::string bytes = read_file(so, size_t(1) << 30);
          const bool stored = plugin::cache_store("cpu", key, bytes.data(), bytes.size());
          TIER_LOG("%s: compiled%s", t.name.c_str(), stored ? " and cached" : " (not cached)");
        }
        for (const std::string& f : {cpp, log, so}) ::unlink(f.c_str());
      }
    }
  } catch (...) {
    TIER_LOG("%s: internal error while compiling", t.name.c_str());
    fn = nullptr;
  }
  if (!dir.empty()) ::rmdir(dir.c_str());  // empty by now
  if (fn) {
    if (t.reduce) t.rfn.store(reinterpret_cast<ember_c_reduce_fn>(fn), std::memory_order_release);
    else t.fn.store(reinterpret_cast<ember_c_kernel_fn>(fn), std::memory_order_release);
    t.state.store(Tier1::kReady, std::memory_order_release);
  } else {
    ++g_failures;
    t.state.store(Tier1::kFailed, std::memory_order_release);
  }
}

// ---- background compile thread ----------------------------------------------------------------
class Compiler {
 public:
  void enqueue(std::shared_ptr<Tier1> t) {
    std::lock_guard<std::mutex> lock(m_);
    if (stop_) return;
    queue_.push_back(std::move(t));
    ++pending_;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    cv_.notify_one();
  }
  ~Compiler() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
      queue_.clear();
    }
    cv_.notify_all();
    done_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    for (;;) {
      std::shared_ptr<Tier1> t;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        t = std::move(queue_.front());
        queue_.pop_front();
      }
      // A program destroyed meanwhile holds the only other reference: skip it.
      if (t.use_count() > 1) compile(*t);
      else t->state.store(Tier1::kFailed, std::memory_order_release);
      {
        std::lock_guard<std::mutex> lock(m_);
        --pending_;
      }
      done_.notify_all();
    }
  }

 public:
  // Waits until t's compile has finished (or failed), or the compiler is shutting down.
  void wait_for(const Tier1& t) {
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return stop_ || t.state.load(std::memory_order_acquire) != Tier1::kPending; });
  }

 public:
  // Compiles queued or running.
  int64_t pending() const { return pending_.load(); }

 private:
  std::mutex m_;
  std::condition_variable cv_, done_;
  std::deque<std::shared_ptr<Tier1>> queue_;
  std::thread thread_;
  bool stop_ = false;
  std::atomic<int64_t> pending_{0};
};

Compiler& compiler() {
  static Compiler c;
  return c;
}

// A program is hot after 3 runs over at least 64K points in all, or one run of 1M points or more.
bool hot(int64_t runs, int64_t points, int64_t now) { return (runs >= 3 && points >= 65536) || now >= (1 << 20); }

// A launch's dims coalesced for a compiled kernel, with its per-argument pointers, offsets and
// strides laid out as ember_c_launch wants them. Launches run thousands of times per second in a
// small model's step, so nothing here allocates unless a kernel has more than kInlineArgs
// arguments.
class CoalescedLaunch {
 public:
  static constexpr int kMaxDims = EMBER_MAX_ITER_RANK + 2;  // each segment may add one size-1 dim
  static constexpr int kInlineArgs = 16;

  explicit CoalescedLaunch(const ember_kir_launch& l) : l_(l), na_(l.n_args) {
    if (na_ > kInlineArgs) {
      heap_.resize(size_t(na_) * (kMaxDims + 2));
      strides_ = heap_.data();
      offset_ = strides_ + size_t(na_) * kMaxDims;
      data_ = reinterpret_cast<void**>(offset_ + na_);
    }
    for (int a = 0; a < na_; ++a) {
      offset_[a] = l.args[a].offset;
      data_[a] = l.args[a].buffer ? l.args[a].buffer->data : nullptr;
    }
  }
  CoalescedLaunch(const CoalescedLaunch&) = delete;
  CoalescedLaunch& operator=(const CoalescedLaunch&) = delete;

  // Appends dims [d0, d1) of the launch, dropping size-1 dims and merging d into the previous
  // dim where every argument is contiguous across them; returns the number of dims appended (at
  // least one: a segment of only size-1 dims, or none, becomes one dim of size 1).
  int append(int d0, int d1) {
    const int first = rank_;
    int last = -1;  // the launch dim whose strides the previous appended dim has
    for (int d = d0; d < d1; ++d) {
      if (l_.shape[d] == 1) continue;
      bool merge = rank_ > first;
      for (int a = 0; a < na_ && merge; ++a) merge = l_.args[a].strides[last] == l_.args[a].strides[d] * l_.shape[d];
      if (merge) {
        shape_[rank_ - 1] *= l_.shape[d];
      } else {
        shape_[rank_] = l_.shape[d];
        ++rank_;
      }
      source_[rank_ - 1] = d;
      last = d;
    }
    if (rank_ == first) {
      shape_[rank_] = 1;
      source_[rank_] = -1;
      ++rank_;
    }
    return rank_ - first;
  }

  int rank() const { return rank_; }
  const int64_t* shape() const { return shape_; }
  int64_t dim(int j) const { return shape_[j]; }
  // Argument a's stride along appended dim j.
  int64_t stride(int a, int j) const { return source_[j] < 0 ? 0 : l_.args[a].strides[source_[j]]; }
  // Fills the [n_args * rank] stride table (call once every dim is appended).
  const int64_t* strides() {
    for (int a = 0; a < na_; ++a)
      for (int j = 0; j < rank_; ++j) strides_[size_t(a) * size_t(rank_) + size_t(j)] = stride(a, j);
    return strides_;
  }
  const int64_t* offset() const { return offset_; }
  void* const* data() const { return data_; }

 private:
  const ember_kir_launch& l_;
  const int na_;
  int rank_ = 0;
  int64_t shape_[kMaxDims];
  int source_[kMaxDims];
  int64_t inline_strides_[kInlineArgs * kMaxDims];
  int64_t inline_offset_[kInlineArgs];
  void* inline_data_[kInlineArgs];
  std::vector<int64_t> heap_;
  int64_t* strides_ = inline_strides_;
  int64_t* offset_ = inline_offset_;
  void** data_ = inline_data_;
};

// A reduction / multi-phase launch on its compiled kernel: outer and reduce dims coalesced
// separately, then the rows scheme when the innermost reduce dim is contiguous in every argument
// an even phase touches (or holds one value per row in an argument the kernel reads from a
// splat), the columns scheme when the innermost outer dim is contiguous in every argument,
// strided columns for short rows and other layouts (emit_c.h); false (the interpreter) only for a
// single outer point whose reduce dim is strided.
bool run_reduce_kernel(const Program& p, const Tier1& t, const ember_kir_launch& l, ember_c_reduce_fn fn,
                       ember_status* st, int32_t* rc) {
  const int na = l.n_args, outer = l.outer_rank, total = outer + l.reduce_rank;
  CoalescedLaunch c(l);
  const int ro = c.append(0, outer);
  const int rr = c.append(outer, total);
  const int R = ro + rr;
  int64_t n_outer = 1, n_reduce = 1;
  for (int d = 0; d < outer; ++d) n_outer *= l.shape[d];
  for (int d = outer; d < total; ++d) n_reduce *= l.shape[d];
  const int64_t inner = c.dim(R - 1), ocols = c.dim(ro - 1);
  bool reduce_contig = true, outer_contig = true;
  int row_values = 0;  // arguments of stride 0 along the row that the rows kernel reads from splats
  for (int a = 0; a < na; ++a) {
    const bool even = p.arg_in_phase[0][size_t(a)], any = even || p.arg_in_phase[1][size_t(a)];
    const int64_t s = c.stride(a, R - 1);
    if (even && inner > 1 && s == 0 && t.row_splats[size_t(a)] && row_values < emit::kRowSplatSlots) ++row_values;
    else if (even && inner > 1 && s != 1) reduce_contig = false;
    if (any && c.stride(a, ro - 1) != 1) outer_contig = false;
  }
  // Short contiguous rows (under 8 values) with many outer points take strided columns: the rows
  // scheme runs such a row as scalar loop tails (the exported transformer's softmax over 7 keys,
  // 448 rows: 41 us as rows).
  int columns;
  if (reduce_contig && !outer_contig && inner <= 16 && ocols >= 16) columns = 2;
  else if (reduce_contig && (inner >= 16 || !outer_contig || ocols < 16)) columns = 0;
  else if (outer_contig && ocols > 1) columns = 1;
  else if (reduce_contig) columns = 0;
  else if (ocols > 1) columns = 2;
  else return false;
  if ((*rc = check_launch(p, l, st)) != EMBER_OK) return true;
  *rc = EMBER_OK;
  if (n_outer == 0) return true;
  ember_c_reduce_launch cl{};
  cl.outer_rank = ro;
  cl.reduce_rank = rr;
  cl.columns = columns;
  // Rows stream only when long (a 64-point row's copy through the buffer cost more than it saved:
  // softmax over 65536 x 64, 5.7 -> 6.0 ms).
  cl.stream = columns == 0 && inner >= 256 && streams(row_store_bytes(p, n_outer * std::max<int64_t>(n_reduce, 1)));
  cl.shape = c.shape();
  cl.data = c.data();
  cl.offset = c.offset();
  cl.strides = c.strides();
  int64_t tasks = n_outer;
  if (columns) {
    // Wide blocks: a row of a block is `block` consecutive values, and every pass walks all
    // reduce rows, each in another page. Blocks of 8 columns (once chosen to keep a block's
    // values in 256 KiB of L2) read 32 bytes per row and page: softmax over dim 0 of 4096x1024
    // took 26.6 ms at 1 thread, 5.4 ms with 256 columns (7.7 with 128, 15.9 with 64). Multi-pass
    // programs re-read the block once per pass, so its values (block x n_reduce) should stay in
    // a share of the last-level cache; and each thread should get a block.
    int64_t block = 256;
    if (p.max_phase >= 2)
      while (block > 16 && block * std::max<int64_t>(n_reduce, 1) * 8 > last_level_cache_bytes() / 4) block /= 2;
    const int64_t threads = omp_get_max_threads();
    while (block > 16 && n_outer / ocols * ((ocols + block - 1) / block) < threads) block /= 2;
    cl.block = std::min(block, ocols);
    cl.nblk = (ocols + cl.block - 1) / cl.block;
    tasks = n_outer / ocols * cl.nblk;
  }
  run_tasks(tasks, n_outer * std::max<int64_t>(n_reduce, 1), [&](int64_t t0, int64_t t1) { fn(&cl, t0, t1); });
  ++g_launches;
  if (cl.stream) ++g_streamed;
  ++g_reduce_schemes[columns];
  return true;
}

}  // namespace

int tier_mode() {
  int m = g_mode.load(std::memory_order_relaxed);
  if (m < 0) {
    m = env_mode();
    int expected = -1;
    g_mode.compare_exchange_strong(expected, m);
  }
  return m;
}

void set_tier_mode(int mode) { g_mode.store(mode < 0 ? env_mode() : std::min(mode, 2)); }

void tier1_attach(Program& p, const ember_kir_program& src) {
  const int mode = tier_mode();
  if (mode == 0) return;
  auto t = std::make_shared<Tier1>();
  std::string why;
  t->reduce = p.has_reduction;
  if (!(t->reduce ? emit::emit_cpu_reduce_kernel(src, t->source, &why) : emit::emit_cpu_kernel(src, t->source, &why))) {
    TIER_LOG("%s: tier 0 only (%s)", p.name.c_str(), why.c_str());
    return;
  }
  if (t->reduce) t->row_splats = emit::reduce_row_splat_args(src);
  t->name = p.name;
  p.tier1 = t;
  if (mode == 1) {
    t->state.store(Tier1::kPending);
    compile(*t);
  }
}

bool tier1_try_run(const Program& p, const ember_kir_launch& l, ember_status* st, int32_t* rc) {
  Tier1* t = p.tier1.get();
  if (!t) return false;
  const int mode = tier_mode();
  if (mode == 0) return false;  // also for kernels compiled before the mode was set to 0
  auto ready = [t] {
    return t->reduce ? t->rfn.load(std::memory_order_acquire) != nullptr
                     : t->fn.load(std::memory_order_acquire) != nullptr;
  };
  if (mode == 1) {
    if (!ready()) {
      int expected = Tier1::kIdle;
      if (!t->state.compare_exchange_strong(expected, Tier1::kPending)) return false;
      compile(*t);
      if (!ready()) return false;
    }
  } else if (!t->switched.load(std::memory_order_acquire)) {
    // Auto mode, before the switch: count the run; the run kTier1SwitchDelayRuns after the one
    // that made the program hot waits for the compile, and from then on the kernel runs if it
    // compiled. A kernel that is ready earlier (the disk cache) waits for that run too.
    int64_t now = 1;
    for (int d = 0; d < l.outer_rank + l.reduce_rank && d < EMBER_MAX_ITER_RANK; ++d) now *= std::max<int64_t>(l.shape[d], 0);
    const int64_t runs = t->runs.fetch_add(1) + 1, points = t->points.fetch_add(now) + now;
    const int64_t at = t->switch_run.load(std::memory_order_acquire);
    if (at == 0) {
      if (!hot(runs, points, now)) return false;
      int64_t none = 0;
      if (t->switch_run.compare_exchange_strong(none, runs + kTier1SwitchDelayRuns)) {
        int expected = Tier1::kIdle;
        if (t->state.compare_exchange_strong(expected, Tier1::kPending)) compiler().enqueue(p.tier1);
      }
      return false;
    }
    if (runs < at) return false;
    compiler().wait_for(*t);
    t->switched.store(true, std::memory_order_release);
    TIER_LOG("%s: run %lld switches to %s", t->name.c_str(), (long long)runs, ready() ? "tier 1" : "tier 0 (no kernel)");
    if (!ready()) return false;
  } else if (!ready()) {
    return false;
  }
  if (t->reduce) return run_reduce_kernel(p, *t, l, t->rfn.load(std::memory_order_acquire), st, rc);
  const ember_c_kernel_fn fn = t->fn.load(std::memory_order_acquire);
  if ((*rc = check_launch(p, l, st)) != EMBER_OK) return true;
  // Coalesced dims: contiguous tensors become one long row.
  const int total = l.outer_rank + l.reduce_rank;
  const int na = l.n_args;
  int64_t points = 1;
  for (int d = 0; d < total; ++d) points *= l.shape[d];
  *rc = EMBER_OK;
  if (points == 0) return true;
  CoalescedLaunch c(l);
  const int r = c.append(0, total);
  // 1: every argument is contiguous along the row; 2: the stored ones are and the loaded ones
  // are or hold one value per row (emit_c.cpp reads those from a splat).
  bool contiguous = true, rowwise = true;
  for (int a = 0; a < na; ++a) {
    if (!p.arg_in_phase[0][size_t(a)]) continue;
    const int64_t s = c.stride(a, r - 1);
    contiguous = contiguous && s == 1;
    rowwise = rowwise && (s == 1 || (s == 0 && !p.arg_stored[size_t(a)]));
  }
  const int64_t inner = c.dim(r - 1);
  ember_c_launch cl{};
  cl.rank = r;
  cl.contiguous = contiguous ? (streams(row_store_bytes(p, points)) ? 3 : 1) : rowwise ? 2 : 0;
  cl.block = std::min<int64_t>(inner, 16384);
  cl.nblk = (inner + cl.block - 1) / cl.block;
  cl.shape = c.shape();
  cl.data = c.data();
  cl.offset = c.offset();
  cl.strides = c.strides();
  const int64_t tasks = points / inner * cl.nblk;
  run_tasks(tasks, points, [&](int64_t t0, int64_t t1) { fn(&cl, t0, t1); });
  ++g_launches;
  if (cl.contiguous == 3) ++g_streamed;
  return true;
}

}  // namespace ember::cpu

// Test and benchmark hooks: the tier mode (-1: from EMBER_CPU_TIER again) and counters
// {kernels compiled, kernels loaded from the disk cache, failed compiles, tier-1 launches}.
extern "C" __attribute__((visibility("default"))) void ember_cpu_set_tier(int mode) {
  ember::cpu::set_tier_mode(mode);
}
// Streaming stores from this many bytes of output per launch (-1: never; INT64_MIN: back to the
// environment's, else the default).
extern "C" __attribute__((visibility("default"))) void ember_cpu_set_stream_bytes(int64_t bytes) {
  ember::cpu::g_stream_bytes.store(bytes);
}
// Tier-1 launches so far that asked their kernel for streaming stores.
extern "C" __attribute__((visibility("default"))) int64_t ember_cpu_tier_streamed() {
  return ember::cpu::g_streamed.load();
}
// Number of background compiles queued or running (tests wait for 0 before counting).
extern "C" __attribute__((visibility("default"))) int64_t ember_cpu_tier_pending() {
  return ember::cpu::compiler().pending();
}
extern "C" __attribute__((visibility("default"))) void ember_cpu_tier_stats(int64_t* out4) {
  out4[0] = ember::cpu::g_compiles.load();
  out4[1] = ember::cpu::g_cache_hits.load();
  out4[2] = ember::cpu::g_failures.load();
  out4[3] = ember::cpu::g_launches.load();
}
// Reduce launches so far by scheme: {rows, columns, strided columns} (emit_c.h).
extern "C" __attribute__((visibility("default"))) void ember_cpu_tier_reduce_schemes(int64_t* out3) {
  for (int i = 0; i < 3; ++i) out3[i] = ember::cpu::g_reduce_schemes[i].load();
}
