// Throughput benchmark of the CPU plugin through its C table (no libember): copy, gelu, tanh,
// exp and a full sum over 2^24 f32 (GB/s counts bytes read + written), and a 1024^3 f32 matmul.
// Build and run: cmake --build --preset release --target ember_cpu_bench &&
//                ./build/release/bin/ember_cpu_bench [path/to/libember_backend_cpu.so]
// (OMP_NUM_THREADS=1 for one thread). Not part of the default build.
#include <dlfcn.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "backend/abi.h"
#include "backend/common/host_memory.h"
static ember_kir_inst I(int op, int dt, int a = -1, int b = -1, int arg = -1, double f = 0, int phase = 0) {
  ember_kir_inst in{}; in.op = uint16_t(op); in.dtype = uint8_t(dt); in.phase = uint8_t(phase); in.a = a; in.b = b; in.c = -1; in.arg = arg; in.fimm = f; return in;
}
int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "";
  if (path.empty()) {  // the plugin next to this program's lib folder: bin/../lib
    char self[4096] = {};
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = len > 0 ? std::string(self, size_t(len)) : std::string("./x");
    path = dir.substr(0, dir.rfind('/')) + "/../lib/libember_backend_cpu.so";
  }
  void* lib = dlopen(path.c_str(), RTLD_NOW);
  if (!lib) { printf("%s\n", dlerror()); return 1; }
  auto entry = (ember_backend_entry_fn)dlsym(lib, "ember_backend_entry");
  const ember_backend_v2* t = entry(EMBER_BACKEND_ABI_VERSION);
  ember_device_properties props{};
  props.struct_size = sizeof props;
  ember_status pst{};
  t->device_properties(0, &props, &pst);
  printf("device: %s\n", props.name);
  ember_queue q = nullptr;
  t->queue_create(0, &q, &pst);
  const int64_t n = 1 << 24;
  ember_status st{};
  ember_buffer x, y;
  t->buffer_alloc(0, n * 4, &x, &st); t->buffer_alloc(0, n * 4, &y, &st);
  for (int64_t i = 0; i < n; ++i) ((float*)x->data)[i] = float(i % 1000) * 0.004f - 2.0f;
  memset(y->data, 0, n * 4);
  uint8_t dts[2] = {EMBER_F32, EMBER_F32};
  auto bench = [&](const char* name, std::vector<ember_kir_inst> insts, int red, double bytes) {
    ember_kir_program p{name, int32_t(insts.size()), insts.data(), 2, dts, red};
    ember_program prog; if (t->program_create(0, &p, &prog, &st)) { printf("%s\n", st.message); return; }
    ember_kir_arg args[2] = {};
    args[0].buffer = y; args[1].buffer = x; args[1].strides[0] = 1;
    ember_kir_launch l{};
    if (red) { l.outer_rank = 0; l.reduce_rank = 1; } else { l.outer_rank = 1; args[0].strides[0] = 1; }
    l.shape[0] = n; l.n_args = 2; l.args = args;
    double best = 1e9;
    for (int r = 0; r < 8; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      if (t->program_run(q, prog, &l, 0, &st)) { printf("%s\n", st.message); return; }
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s < best) best = s;
    }
    printf("%-6s 2^24 f32: %.2f ms  %.1f GB/s  (%.2f Gelem/s)\n", name, best * 1e3, bytes / best / 1e9, n / best / 1e9);
    t->program_destroy(prog);
  };
  bench("copy", {I(EMBER_KIR_LOAD, 0, -1, -1, 1), I(EMBER_KIR_STORE, 0, 0, -1, 0)}, 0, 8.0 * n);
  bench("gelu", {I(EMBER_KIR_LOAD, 0, -1, -1, 1), I(EMBER_KIR_CONST, 0, -1, -1, -1, 0.7071067811865476),
                 I(EMBER_KIR_MUL, 0, 0, 1), I(EMBER_KIR_ERF, 0, 2), I(EMBER_KIR_CONST, 0, -1, -1, -1, 1.0),
                 I(EMBER_KIR_ADD, 0, 3, 4), I(EMBER_KIR_CONST, 0, -1, -1, -1, 0.5), I(EMBER_KIR_MUL, 0, 0, 6),
                 I(EMBER_KIR_MUL, 0, 7, 5), I(EMBER_KIR_STORE, 0, 8, -1, 0)}, 0, 8.0 * n);
  bench("tanh", {I(EMBER_KIR_LOAD, 0, -1, -1, 1), I(EMBER_KIR_TANH, 0, 0), I(EMBER_KIR_STORE, 0, 1, -1, 0)}, 0, 8.0 * n);
  bench("exp", {I(EMBER_KIR_LOAD, 0, -1, -1, 1), I(EMBER_KIR_EXP, 0, 0), I(EMBER_KIR_STORE, 0, 1, -1, 0)}, 0, 8.0 * n);
  bench("sum", {I(EMBER_KIR_LOAD, 0, -1, -1, 1), I(EMBER_KIR_ACC_SUM, 0, 0, -1, -1, 0, 1), I(EMBER_KIR_STORE, 0, 1, -1, 0, 0, 1)}, 1, 4.0 * n);
  // matmul 1024^3
  const int64_t M = 1024;
  ember_buffer a, b, c;
  t->buffer_alloc(0, M * M * 4, &a, &st); t->buffer_alloc(0, M * M * 4, &b, &st); t->buffer_alloc(0, M * M * 4, &c, &st);
  for (int64_t i = 0; i < M * M; ++i) ((float*)a->data)[i] = ((float*)b->data)[i] = float(i % 7) * 0.1f;
  ember_tensor_desc d[3] = {};
  ember_buffer bufs[3] = {a, b, c};
  for (int i = 0; i < 3; ++i) { d[i].buffer = bufs[i]; d[i].dtype = EMBER_F32; d[i].rank = 2; d[i].shape[0] = d[i].shape[1] = M; d[i].strides[0] = M; d[i].strides[1] = 1; }
  for (int trans = 0; trans < 2; ++trans) {
    if (trans) { d[1].strides[0] = 1; d[1].strides[1] = M; }
    double best = 1e9;
    for (int r = 0; r < 6; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      if (t->library_call(q, EMBER_LIB_MATMUL, d, 2, &d[2], 1, nullptr, 0, &st)) { printf("%s\n", st.message); return 1; }
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s < best) best = s;
    }
    printf("matmul 1024^3 f32%s: %.2f ms  %.1f GFLOP/s\n", trans ? " (b transposed)" : "", best * 1e3, 2.0 * M * M * M / best / 1e9);
  }
  return 0;
}
