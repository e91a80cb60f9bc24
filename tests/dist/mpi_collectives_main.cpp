// The MPI test program, run by mpirun as ctest entries (tests/CMakeLists.txt: dist.mpi.*):
//   collectives   every collective on every dtype (collective_checks.h) on this job's ranks
//   equivalence   2 ranks x batch 32 over MPI: the same parameters as 1 process x batch 64
//                 (within the tolerance of data_parallel_test.cpp), bit-identical across ranks
//                 and to the same run on in-process ranks (the reduction is shared)
//   sync-bn       DataParallel{.sync_batch_norm} over MPI: the same parameters and running
//                 statistics as 1 process with the whole batch, bit-identical across ranks
//   fault-hang    rank 1 stops taking part: rank 0 must fail within its 2 s timeout naming
//                 rank 1 and the collective, and the job must end (not hang)
//   fault-exit    the same with rank 1 exiting early (normally, MPI finalized)
//   bench         times the CNN's data-parallel step and all_reduce of 1 and 25 MiB buckets over
//                 MPI and in-process, and profiles how much of the all-reduce overlaps the
//                 device's work with one and with several buckets (no checks)
// Prints "PASS" lines; exits non-zero on a failed check.
#include <ember/dist/in_process.h>
#include <ember/dist/mpi.h>

#include <ember/profiler.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/models.h"
#include "dist/collective_checks.h"
#include "dist/dp_fixture.h"

using namespace ember;
using namespace ember::dist;

namespace {

int run_collectives(Communicator& comm) {
  checks::run_all_collective_checks(comm);
  std::printf("PASS collectives on rank %d of %d\n", comm.rank(), comm.size());
  return 0;
}

int run_equivalence(Communicator& comm) {
  int failures = 0;
  for (auto kind : {fixture::OptimKind::Sgd, fixture::OptimKind::Adam}) {
    for (int accumulation : {1, 2}) {
      const char* name = kind == fixture::OptimKind::Sgd ? "sgd" : "adam";
      fixture::Params mine = fixture::train_data_parallel(comm, kind, accumulation);
      // Every rank's parameters, as bytes, to compare across ranks.
      std::vector<Array> flat;
      for (auto& p : mine) flat.push_back(from_vector(p, {int64_t(p.size())}));
      bool same_as_peers = true;
      for (size_t i = 0; i < flat.size(); ++i) {
        std::vector<Array> all = comm.all_gather(flat[i]).wait();
        for (auto& a : all) same_as_peers = same_as_peers && fixture::bit_identical({a.to_vector<float>()}, {mine[i]});
      }
      // The same training on in-process ranks inside this process.
      std::vector<fixture::Params> threads(size_t(comm.size()));
      run_in_process({.size = comm.size()}, [&](Communicator& c) {
        threads[size_t(c.rank())] = fixture::train_data_parallel(c, kind, accumulation);
      });
      bool same_as_in_process = fixture::bit_identical(mine, threads[size_t(comm.rank())]);
      double diff = fixture::max_difference(fixture::train_single_process(kind), mine);
      bool ok = same_as_peers && same_as_in_process && diff < 5e-6;
      std::printf("%s equivalence %s accumulation %d on rank %d: ranks identical %d, in-process identical %d, "
                  "difference to 1 process x 64: %.3g\n",
                  ok ? "PASS" : "FAIL", name, accumulation, comm.rank(), same_as_peers, same_as_in_process, diff);
      failures += !ok;
    }
  }
  return failures ? 1 : 0;
}

int run_sync_batch_norm(Communicator& comm) {
  fixture::Params mine = fixture::train_batch_norm_net(&comm, true);
  bool same_as_peers = true;
  for (auto& p : mine)
    for (auto& a : comm.all_gather(from_vector(p, {int64_t(p.size())})).wait())
      same_as_peers = same_as_peers && fixture::bit_identical({a.to_vector<float>()}, {p});
  double diff = fixture::max_difference(fixture::train_batch_norm_net(nullptr, false), mine);
  bool ok = same_as_peers && diff < 1e-5;
  std::printf("%s sync batch norm on rank %d of %d: ranks identical %d, difference to 1 process x 64: %.3g\n",
              ok ? "PASS" : "FAIL", comm.rank(), comm.size(), same_as_peers, diff);
  return ok ? 0 : 1;
}

// Rank 1 stops taking part after a barrier: it hangs (`exit_early` false) or finishes at once,
// destroying its communicator (`exit_early`). Rank 0's next all_reduce must fail within its 2 s
// timeout naming rank 1; the job then ends through rank 0's MPI_Abort.
int run_fault(Communicator& comm, bool exit_early) {
  comm.set_timeout(std::chrono::seconds(2));
  comm.barrier().wait();
  if (comm.rank() == 1) {
    if (exit_early) return -1;  // main() destroys the communicator (MPI_Finalize) and returns 0
    std::this_thread::sleep_for(std::chrono::seconds(60));  // ended long before by rank 0's abort
    return 0;
  }
  auto start = std::chrono::steady_clock::now();
  try {
    comm.all_reduce(zeros({16}), ReduceOp::Sum).wait();
    std::printf("FAIL: all_reduce succeeded without rank 1\n");
    return 1;
  } catch (const Error& e) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("FAULT DETECTED after %.1f s: %s\n", s, e.what());
    std::fflush(stdout);
    return 3;  // destroying the communicator ends the job (MPI_Abort)
  }
}

