// Test harness for backend plugins: runs one KIR launch (or library call) with given argument
// buffers on a backend through ember::Backend and returns the buffers' final bytes, so a test
// can compare the CPU backend with the scalar reference. Also sets the OpenMP thread count of
// the CPU plugin's runtime (libgomp, loaded with the plugin) for determinism tests.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/registry.h"
#include "ember/dtype.h"
#include "ember/error.h"
#include "kir/builder.h"

namespace ember::testing {

// One argument of a launch: its storage dtype, initial buffer contents and view.
struct HArg {
  DType dtype = DType::F32;
  std::vector<uint8_t> bytes;  // initial contents (also fixes the buffer size)
  int64_t offset = 0;
  std::vector<int64_t> strides;  // over the launch dims
  int64_t gather_stride = 0, gather_size = 0;
  bool no_buffer = false;  // an IOTA's argument: its view only (the bytes stay as they are)
};

struct HLaunch {
  int outer_rank = 0, reduce_rank = 0;
  std::vector<int64_t> shape;
  std::vector<HArg> args;
};

inline Backend& cpu_backend() { return Backend::get(DeviceKind::Cpu); }
inline Backend& reference_backend() { return Backend::get(DeviceKind::Reference); }

// The arguments' buffers on `be`, filled with their initial contents, and the launch over them.
struct Uploaded {
  std::vector<std::shared_ptr<DeviceBuffer>> bufs;
  std::vector<ember_kir_arg> args;
  ember_kir_launch launch{};
};
inline Uploaded upload(Backend& be, const HLaunch& h, Device device = Device{}) {
  Uploaded u;
  u.args.resize(h.args.size());
  for (size_t a = 0; a < h.args.size(); ++a) {
    const HArg& ha = h.args[a];
    std::shared_ptr<DeviceBuffer> buf;
    if (!ha.no_buffer) {
      buf = be.alloc(device, ha.bytes.size());
      be.write(*buf, 0, ha.bytes.data(), ha.bytes.size());
    }
    u.bufs.push_back(buf);
    ember_kir_arg& c = u.args[a];
    c = ember_kir_arg{};
    c.buffer = buf ? buf->handle : nullptr;
    c.offset = ha.offset;
    for (size_t d = 0; d < ha.strides.size(); ++d) c.strides[d] = ha.strides[d];
    c.gather_stride = ha.gather_stride;
    c.gather_size = ha.gather_size;
  }
  u.launch.outer_rank = h.outer_rank;
  u.launch.reduce_rank = h.reduce_rank;
  for (size_t d = 0; d < h.shape.size(); ++d) u.launch.shape[d] = h.shape[d];
  u.launch.n_args = int32_t(u.args.size());
  u.launch.args = u.args.data();
  return u;
}
// Every argument's bytes after a run.
inline std::vector<std::vector<uint8_t>> download(Backend& be, const HLaunch& h, const Uploaded& u) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t a = 0; a < h.args.size(); ++a) {
    std::vector<uint8_t> bytes = h.args[a].bytes;
    if (u.bufs[a]) be.read(*u.bufs[a], 0, bytes.data(), bytes.size());
    out.push_back(std::move(bytes));
  }
  return out;
}

// Runs the program on `be` (through its program cache); returns every argument's final bytes, or
// sets *error.
inline std::vector<std::vector<uint8_t>> run_kir(Backend& be, kir::Builder& b, const std::string& name,
                                                 const HLaunch& h, std::string* error, Device device = Device{}) {
  Uploaded u = upload(be, h, device);
  try {
    ember_kir_program prog = b.program(name);
    std::shared_ptr<const CompiledProgram> p = be.program(0, prog, b.structure_hash());
    be.run(*p, u.launch);
  } catch (const Error& e) {
    if (error) *error = e.what();
    return {};
  }
  return download(be, h, u);
}

// Sets element i of a buffer of dtype dt to v (rounded or wrapped to the dtype).
inline void put(std::vector<uint8_t>& bytes, DType dt, size_t i, double v) {
  uint8_t* p = bytes.data();
  switch (dt) {
    case DType::F32: { float f = float(v); std::memcpy(p + 4 * i, &f, 4); break; }
    case DType::F64: std::memcpy(p + 8 * i, &v, 8); break;
    case DType::F16: { uint16_t h = float_to_half(float(v)); std::memcpy(p + 2 * i, &h, 2); break; }
    case DType::BF16: { uint16_t h = float_to_bf16(float(v)); std::memcpy(p + 2 * i, &h, 2); break; }
    case DType::I32: { int32_t x = int32_t(v); std::memcpy(p + 4 * i, &x, 4); break; }
    case DType::I64: { int64_t x = int64_t(v); std::memcpy(p + 8 * i, &x, 8); break; }
    default: p[i] = uint8_t(int64_t(v));
  }
}

// Element i of a buffer of dtype dt, as a double.
inline double element(const std::vector<uint8_t>& bytes, DType dt, size_t i) {
  const uint8_t* p = bytes.data();
  switch (dt) {
    case DType::F32: { float v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DType::F64: { double v; std::memcpy(&v, p + 8 * i, 8); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return half_to_float(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return bf16_to_float(v); }
    case DType::I32: { int32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DType::I64: { int64_t v; std::memcpy(&v, p + 8 * i, 8); return double(v); }
    default: return p[i];
  }
}

// Sets the OpenMP thread count of the calling thread in the process's libgomp (the CPU plugin's
// runtime); false if libgomp is not loaded.
inline bool set_omp_threads(int n) {
  void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!gomp) return false;
  auto fn = reinterpret_cast<void (*)(int)>(dlsym(gomp, "omp_set_num_threads"));
  if (fn) fn(n);
  dlclose(gomp);
  return fn != nullptr;
}

}  // namespace ember::testing
