// The collectives of ember::dist, written once over one primitive (exchange: every rank sends one
// buffer to every rank) so that the in-process and MPI implementations reduce identically.
// Each call runs on the communicator's worker thread in submission order: a call description
// exchange first (catches mismatches between ranks), then the data.
#include "ember/dist/communicator.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "dist/host_data.h"
#include "scheduler/trace.h"

namespace ember::dist {

using detail::CallHeader;
using detail::Collective;

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

std::chrono::milliseconds default_timeout() {
  if (const char* env = std::getenv("EMBER_DIST_TIMEOUT"); env && *env) {
    char* end = nullptr;
    double s = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(s > 0))
      throw Error(std::string("EMBER_DIST_TIMEOUT: expected a positive number of seconds, got '") + env + "'");
    return std::chrono::milliseconds(int64_t(s * 1000 + 0.5));
  }
  return std::chrono::seconds(60);
}

std::pair<int64_t, int64_t> chunk_rows(int64_t rows, int size, int r) {
  int64_t base = rows / size, extra = rows % size;
  int64_t begin = r * base + std::min<int64_t>(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

// One thread per communicator runs the collectives in the order they were submitted.
struct Communicator::Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  bool stop = false;
  std::string broken;  // the first error; later calls fail with it (worker thread only)
  std::thread thread;

  Worker() : thread([this] { run(); }) {}
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !tasks.empty(); });
        if (tasks.empty()) return;  // stop requested and everything submitted has run
        task = std::move(tasks.front());
        tasks.pop_front();
      }
      task();
    }
  }
  void push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) throw Error("dist: collective submitted to a communicator that is shutting down");
      tasks.push_back(std::move(task));
    }
    cv.notify_one();
  }
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_one();
    if (thread.joinable()) thread.join();
  }
};

Communicator::Communicator(int rank, int size, Device device, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), device_(device), timeout_ms_(timeout.count()), worker_(std::make_unique<Worker>()) {}

Communicator::~Communicator() { stop_worker(); }

void Communicator::stop_worker() {
  if (worker_) worker_->finish();
}

std::string Communicator::first_error() const { return worker_ ? worker_->broken : std::string(); }

std::string Communicator::describe(const char* collective, uint64_t seq) const {
  return "dist " + std::string(collective) + " #" + std::to_string(seq) + " (rank " + std::to_string(rank_) +
         " of " + std::to_string(size_) + ", " + backend_name() + ")";
}

template <class T>
Pending<T> Communicator::submit(std::function<T()> task) {
  auto promise = std::make_shared<std::promise<T>>();
  Pending<T> pending(promise->get_future().share());
  Worker* w = worker_.get();
  w->push([w, promise, task = std::move(task)] {
    try {
      if (!w->broken.empty()) throw Error("dist: the communicator is broken by an earlier error: " + w->broken);
      if constexpr (std::is_void_v<T>) {
        task();
        promise->set_value();
      } else {
        promise->set_value(task());
      }
    } catch (const std::exception& e) {
      if (w->broken.empty()) w->broken = e.what();
      promise->set_exception(std::current_exception());
    } catch (...) {
      if (w->broken.empty()) w->broken = "unknown exception";
      promise->set_exception(std::current_exception());
    }
  });
  return pending;
}

