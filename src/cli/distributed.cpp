// `ember train` on several processes (src/cli/distributed.h; docs/distributed.md § ember train).
#include "cli/distributed.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#ifdef EMBER_CLI_HAVE_MPI
#include "ember/dist/mpi.h"
#endif

namespace ember::cli {

namespace fs = std::filesystem;

namespace {
constexpr bool kHaveMpi =
#ifdef EMBER_CLI_HAVE_MPI
    true;
#else
    false;
#endif

// mpirun (or mpiexec) on PATH; empty when there is none.
std::string find_launcher() {
  const char* path = std::getenv("PATH");
  std::string rest = path ? path : "";
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find(':', start);
    std::string dir = rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (const char* name : {"mpirun", "mpiexec"}) {
      std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}
}  // namespace

int launched_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    try {
      int n = std::stoi(v);
      if (n >= 1) return n;
    } catch (const std::exception&) {
    }
    throw Error(std::string("ember train: the launcher's ") + var + " is '" + v + "', not a process count");
  }
  return 1;
}

std::unique_ptr<dist::Communicator> join_mpi(Device device) {
#ifdef EMBER_CLI_HAVE_MPI
  return dist::mpi_world({.device = device});
#else
  (void)device;
  throw Error("ember train: launched as " + std::to_string(launched_world_size()) +
              " processes (mpirun/srun), but this ember was built without MPI (ember_dist_mpi): install "
              "libopenmpi-dev and rebuild, or run one process");
#endif
}

void relaunch_under_mpirun(int nproc, int argc, char** argv) {
  if (!kHaveMpi)
    throw Error("ember train --nproc " + std::to_string(nproc) +
                ": this ember was built without MPI (ember_dist_mpi); install libopenmpi-dev openmpi-bin and rebuild");
  std::string launcher = find_launcher();
  if (launcher.empty())
    throw Error("ember train --nproc " + std::to_string(nproc) +
                ": no mpirun or mpiexec on PATH (Debian: apt install openmpi-bin)");
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> args = {launcher, "-np", std::to_string(nproc), "--oversubscribe"};
  if (::geteuid() == 0) args.push_back("--allow-run-as-root");
  args.push_back(ec ? std::string(argv[0]) : self.string());
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (s.rfind("--nproc=", 0) == 0) continue;
    args.push_back(s);
  }
  if (!std::getenv("OMP_NUM_THREADS")) {  // the ranks share the cores
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    ::setenv("OMP_NUM_THREADS", std::to_string(std::max(1u, cores / unsigned(nproc))).c_str(), 1);
  }
  std::vector<char*> cargs;
  for (auto& s : args) cargs.push_back(s.data());
  cargs.push_back(nullptr);
  ::execv(launcher.c_str(), cargs.data());
  throw Error("ember train --nproc: could not run " + launcher + ": " + std::strerror(errno));
}

}  // namespace ember::cli