// Timing (not a test): all_reduce (mean) of f32 buckets over MPI and over in-process ranks.
void time_all_reduce(Communicator& comm, const char* label) {
  for (int64_t mib : {1, 25}) {
    Array x = full({mib * 262144}, double(comm.rank() + 1));
    x.eval();
    comm.all_reduce(x, ReduceOp::Mean).wait();  // warm-up
    const int reps = 5;
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < reps; ++k) comm.all_reduce(x, ReduceOp::Mean).wait();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
    if (comm.rank() == 0)
      std::printf("%s all_reduce %lld MiB f32 on %d ranks: %.2f ms (%.2f GB/s of bucket)\n", label, (long long)mib,
                  comm.size(), ms, double(mib) * 1048576 / (ms * 1e6));
  }
}

// Timing (not a test): the Fashion-MNIST CNN of `ember train` (0.42 M parameters, one 1.6 MiB
// bucket) with a global batch of 64 split over the ranks. `separate`: backward's gradients are
// computed to the end first, then all-reduced (compute and communication timed apart); else
// DataParallel::backward as in training (the all-reduce waits for the bucket's values).
void time_cnn(Communicator& comm, bool separate) {
  manual_seed(1);
  cli::FashionCnn model;
  DataParallel dp(comm, model);
  optim::Adam opt(model, {.lr = 1e-3});
  auto mine = shard(data::FashionMnist::train(), {.rank = comm.rank(), .size = comm.size(), .shuffle = true, .seed = 1});
  data::DataLoader loader(mine, {.batch_size = size_t(64 / comm.size())});
  const int warmup = 20, steps = 60;
  int k = 0;
  double compute_ms = 0, reduce_ms = 0;
  std::chrono::steady_clock::time_point t0;
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); };
  for (auto& [x, y] : loader) {
    if (k == warmup) t0 = clock::now();
    if (separate) {
      auto c0 = clock::now();
      Gradients g = nn::cross_entropy(model.forward(x), y).array().backward();
      std::vector<Array> all = g.arrays();
      eval(all);
      for (auto& a : all) a.to_vector<float>();  // waits for the values
      auto c1 = clock::now();
      dp.all_reduce_gradients(g);
      if (k >= warmup) {
        compute_ms += std::chrono::duration<double, std::milli>(c1 - c0).count();
        reduce_ms += ms_since(c1);
      }
      opt.step(g);
    } else if (dp.backward(nn::cross_entropy(model.forward(x), y).array())) {
      opt.step(dp.gradients());
    }
    if (++k == warmup + steps) break;
  }
  synchronize();
  double per_step = ms_since(t0) / steps;
  if (comm.rank() == 0) {
    if (separate)
      std::printf("cnn on %d ranks, global batch 64, apart: %.1f ms per step = forward+backward %.1f ms + all-reduce "
                  "%.1f ms (%.2f MiB) + rest\n",
                  comm.size(), per_step, compute_ms / steps, reduce_ms / steps,
                  double(dp.stats().bytes) / double(std::max<int64_t>(1, dp.stats().reductions)) / 1048576);
    else
      std::printf("cnn on %d ranks, global batch 64, DataParallel::backward: %.1f ms per step\n", comm.size(), per_step);
  }
}

// The measure of the union of [begin, end) intervals intersected with [lo, hi).
int64_t covered(std::vector<std::pair<int64_t, int64_t>> spans, int64_t lo, int64_t hi) {
  std::sort(spans.begin(), spans.end());
  int64_t total = 0, reach = lo;
  for (auto [b, e] : spans) {
    b = std::max(b, reach);
    e = std::min(e, hi);
    if (e > b) {
      total += e - b;
      reach = e;
    }
  }
  return total;
}

