// The MPI implementation of ember::dist (library ember_dist_mpi, built when CMake finds MPI;
// link it as Ember::ember_dist_mpi). Processes and machines come from the launcher: `mpirun -np
// 2 prog`, `srun prog` (see docs/distributed.md). The reduction is the same rank-order host
// reduction as the in-process implementation (not MPI_Allreduce, whose order is unspecified),
// so results are bit-identical on every rank, run to run and to an in-process run.
#pragma once

#include <memory>
#include <string>

#include "ember/dist/communicator.h"

namespace ember::dist {

struct MpiOptions {
  Device device = Device::cpu();  // the device this rank computes on
  std::chrono::milliseconds timeout = default_timeout();
};

// This process's rank in MPI_COMM_WORLD (a private duplicate of it, so that the program's own MPI
// traffic never mixes with Ember's). Initializes MPI on the calling thread when nobody has
// (MPI_Init_thread with MPI_THREAD_SERIALIZED: the communicator's thread makes every MPI call);
// the last such communicator destroyed finalizes it. A program that initializes MPI itself
// must ask for MPI_THREAD_MULTIPLE if it makes MPI calls while collectives run.
//
// A rank whose collective failed (timeout, mismatch) cannot finalize MPI, as its peers are
// gone or stuck: destroying its communicator prints the first error and calls MPI_Abort (exit
// status 1), which makes the launcher stop every rank — never an endless hang.
std::unique_ptr<Communicator> mpi_world(const MpiOptions& opts = {});

// The rank among the processes of this machine (to choose a device: Device::cuda(local_rank)).
int mpi_local_rank();

// Prints `message` to stderr and ends the whole MPI job with `code` (MPI_Abort).
[[noreturn]] void mpi_abort(int code, const std::string& message);

}  // namespace ember::dist
