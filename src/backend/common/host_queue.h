// Queues and events (ABI v2) for the plugins whose memory is host RAM (cpu, reference).
//
// A HostQueue runs its work in one of two modes:
//  - immediate: each call does its work before returning (the cpu plugin, the reference plugin
//    by default). Errors come back from the call itself; events are reached when recorded.
//  - asynchronous (the reference plugin's test mode, EMBER_REFERENCE_ASYNC=1): each call is
//    queued and a worker thread runs it later, after a random delay, so that the core's ordering
//    and lifetime rules are exercised as a GPU would exercise them. Errors found while running
//    are deferred to the next synchronize (abi.h); freed buffers are filled with a poison
//    pattern before their memory goes back (see HostQueue::free_buffer), new ones start as
//    poison too, so a read that overtakes the work it depends on sees NaN or 0xFF.. bytes.
// Plugins link no part of libember; this header uses only the C ABI and the standard library.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "backend/abi.h"
#include "backend/common/deferred_errors.h"
#include "backend/common/host_memory.h"
#include "backend/library_attrs.h"

namespace ember::host {

// Settings of the asynchronous mode.
struct AsyncSettings {
  bool async = false;
  int max_delay_us = 0;   // each operation waits a random 0..max_delay_us before it runs
  bool poison = false;    // fill new and freed buffers with 0xFF bytes (NaN in f32/f64, -1 in ints)
  size_t max_deferred = 4096;  // kernel errors kept until reported; past it they are lost (flagged)
};

// A unit of queued work: returns an ABI status code and fills `st` on failure.
using HostWork = std::function<int32_t(ember_status* st)>;

}  // namespace ember::host

struct ember_queue_s {
  int32_t device = 0;
  ember::host::AsyncSettings settings;

  // Asynchronous mode only.
  std::mutex m;
  std::condition_variable work_ready, progressed;
  std::deque<ember::host::HostWork> work;
  uint64_t enqueued = 0;   // operations pushed so far
  uint64_t completed = 0;  // operations finished so far (in order)
  bool stop = false;
  // Errors found while running, oldest first, until reported (at most settings.max_deferred:
  // the last kept then says that later ones were lost, EMBER_STATUS_ERRORS_LOST).
  ember::plugin::DeferredErrors deferred;
  // Device timing (abi.h queue_set_timing): while `timing`, each call with a tag is timed around
  // its work on the worker (after its random delay), and its record kept until taken.
  static constexpr size_t kMaxTimings = 65536;
  bool timing = false;
  std::deque<ember_timing> timings;
  std::thread worker;

  ember_queue_s(int32_t dev, ember::host::AsyncSettings s) : device(dev), settings(s), deferred(s.max_deferred) {
    if (settings.async) worker = std::thread([this] { loop(); });
  }
  ~ember_queue_s() {
    if (!settings.async) return;
    {
      std::lock_guard lock(m);
      stop = true;
    }
    work_ready.notify_all();
    worker.join();
  }

  // Runs `w` now (immediate mode: its status is the call's) or queues it (asynchronous mode:
  // the call succeeds; a failure is deferred with `tag`).
  int32_t submit(ember::host::HostWork w, uint64_t tag, ember_status* st) {
    if (!settings.async) return w(st);
    std::lock_guard lock(m);
    const bool timed = timing && tag != 0;
    work.push_back([this, w = std::move(w), tag, timed](ember_status* s) {
      const int64_t start = timed ? now_ns() : 0;
      int32_t rc = w(s);
      s->tag = tag;
      if (timed) {
        const int64_t end = now_ns();
        std::lock_guard timings_lock(m);
        if (timings.size() < kMaxTimings) timings.push_back(ember_timing{tag, start, end});
      }
      return rc;
    });
    ++enqueued;
    work_ready.notify_one();
    return EMBER_OK;
  }

  uint64_t point() {
    std::lock_guard lock(m);
    return enqueued;
  }
  bool reached(uint64_t p) {
    std::lock_guard lock(m);
    return completed >= p;
  }
  // Blocks until the first `p` operations are done; returns (and forgets) the oldest deferred error.
  int32_t wait(uint64_t p, ember_status* st) {
    if (!settings.async) return EMBER_OK;
    std::unique_lock lock(m);
    progressed.wait(lock, [&] { return completed >= p; });
    return deferred.take(st);
  }
  int32_t synchronize(ember_status* st) { return wait(point(), st); }
  // Blocks until the first `p` operations are done, without touching the deferred error.
  void wait_quietly(uint64_t p) {
    if (!settings.async) return;
    std::unique_lock lock(m);
    progressed.wait(lock, [&] { return completed >= p; });
  }

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void loop() {
    std::minstd_rand rng(uint32_t(0x5eed + device));
    for (;;) {
      ember::host::HostWork w;
      {
        std::unique_lock lock(m);
        work_ready.wait(lock, [&] { return stop || !work.empty(); });
        if (work.empty()) return;
        w = std::move(work.front());
        work.pop_front();
      }
      if (settings.max_delay_us > 0)
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % uint32_t(settings.max_delay_us + 1)));
      ember_status s{};
      int32_t rc = w(&s);
      {
        std::lock_guard lock(m);
        if (rc != EMBER_OK) {
          s.code = rc;
          deferred.add(s);
        }
        ++completed;
      }
      progressed.notify_all();
    }
  }
};

// A point in one queue's work; never recorded = already reached.
struct ember_event_s {
  ember_queue_s* queue = nullptr;
  uint64_t point = 0;
};

