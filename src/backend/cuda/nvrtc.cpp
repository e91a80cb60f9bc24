// NVRTC through dlopen (nvrtc.h).
#include "backend/cuda/nvrtc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>
#include <vector>

namespace ember::cuda {

const Nvrtc& Nvrtc::get() {
  static const Nvrtc instance;
  return instance;
}

Nvrtc::Nvrtc() {
  // EMBER_NVRTC names another file: the tests' host emulation (tests/backend/fake_cuda/).
  const char* env = std::getenv("EMBER_NVRTC");
  const std::vector<std::string> names =
      env && *env ? std::vector<std::string>{env} : std::vector<std::string>{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  for (const std::string& name : names) {
    lib_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib_) break;
    why_ += why_.empty() ? "" : "; ";
    why_ += dlerror();
  }
  if (!lib_) return;
  bool missing = false;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib_, name));
    if (!fn && !missing) {
      why_ = std::string("libnvrtc lacks ") + name;
      missing = true;
    }
  };
  int (*version)(int*, int*) = nullptr;
  sym(version, "nvrtcVersion");
  sym(error_string_, "nvrtcGetErrorString");
  sym(create_, "nvrtcCreateProgram");
  sym(compile_, "nvrtcCompileProgram");
  sym(log_size_, "nvrtcGetProgramLogSize");
  sym(log_, "nvrtcGetProgramLog");
  sym(cubin_size_, "nvrtcGetCUBINSize");
  sym(cubin_, "nvrtcGetCUBIN");
  sym(ptx_size_, "nvrtcGetPTXSize");
  sym(ptx_, "nvrtcGetPTX");
  sym(destroy_, "nvrtcDestroyProgram");
  if (missing) return;
  int major = 0, minor = 0;
  version(&major, &minor);
  version_ = std::to_string(major) + "." + std::to_string(minor);
  why_.clear();
  available_ = true;
}

bool Nvrtc::compile(const std::string& src, const std::string& name, const std::string& arch, std::string& binary,
                    std::string& log, const std::vector<std::string>& extra) const {
  log.clear();
  binary.clear();
  if (!available_) {
    log = "NVRTC is not available: " + why_;
    return false;
  }
  Program* prog = nullptr;
  if (int r = create_(&prog, src.c_str(), name.c_str(), 0, nullptr, nullptr); r != 0) {
    log = std::string("nvrtcCreateProgram: ") + error_string_(r);
    return false;
  }
  const std::string arch_opt = "--gpu-architecture=" + arch;
  std::vector<const char*> opts = {arch_opt.c_str(), "--fmad=false", "--std=c++17"};
  for (const std::string& o : extra) opts.push_back(o.c_str());
  const int r = compile_(prog, int(opts.size()), opts.data());
  size_t n = 0;
  if (log_size_(prog, &n) == 0 && n > 1) {
    std::vector<char> text(n);
    if (log_(prog, text.data()) == 0) log.assign(text.data(), n - 1);
  }
  bool ok = r == 0;
  if (!ok) {
    log = std::string(error_string_(r)) + (log.empty() ? "" : ":\n" + log);
  } else {
    const bool cubin = arch.rfind("sm_", 0) == 0;
    size_t size = 0;
    ok = (cubin ? cubin_size_(prog, &size) : ptx_size_(prog, &size)) == 0;
    if (ok) {
      binary.resize(size);
      ok = (cubin ? cubin_(prog, binary.data()) : ptx_(prog, binary.data())) == 0;
    }
    if (!ok) log = "NVRTC compiled " + name + " but returned no binary";
  }
  destroy_(&prog);
  return ok;
}

}  // namespace ember::cuda
