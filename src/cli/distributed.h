// `ember train` on several processes: detecting a launch by mpirun/srun, joining the MPI group
// (when ember_dist_mpi was built), and --nproc N, which runs this command again under
// `mpirun -np N`.
#pragma once

#include <memory>

#include "ember/dist/communicator.h"

namespace ember::cli {

// The number of processes the launcher started (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE);
// 1 without a launcher.
int launched_world_size();

// This process's rank in the MPI job, computing on `device`; an Error when this ember was built
// without MPI (ember_dist_mpi).
std::unique_ptr<dist::Communicator> join_mpi(Device device);

// Runs argv (without its --nproc option) again as `mpirun -np nproc --oversubscribe ...` (and
// --allow-run-as-root as root), with OMP_NUM_THREADS = cores / nproc unless set. Returns only
// by throwing an Error: no MPI in this build, no mpirun on PATH, or exec failed.
[[noreturn]] void relaunch_under_mpirun(int nproc, int argc, char** argv);

}  // namespace ember::cli
