// Checks of every ember::dist collective, shared by the in-process tests (collectives_test.cpp)
// and the MPI test program (mpi_collectives_main.cpp, run by mpirun): each rank builds every
// rank's input from (rank, index), so it computes the expected results itself, in f64.
// A failed check throws std::runtime_error with the collective, dtype, shape and element.
#pragma once

#include <ember/dist/communicator.h>
#include <ember/ops.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::dist::checks {

inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

// Rank r's element i of a `dtype` input; every value is exact in every dtype, and so are sums
// over up to 4 ranks.
inline double input_value(int r, int64_t i, DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::F64:
    case DType::F16:
    case DType::BF16: return (r + 1) * 0.5 + double(i % 9) * 0.25 - 1.0;
    case DType::I32:
    case DType::I64:
    case DType::I8:
    case DType::I16: return double((r + 1) * 7 - i % 20);
    case DType::U8: return double((r * 100 + i * 3) % 256);
    case DType::U16:
    case DType::U32:
    case DType::U64: return double((r * 100 + i * 3) % 1000);
    case DType::Bool: return (r + i) % 3 == 0 ? 1.0 : 0.0;
  }
  return 0;
}

inline Array make_input(int r, const Shape& shape, DType dtype, Device device) {
  std::vector<double> v(size_t(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = input_value(r, int64_t(i), dtype);
  return to_device(cast(from_vector(v, shape), dtype), device);
}

inline double expected_reduce(int size, int64_t i, DType dtype, ReduceOp op) {
  double acc = input_value(0, i, dtype);
  for (int r = 1; r < size; ++r) {
    double v = input_value(r, i, dtype);
    if (dtype == DType::Bool) acc = op == ReduceOp::Min ? double(acc && v) : double(acc || v);
    else if (op == ReduceOp::Max) acc = std::max(acc, v);
    else if (op == ReduceOp::Min) acc = std::min(acc, v);
    else acc += v;
  }
  if (dtype == DType::U8 && (op == ReduceOp::Sum)) acc = std::fmod(acc, 256.0);
  if (op == ReduceOp::Mean) acc /= size;
  return acc;
}

inline std::string where(const char* coll, DType dtype, const Shape& shape, int rank) {
  return std::string(coll) + " " + std::string(dtype_name(dtype)) + " " + shape.str() + " on rank " +
         std::to_string(rank);
}

inline void expect_values(const Array& got, const Shape& shape, DType dtype, Device device,
                          const std::function<double(int64_t)>& expected, double rel_tol, const std::string& what) {
  check(got.shape() == shape, what + ": shape " + got.shape().str() + ", expected " + shape.str());
  check(got.dtype() == dtype, what + ": dtype " + std::string(dtype_name(got.dtype())));
  check(got.device() == device, what + ": device " + got.device().str() + ", expected " + device.str());
  std::vector<double> v = got.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    double e = expected(int64_t(i));
    bool ok = rel_tol == 0 ? v[i] == e : std::abs(v[i] - e) <= rel_tol * std::max(1.0, std::abs(e));
    check(ok, what + ": element " + std::to_string(i) + " is " + std::to_string(v[i]) + ", expected " +
                  std::to_string(e));
  }
}

inline void check_all_reduce(Communicator& comm, DType dtype, const Shape& shape) {
  const int n = comm.size(), r = comm.rank();
  std::vector<ReduceOp> ops = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};
  if (is_floating(dtype)) ops.push_back(ReduceOp::Mean);
  std::vector<Pending<Array>> pending;  // all started before any is waited on
  for (ReduceOp op : ops) pending.push_back(comm.all_reduce(make_input(r, shape, dtype, comm.device()), op));
  for (size_t k = 0; k < ops.size(); ++k) {
    ReduceOp op = ops[k];
    // Means over 3 ranks are inexact: f32/f64 within rounding, f16/bf16 within their precision.
    double tol = op != ReduceOp::Mean ? 0 : (dtype == DType::F16 || dtype == DType::BF16) ? 1e-2 : 1e-6;
    expect_values(
        pending[k].wait(), shape, dtype, comm.device(), [&](int64_t i) { return expected_reduce(n, i, dtype, op); },
        tol, where("all_reduce", dtype, shape, r) + " " + reduce_op_name(op));
  }
}