namespace {

// The profiler's record of one collective (device "dist", on the communicator's thread): its
// time from start to result, input wait included (the "dist input to host" record inside it).
void describe_collective(KernelRecord& r, const char* collective, const std::string& what, const Array* x) {
  r.name = std::string("dist ") + collective;
  r.device = "dist";
  r.where = what;
  if (x)
    r.ops = fmt::format("{} {} ({:.3f} MiB)", dtype_name(x->dtype()), x->shape().str(),
                        double(x->numel()) * double(dtype_size(x->dtype())) / 1048576.0);
}

// Sends the call description to every rank, checks that all agree, returns them by rank.
template <class Exchange>
std::vector<CallHeader> agree(Exchange&& exchange, const CallHeader& mine, int size, const std::string& what) {
  auto bytes = std::make_shared<const Bytes>(detail::encode(mine));
  std::vector<BytesPtr> got = exchange(std::vector<BytesPtr>(size_t(size), bytes));
  std::vector<CallHeader> headers;
  for (int r = 0; r < size; ++r) headers.push_back(detail::decode(*got[size_t(r)], r, what));
  detail::check_headers(headers, what);
  return headers;
}

BytesPtr slice_bytes(const Bytes& b, size_t begin, size_t end) {
  return std::make_shared<const Bytes>(b.begin() + std::ptrdiff_t(begin), b.begin() + std::ptrdiff_t(end));
}

// Each rank reduces its chunk of every rank's data in rank order; returns this rank's reduced
// chunk. `offsets` has size + 1 byte offsets.
template <class Exchange>
Bytes scatter_reduce(Exchange&& exchange, const Bytes& data, const std::vector<size_t>& offsets, int rank, DType dtype,
                     ReduceOp op, const std::string& what) {
  size_t n = offsets.size() - 1;
  std::vector<BytesPtr> to_each;
  for (size_t r = 0; r < n; ++r) to_each.push_back(slice_bytes(data, offsets[r], offsets[r + 1]));
  std::vector<BytesPtr> parts = exchange(to_each);
  size_t mine = offsets[size_t(rank) + 1] - offsets[size_t(rank)];
  std::vector<const uint8_t*> ptrs;
  for (size_t r = 0; r < n; ++r) {
    if (parts[r]->size() != mine)
      throw Error(what + ": rank " + std::to_string(r) + " sent " + std::to_string(parts[r]->size()) +
                  " bytes for chunk " + std::to_string(rank) + ", expected " + std::to_string(mine));
    ptrs.push_back(parts[r]->data());
  }
  return detail::reduce_in_rank_order(ptrs, mine / dtype_size(dtype), dtype, op, what);
}

}  // namespace

// The exchange bound to one collective: a fresh deadline (the timeout when the call was made,
// `t`) for each step.
#define EMBER_DIST_EXCHANGE                                                                        \
  [this, &what, t](const std::vector<BytesPtr>& to_each) {                                         \
    return this->exchange(to_each, what, std::chrono::steady_clock::now() + t);                    \
  }

Pending<Array> Communicator::all_reduce(const Array& x, ReduceOp op) {
  if (!x.defined()) throw Error(describe("all_reduce", next_seq_) + ": undefined array");
  uint64_t seq = next_seq_++;
  return submit<Array>([this, x, op, seq, t = timeout()]() -> Array {
    std::string what = describe("all_reduce", seq);
    trace::Span span([&](KernelRecord& r) { describe_collective(r, "all_reduce", what, &x); });
    auto ex = EMBER_DIST_EXCHANGE;
    agree(ex, CallHeader{seq, Collective::AllReduce, op, 0, x.dtype(), x.shape()}, size_, what);
    detail::check_reduce_supported(x.dtype(), op, what);
    Bytes data = detail::to_bytes(x);
    size_t es = dtype_size(x.dtype());
    std::vector<size_t> offsets;
    for (int r = 0; r < size_; ++r) offsets.push_back(size_t(chunk_rows(x.numel(), size_, r).first) * es);
    offsets.push_back(data.size());
    auto reduced = std::make_shared<const Bytes>(scatter_reduce(ex, data, offsets, rank_, x.dtype(), op, what));
    std::vector<BytesPtr> chunks = ex(std::vector<BytesPtr>(size_t(size_), reduced));
    Bytes out;
    out.reserve(data.size());
    for (int r = 0; r < size_; ++r) {
      const Bytes& c = *chunks[size_t(r)];
      if (c.size() != offsets[size_t(r) + 1] - offsets[size_t(r)])
        throw Error(what + ": rank " + std::to_string(r) + " sent a reduced chunk of " + std::to_string(c.size()) +
                    " bytes, expected " + std::to_string(offsets[size_t(r) + 1] - offsets[size_t(r)]));
      out.insert(out.end(), c.begin(), c.end());
    }
    return detail::from_bytes(out.data(), out.size(), x.shape(), x.dtype(), x.device());
  });
}

