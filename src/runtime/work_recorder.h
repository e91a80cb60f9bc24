// WorkRecorder: the device work of a realization, reported as it is issued so that it can be
// replayed later without the graph (ops/capture.cpp, ember/capture.h). The scheduler reports
// every buffer it allocates, kernel it launches and library call it makes while a recorder is
// active on its thread; anything that cannot be replayed faithfully (a host read of device
// data, a cross-device copy, work moved to the host fallback) refuses the
// recording, and the caller keeps running that function eagerly. Lives in the backend layer so
// that the backend's own host transfers can refuse too; the graph layer implements it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/abi.h"
#include "backend/library_attrs.h"

namespace ember {

struct DeviceBuffer;
struct CompiledProgram;

class WorkRecorder {
 public:
  virtual ~WorkRecorder() = default;
  // What the next recorded calls compute ("add (at model.cpp:12)"), for replay errors.
  virtual void begin_step(const std::string& where) = 0;
  // A buffer the realization allocated (its contents are produced by the recorded work).
  virtual void allocated(const std::shared_ptr<DeviceBuffer>& buffer) = 0;
  // A kernel launch; `buffers[a]` owns argument a's buffer (null for none), `stored[a]` says
  // whether the program writes argument a, `random_key[a]` whether it is a random op's Philox
  // key (a launch-time scalar, abi.h LOAD_SCALAR, holding the seed). A replay passes fresh keys
  // there (a random op drawn from the global sequence draws again), or the recording is refused
  // (a fixed seed). `program` is null for a kernel that runs on the host fallback, which the
  // caller refuses after this call.
  virtual void kernel(const std::shared_ptr<const CompiledProgram>& program, const ember_kir_launch& launch,
                      const std::vector<std::shared_ptr<DeviceBuffer>>& buffers, const std::vector<bool>& stored,
                      const std::vector<bool>& random_key) = 0;
  // A library call; `buffers` owns every buffer the descriptors name.
  virtual void library(int device, int32_t op, const ember_tensor_desc* inputs, int n_inputs,
                       const ember_tensor_desc* outputs, int n_outputs, const void* attrs,
                       const std::vector<std::shared_ptr<DeviceBuffer>>& buffers) = 0;
  // Work that cannot be replayed: the recording is abandoned with this reason (the work itself
  // still runs normally).
  virtual void refuse(const std::string& why) = 0;
};

// The recorder of work issued by this thread (null: none), and its replacement.
WorkRecorder* active_work_recorder();
void set_active_work_recorder(WorkRecorder* r);

// Makes `r` this thread's recorder while it lives (null suspends recording).
class WorkRecorderScope {
 public:
  explicit WorkRecorderScope(WorkRecorder* r);
  ~WorkRecorderScope();
  WorkRecorderScope(const WorkRecorderScope&) = delete;
  WorkRecorderScope& operator=(const WorkRecorderScope&) = delete;

 private:
  WorkRecorder* previous_;
};

}  // namespace ember