inline void check_broadcast(Communicator& comm, DType dtype, const Shape& shape) {
  const int root = comm.size() - 1;
  Array got = comm.broadcast(make_input(comm.rank(), shape, dtype, comm.device()), root).wait();
  expect_values(
      got, shape, dtype, comm.device(), [&](int64_t i) { return input_value(root, i, dtype); }, 0,
      where("broadcast", dtype, shape, comm.rank()));
}

// Uneven: rank r contributes [r, 3] (rank 0 an empty array).
inline void check_all_gather(Communicator& comm, DType dtype) {
  const int r = comm.rank();
  std::vector<Array> got = comm.all_gather(make_input(r, {r, 3}, dtype, comm.device())).wait();
  check(int(got.size()) == comm.size(), "all_gather: " + std::to_string(got.size()) + " arrays");
  for (int s = 0; s < comm.size(); ++s)
    expect_values(
        got[size_t(s)], {s, 3}, dtype, comm.device(), [&](int64_t i) { return input_value(s, i, dtype); }, 0,
        where("all_gather", dtype, Shape{s, 3}, r) + " part " + std::to_string(s));
}

inline void check_reduce_scatter(Communicator& comm, DType dtype, const Shape& shape) {
  const int n = comm.size(), r = comm.rank();
  Array got = comm.reduce_scatter(make_input(r, shape, dtype, comm.device()), ReduceOp::Sum).wait();
  const auto chunk = chunk_rows(shape[0], n, r);
  const int64_t begin = chunk.first, end = chunk.second;
  std::vector<int64_t> dims = shape.dims();
  dims[0] = end - begin;
  int64_t row = shape[0] == 0 ? 0 : shape.numel() / shape[0];
  expect_values(
      got, Shape(dims), dtype, comm.device(),
      [&](int64_t i) { return expected_reduce(n, begin * row + i, dtype, ReduceOp::Sum); }, 0,
      where("reduce_scatter", dtype, shape, r));
}

// f32 values that round when added: the result is ((x0 + x1) + x2) ... in f32, bit for bit, and
// the same bits on every rank.
inline void check_rank_order_bits(Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  const int64_t count = 1001;  // several chunks of uneven size
  auto value = [](int rank, int64_t i) { return float(1.0 / (rank + 3) + double(i) * 1e-3 + 1e-7 * double(i % 7)); };
  std::vector<float> mine(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) mine[size_t(i)] = value(r, i);
  Array got = comm.all_reduce(from_vector(mine, {count}, comm.device()), ReduceOp::Sum).wait();
  std::vector<float> v = got.to_vector<float>();
  for (int64_t i = 0; i < count; ++i) {
    float acc = value(0, i);
    for (int s = 1; s < n; ++s) acc = acc + value(s, i);
    uint32_t a, b;
    std::memcpy(&a, &v[size_t(i)], 4);
    std::memcpy(&b, &acc, 4);
    check(a == b, "rank-order f32 sum, element " + std::to_string(i) + " on rank " + std::to_string(r));
  }
  // Every rank holds the same bits.
  std::vector<Array> all = comm.all_gather(got).wait();
  for (int s = 0; s < n; ++s) {
    std::vector<float> o = all[size_t(s)].to_vector<float>();
    check(std::memcmp(o.data(), v.data(), v.size() * 4) == 0,
          "rank " + std::to_string(s) + " and rank " + std::to_string(r) + " hold different sums");
  }
}

inline void run_all_collective_checks(Communicator& comm) {
  const std::vector<DType> dtypes = {DType::F32, DType::F64, DType::F16, DType::BF16,
                                     DType::I32, DType::I64, DType::U8,  DType::Bool};
  const std::vector<Shape> shapes = {{5, 3}, {7}, {0, 4}, {}};
  for (DType dt : dtypes) {
    for (const Shape& s : shapes) {
      check_all_reduce(comm, dt, s);
      check_broadcast(comm, dt, s);
      if (s.rank() > 0) check_reduce_scatter(comm, dt, s);
    }
    check_reduce_scatter(comm, dt, {2, 3});  // fewer rows than 3 ranks: a rank gets [0, 3]
    check_all_gather(comm, dt);
    comm.barrier().wait();
  }
  check_rank_order_bits(comm);
}

}  // namespace ember::dist::checks
