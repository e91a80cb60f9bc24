// ember::dist collectives on the in-process implementation: every collective on every dtype for
// 1, 2 and 3 ranks, uneven and empty shapes, against values computed here in f64; the f32
// rank-order reduction bit for bit; mismatches between ranks and timeouts as Errors naming the
// rank. tests/dist/mpi_collectives_main.cpp runs the same checks over MPI.
#include <gtest/gtest.h>

#include <ember/dist/in_process.h>
#include <ember/ops.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "dist/collective_checks.h"

namespace ember::dist {
namespace {

using namespace std::chrono_literals;

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, EveryCollectiveEveryDtype) {
  const int size = GetParam();
  run_in_process({.size = size, .timeout = 20s}, [](Communicator& comm) { checks::run_all_collective_checks(comm); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesTest, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(CollectivesInProcessTest, AsyncHandlesCompleteInSubmissionOrder) {
  run_in_process({.size = 2, .timeout = 20s}, [](Communicator& comm) {
    std::vector<Pending<Array>> pending;
    for (int k = 0; k < 8; ++k)
      pending.push_back(comm.all_reduce(full({4}, double(k * 10 + comm.rank())), ReduceOp::Sum));
    for (int k = 7; k >= 0; --k) {  // waited on in reverse: each still has its own result
      std::vector<float> v = pending[size_t(k)].wait().to_vector<float>();
      for (float x : v) EXPECT_EQ(x, float(2 * k * 10 + 1)) << "call " << k;
    }
  });
}

TEST(CollectivesInProcessTest, RanksOnTwoDevicesKeepTheirDevice) {
  // Two devices: the CPU and the reference device (as a second device instance).
  if (!Device::reference().available()) GTEST_SKIP() << "reference plugin not found";
  run_in_process({.size = 2, .devices = {Device::cpu(), Device::reference()}, .timeout = 20s}, [](Communicator& comm) {
    Array x = full({3}, double(comm.rank() + 1), {.device = comm.device()});
    Array y = comm.all_reduce(x, ReduceOp::Sum).wait();
    EXPECT_EQ(y.device(), comm.device());
    EXPECT_EQ(y.to_vector<float>(), std::vector<float>(3, 3.0f));
  });
}

TEST(CollectivesInProcessTest, MismatchedShapesAreAnErrorOnEveryRank) {
  std::vector<std::string> errors(2);
  run_in_process({.size = 2, .timeout = 20s}, [&](Communicator& comm) {
    Array x = zeros({3, comm.rank() == 0 ? 4 : 5});
    try {
      comm.all_reduce(x).wait();
    } catch (const Error& e) {
      errors[size_t(comm.rank())] = e.what();
    }
    // The communicator is broken afterwards: later calls fail at once with the first error.
    EXPECT_THROW(comm.barrier().wait(), Error);
  });
  for (const auto& msg : errors) {
    EXPECT_NE(msg.find("all_reduce #0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 0 has float32 [3, 4] but rank 1 has float32 [3, 5]"), std::string::npos) << msg;
  }
}

TEST(CollectivesInProcessTest, MismatchedDtypesAndCallsAreErrors) {
  std::vector<std::string> dtype_errors(3), call_errors(3);
  run_in_process({.size = 3, .timeout = 20s}, [&](Communicator& comm) {
    try {
      comm.all_gather(zeros({2}, {.dtype = comm.rank() == 2 ? DType::I32 : DType::F32})).wait();
    } catch (const Error& e) {
      dtype_errors[size_t(comm.rank())] = e.what();
    }
  });
  run_in_process({.size = 3, .timeout = 20s}, [&](Communicator& comm) {
    try {
      if (comm.rank() == 1) comm.broadcast(zeros({2}), 0).wait();
      else comm.all_reduce(zeros({2})).wait();
    } catch (const Error& e) {
      call_errors[size_t(comm.rank())] = e.what();
    }
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(dtype_errors[size_t(r)].find("rank 0 has float32 [2] but rank 2 has int32 [2]"), std::string::npos)
        << dtype_errors[size_t(r)];
    EXPECT_NE(call_errors[size_t(r)].find("rank 0 is in all_reduce #0, rank 1 in broadcast #0"), std::string::npos)
        << call_errors[size_t(r)];
  }
}

TEST(CollectivesInProcessTest, MeanOfIntegersIsAnError) {
  run_in_process({.size = 2, .timeout = 20s}, [](Communicator& comm) {
    try {
      comm.all_reduce(zeros({2}, {.dtype = DType::I64}), ReduceOp::Mean).wait();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("mean is defined for floating dtypes only, got int64"), std::string::npos)
          << e.what();
    }
  });
}

TEST(CollectivesInProcessTest, BadRootAndUndefinedArrayAreErrors) {
  run_in_process({.size = 2, .timeout = 20s}, [](Communicator& comm) {
    EXPECT_THROW(comm.broadcast(zeros({2}), 2), Error);
    EXPECT_THROW(comm.all_reduce(Array()), Error);
    comm.barrier().wait();  // nothing was submitted by the failed calls
  });
}

TEST(CollectivesInProcessTest, ReduceScatterOfAScalarIsAnError) {
  run_in_process({.size = 2, .timeout = 20s}, [](Communicator& comm) {
    EXPECT_THROW(comm.reduce_scatter(full({}, 1.0)).wait(), Error);
  });
}

// A rank that never arrives: its peer fails after the timeout, naming it and the collective.
TEST(CollectivesInProcessTest, TimeoutNamesTheMissingRank) {
  auto comms = in_process_group({.size = 3, .timeout = 300ms});
  auto start = std::chrono::steady_clock::now();
  auto p0 = comms[0]->all_reduce(zeros({4}));
  auto p2 = comms[2]->all_reduce(zeros({4}));
  std::string msg;
  try {
    p0.wait();
  } catch (const Error& e) {
    msg = e.what();
  }
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(msg.find("dist all_reduce #0 (rank 0 of 3, in-process): timed out after 0.3 s waiting for rank 1"),
            std::string::npos)
      << msg;
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 5.0);
  EXPECT_THROW(p2.wait(), Error);
}

// A rank that exits early (its communicator is destroyed): the peer fails at once, naming it.
TEST(CollectivesInProcessTest, RankThatLeftIsNamedBeforeTheTimeout) {
  auto start = std::chrono::steady_clock::now();
  std::string msg;
  run_in_process({.size = 2, .timeout = 30s}, [&](Communicator& comm) {
    comm.barrier().wait();
    if (comm.rank() == 1) return;  // exits early
    try {
      comm.all_reduce(zeros({4})).wait();
    } catch (const Error& e) {
      msg = e.what();
    }
  });
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(msg.find("all_reduce #1 (rank 0 of 2, in-process): rank 1 left the group"), std::string::npos) << msg;
  EXPECT_LT(waited, 10.0);
}

TEST(CollectivesInProcessTest, FirstRankErrorIsRethrown) {
  EXPECT_THROW(run_in_process({.size = 2, .timeout = 20s},
                              [](Communicator& comm) {
                                if (comm.rank() == 1) throw Error("rank 1 failed on purpose");
                                comm.barrier().wait();
                              }),
               Error);
}

TEST(CollectivesInProcessTest, ChunkRowsSplitsEvenly) {
  EXPECT_EQ(chunk_rows(7, 3, 0), std::make_pair(int64_t(0), int64_t(3)));
  EXPECT_EQ(chunk_rows(7, 3, 1), std::make_pair(int64_t(3), int64_t(5)));
  EXPECT_EQ(chunk_rows(7, 3, 2), std::make_pair(int64_t(5), int64_t(7)));
  EXPECT_EQ(chunk_rows(1, 3, 2), std::make_pair(int64_t(1), int64_t(1)));
}

}  // namespace
}  // namespace ember::dist
