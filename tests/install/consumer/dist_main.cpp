// An installed Ember's MPI collectives from a consumer project (Ember::ember_dist_mpi): one
// process (MPI's singleton mode) all-reduces [1, 2, 3] and gets it back unchanged; prints "ok".
#include <ember/dist/mpi.h>
#include <ember/ember.h>

#include <cstdio>

int main() {
  auto comm = ember::dist::mpi_world();
  std::vector<float> got = comm->all_reduce(ember::from_vector<float>({1, 2, 3}, {3})).wait().to_vector<float>();
  if (comm->size() != 1 || got != std::vector<float>{1, 2, 3}) {
    std::printf("dist consumer: wrong result\n");
    return 1;
  }
  std::printf("dist consumer ok (%s)\n", comm->backend_name().c_str());
  return 0;
}