// How much of the gradient all-reduce overlaps the device's work (the profiler's records): 10
// profiled steps of the CNN through DataParallel::backward with buckets of `bucket_mb` MiB. Per
// all-reduce: its time from start to result, the part spent waiting for the bucket's values
// ("dist input to host"), and of the rest (moving and reducing data) the part during which the
// device ran kernels. Rank 0 prints it and writes the Chrome trace to `trace_path`.
void profile_overlap(Communicator& comm, double bucket_mb, const std::string& trace_path) {
  manual_seed(1);
  cli::FashionCnn model;
  DataParallel dp(comm, model, {.bucket_mb = bucket_mb});
  optim::Adam opt(model, {.lr = 1e-3});
  auto mine = shard(data::FashionMnist::train(), {.rank = comm.rank(), .size = comm.size(), .shuffle = true, .seed = 1});
  data::DataLoader loader(mine, {.batch_size = size_t(64 / comm.size())});
  const int warmup = 10, steps = 10;
  int k = 0;
  for (auto& [x, y] : loader) {
    if (k == warmup) {
      synchronize();
      comm.barrier().wait();
      profiler_start();
    }
    if (dp.backward(nn::cross_entropy(model.forward(x), y).array())) opt.step(dp.gradients());
    if (++k == warmup + steps) break;
  }
  synchronize();
  std::vector<KernelRecord> records = profiler_stop();
  if (comm.rank() != 0) return;
  std::vector<std::pair<int64_t, int64_t>> kernels;
  int64_t first = INT64_MAX, last = 0, device_ns = 0;
  for (auto& r : records) {
    first = std::min(first, r.start_ns);
    last = std::max(last, r.start_ns + r.duration_ns);
    if (r.device != "host" && r.device != "dist") {
      kernels.push_back({r.start_ns, r.start_ns + r.duration_ns});
      device_ns += r.duration_ns;
    }
  }
  int64_t reduce_ns = 0, wait_ns = 0, moving_ns = 0, overlapped_ns = 0, count = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const KernelRecord& r = records[i];
    if (r.name != "dist all_reduce") continue;
    ++count;
    int64_t b = r.start_ns, e = r.start_ns + r.duration_ns, wait_end = b;
    for (const KernelRecord& w : records)  // the input wait inside this collective (same thread)
      if (w.name == "dist input to host" && w.thread == r.thread && w.start_ns >= b && w.start_ns < e) {
        wait_ns += w.duration_ns;
        wait_end = w.start_ns + w.duration_ns;
      }
    reduce_ns += e - b;
    moving_ns += e - wait_end;
    overlapped_ns += covered(kernels, wait_end, e);
  }
  write_chrome_trace(trace_path, records);
  std::printf("overlap, cnn on %d ranks, buckets of %.2f MiB (%zu buckets, %.0f%% started inside the backward walk): %.1f ms per step, device busy %.1f ms; "
              "%.1f all-reduces per step take %.2f ms from start to result = %.2f ms waiting for the values + %.2f ms "
              "moving and reducing, of which %.2f ms (%.0f%%) while the device ran kernels; trace %s\n",
              comm.size(), bucket_mb, dp.buckets().size(),
              100.0 * double(dp.stats().started_in_backward) / double(std::max<int64_t>(1, dp.stats().buckets)),
              double(last - first) / 1e6 / steps,
              double(device_ns) / 1e6 / steps, double(count) / steps, double(reduce_ns) / 1e6 / steps,
              double(wait_ns) / 1e6 / steps, double(moving_ns) / 1e6 / steps, double(overlapped_ns) / 1e6 / steps,
              moving_ns > 0 ? 100.0 * double(overlapped_ns) / double(moving_ns) : 0.0, trace_path.c_str());
}

int run_bench(Communicator& comm) {
  time_cnn(comm, false);
  time_cnn(comm, true);
  const char* dir = std::getenv("EMBER_BENCH_TRACE_DIR");
  std::string base = std::string(dir && *dir ? dir : "/tmp") + "/ember_dp_overlap_";
  profile_overlap(comm, 25, base + "one_bucket.json");
  profile_overlap(comm, 0.25, base + "small_buckets.json");
  time_all_reduce(comm, "mpi");
  comm.barrier().wait();
  if (comm.rank() == 0) run_in_process({.size = comm.size()}, [](Communicator& c) { time_all_reduce(c, "in-process"); });
  comm.barrier().wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "collectives";
  auto comm = mpi_world();
  int rc = 1;
  try {
    if (mode == "collectives") rc = run_collectives(*comm);
    else if (mode == "equivalence") rc = run_equivalence(*comm);
    else if (mode == "sync-bn") rc = run_sync_batch_norm(*comm);
    else if (mode == "fault-hang") rc = run_fault(*comm, false);
    else if (mode == "fault-exit") rc = run_fault(*comm, true);
    else if (mode == "bench") rc = run_bench(*comm);
    else std::fprintf(stderr, "unknown mode '%s' (collectives, equivalence, sync-bn, fault-hang, fault-exit, bench)\n", mode.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL on rank %d: %s\n", comm->rank(), e.what());
    std::fflush(stderr);
    mpi_abort(1, "ending the job");
  }
  std::fflush(stdout);
  bool fault_mode = mode.rfind("fault", 0) == 0;
  if (rc != 0 && !fault_mode) mpi_abort(rc, "a check failed");
  comm.reset();
  return rc < 0 ? 0 : rc;
}
