// The launch planner of the CPU tile interpreter: checks a launch, cuts its iteration space into
// tiles of up to kTile points, computes where each tile's points live in every argument, runs
// the per-target kernels over them (tile_kernels.cpp) and spreads tiles over OpenMP threads.
//
// Elementwise programs: tiles are chunks of the innermost dim when it is long (each argument is
// then contiguous, broadcast or strided along the tile), otherwise runs of consecutive points
// across rows (per-point offsets).
// Reductions (has ACC_*): either
//  - reduce-vectorized: for each outer point, tiles run along the innermost reduce dim and each
//    lane keeps its own accumulator; lanes are combined at the end (long contiguous reductions), or
//  - outer-vectorized: a tile holds consecutive outer points, one accumulator per lane, and the
//    reduce dims are walked in order (same order as the reference, so float sums match exactly).
// Phase-1 instructions then run once over each block of outer points.
// Work is split into a fixed set of tiles/blocks that does not depend on the thread count, and a
// reduction is never split between threads, so results are bitwise identical for any count.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/cpu/program.h"

namespace ember::cpu {

using ember::host::set_status;

namespace {

size_t dtype_bytes(uint8_t dt) { return ember_dtype_bytes(dt); }

// ---- per-thread scratch ---------------------------------------------------------------------
struct Scratch {
  char* regs;             // n_insts register slots
  char* tmp;              // one slot
  char* acc_val;          // per ACC: kSlotBytes of lanes
  int64_t* acc_idx;       // per ACC: kTile argmax/argmin indices
  int64_t* offs;          // per argument: kTile point offsets
  const void** src;       // per instruction
  ArgAddr* addr;          // per argument: addresses of the tile being run
  ArgAddr* block;         // per argument: addresses of the current block of outer points
  int64_t* red_off;       // per argument: offset of the current reduce point
  int64_t* idx;           // multi-index scratch (EMBER_MAX_ITER_RANK)
};

Scratch make_scratch(const Program& p, int n_args) {
  const size_t n = p.insts.size(), na = size_t(n_args), nacc = p.accs.size();
  auto round = [](size_t b) { return (b + 63) / 64 * 64; };
  size_t sizes[] = {round(n * kSlotBytes),        round(kSlotBytes),
                    round(nacc * kSlotBytes),     round(nacc * kTile * 8),
                    round(na * kTile * 8),        round(n * sizeof(void*)),
                    round(na * sizeof(ArgAddr)),  round(na * sizeof(ArgAddr)),
                    round(na * 8),                round(EMBER_MAX_ITER_RANK * 8)};
  size_t total = 64;
  for (size_t s : sizes) total += s;
  thread_local std::unique_ptr<char[]> buffer;
  thread_local size_t capacity = 0;
  if (total > capacity) {
    buffer.reset(new char[total]);
    capacity = total;
  }
  char* base = buffer.get();
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  char* parts[10];
  for (int i = 0; i < 10; ++i) {
    parts[i] = base;
    base += sizes[i];
  }
  Scratch s;
  s.regs = parts[0];
  s.tmp = parts[1];
  s.acc_val = parts[2];
  s.acc_idx = reinterpret_cast<int64_t*>(parts[3]);
  s.offs = reinterpret_cast<int64_t*>(parts[4]);
  s.src = reinterpret_cast<const void**>(parts[5]);
  s.addr = reinterpret_cast<ArgAddr*>(parts[6]);
  s.block = reinterpret_cast<ArgAddr*>(parts[7]);
  s.red_off = reinterpret_cast<int64_t*>(parts[8]);
  s.idx = reinterpret_cast<int64_t*>(parts[9]);
  for (size_t k = 0; k < n; ++k) s.src[k] = s.regs + k * kSlotBytes;
  for (size_t a = 0; a < na; ++a) s.addr[a] = s.block[a] = ArgAddr{};
  return s;
}

Tile make_tile(const Program& p, const ember_kir_launch& l, const Scratch& s, const ArgAddr* addr, size_t len) {
  Tile t;
  t.prog = &p;
  t.launch = &l;
  t.addr = addr;
  t.src = s.src;
  t.regs = s.regs;
  t.tmp = s.tmp;
  t.len = len;
  return t;
}

// ---- tiling of dims [0, rank) of a launch ------------------------------------------------------
struct Tiling {
  int rank = 0;
  int64_t points = 1;
  bool rows = false;     // tiles are chunks of one innermost row
  int64_t inner = 1;     // rows: length of the innermost dim
  int64_t per_row = 1;   // rows: tiles per row
  int64_t chunk = kTile; // runs: points per tile
  int64_t count = 0;     // number of tiles
};

Tiling make_tiling(const ember_kir_launch& l, int rank, bool allow_rows, int64_t chunk) {
  Tiling T;
  T.rank = rank;
  for (int d = 0; d < rank; ++d) T.points *= l.shape[d];
  T.chunk = chunk;
  if (T.points == 0) return T;
  if (rank == 0) {
    T.rows = true;
    T.count = 1;
  } else if (allow_rows && l.shape[rank - 1] >= 64) {
    T.rows = true;
    T.inner = l.shape[rank - 1];
    T.per_row = (T.inner + int64_t(kTile) - 1) / int64_t(kTile);
    T.count = T.points / T.inner * T.per_row;
  } else {
    T.count = (T.points + chunk - 1) / chunk;
  }
  return T;
}

// Fills addr (one per argument) for tile t and returns the tile's length.
size_t tile_addr(const Tiling& T, int64_t t, const ember_kir_launch& l, ArgAddr* addr, int64_t* offs,
                 int64_t* idx) {
  const int r = T.rank, na = l.n_args;
  if (T.rows) {
    const int64_t row = t / T.per_row, j0 = (t % T.per_row) * int64_t(kTile);
    const size_t len = size_t(std::min<int64_t>(int64_t(kTile), T.inner - j0));
    for (int a = 0; a < na; ++a) {
      const ember_kir_arg& g = l.args[a];
      int64_t base = g.offset, rem = row;
      for (int d = r - 2; d >= 0; --d) {
        base += (rem % l.shape[d]) * g.strides[d];
        rem /= l.shape[d];
      }
      const int64_t step = r > 0 ? g.strides[r - 1] : 0;
      addr[a] = ArgAddr{base + j0 * step, step, nullptr};
    }
    return len;
  }
  const int64_t p0 = t * T.chunk;
  const size_t len = size_t(std::min<int64_t>(T.chunk, T.points - p0));
  int64_t rem = p0;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % l.shape[d];
    rem /= l.shape[d];
  }
  const int64_t inner = l.shape[r - 1];
  size_t i = 0;
  while (i < len) {
    const size_t run = size_t(std::min<int64_t>(int64_t(len - i), inner - idx[r - 1]));
    for (int a = 0; a < na; ++a) {
      const ember_kir_arg& g = l.args[a];
      int64_t cur = 0;
      for (int d = 0; d < r; ++d) cur += idx[d] * g.strides[d];
      const int64_t s = g.strides[r - 1];
      int64_t* o = offs + size_t(a) * kTile + i;
      for (size_t j = 0; j < run; ++j) o[j] = cur + int64_t(j) * s;
    }
    i += run;
    idx[r - 1] += int64_t(run);
    for (int d = r - 1; d > 0 && idx[d] >= l.shape[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
  for (int a = 0; a < na; ++a) addr[a] = ArgAddr{l.args[a].offset, 0, offs + size_t(a) * kTile};
  return len;
}

// Advances the multi-index idx over dims [d0, d1) (innermost fastest) and keeps each argument's
// offset over those dims in off.
void advance(const ember_kir_launch& l, int d0, int d1, int64_t* idx, int64_t* off) {
  for (int d = d1 - 1; d >= d0; --d) {
    ++idx[d];
    for (int a = 0; a < l.n_args; ++a) off[a] += l.args[a].strides[d];
    if (idx[d] < l.shape[d]) return;
    for (int a = 0; a < l.n_args; ++a) off[a] -= l.shape[d] * l.args[a].strides[d];
    idx[d] = 0;
  }
}

// ---- reduction lanes ------------------------------------------------------------------------
template <class T>
void init_lanes_t(uint16_t op, T* v, size_t n) {
  T init;
  using L = std::numeric_limits<T>;
  constexpr bool fl = std::is_floating_point_v<T>;
  switch (op) {
    case EMBER_KIR_ACC_SUM: init = T(0); break;
    case EMBER_KIR_ACC_PROD: init = T(1); break;
    case EMBER_KIR_ACC_MAX: case EMBER_KIR_ACC_ARGMAX: init = fl ? -L::infinity() : L::lowest(); break;
    default: init = fl ? L::infinity() : L::max(); break;
  }
  std::fill(v, v + n, init);
}

void init_lanes(uint16_t op, uint8_t kind, void* v, int64_t* idx, size_t n) {
  switch (kind) {
    case kF32: init_lanes_t(op, static_cast<float*>(v), n); break;
    case kF64: init_lanes_t(op, static_cast<double*>(v), n); break;
    case kI32: init_lanes_t(op, static_cast<int32_t*>(v), n); break;
    case kU64: init_lanes_t(op, static_cast<uint64_t*>(v), n); break;
    default: init_lanes_t(op, static_cast<int64_t*>(v), n); break;
  }
  if (is_arg_acc(op)) std::fill(idx, idx + n, int64_t(-1));
}

template <class T>
T nan_max(T a, T b, bool is_max) {
  if constexpr (std::is_floating_point_v<T>)
    if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
  return is_max ? (a > b ? a : b) : (a < b ? a : b);
}

template <class T, bool = std::is_floating_point_v<T>>
struct Wrap { using type = T; };
template <class T>
struct Wrap<T, false> { using type = std::make_unsigned_t<T>; };

// Combines lanes [0, n) into the value of one outer point, written at out[q].
template <class T>
void combine_t(uint16_t op, const T* v, const int64_t* idx, size_t n, void* out, size_t q) {
  using U = typename Wrap<T>::type;
  switch (op) {
    case EMBER_KIR_ACC_SUM: {
      U s = U(0);
      for (size_t i = 0; i < n; ++i) s = U(s + U(v[i]));
      static_cast<T*>(out)[q] = T(s);
      break;
    }
    case EMBER_KIR_ACC_PROD: {
      U s = U(1);
      for (size_t i = 0; i < n; ++i) s = U(s * U(v[i]));
      static_cast<T*>(out)[q] = T(s);
      break;
    }
    case EMBER_KIR_ACC_MAX: case EMBER_KIR_ACC_MIN: {
      const bool is_max = op == EMBER_KIR_ACC_MAX;
      T s;
      init_lanes_t(op, &s, 1);
      for (size_t i = 0; i < n; ++i) s = nan_max(s, v[i], is_max);
      static_cast<T*>(out)[q] = s;
      break;
    }
    default: {  // the first NaN, else the first extreme value
      const bool is_max = op == EMBER_KIR_ACC_ARGMAX;
      int64_t best = -1;
      T bv{};
      bool bnan = false;
      for (size_t i = 0; i < n; ++i) {
        if (idx[i] < 0) continue;
        const bool nan = v[i] != v[i];
        bool take;
        if (best < 0) take = true;
        else if (bnan) take = nan && idx[i] < best;
        else if (nan) take = true;
        else take = (is_max ? v[i] > bv : v[i] < bv) || (v[i] == bv && idx[i] < best);
        if (take) {
          best = idx[i];
          bv = v[i];
          bnan = nan;
        }
      }
      static_cast<int64_t*>(out)[q] = best;
      break;
    }
  }
}

void combine(uint16_t op, uint8_t kind, const void* v, const int64_t* idx, size_t n, void* out, size_t q) {
  switch (kind) {
    case kF32: combine_t(op, static_cast<const float*>(v), idx, n, out, q); break;
    case kF64: combine_t(op, static_cast<const double*>(v), idx, n, out, q); break;
    case kI32: combine_t(op, static_cast<const int32_t*>(v), idx, n, out, q); break;
    case kU64: combine_t(op, static_cast<const uint64_t*>(v), idx, n, out, q); break;
    default: combine_t(op, static_cast<const int64_t*>(v), idx, n, out, q); break;
  }
}

// ---- running tiles on threads ---------------------------------------------------------------
struct Failure {
  std::atomic<bool> failed{false};
  TileError error;
  const char* internal = nullptr;
};

// Runs body(scratch, tile index, error) for tiles [0, count), on several threads when the work is
// large. Each thread first computes the program's uniform values into its own registers.
template <class Body>
void run_tiles(const Program& p, const ember_kir_launch& l, int64_t count, int64_t work, Failure& f, Body body) {
  if (count <= 0) return;
  auto worker = [&](int64_t begin, int64_t end) {
    try {
      Scratch s = make_scratch(p, l.n_args);
      TileError err;
      Tile u = make_tile(p, l, s, s.addr, kTile);
      if (!run_list(u, p.uniform.data(), p.uniform.size(), &err)) {
        if (!f.failed.exchange(true)) f.error = err;
        return;
      }
      for (int64_t t = begin; t < end && !f.failed.load(std::memory_order_relaxed); ++t)
        if (!body(s, t, err)) {
          if (!f.failed.exchange(true)) f.error = err;
          return;
        }
    } catch (const std::bad_alloc&) {
      if (!f.failed.exchange(true)) f.internal = "out of memory for interpreter registers";
    } catch (...) {
      if (!f.failed.exchange(true)) f.internal = "internal error in the tile interpreter";
    }
  };
  run_tasks(count, work, worker);
}

}  // namespace

// ---- launch checks ----------------------------------------------------------------------------
int32_t check_launch(const Program& p, const ember_kir_launch& l, ember_status* st) {
  const char* name = p.name.c_str();
  if (l.n_args != int32_t(p.arg_dtypes.size()) || (l.n_args > 0 && !l.args))
    return set_status(st, EMBER_ERR_INVALID, "%s: launch has %d arguments, the program %zu", name, l.n_args,
                      p.arg_dtypes.size());
  if (l.outer_rank < 0 || l.reduce_rank < 0 || l.outer_rank + l.reduce_rank > EMBER_MAX_ITER_RANK)
    return set_status(st, EMBER_ERR_INVALID, "%s: bad launch ranks %d + %d", name, l.outer_rank, l.reduce_rank);
  const int outer = l.outer_rank, total = outer + l.reduce_rank;
  int64_t n_outer = 1, n_all = 1;
  for (int d = 0; d < total; ++d) {
    if (l.shape[d] < 0) return set_status(st, EMBER_ERR_INVALID, "%s: negative launch size", name);
    n_all *= l.shape[d];
    if (d < outer) n_outer *= l.shape[d];
  }
  // Every element the launch can touch must lie inside its buffer.
  for (int a = 0; a < l.n_args; ++a) {
    const bool ph0 = p.arg_in_phase[0][size_t(a)] && n_all > 0;
    const bool ph1 = p.arg_in_phase[1][size_t(a)] && n_outer > 0;
    const bool uni = p.arg_uniform[size_t(a)] && n_outer > 0;  // only the element at the offset
    if (!ph0 && !ph1 && !uni) continue;
    const ember_kir_arg& g = l.args[a];
    if (!g.buffer || !g.buffer->data)
      return set_status(st, EMBER_ERR_INVALID, "%s: argument %d has no buffer", name, a);
    int64_t lo = g.offset, hi = g.offset;
    for (int d = 0; d < (ph0 ? total : ph1 ? outer : 0); ++d) {
      if (l.shape[d] == 0) continue;
      const int64_t ext = (l.shape[d] - 1) * g.strides[d];
      (ext > 0 ? hi : lo) += ext;
    }
    if (g.gather_size > 0) {
      const int64_t ext = (g.gather_size - 1) * g.gather_stride;
      (ext > 0 ? hi : lo) += ext;
    }
    const int64_t elems = int64_t(g.buffer->bytes / dtype_bytes(p.arg_dtypes[size_t(a)]));
    if (lo < 0 || hi >= elems)
      return set_status(st, EMBER_ERR_INVALID,
                        "%s: argument %d reaches elements %lld..%lld outside its buffer of %lld elements", name, a,
                        (long long)lo, (long long)hi, (long long)elems);
  }
  return EMBER_OK;
}

namespace {

// ---- elementwise programs -----------------------------------------------------------------------
void run_elementwise(const Program& p, const ember_kir_launch& l, Failure& f) {
  const int total = l.outer_rank + l.reduce_rank;
  const Tiling T = make_tiling(l, total, true, kTile);
  run_tiles(p, l, T.count, T.points, f, [&](Scratch& s, int64_t t, TileError& err) {
    const size_t len = tile_addr(T, t, l, s.addr, s.offs, s.idx);
    const Tile tile = make_tile(p, l, s, s.addr, len);
    return run_list(tile, p.phase[0].data(), p.phase[0].size(), &err);
  });
}

// ---- reductions -------------------------------------------------------------------------------
// Phase 1 over a block of outer points whose ACC registers are filled.
bool run_phase1(const Program& p, const ember_kir_launch& l, Scratch& s, size_t len, TileError& err) {
  const Tile tile = make_tile(p, l, s, s.block, len);
  return run_list(tile, p.phase[1].data(), p.phase[1].size(), &err);
}

void run_outer_vectorized(const Program& p, const ember_kir_launch& l, int64_t n_reduce, Failure& f) {
  const int outer = l.outer_rank, total = outer + l.reduce_rank;
  const Tiling T = make_tiling(l, outer, true, kTile);
  const int64_t work = T.points * std::max<int64_t>(n_reduce, 1);
  run_tiles(p, l, T.count, work, f, [&](Scratch& s, int64_t t, TileError& err) {
    const size_t len = tile_addr(T, t, l, s.block, s.offs, s.idx);
    for (size_t j = 0; j < p.accs.size(); ++j) {
      const ember_kir_inst& in = p.insts[size_t(p.accs[j])];
      init_lanes(in.op, p.kind[size_t(in.a)], s.acc_val + j * kSlotBytes, s.acc_idx + j * kTile, len);
    }
    std::fill(s.red_off, s.red_off + l.n_args, int64_t(0));
    std::fill(s.idx, s.idx + EMBER_MAX_ITER_RANK, int64_t(0));
    const Tile tile = make_tile(p, l, s, s.addr, len);
    for (int64_t r = 0; r < n_reduce; ++r) {
      for (int a = 0; a < l.n_args; ++a) {
        s.addr[a] = s.block[a];
        s.addr[a].base += s.red_off[a];
      }
      if (!run_list(tile, p.phase[0].data(), p.phase[0].size(), &err)) return false;
      for (size_t j = 0; j < p.accs.size(); ++j) {
        const ember_kir_inst& in = p.insts[size_t(p.accs[j])];
        acc_update(in.op, p.kind[size_t(in.a)], s.acc_val + j * kSlotBytes, s.acc_idx + j * kTile, s.src[in.a],
                   len, r, 0);
      }
      advance(l, outer, total, s.idx, s.red_off);
    }
    for (size_t j = 0; j < p.accs.size(); ++j) {
      const ember_kir_inst& in = p.insts[size_t(p.accs[j])];
      s.src[p.accs[j]] = is_arg_acc(in.op) ? static_cast<const void*>(s.acc_idx + j * kTile)
                                           : static_cast<const void*>(s.acc_val + j * kSlotBytes);
    }
    return run_phase1(p, l, s, len, err);
  });
}

void run_reduce_vectorized(const Program& p, const ember_kir_launch& l, int64_t n_outer, int64_t n_reduce,
                           Failure& f) {
  const int outer = l.outer_rank, total = outer + l.reduce_rank;
  const int64_t inner = l.shape[total - 1];
  const int64_t rows = inner > 0 ? n_reduce / inner : 0;
  const size_t used = size_t(std::min<int64_t>(int64_t(kTile), inner));
  // Blocks of outer points: small enough that a few long reductions still spread over threads.
  const int64_t block = std::clamp<int64_t>(n_outer / 64, 1, int64_t(kTile));
  const Tiling T = make_tiling(l, outer, false, block);
  run_tiles(p, l, T.count, n_outer * n_reduce, f, [&](Scratch& s, int64_t t, TileError& err) {
    const size_t len = tile_addr(T, t, l, s.block, s.offs, s.idx);
    for (size_t q = 0; q < len; ++q) {
      for (size_t j = 0; j < p.accs.size(); ++j) {
        const ember_kir_inst& in = p.insts[size_t(p.accs[j])];
        init_lanes(in.op, p.kind[size_t(in.a)], s.acc_val + j * kSlotBytes, s.acc_idx + j * kTile, used);
      }
      std::fill(s.red_off, s.red_off + l.n_args, int64_t(0));
      std::fill(s.idx, s.idx + EMBER_MAX_ITER_RANK, int64_t(0));
      for (int64_t row = 0; row < rows; ++row) {
        for (int64_t j0 = 0; j0 < inner; j0 += int64_t(kTile)) {
          const size_t n = size_t(std::min<int64_t>(int64_t(kTile), inner - j0));
          for (int a = 0; a < l.n_args; ++a) {
            const ArgAddr& b = s.block[a];
            const int64_t step = l.args[a].strides[total - 1];
            const int64_t base = b.base + (b.offs ? b.offs[q] : int64_t(q) * b.step) + s.red_off[a];
            s.addr[a] = ArgAddr{base + j0 * step, step, nullptr};
          }
          const Tile tile = make_tile(p, l, s, s.addr, n);
          if (!run_list(tile, p.phase[0].data(), p.phase[0].size(), &err)) return false;
          for (size_t j = 0; j < p.accs.size(); ++j) {
            const ember_kir_inst& in = p.insts[size_t(p.accs[j])];
            acc_update(in.op, p.kind[size_t(in.a)], s.acc_val + j * kSlotBytes, s.acc_idx + j * kTile,
                       s.src[in.a], n, row * inner + j0, 1);
          }
        }
        advance(l, outer, total - 1, s.idx, s.red_off);
      }
      for (size_t j = 0; j < p.accs.size(); ++j) {
        const int32_t k = p.accs[j];
        const ember_kir_inst& in = p.insts[size_t(k)];
        combine(in.op, p.kind[size_t(in.a)], s.acc_val + j * kSlotBytes, s.acc_idx + j * kTile, used,
                s.regs + size_t(k) * kSlotBytes, q);
      }
    }
    for (int32_t k : p.accs) s.src[k] = s.regs + size_t(k) * kSlotBytes;
    return run_phase1(p, l, s, len, err);
  });
}

// Copies lane 0 of instruction k's value into the first `lanes` lanes of its register, so that
// later passes (whose tiles use at most that many lanes, one per reduce point) read a
// per-outer-point value at any lane.
void broadcast_lane0(const Program& p, Scratch& s, int32_t k, size_t lanes) {
  char* slot = s.regs + size_t(k) * kSlotBytes;
  if (is_wide_kind(p.kind[size_t(k)])) {
    uint64_t v;
    std::memcpy(&v, s.src[k], 8);
    std::fill_n(reinterpret_cast<uint64_t*>(slot), lanes, v);
  } else {
    uint32_t v;
    std::memcpy(&v, s.src[k], 4);
    std::fill_n(reinterpret_cast<uint32_t*>(slot), lanes, v);
  }
  s.src[k] = slot;
}

// Programs with several passes per outer point (fused softmax, layer norm): one outer point per
// tile; each pass runs its row phase along the innermost reduce dim with lane-wise accumulators,
// then its per-point phase once; the per-point values are broadcast to all lanes for the passes
// that follow.
void run_multipass(const Program& p, const ember_kir_launch& l, int64_t n_outer, int64_t n_reduce, Failure& f) {
  const int outer = l.outer_rank, total = outer + l.reduce_rank;
  const int64_t inner = total > outer ? l.shape[total - 1] : 1;
  const int64_t rows = inner > 0 ? n_reduce / inner : 0;
  const size_t used = size_t(std::clamp<int64_t>(inner, 1, int64_t(kTile)));
  const Tiling T = make_tiling(l, outer, false, 1);
  run_tiles(p, l, T.count, n_outer * std::max<int64_t>(n_reduce, 1), f, [&](Scratch& s, int64_t t, TileError& err) {
    tile_addr(T, t, l, s.block, s.offs, s.idx);
    for (int pass = 0; 2 * pass <= p.max_phase; ++pass) {
      const int row_phase = 2 * pass, point_phase = 2 * pass + 1;
      for (size_t j = 0; j < p.accs.size(); ++j) {
        const ember_kir_inst& in = p.insts[size_t(p.accs[j])];
        if (in.phase == point_phase)
          init_lanes(in.op, p.kind[size_t(in.a)], s.acc_val + j * kSlotBytes, s.acc_idx + j * kTile, used);
      }
      std::fill(s.red_off, s.red_off + l.n_args, int64_t(0));
      std::fill(s.idx, s.idx + EMBER_MAX_ITER_RANK, int64_t(0));
      const std::vector<int32_t>& row_list = p.phase[size_t(row_phase)];
      for (int64_t row = 0; row < rows; ++row) {
        for (int64_t j0 = 0; j0 < inner; j0 += int64_t(kTile)) {
          const size_t n = size_t(std::min<int64_t>(int64_t(kTile), inner - j0));
          for (int a = 0; a < l.n_args; ++a) {
            const ArgAddr& b = s.block[a];
            const int64_t step = l.args[a].strides[total - 1];
            const int64_t base = b.base + (b.offs ? b.offs[0] : 0) + s.red_off[a];
            s.addr[a] = ArgAddr{base + j0 * step, step, nullptr};
          }
          const Tile tile = make_tile(p, l, s, s.addr, n);
          if (!run_list(tile, row_list.data(), row_list.size(), &err)) return false;
          for (size_t j = 0; j < p.accs.size(); ++j) {
            const ember_kir_inst& in = p.insts[size_t(p.accs[j])];
            if (in.phase != point_phase) continue;
            acc_update(in.op, p.kind[size_t(in.a)], s.acc_val + j * kSlotBytes, s.acc_idx + j * kTile,
                       s.src[in.a], n, row * inner + j0, 1);
          }
        }
        advance(l, outer, total - 1, s.idx, s.red_off);
      }
      for (size_t j = 0; j < p.accs.size(); ++j) {
        const int32_t k = p.accs[j];
        const ember_kir_inst& in = p.insts[size_t(k)];
        if (in.phase != point_phase) continue;
        combine(in.op, p.kind[size_t(in.a)], s.acc_val + j * kSlotBytes, s.acc_idx + j * kTile, used,
                s.regs + size_t(k) * kSlotBytes, 0);
        s.src[k] = s.regs + size_t(k) * kSlotBytes;
      }
      if (point_phase < int(p.phase.size())) {
        const std::vector<int32_t>& point_list = p.phase[size_t(point_phase)];
        const Tile tile = make_tile(p, l, s, s.block, 1);
        if (!run_list(tile, point_list.data(), point_list.size(), &err)) return false;
        for (int32_t k : point_list)
          if (p.insts[size_t(k)].op != EMBER_KIR_STORE) broadcast_lane0(p, s, k, used);
      }
      for (size_t j = 0; j < p.accs.size(); ++j)
        if (p.insts[size_t(p.accs[j])].phase == point_phase) broadcast_lane0(p, s, p.accs[j], used);
    }
    return true;
  });
}

void run_reduction(const Program& p, const ember_kir_launch& l, Failure& f) {
  const int outer = l.outer_rank, total = outer + l.reduce_rank;
  int64_t n_outer = 1, n_reduce = 1;
  for (int d = 0; d < outer; ++d) n_outer *= l.shape[d];
  for (int d = outer; d < total; ++d) n_reduce *= l.shape[d];
  if (n_outer == 0) return;
  if (p.max_phase >= 2) {
    run_multipass(p, l, n_outer, n_reduce, f);
    return;
  }
  bool reduce_vec = false;
  if (l.reduce_rank > 0) {
    const int64_t inner = l.shape[total - 1];
    bool contiguous = true;
    for (int a = 0; a < l.n_args; ++a)
      if (p.arg_in_phase[0][size_t(a)] && std::abs(l.args[a].strides[total - 1]) > 1) contiguous = false;
    reduce_vec = inner >= 16 && (contiguous ? (inner >= 128 || n_outer < int64_t(kTile)) : n_outer < 64);
  }
  if (reduce_vec) run_reduce_vectorized(p, l, n_outer, n_reduce, f);
  else run_outer_vectorized(p, l, n_reduce, f);
}

}  // namespace

int32_t run_program(const Program& p, const ember_kir_launch& l, ember_status* st) {
  if (int32_t rc = check_launch(p, l, st)) return rc;
  Failure f;
  if (p.has_reduction) run_reduction(p, l, f);
  else run_elementwise(p, l, f);
  if (!f.failed) return EMBER_OK;
  const char* name = p.name.c_str();
  if (f.internal) return set_status(st, EMBER_ERR_INTERNAL, "%s: %s", name, f.internal);
  const TileError& e = f.error;
  if (e.extra)
    return set_status(st, e.code, "%s: %s (%lld for a dimension of size %lld)", name, e.what, e.value, e.extra);
  return set_status(st, e.code, "%s: %s", name, e.what);
}

}  // namespace ember::cpu
