// The in-process communicator (ember/dist/in_process.h): ranks are threads that meet in a shared
// Group. Each exchange is a numbered round: a rank deposits one buffer per destination and waits
// (with its deadline) until every rank has deposited, then takes what was sent to it.
#include "ember/dist/in_process.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "dist/timeout_text.h"

namespace ember::dist {

namespace {

struct Group {
  struct Round {
    std::vector<std::vector<BytesPtr>> sent;  // by source rank, then destination
    std::vector<bool> arrived;
    int arrivals = 0, collected = 0;
  };
  int size = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, Round> rounds;
  std::vector<bool> left;
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Group> group, int rank, Device device, std::chrono::milliseconds timeout)
      : Communicator(rank, group->size, device, timeout), group_(std::move(group)) {}
  ~InProcessCommunicator() override {
    stop_worker();
    {
      std::lock_guard<std::mutex> lock(group_->mu);
      group_->left[size_t(rank())] = true;
    }
    group_->cv.notify_all();
  }
  std::string backend_name() const override { return "in-process"; }

 protected:
  std::vector<BytesPtr> exchange(const std::vector<BytesPtr>& to_each, const std::string& what,
                                 std::chrono::steady_clock::time_point deadline) override {
    Group& g = *group_;
    const size_t me = size_t(rank());
    uint64_t k = round_++;
    std::unique_lock<std::mutex> lock(g.mu);
    Group::Round& rd = g.rounds[k];
    if (rd.sent.empty()) {
      rd.sent.resize(size_t(g.size));
      rd.arrived.assign(size_t(g.size), false);
    }
    rd.sent[me] = to_each;
    rd.arrived[me] = true;
    ++rd.arrivals;
    g.cv.notify_all();
    auto someone_left = [&] {
      for (size_t r = 0; r < size_t(g.size); ++r)
        if (!rd.arrived[r] && g.left[r]) return true;
      return false;
    };
    bool complete = g.cv.wait_until(lock, deadline, [&] { return rd.arrivals == g.size || someone_left(); });
    if (rd.arrivals != g.size) {
      std::vector<int> missing, gone;
      for (size_t r = 0; r < size_t(g.size); ++r)
        if (!rd.arrived[r]) (g.left[r] ? gone : missing).push_back(int(r));
      if (!gone.empty())
        throw Error(what + ": " + detail::rank_list(gone) + " left the group (its communicator was destroyed) " +
                    "without making this call");
      (void)complete;
      throw Error(what + ": timed out after " + detail::seconds_text(timeout()) + " waiting for " +
                  detail::rank_list(missing));
    }
    std::vector<BytesPtr> out(size_t(g.size));
    for (size_t r = 0; r < size_t(g.size); ++r) out[r] = rd.sent[r][me];
    if (++rd.collected == g.size) g.rounds.erase(k);
    return out;
  }

 private:
  std::shared_ptr<Group> group_;
  uint64_t round_ = 0;  // exchanges made by this rank (worker thread only)
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> in_process_group(const InProcessOptions& opts) {
  if (opts.size < 1) throw Error("dist::in_process_group: size must be at least 1, got " + std::to_string(opts.size));
  if (opts.timeout.count() <= 0) throw Error("dist::in_process_group: the timeout must be positive");
  auto group = std::make_shared<Group>();
  group->size = opts.size;
  group->left.assign(size_t(opts.size), false);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < opts.size; ++r) {
    Device d = opts.devices.empty() ? Device::cpu() : opts.devices[size_t(r) % opts.devices.size()];
    comms.push_back(std::make_unique<InProcessCommunicator>(group, r, d, opts.timeout));
  }
  return comms;
}

void run_in_process(const InProcessOptions& opts, const std::function<void(Communicator&)>& fn) {
  auto comms = in_process_group(opts);
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm = std::move(comms[r]);
      try {
        fn(*comm);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
      comm.reset();  // leaves the group: peers still waiting for this rank fail at once
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace ember::dist
