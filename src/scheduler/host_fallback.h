// Host fallback: a kernel or library call that a device's plugin says it cannot run (an
// instruction or dtype it lacks: f64 on a GPU without shaderFloat64, a library op not written for
// it) runs on the CPU backend instead, with the buffers it touches copied to host memory and the
// written ones copied back, in order with the device's queue. Slow but correct; EMBER_LOG=fallback
// names every kernel that takes this path, so a user can see what a device lacks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/registry.h"
#include "ember/device.h"

namespace ember {

// Whether work the device cannot run goes to the CPU (true unless EMBER_FALLBACK=0, which makes
// it an error naming the op, as a device without the host plugin must).
bool host_fallback_enabled();

// Runs KIR `program` (cached by `structure_hash`) with `launch` on the CPU. `buffers[a]` owns the
// device buffer of argument a (null for arguments without one); `why` is the device's refusal,
// logged with EMBER_LOG=fallback.
void run_program_on_host(Device device, const ember_kir_program& program, uint64_t structure_hash,
                         const ember_kir_launch& launch, const std::vector<std::shared_ptr<DeviceBuffer>>& buffers,
                         const std::string& why);

// Library call `op` (for the op named `what`) on the device, or on the CPU when the device lacks
// it (and fallback is on). `buffers` owns every device buffer the descriptors name.
void library_call(Device device, const std::string& what, int32_t op, const ember_tensor_desc* inputs, int n_inputs,
                  const ember_tensor_desc* outputs, int n_outputs, const void* attrs,
                  const std::vector<std::shared_ptr<DeviceBuffer>>& buffers);

}  // namespace ember
