// Host fallback (host_fallback.h): staging a device's buffers through host memory so that the CPU
// backend runs what the device cannot.
#include "scheduler/host_fallback.h"

#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>

#include "runtime/work_recorder.h"
#include "ember/error.h"

namespace ember {

bool host_fallback_enabled() {
  static const bool on = [] {
    const char* s = std::getenv("EMBER_FALLBACK");
    return !(s && std::string(s) == "0");
  }();
  return on;
}

namespace {

bool log_fallback() {
  static const bool on = [] {
    const char* s = std::getenv("EMBER_LOG");
    return s && std::string(s).find("fallback") != std::string::npos;
  }();
  return on;
}

// Each distinct refusal once per process: a training loop repeats the same kernels every step.
void note(Device device, const std::string& what, const std::string& why) {
  if (!log_fallback()) return;
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::string line = fmt::format("ember: fallback: {} runs on the cpu instead of {}: {}", what, device.str(), why);
  std::lock_guard lock(mutex);
  if (seen.insert(line).second) std::cerr << line << '\n';
}

Backend& host_backend(Device device, const std::string& why) {
  std::string missing;
  if (device.kind == DeviceKind::Cpu || !host_fallback_enabled()) throw Error(why);
  Backend* host = Backend::try_get(DeviceKind::Cpu, &missing);
  if (!host) throw Error(fmt::format("{} (and the cpu backend, which would run it instead, is unavailable: {})", why,
                                     missing));
  return *host;
}

// Host copies of a call's device buffers: each staged once, the written ones copied back.
class HostStaging {
 public:
  HostStaging(Backend& host, const std::vector<std::shared_ptr<DeviceBuffer>>& buffers) : host_(host) {
    for (const std::shared_ptr<DeviceBuffer>& b : buffers) {
      if (!b || find(b->handle)) continue;
      std::vector<unsigned char> bytes(b->bytes);
      b->backend->read(*b, 0, bytes.data(), b->bytes);  // after the device's earlier work
      std::shared_ptr<DeviceBuffer> copy = host_.alloc(Device::cpu(), b->bytes);
      host_.write(*copy, 0, bytes.data(), b->bytes);
      staged_.push_back({b, std::move(copy), false});
    }
  }
  // The host buffer standing for a device handle (null stays null).
  ember_buffer host_handle(ember_buffer device_handle, bool written) {
    if (!device_handle) return nullptr;
    Staged* s = find(device_handle);
    if (!s) throw Error("host fallback: a buffer of the call was not staged (internal error)");
    s->written |= written;
    return s->host->handle;
  }
  // Copies every written buffer back to its device (ordered after the device's earlier work).
  void write_back() {
    for (Staged& s : staged_) {
      if (!s.written) continue;
      std::vector<unsigned char> bytes(s.device->bytes);
      host_.read(*s.host, 0, bytes.data(), bytes.size());
      s.device->backend->write(*s.device, 0, bytes.data(), bytes.size());
    }
  }

 private:
  struct Staged {
    std::shared_ptr<DeviceBuffer> device, host;
    bool written;
  };
  Staged* find(ember_buffer handle) {
    for (Staged& s : staged_)
      if (s.device->handle == handle) return &s;
    return nullptr;
  }
  Backend& host_;
  std::vector<Staged> staged_;
};

}  // namespace

void run_program_on_host(Device device, const ember_kir_program& program, uint64_t structure_hash,
                         const ember_kir_launch& launch, const std::vector<std::shared_ptr<DeviceBuffer>>& buffers,
                         const std::string& why) {
  Backend& host = host_backend(device, why);
  note(device, fmt::format("kernel '{}'", program.name ? program.name : "kernel"), why);
  std::vector<bool> stored(size_t(launch.n_args), false);
  for (int32_t i = 0; i < program.n_insts; ++i)
    if (program.insts[i].op == EMBER_KIR_STORE) stored[size_t(program.insts[i].arg)] = true;
  HostStaging staging(host, buffers);
  std::vector<ember_kir_arg> args(launch.args, launch.args + launch.n_args);
  for (size_t a = 0; a < args.size(); ++a) args[a].buffer = staging.host_handle(args[a].buffer, stored[a]);
  ember_kir_launch on_host = launch;
  on_host.args = args.data();
  std::shared_ptr<const CompiledProgram> compiled = host.program(0, program, structure_hash);
  host.run(*compiled, on_host);
  staging.write_back();
}

void library_call(Device device, const std::string& what, int32_t op, const ember_tensor_desc* inputs, int n_inputs,
                  const ember_tensor_desc* outputs, int n_outputs, const void* attrs,
                  const std::vector<std::shared_ptr<DeviceBuffer>>& buffers) {
  Backend& be = Backend::get(device.kind);
  std::string why = be.unsupported_library(device.index, op, inputs, n_inputs, outputs, n_outputs);
  WorkRecorder* recorder = active_work_recorder();
  if (why.empty()) {
    if (recorder) recorder->library(device.index, op, inputs, n_inputs, outputs, n_outputs, attrs, buffers);
    return be.library_call(device.index, op, inputs, n_inputs, outputs, n_outputs, attrs);
  }
  why = fmt::format("{}: {}", what, why);
  if (recorder) recorder->refuse(fmt::format("{} runs on the host fallback", what));
  Backend& host = host_backend(device, why);
  note(device, fmt::format("op '{}'", what), why);
  HostStaging staging(host, buffers);
  std::vector<ember_tensor_desc> ins(inputs, inputs + n_inputs), outs(outputs, outputs + n_outputs);
  for (ember_tensor_desc& d : ins) d.buffer = staging.host_handle(d.buffer, false);
  for (ember_tensor_desc& d : outs) d.buffer = staging.host_handle(d.buffer, true);
  host.library_call(0, op, ins.data(), n_inputs, outs.data(), n_outputs, attrs);
  staging.write_back();
}

}  // namespace ember
