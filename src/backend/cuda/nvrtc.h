// NVRTC, CUDA's run-time compiler, loaded with dlopen on first use (libnvrtc.so.13, then
// libnvrtc.so), so that nothing links against the CUDA toolkit and a machine without it simply
// has no CUDA code generation. NVRTC needs no GPU: the CUDA code check compiles every generated
// kernel for sm_90 on machines without one (tools/cuda_compile_check.cpp).
#pragma once

#include <string>
#include <vector>

namespace ember::cuda {

class Nvrtc {
 public:
  // The process-wide instance; loading is tried once.
  static const Nvrtc& get();

  bool available() const { return available_; }
  // Why it is not available (the dlopen/dlsym error); empty when it is.
  const std::string& why() const { return why_; }
  // "13.0", or empty.
  const std::string& version() const { return version_; }

  // Compiles CUDA C `src` (named `name` in messages) for `arch`: "sm_90" gives a cubin, "compute_90"
  // PTX, in `binary`. Options: --fmad=false (no contraction of a * b + c: the reference rounds
  // twice), C++17, and `extra` (e.g. "--Ofast-compile=max" for checks that only need the code
  // accepted: 5x faster). False on a compile error, with NVRTC's log in `log`.
  bool compile(const std::string& src, const std::string& name, const std::string& arch, std::string& binary,
               std::string& log, const std::vector<std::string>& extra = {}) const;

 private:
  Nvrtc();
  bool available_ = false;
  std::string why_, version_;
  void* lib_ = nullptr;
  // The entry points used, as NVRTC declares them (nvrtc.h), with nvrtcResult as int.
  struct Program;
  const char* (*error_string_)(int) = nullptr;
  int (*create_)(Program**, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile_)(Program*, int, const char* const*) = nullptr;
  int (*log_size_)(Program*, size_t*) = nullptr;
  int (*log_)(Program*, char*) = nullptr;
  int (*cubin_size_)(Program*, size_t*) = nullptr;
  int (*cubin_)(Program*, char*) = nullptr;
  int (*ptx_size_)(Program*, size_t*) = nullptr;
  int (*ptx_)(Program*, char*) = nullptr;
  int (*destroy_)(Program**) = nullptr;
};

}  // namespace ember::cuda