Pending<Array> Communicator::broadcast(const Array& x, int root) {
  if (!x.defined()) throw Error(describe("broadcast", next_seq_) + ": undefined array");
  if (root < 0 || root >= size_)
    throw Error(describe("broadcast", next_seq_) + ": root " + std::to_string(root) + " is not a rank (size " +
                std::to_string(size_) + ")");
  uint64_t seq = next_seq_++;
  return submit<Array>([this, x, root, seq, t = timeout()]() -> Array {
    std::string what = describe("broadcast", seq);
    trace::Span span([&](KernelRecord& r) { describe_collective(r, "broadcast", what, &x); });
    auto ex = EMBER_DIST_EXCHANGE;
    agree(ex, CallHeader{seq, Collective::Broadcast, ReduceOp::Sum, root, x.dtype(), x.shape()}, size_, what);
    BytesPtr payload = std::make_shared<const Bytes>(rank_ == root ? detail::to_bytes(x) : Bytes());
    std::vector<BytesPtr> got = ex(std::vector<BytesPtr>(size_t(size_), payload));
    const Bytes& b = *got[size_t(root)];
    return detail::from_bytes(b.data(), b.size(), x.shape(), x.dtype(), x.device());
  });
}

Pending<std::vector<Array>> Communicator::all_gather(const Array& x) {
  if (!x.defined()) throw Error(describe("all_gather", next_seq_) + ": undefined array");
  uint64_t seq = next_seq_++;
  return submit<std::vector<Array>>([this, x, seq, t = timeout()]() -> std::vector<Array> {
    std::string what = describe("all_gather", seq);
    trace::Span span([&](KernelRecord& r) { describe_collective(r, "all_gather", what, &x); });
    auto ex = EMBER_DIST_EXCHANGE;
    auto headers = agree(ex, CallHeader{seq, Collective::AllGather, ReduceOp::Sum, 0, x.dtype(), x.shape()}, size_, what);
    auto mine = std::make_shared<const Bytes>(detail::to_bytes(x));
    std::vector<BytesPtr> got = ex(std::vector<BytesPtr>(size_t(size_), mine));
    std::vector<Array> out;
    for (int r = 0; r < size_; ++r) {
      const Bytes& b = *got[size_t(r)];
      out.push_back(detail::from_bytes(b.data(), b.size(), headers[size_t(r)].shape, x.dtype(), x.device()));
    }
    return out;
  });
}

Pending<Array> Communicator::reduce_scatter(const Array& x, ReduceOp op) {
  if (!x.defined()) throw Error(describe("reduce_scatter", next_seq_) + ": undefined array");
  uint64_t seq = next_seq_++;
  return submit<Array>([this, x, op, seq, t = timeout()]() -> Array {
    std::string what = describe("reduce_scatter", seq);
    trace::Span span([&](KernelRecord& r) { describe_collective(r, "reduce_scatter", what, &x); });
    auto ex = EMBER_DIST_EXCHANGE;
    agree(ex, CallHeader{seq, Collective::ReduceScatter, op, 0, x.dtype(), x.shape()}, size_, what);
    if (x.rank() == 0) throw Error(what + ": needs an array with at least one dimension to split, got a scalar");
    detail::check_reduce_supported(x.dtype(), op, what);
    Bytes data = detail::to_bytes(x);
    int64_t rows = x.shape()[0];
    size_t row_bytes = rows == 0 ? 0 : data.size() / size_t(rows);
    std::vector<size_t> offsets;
    for (int r = 0; r < size_; ++r) offsets.push_back(size_t(chunk_rows(rows, size_, r).first) * row_bytes);
    offsets.push_back(data.size());
    Bytes mine = scatter_reduce(ex, data, offsets, rank_, x.dtype(), op, what);
    auto [begin, end] = chunk_rows(rows, size_, rank_);
    std::vector<int64_t> dims = x.shape().dims();
    dims[0] = end - begin;
    return detail::from_bytes(mine.data(), mine.size(), Shape(dims), x.dtype(), x.device());
  });
}

Pending<void> Communicator::barrier() {
  uint64_t seq = next_seq_++;
  return submit<void>([this, seq, t = timeout()] {
    std::string what = describe("barrier", seq);
    trace::Span span([&](KernelRecord& r) { describe_collective(r, "barrier", what, nullptr); });
    auto ex = EMBER_DIST_EXCHANGE;
    agree(ex, CallHeader{seq, Collective::Barrier, ReduceOp::Sum, 0, DType::U8, Shape()}, size_, what);
  });
}

void Communicator::synchronize() {
  // A no-op task queued behind everything submitted so far (it bypasses the broken check: it
  // moves no data).
  auto done = std::make_shared<std::promise<void>>();
  auto f = done->get_future();
  worker_->push([done] { done->set_value(); });
  f.wait();
}

#undef EMBER_DIST_EXCHANGE

}  // namespace ember::dist
