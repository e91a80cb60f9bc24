// The Learner's data-parallel hooks (Learner::data_parallel, src/train/distributed_fit.cpp): who
// writes, the same batch count on every rank, and epoch metrics averaged over all ranks' items.
// Every function is a no-op (or trivially true) without a communicator.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ember/dist/communicator.h"
#include "ember/train/metrics.h"

namespace ember::train::distributed {

// Rank 0, or no communicator: this rank prints and writes the run folder.
bool is_writer(const dist::Communicator* comm);

// Every rank must run the same number of steps (each step is a collective): an Error naming the
// ranks' counts otherwise, before the first step would hang until the timeout.
void check_same_steps(dist::Communicator* comm, int64_t steps, const std::string& phase, int64_t epoch);

// Replaces values[prefix + name] of every metric by the mean over all ranks' items: the sum of
// value x items over ranks divided by the total items (exact for item means: loss, accuracy).
// Returns the total items (this rank's `items` without a communicator).
int64_t average_over_ranks(dist::Communicator* comm, std::map<std::string, double>& values, const std::string& prefix,
                           const std::vector<MetricPtr>& metrics, int64_t items);

}  // namespace ember::train::distributed
