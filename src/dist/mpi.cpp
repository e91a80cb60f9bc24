// The MPI communicator (ember/dist/mpi.h). exchange() is point-to-point: one MPI_Isend to every
// peer and, for every peer, MPI_Improbe + MPI_Mrecv (sizes differ per peer and call), polled
// until done or the deadline, so a missing rank is named instead of waited for forever.
#include "ember/dist/mpi.h"

// Only the C API: skip the deprecated C++ bindings (which libmpi_cxx would have to provide).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <thread>

#include "dist/timeout_text.h"

namespace ember::dist {

namespace {

constexpr int kTag = 0x454d;  // 'EM': every exchange; MPI's non-overtaking order pairs them up

std::mutex g_init_mu;
int g_owned_comms = 0;      // live communicators that share an MPI we initialized
bool g_we_initialized = false;

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, size_t(len));
}

void check_mpi(int code, const std::string& what, const char* call) {
  if (code != MPI_SUCCESS) throw Error(what + ": " + call + " failed: " + mpi_error_text(code));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size, const MpiOptions& opts)
      : Communicator(rank, size, opts.device, opts.timeout), comm_(comm) {}

  ~MpiCommunicator() override {
    stop_worker();
    std::string error = first_error();
    if (!error.empty()) mpi_abort(1, "ember::dist: ending the MPI job after a failed collective: " + error);
    MPI_Comm_free(&comm_);
    std::lock_guard<std::mutex> lock(g_init_mu);
    if (--g_owned_comms == 0 && g_we_initialized) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
      g_we_initialized = false;
    }
  }
  std::string backend_name() const override { return "mpi"; }

 protected:
  std::vector<BytesPtr> exchange(const std::vector<BytesPtr>& to_each, const std::string& what,
                                 std::chrono::steady_clock::time_point deadline) override {
    const int n = size(), me = rank();
    std::vector<BytesPtr> got(static_cast<size_t>(n));
    got[size_t(me)] = to_each[size_t(me)];
    std::vector<MPI_Request> sends(size_t(n), MPI_REQUEST_NULL);
    std::vector<bool> sent(size_t(n), true), received(size_t(n), true);
    for (int r = 0; r < n; ++r) {
      if (r == me) continue;
      const Bytes& b = *to_each[size_t(r)];
      if (b.size() > size_t(INT_MAX))
        throw Error(what + ": " + std::to_string(b.size()) + " bytes to rank " + std::to_string(r) +
                    " is more than one MPI message holds (2 GiB); use smaller buckets");
      check_mpi(MPI_Isend(b.data(), int(b.size()), MPI_BYTE, r, kTag, comm_, &sends[size_t(r)]), what, "MPI_Isend");
      sent[size_t(r)] = false;
      received[size_t(r)] = false;
    }
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      bool progressed = false, done = true;
      for (int r = 0; r < n; ++r) {
        if (!received[size_t(r)]) {
          int flag = 0;
          MPI_Message msg;
          MPI_Status status;
          check_mpi(MPI_Improbe(r, kTag, comm_, &flag, &msg, &status), what, "MPI_Improbe");
          if (flag) {
            int count = 0;
            MPI_Get_count(&status, MPI_BYTE, &count);
            auto buf = std::make_shared<Bytes>(size_t(count));
            check_mpi(MPI_Mrecv(buf->data(), count, MPI_BYTE, &msg, MPI_STATUS_IGNORE), what, "MPI_Mrecv");
            got[size_t(r)] = std::move(buf);
            received[size_t(r)] = progressed = true;
          }
        }
        if (!sent[size_t(r)]) {
          int flag = 0;
          check_mpi(MPI_Test(&sends[size_t(r)], &flag, MPI_STATUS_IGNORE), what, "MPI_Test");
          if (flag) sent[size_t(r)] = progressed = true;
        }
        done = done && received[size_t(r)] && sent[size_t(r)];
      }
      if (done) return got;
      if (std::chrono::steady_clock::now() > deadline) {
        std::vector<int> silent, not_taking;
        for (int r = 0; r < n; ++r) {
          if (!received[size_t(r)]) silent.push_back(r);
          else if (!sent[size_t(r)]) not_taking.push_back(r);
        }
        // The send requests stay pending: the communicator is broken and the job is ended.
        if (!silent.empty())
          throw Error(what + ": timed out after " + detail::seconds_text(timeout()) + " waiting for " +
                      detail::rank_list(silent) + " (it has not made this call: stuck, slower, or gone)");
        throw Error(what + ": timed out after " + detail::seconds_text(timeout()) + " sending to " +
                    detail::rank_list(not_taking));
      }
      // Sends in flight need MPI_Test calls to move (large messages go in fragments): keep
      // polling them without sleeping. While peers have not arrived, back off to at most 200 us.
      bool all_received = true;
      for (int r = 0; r < n; ++r) all_received = all_received && received[size_t(r)];
      if (progressed || all_received) {
        pause = std::chrono::microseconds(10);
        if (!progressed) std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(pause);
        pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::microseconds(200));
      }
    }
  }

 private:
  MPI_Comm comm_;
};

}  // namespace

std::unique_ptr<Communicator> mpi_world(const MpiOptions& opts) {
  if (opts.timeout.count() <= 0) throw Error("dist::mpi_world: the timeout must be positive");
  std::lock_guard<std::mutex> lock(g_init_mu);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw Error("dist::mpi_world: MPI was already finalized in this process");
  if (!initialized) {
    int provided = 0;
    int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (code != MPI_SUCCESS) throw Error("dist::mpi_world: MPI_Init_thread failed: " + mpi_error_text(code));
    g_we_initialized = true;
    if (provided < MPI_THREAD_SERIALIZED)
      throw Error("dist::mpi_world: this MPI provides thread level " + std::to_string(provided) +
                  ", Ember needs MPI_THREAD_SERIALIZED (" + std::to_string(MPI_THREAD_SERIALIZED) + ")");
  } else {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED)
      throw Error("dist::mpi_world: MPI was initialized with thread level " + std::to_string(provided) +
                  "; initialize it with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) to use ember::dist");
  }
  MPI_Comm comm;
  int code = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (code != MPI_SUCCESS) throw Error("dist::mpi_world: MPI_Comm_dup failed: " + mpi_error_text(code));
  // Errors come back as codes (turned into ember::Error), never MPI's default abort.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ++g_owned_comms;
  return std::make_unique<MpiCommunicator>(comm, rank, size, opts);
}

int mpi_local_rank() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw Error("dist::mpi_local_rank: MPI is not initialized (call dist::mpi_world first)");
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int r = 0;
  MPI_Comm_rank(local, &r);
  MPI_Comm_free(&local);
  return r;
}

void mpi_abort(int code, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this only keeps [[noreturn]] honest
}

}  // namespace ember::dist
