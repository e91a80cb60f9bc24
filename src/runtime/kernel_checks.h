// Deferred kernel checks: how an asynchronous device reports a kernel's error without the host
// waiting for the kernel.
//
// A kernel that can fail while it runs (a gather's bounds, integer division by zero) is, on an
// asynchronous device, not waited for. Its launch becomes a KernelCheck that the buffers it
// writes carry, and so does every buffer computed from them (the graph layer passes the checks
// of a step's inputs on to its outputs, realize.cpp). The device remembers its first kernel
// error and returns it, with the failing launch's tag, at its next synchronize or read (abi.h,
// "Errors"); the backend (registry.cpp) then marks that check failed. A read of a buffer that
// carries a failed check throws the check's error, named after the op and line as on a
// synchronous device; buffers that do not depend on the failed kernel read as usual.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember {

struct DeviceBuffer;

struct KernelCheck {
  enum class State : uint8_t { Pending, Passed, Failed };
  uint64_t tag = 0;     // passed with the launch; the device's deferred error names it
  std::string where;    // the op the error is attributed to: "floor_div (at model.cpp:12)"; "" = none
  std::string op;       // that op's name, replacing `kernel` at the head of the device's message
  std::string kernel;   // the kernel's name, as the device's message starts ("floor_div mul add")
  std::atomic<State> state{State::Pending};
  std::string error;    // the whole message; written before state becomes Failed

  // The message of a failure the device reported as `device_message`.
  std::string attribute(const std::string& device_message) const;
  void fail(std::string message);
  void pass() { state.store(State::Passed, std::memory_order_release); }
  bool failed() const { return state.load(std::memory_order_acquire) == State::Failed; }
  bool pending() const { return state.load(std::memory_order_acquire) == State::Pending; }
};

// The checks a buffer's contents depend on. Shared and never changed once made: a merge makes a
// new set.
using CheckSet = std::vector<std::shared_ptr<KernelCheck>>;
using CheckSetPtr = std::shared_ptr<const CheckSet>;

// The union of a and b without the checks that passed; null when nothing is left.
CheckSetPtr merge_checks(const CheckSetPtr& a, const CheckSetPtr& b);
// The failed check of s launched first (the others may have failed because of it), or null.
const KernelCheck* failed_check(const CheckSetPtr& s);
bool any_pending(const CheckSetPtr& s);

// The checks of a buffer (null when none; a cheap atomic test when none), and adding to them.
CheckSetPtr checks_of(const DeviceBuffer& b);
void carry_checks(DeviceBuffer& b, const CheckSetPtr& s);

// Set by the graph layer around one step of a plan: the checked launches of the step on an
// asynchronous device become deferred checks, attributed by `attribute` (called once per such
// launch, while the step's nodes are alive) and collected in `made`. A replayed capture sets one
// too. Without a scope (the host fallback, anomaly mode), a checked launch is waited for at once.
class CheckScope {
 public:
  using Attribute = void (*)(const void* step, KernelCheck& check);
  CheckScope(const void* step, Attribute attribute);
  ~CheckScope();
  CheckScope(const CheckScope&) = delete;
  CheckScope& operator=(const CheckScope&) = delete;

  static CheckScope* current();
  void attribute(KernelCheck& check) const { attribute_(step_, check); }
  void add(std::shared_ptr<KernelCheck> check);
  const CheckSetPtr& made() const { return made_; }

 private:
  const void* step_;
  Attribute attribute_;
  CheckScope* previous_;
  CheckSetPtr made_;
};

}  // namespace ember
