// ember::dist — collectives for data-parallel training (docs/distributed.md).
//
// A Communicator is one rank of a group of `size()` ranks. Every collective is asynchronous: it
// returns a Pending at once and runs on the communicator's own thread, in the order the calls
// were made (every rank must make the same calls in the same order, as with MPI). wait() gives the
// result or rethrows the error.
//
//   auto comm = dist::mpi_world();                                  // or dist::run_in_process(...)
//   auto summed = comm->all_reduce(grad, dist::ReduceOp::Mean);     // starts now
//   ...                                                             // overlap other work
//   Array g = summed.wait();                                        // on grad's device
//
// Results are bit-identical on every rank and from run to run: element e is reduced on one rank
// in rank order, ((x0 + x1) + x2) + ..., whatever the implementation (in-process or MPI), the
// number of chunks or the timing. Before moving data the ranks exchange a small description of
// each call (collective, dtype, shape), so a mismatch between ranks is an Error naming both ranks'
// values on every rank instead of a hang or garbage; a rank that does not arrive within the
// timeout (default 60 s, or EMBER_DIST_TIMEOUT seconds) is an Error naming it. After an error
// the communicator is broken: later calls fail at once with the first error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "ember/array.h"

namespace ember::dist {

// Sum and Mean for every dtype except: Mean is floating-only; on bool, Sum (and Max) is logical
// or, Min logical and. f16/bf16 are accumulated in f32 and rounded once.
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min };
const char* reduce_op_name(ReduceOp op);

// The default timeout: EMBER_DIST_TIMEOUT (seconds, may be fractional) when set, else 60 s.
std::chrono::milliseconds default_timeout();

// The result of an asynchronous collective. Copyable; wait() may be called more than once.
template <class T>
class Pending {
 public:
  Pending() = default;
  explicit Pending(std::shared_future<T> f) : future_(std::move(f)) {}
  // Blocks until the collective is done; returns its result or rethrows its ember::Error.
  T wait() const { return future_.get(); }
  bool ready() const { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
  bool valid() const { return future_.valid(); }

 private:
  std::shared_future<T> future_;
};
template <>
class Pending<void> {
 public:
  Pending() = default;
  explicit Pending(std::shared_future<void> f) : future_(std::move(f)) {}
  void wait() const { future_.get(); }
  bool ready() const { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
  bool valid() const { return future_.valid(); }

 private:
  std::shared_future<void> future_;
};

// Raw bytes moved between ranks (shared: in-process ranks hand each other the same buffer).
using Bytes = std::vector<uint8_t>;
using BytesPtr = std::shared_ptr<const Bytes>;

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The device this rank computes on (results of collectives land on their input's device).
  Device device() const { return device_; }
  // "in-process" or "mpi".
  virtual std::string backend_name() const = 0;
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeout_ms_.load()); }
  // Affects collectives started after the call.
  void set_timeout(std::chrono::milliseconds t) { timeout_ms_ = t.count(); }

  // Every rank gets the reduction of all ranks' `x` (same shape and dtype on every rank).
  Pending<Array> all_reduce(const Array& x, ReduceOp op = ReduceOp::Sum);
  // Every rank gets rank `root`'s `x`; the other ranks pass an array of the same shape and dtype
  // (its values are ignored), so that a mismatch is caught.
  Pending<Array> broadcast(const Array& x, int root = 0);
  // Every rank gets every rank's `x`, in rank order. Shapes may differ between ranks (uneven
  // sizes); dtypes must match.
  Pending<std::vector<Array>> all_gather(const Array& x);
  // The reduction of all ranks' `x` (same shape and dtype, rank >= 1), split along dim 0 into
  // size() chunks as evenly as possible (the first dim0 % size chunks one row longer): rank r
  // gets chunk r. See chunk_rows().
  Pending<Array> reduce_scatter(const Array& x, ReduceOp op = ReduceOp::Sum);
  // Completes when every rank has called barrier().
  Pending<void> barrier();
  // Waits for every collective started so far (their errors stay with their Pendings).
  void synchronize();

 protected:
  Communicator(int rank, int size, Device device, std::chrono::milliseconds timeout);
  // The one primitive an implementation provides, called on the communicator's thread: sends
  // to_each[r] to rank r (to_each has size() entries; entry rank() is kept locally) and returns
  // what every rank sent to this one, by source rank. `what` names the collective for errors;
  // the call throws an ember::Error naming the missing rank when `deadline` passes.
  virtual std::vector<BytesPtr> exchange(const std::vector<BytesPtr>& to_each, const std::string& what,
                                         std::chrono::steady_clock::time_point deadline) = 0;
  // Implementations stop the worker in their destructor (before their own members go away).
  void stop_worker();
  // The first error of a collective on this communicator ("" if none); after stop_worker().
  std::string first_error() const;

 private:
  struct Worker;
  template <class T>
  Pending<T> submit(std::function<T()> task);
  std::string describe(const char* collective, uint64_t seq) const;

  int rank_ = 0, size_ = 1;
  Device device_;
  std::atomic<int64_t> timeout_ms_;
  uint64_t next_seq_ = 0;  // collectives submitted (the caller's thread)
  std::unique_ptr<Worker> worker_;
};

// Rows of chunk `r` of a reduce_scatter over `rows` rows on `size` ranks: [begin, end).
std::pair<int64_t, int64_t> chunk_rows(int64_t rows, int size, int r);

}  // namespace ember::dist
