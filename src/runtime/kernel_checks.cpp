// Deferred kernel checks (kernel_checks.h): their messages, sets and the per-step scope.
#include "runtime/kernel_checks.h"

#include <algorithm>
#include <mutex>

#include "runtime/registry.h"

namespace ember {

std::string KernelCheck::attribute(const std::string& device_message) const {
  std::string text = device_message;
  // The device names the kernel; a fused kernel's error names the op that failed instead, as
  // running that op alone would ("floor_div: integer division by zero").
  if (!op.empty() && !kernel.empty() && text.size() > kernel.size() + 2 && text.compare(0, kernel.size(), kernel) == 0 &&
      text.compare(kernel.size(), 2, ": ") == 0)
    text = op + text.substr(kernel.size());
  return where.empty() ? text : where + ": " + text;
}

void KernelCheck::fail(std::string message) {
  if (state.load(std::memory_order_acquire) == State::Failed) return;
  error = std::move(message);
  state.store(State::Failed, std::memory_order_release);
}

CheckSetPtr merge_checks(const CheckSetPtr& a, const CheckSetPtr& b) {
  auto kept = [](const std::shared_ptr<KernelCheck>& c) { return c->state.load() != KernelCheck::State::Passed; };
  auto live = [&](const CheckSetPtr& s) { return s && std::any_of(s->begin(), s->end(), kept); };
  const bool la = live(a), lb = live(b);
  if (!la && !lb) return nullptr;
  auto all_kept = [&](const CheckSetPtr& s) { return std::all_of(s->begin(), s->end(), kept); };
  if (la != lb && all_kept(la ? a : b)) return la ? a : b;  // the common case: one side, nothing dropped
  auto out = std::make_shared<CheckSet>();
  for (const CheckSetPtr* s : {&a, &b})
    if (*s)
      for (const auto& c : **s)
        if (kept(c) && std::find(out->begin(), out->end(), c) == out->end())
          out->push_back(c);
  if (out->empty()) return nullptr;
  return out;
}

const KernelCheck* failed_check(const CheckSetPtr& s) {
  const KernelCheck* first = nullptr;  // the earliest launch: the others may have failed because of it
  if (s)
    for (const auto& c : *s)
      if (c->failed() && (!first || c->tag < first->tag)) first = c.get();
  return first;
}

bool any_pending(const CheckSetPtr& s) {
  return s && std::any_of(s->begin(), s->end(), [](const auto& c) { return c->pending(); });
}

namespace {
// Guards DeviceBuffer::checks: a buffer's set is read by host threads while a device worker may
// add to it (the slabs of a concatenation are written by several steps).
std::mutex& buffer_checks_mutex() {
  static std::mutex m;
  return m;
}
thread_local CheckScope* current_scope = nullptr;
}  // namespace

CheckSetPtr checks_of(const DeviceBuffer& b) {
  if (!b.has_checks.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(buffer_checks_mutex());
  return b.checks;
}

void carry_checks(DeviceBuffer& b, const CheckSetPtr& s) {
  if (!s || s->empty()) return;
  std::lock_guard lock(buffer_checks_mutex());
  b.checks = merge_checks(b.checks, s);
  b.has_checks.store(b.checks != nullptr, std::memory_order_release);
}

CheckScope::CheckScope(const void* step, Attribute attribute)
    : step_(step), attribute_(attribute), previous_(current_scope) {
  current_scope = this;
}

CheckScope::~CheckScope() { current_scope = previous_; }

CheckScope* CheckScope::current() { return current_scope; }

void CheckScope::add(std::shared_ptr<KernelCheck> check) {
  auto out = made_ ? std::make_shared<CheckSet>(*made_) : std::make_shared<CheckSet>();
  out->push_back(std::move(check));
  made_ = std::move(out);
}

}  // namespace ember