namespace ember::host {

inline void poison(ember_buffer b) {
  if (b && b->data) std::memset(b->data, 0xFF, b->bytes);
}

inline void queue_destroy(ember_queue q) { delete q; }  // joins the worker after the queued work
inline int32_t queue_synchronize(ember_queue q, ember_status* st) { return q->synchronize(st); }

// Device timing: only the asynchronous mode has work apart from the calls that the core times.
inline int32_t queue_set_timing(ember_queue q, int32_t on, ember_status* st) {
  if (!q->settings.async)
    return set_status(st, EMBER_ERR_UNSUPPORTED, "an immediate queue runs its work inside the call: no device timing");
  std::lock_guard lock(q->m);
  q->timing = on != 0;
  return EMBER_OK;
}
inline int32_t queue_take_timings(ember_queue q, ember_timing* out, int32_t capacity) {
  std::lock_guard lock(q->m);
  int32_t n = 0;
  for (; n < capacity && !q->timings.empty(); ++n) {
    out[n] = q->timings.front();
    q->timings.pop_front();
  }
  return n;
}

inline int32_t event_create(int32_t, ember_event* out, ember_status* st) {
  if (!out) return set_status(st, EMBER_ERR_INVALID, "event_create without an output");
  *out = new ember_event_s{};
  return EMBER_OK;
}
inline void event_destroy(ember_event e) { delete e; }
inline int32_t event_record(ember_event e, ember_queue q, ember_status*) {
  e->queue = q;
  e->point = q->point();
  return EMBER_OK;
}
inline int32_t event_synchronize(ember_event e, ember_status* st) {
  return e->queue ? e->queue->wait(e->point, st) : EMBER_OK;
}
inline int32_t event_query(ember_event e) { return !e->queue || e->queue->reached(e->point) ? 1 : 0; }
inline int32_t queue_wait_event(ember_queue q, ember_event e, ember_status* st) {
  if (!e->queue || e->queue == q) return EMBER_OK;  // one queue is in order already
  ember_queue_s* other = e->queue;
  uint64_t p = e->point;
  if (!q->settings.async) {  // the host is the queue: wait here
    other->wait_quietly(p);
    return EMBER_OK;
  }
  return q->submit([other, p](ember_status*) { other->wait_quietly(p); return int32_t(EMBER_OK); }, 0, st);
}

// Buffers: allocation is immediate (memory is the host's); writes take a copy of the source,
// reads wait for the queue, frees are ordered on the queue.
inline int32_t queued_buffer_alloc(const AsyncSettings& s, size_t bytes, ember_buffer* out, ember_status* st) {
  int32_t rc = buffer_alloc(0, bytes, out, st);
  if (rc == EMBER_OK && s.poison) poison(*out);
  return rc;
}
inline void queued_buffer_free(ember_queue q, ember_buffer b) {
  if (!b) return;
  if (!q->settings.async) {
    buffer_free(b);
    return;
  }
  bool poisoning = q->settings.poison;
  q->submit([b, poisoning](ember_status*) {
    if (poisoning) poison(b);
    buffer_free(b);
    return int32_t(EMBER_OK);
  }, 0, nullptr);
}
inline int32_t queued_buffer_write(ember_queue q, ember_buffer dst, size_t off, const void* src, size_t n,
                                   ember_status* st) {
  if (!q->settings.async) return buffer_write(dst, off, src, n, st);
  if (off + n > dst->bytes)  // refused at once: the core needs no deferred error for its own mistake
    return set_status(st, EMBER_ERR_INVALID, "write of %zu bytes at %zu past the end of a %zu-byte buffer", n,
                      off, dst->bytes);
  auto bytes = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                            static_cast<const unsigned char*>(src) + n);
  return q->submit([dst, off, bytes](ember_status* s) { return buffer_write(dst, off, bytes->data(), bytes->size(), s); },
                   0, st);
}
inline int32_t queued_buffer_read(ember_queue q, ember_buffer src, size_t off, void* dst, size_t n, ember_status* st) {
  q->wait_quietly(q->point());
  return buffer_read(src, off, dst, n, st);
}
inline int32_t queued_buffer_copy(ember_queue q, ember_buffer dst, size_t dst_off, ember_buffer src, size_t src_off,
                                  size_t n, ember_status* st) {
  if (dst_off + n > dst->bytes || src_off + n > src->bytes)
    return set_status(st, EMBER_ERR_INVALID, "copy of %zu bytes from %zu (of %zu) to %zu (of %zu) out of range", n,
                      src_off, src->bytes, dst_off, dst->bytes);
  return q->submit([=](ember_status*) {
    mark_written(dst);
    std::memmove(static_cast<char*>(dst->data) + dst_off, static_cast<const char*>(src->data) + src_off, n);
    return int32_t(EMBER_OK);
  }, 0, st);
}

// A library call's arguments, owned, so that the call can run after the caller's arrays are gone.
struct QueuedLibraryCall {
  int32_t op = 0;
  std::vector<ember_tensor_desc> inputs, outputs;
  std::vector<unsigned char> attrs;
  QueuedLibraryCall(int32_t o, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                    const void* a)
      : op(o), inputs(in, in + (in ? n_in : 0)), outputs(out, out + (out ? n_out : 0)) {
    size_t n = a ? library_attrs_size(o) : 0;
    attrs.assign(static_cast<const unsigned char*>(a), static_cast<const unsigned char*>(a) + n);
  }
  const void* attrs_ptr() const { return attrs.empty() ? nullptr : attrs.data(); }
};

// A KIR launch, owned.
struct QueuedLaunch {
  ember_kir_launch launch{};
  std::vector<ember_kir_arg> args;
  explicit QueuedLaunch(const ember_kir_launch& l) : launch(l), args(l.args, l.args + (l.args ? l.n_args : 0)) {
    launch.args = args.data();
  }
};

}  // namespace ember::host
