// Options of data-parallel training (dist::DataParallel, train::Learner::data_parallel), apart
// from ember/dist/data_parallel.h so that the Learner's header does not pull in the collectives
// (and <future>) for programs that never train on several ranks.
#pragma once

namespace ember::dist {

struct DataParallelOptions {
  double bucket_mb = 25;          // gradient bucket size in MiB (a larger parameter is a bucket alone)
  int accumulation_steps = 1;     // micro-steps per optimizer step; gradients sum locally in between
  bool broadcast_buffers = true;  // also broadcast buffers (batch norm statistics) at construction
  // Batch norm statistics over every rank's batch (dist::synchronize_batch_norm), so that the
  // model trains as one process with the whole batch would; false: each rank's own batch.
  bool sync_batch_norm = false;
};

}  // namespace ember::dist
