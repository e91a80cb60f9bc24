// The in-process implementation of ember::dist: several ranks as threads of one process, each
// rank on its own device if wanted (two CPU device instances, CPU + Vulkan, ...). Data moves
// through the library's own device-to-host and host-to-device copies; the reduction is the
// same rank-order reduction as over MPI, so results are bit-identical to an MPI run.
//
//   dist::run_in_process({.size = 2}, [&](dist::Communicator& comm) {
//     Array g = comm.all_reduce(local_grad(comm.rank()), dist::ReduceOp::Mean).wait();
//   });
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ember/dist/communicator.h"

namespace ember::dist {

struct InProcessOptions {
  int size = 2;
  std::vector<Device> devices{};  // rank r computes on devices[r % devices.size()]; empty: the CPU
  std::chrono::milliseconds timeout = default_timeout();
};

// One communicator per rank, to be used by one thread each. Destroying a rank's communicator
// makes it leave the group: a peer waiting for it fails at once with an Error naming it.
std::vector<std::unique_ptr<Communicator>> in_process_group(const InProcessOptions& opts);

// Runs fn(comm) on opts.size threads, one per rank, and returns when all are done; rethrows the
// first exception a rank threw (the peers of a failed rank fail too: it left their group).
void run_in_process(const InProcessOptions& opts, const std::function<void(Communicator&)>& fn);

}  // namespace ember::dist
