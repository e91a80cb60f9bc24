// Captured functions: a function of arrays whose device work is recorded on its first call for a
// given input signature and replayed on later calls, without building the graph, planning or
// lowering again (CUDA graphs and torch.compile(mode="reduce-overhead") do this on GPUs). It
// removes the host cost per op, which dominates small inference (batch 1):
//
//   auto infer = ember::capture([&](const std::vector<ember::Array>& in) {
//     return std::vector<ember::Array>{model.forward(in[0])};
//   });
//   ember::Array y = infer({x})[0];  // first call: runs and records; later calls: replays
//
// The function must be pure: what it computes is a function of its inputs. Arrays it reads
// that are not inputs (a module's weights, constants) are captured as they are at recording
// time, and host values it branches on are baked in: pass whatever changes between calls as an
// input (ember::capture_module below passes a module's parameters and buffers). Side effects
// other than the outputs (a batch norm's running statistics in training) happen only on the
// recording call. A call runs the function eagerly instead when an input requires a gradient
// (with gradients enabled: a replay has no backward, unless the function takes its gradients
// itself: CaptureOptions::outputs_need_grad), autocast is on, or its signature could not be
// recorded: the function reads device data on the host, draws random numbers with a fixed seed,
// copies between devices or uses the host fallback (stats().last_refusal says why). Random ops
// that take their seeds from the global sequence (dropout, uniform() without a seed) draw anew on
// every replay: the numbers the eager call would have drawn (manual_seed makes both repeatable). Errors found while a
// replay runs (an index out of range) fail its outputs, naming the op and line as eagerly.
// Semantics in full: docs/semantics.md, "Captured functions".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/array.h"

namespace ember {

namespace nn {
class Module;
}

struct CaptureOptions {
  // Input signatures (shapes, dtypes, devices, layouts) kept; the least recently used goes first.
  size_t max_signatures = 8;
  // false: the function takes its own gradients (calls backward inside, e.g. a whole training
  // step's loss and gradients) and its outputs are returned without history; inputs that require
  // gradients then no longer make a call eager.
  bool outputs_need_grad = true;
  // When set and true at a call, that call runs eagerly (capture_module: the module is training).
  std::function<bool()> run_eagerly{};
  // Arrays read at every call and bound as inputs after the given ones, though the function does
  // not receive them (it reads them itself): capture_module's parameters and buffers.
  std::function<std::vector<Array>()> implicit_inputs{};
};

struct CaptureStats {
  int64_t recordings = 0;   // signatures recorded
  int64_t replays = 0;      // calls served by a replay
  int64_t eager_calls = 0;  // calls run eagerly (gradients, unrecordable signatures)
  // Replays that skipped the work depending only on parameters (capture_module's weights and
  // buffers: a batch norm's scale and shift), because those held the same bytes as when it last
  // ran, and reused its results. Counted when the replay runs, on the device's queue.
  int64_t parameter_work_reused = 0;
  std::string last_refusal; // why the last refused recording could not be replayed ("" if none)
};

// The recordings of one captured function (ops/capture.cpp).
struct CaptureCache;

// Copies share their recordings.
class CapturedFunction {
 public:
  using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;
  explicit CapturedFunction(Fn fn, CaptureOptions options = {});

  // Thread-safe; concurrent calls replay one recording independently.
  std::vector<Array> operator()(const std::vector<Array>& inputs) const;
  CaptureStats stats() const;
  // Forgets every recording (the next call of each signature records again).
  void clear();

 private:
  Fn fn_;
  CaptureOptions options_;
  std::shared_ptr<CaptureCache> cache_;
};

CapturedFunction capture(CapturedFunction::Fn fn, CaptureOptions options = {});

class WorkRecorder;

// While it lives, this thread's work and host reads are left out of a recording in progress:
// for values that depend only on the inputs' shapes and on constants (shape arithmetic read to
// the host, as an ONNX Shape -> Gather -> Reshape chain does), which are the same on every call
// with the same signature. Their values are baked into the recording; anything else read here
// would be silently stale on replay.
class SignatureOnlyScope {
 public:
  SignatureOnlyScope();
  ~SignatureOnlyScope();
  SignatureOnlyScope(const SignatureOnlyScope&) = delete;
  SignatureOnlyScope& operator=(const SignatureOnlyScope&) = delete;

 private:
  WorkRecorder* previous_;
};

// A captured forward of a module: fn(inputs) with the module's current parameters and buffers
// passed as extra inputs on every call, so that training or loading weights later is seen by the
// replays. The module must outlive the result.
CapturedFunction capture_module(nn::Module& module, CapturedFunction::Fn fn, CaptureOptions options = {});

}  // namespace ember
