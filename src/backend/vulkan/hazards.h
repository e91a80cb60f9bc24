// Which recorded commands of an open command buffer a new one must wait for. The Vulkan plugin
// records each command's buffer accesses (buffer handle + byte range, read or write) since the
// last pipeline barrier; a new command needs a barrier first only when it reads or writes a range
// that an earlier one wrote (read-after-write, write-after-write) or writes a range that an
// earlier one read (write-after-read). Independent commands then run without barriers.
// Header-only and free of Vulkan types (buffers are opaque 64-bit keys), so that the unit tests
// can use it without a device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ember::vk {

// One access of a command: bytes [begin, end) of `buffer`. A command that both reads and writes a
// range lists it once, as a write (a write conflicts with everything a read does, and more).
struct BufferAccess {
  uint64_t buffer = 0;
  uint64_t begin = 0, end = 0;
  bool write = false;
};

// What a new command would race with (the first conflict found).
enum class Hazard { None, ReadAfterWrite, WriteAfterWrite, WriteAfterRead };

inline bool overlaps(const BufferAccess& a, const BufferAccess& b) {
  return a.buffer == b.buffer && a.begin < b.end && b.begin < a.end;
}

// The accesses since the last barrier. Not thread safe (the queue's mutex guards it).
class HazardTracker {
 public:
  // Whether a command making these accesses must wait for the recorded ones, and why.
  Hazard conflict(const BufferAccess* accesses, size_t n) const {
    for (size_t i = 0; i < n; ++i)
      for (const BufferAccess& r : recorded_)
        if ((accesses[i].write || r.write) && overlaps(accesses[i], r))
          return !r.write ? Hazard::WriteAfterRead : accesses[i].write ? Hazard::WriteAfterWrite : Hazard::ReadAfterWrite;
    return Hazard::None;
  }
  bool conflicts(const BufferAccess* accesses, size_t n) const { return conflict(accesses, n) != Hazard::None; }

  // Adds a command's accesses (after any barrier it needed). An access already covered by a
  // recorded one of the same kind (or by a recorded write) adds nothing: kernels that read the
  // same weights keep the list short.
  void record(const BufferAccess* accesses, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const BufferAccess& a = accesses[i];
      if (a.begin >= a.end) continue;
      const bool covered = std::any_of(recorded_.begin(), recorded_.end(), [&](const BufferAccess& r) {
        return r.buffer == a.buffer && (r.write || !a.write) && r.begin <= a.begin && a.end <= r.end;
      });
      if (!covered) recorded_.push_back(a);
    }
  }

  // After a barrier: everything recorded so far is ordered before what comes next.
  void clear() { recorded_.clear(); }
  bool empty() const { return recorded_.empty(); }
  size_t size() const { return recorded_.size(); }

 private:
  std::vector<BufferAccess> recorded_;
};

}  // namespace ember::vk
