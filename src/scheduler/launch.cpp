// Kernel launches: collapsing iteration spaces, compiling (cached) and running KIR programs,
// and the buffer/stride helpers the lowering files share.
#include "scheduler/launch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "runtime/work_recorder.h"
#include "ember/error.h"
#include "scheduler/host_fallback.h"

namespace ember {

Backend& backend_for(Device d) { return Backend::get(d.kind); }

static bool env_log_kir() {
  static bool on = [] {
    const char* s = std::getenv("EMBER_LOG");
    return s && std::string(s).find("kir") != std::string::npos;
  }();
  return on;
}

View alloc_contiguous(Device device, const Shape& shape, DType dtype) {
  View v;
  size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  v.buffer = backend_for(device).alloc(device, bytes);
  if (WorkRecorder* r = active_work_recorder()) r->allocated(v.buffer);
  v.strides = shape.contiguous_strides();
  return v;
}

View alloc_contiguous(const Node& n) {
  if (n.placement) return *n.placement;
  return alloc_contiguous(n.device, n.shape, n.dtype);
}

bool is_contiguous(const View& v, const Shape& shape) {
  int64_t expect = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    if (shape[i] != 1 && v.strides[size_t(i)] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

// Strides of `in` (shape in_shape) read at every point of out_shape (numpy broadcasting).
std::vector<int64_t> broadcast_strides(const Shape& in_shape, const std::vector<int64_t>& strides,
                                       const Shape& out_shape) {
  int r = out_shape.rank(), ri = in_shape.rank();
  std::vector<int64_t> s(size_t(r), 0);
  for (int i = 0; i < ri; ++i) {
    int o = r - ri + i;
    s[size_t(o)] = in_shape[i] == 1 ? 0 : strides[size_t(i)];
  }
  return s;
}

void Launch::collapse() {
  // In place: the kept dim k is never after the dim d being read (k <= d).
  size_t kept = 0;
  int kept_outer = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool outer = int(d) < outer_rank;
    // Outer dims come first, so the previous kept dim is in d's segment if one exists there.
    bool mergeable = outer ? kept > 0 : int(kept) > kept_outer;
    for (size_t a = 0; a < args.size() && mergeable; ++a)
      mergeable = args[a].strides[kept - 1] == args[a].strides[d] * shape[d];
    if (mergeable) {
      shape[kept - 1] *= shape[d];
      for (Arg& arg : args) arg.strides[kept - 1] = arg.strides[d];
    } else {
      shape[kept] = shape[d];
      for (Arg& arg : args) arg.strides[kept] = arg.strides[d];
      ++kept;
      if (outer) ++kept_outer;
    }
  }
  shape.resize(kept);
  outer_rank = kept_outer;
  for (Arg& arg : args) arg.strides.resize(kept);
}

namespace {

// Why the device cannot run this launch as it is, so that it takes the host fallback:
// - one output point reads more of an argument than one binding of the device may address (a
//   long reduction, a large gathered table): a plugin splits larger launches along their outer
//   dims (Vulkan: launch_pieces.h), which cannot help there;
// - a device that indexes in 32 bits (index_bits) would need an index past 2^31 - 1: more points
//   than that, or an argument's offset (an IOTA's counter included) beyond it.
std::string beyond_device_limits(Backend& be, Device device, const ember_kir_program& prog, const ember_kir_launch& l) {
  const uint64_t limit = be.max_binding(device.index);
  const bool index32 = be.index32(device.index);
  if (limit == UINT64_MAX && !index32) return {};
  const int rank = l.outer_rank + l.reduce_rank;
  // Doubles: no overflow, and the limits are far from their precision.
  constexpr double kMax32 = 2147483647.0;
  if (index32) {
    double points = 1;
    for (int d = 0; d < rank; ++d) points *= double(l.shape[d]);
    if (points > kMax32)
      return fmt::format("kernel '{}' covers {:.0f} points, more than device {} indexes (32-bit indexing)",
                         prog.name ? prog.name : "kernel", points, device.str());
  }
  std::vector<bool> scalar(size_t(l.n_args), false);  // a launch-time scalar's offset is a value
  for (int32_t i = 0; i < prog.n_insts; ++i)
    if (prog.insts[i].op == EMBER_KIR_LOAD_SCALAR) scalar[size_t(prog.insts[i].arg)] = true;
  for (int32_t a = 0; a < l.n_args; ++a) {
    const ember_kir_arg& arg = l.args[a];
    if (scalar[size_t(a)]) continue;
    if (index32) {
      double hi = double(arg.offset), lo = double(arg.offset);
      for (int d = 0; d < rank; ++d) {
        const double span = double(std::max<int64_t>(l.shape[d] - 1, 0)) * double(arg.strides[d]);
        (span >= 0 ? hi : lo) += span;
      }
      if (arg.gather_size > 1) hi += double(arg.gather_size - 1) * std::fabs(double(arg.gather_stride));
      if (hi > kMax32 || lo < -kMax32)
        return fmt::format("argument {} of kernel '{}' reaches element {:.0f}, past what device {} indexes (32-bit "
                           "indexing)",
                           a, prog.name ? prog.name : "kernel", hi > kMax32 ? hi : lo, device.str());
    }
    if (!arg.buffer || limit == UINT64_MAX) continue;
    double elements = 1;
    for (int d = l.outer_rank; d < rank; ++d) elements += double(l.shape[d] - 1) * std::fabs(double(arg.strides[d]));
    if (arg.gather_size > 1) elements += double(arg.gather_size - 1) * std::fabs(double(arg.gather_stride));
    const double bytes = elements * double(ember_dtype_bytes(prog.arg_dtypes[a]));
    if (bytes > double(limit))
      return fmt::format("argument {} of kernel '{}' spans {:.0f} bytes at one output point, more than device {} "
                         "binds at once ({} bytes)",
                         a, prog.name ? prog.name : "kernel", bytes, device.str(), limit);
  }
  return {};
}

}  // namespace

void Launch::run(Device device, const kir::Builder& b, const std::string& name, uint64_t structure_hash) {
  Backend& be = backend_for(device);
  collapse();
  if (shape.size() > EMBER_MAX_ITER_RANK)
    throw Error(fmt::format("{}: iteration space of rank {} exceeds {}", name, shape.size(),
                            EMBER_MAX_ITER_RANK));
  ember_kir_program prog = b.program_view(name);
  if (env_log_kir()) std::cerr << kir::to_string(prog);
  // Launch arguments on the stack for ordinary kernels (this runs for every kernel of a step).
  constexpr size_t kInlineArgs = 16;
  ember_kir_arg inline_args[kInlineArgs];
  std::vector<ember_kir_arg> heap_args;
  ember_kir_arg* cargs = inline_args;
  if (args.size() > kInlineArgs) {
    heap_args.resize(args.size());
    cargs = heap_args.data();
  }
  for (size_t a = 0; a < args.size(); ++a) {
    ember_kir_arg& c = cargs[a];
    c = ember_kir_arg{};
    c.buffer = args[a].buffer ? args[a].buffer->handle : nullptr;
    c.offset = args[a].offset;
    std::copy(args[a].strides.begin(), args[a].strides.end(), c.strides);
    c.gather_stride = args[a].gather_stride;
    c.gather_size = args[a].gather_size;
  }
  ember_kir_launch l{};
  l.outer_rank = outer_rank;
  l.reduce_rank = int32_t(shape.size()) - outer_rank;
  std::copy(shape.begin(), shape.end(), l.shape);
  l.n_args = int32_t(args.size());
  l.args = cargs;
  // The backend's cache is asked every time (not a copy kept by the caller), so its capacity
  // and eviction hold for every program.
  const uint64_t hash = structure_hash ? structure_hash : b.structure_hash();
  std::string unsupported;
  std::shared_ptr<const CompiledProgram> compiled = be.program(device.index, prog, hash, &unsupported);
  if (compiled) unsupported = beyond_device_limits(be, device, prog, l);
  WorkRecorder* recorder = active_work_recorder();
  const bool on_host = !compiled || !unsupported.empty();
  std::vector<std::shared_ptr<DeviceBuffer>> buffers;
  if (recorder || on_host)
    for (const Arg& a : args) buffers.push_back(a.buffer);
  if (recorder) {
    std::vector<bool> stored(args.size(), false), random_key(args.size(), false);
    for (int32_t i = 0; i < prog.n_insts; ++i) {
      const ember_kir_inst& in = prog.insts[i];
      if (in.op == EMBER_KIR_STORE) stored[size_t(in.arg)] = true;
      if (in.op == EMBER_KIR_RAND_UNIFORM && in.b >= 0 && prog.insts[in.b].op == EMBER_KIR_LOAD_SCALAR)
        random_key[size_t(prog.insts[in.b].arg)] = true;
    }
    // On the host fallback the recorder still checks the random keys (a fixed seed is the
    // reason it gives first), then refuses.
    recorder->kernel(on_host ? nullptr : compiled, l, buffers, stored, random_key);
    if (on_host) recorder->refuse(fmt::format("kernel '{}' runs on the host fallback", name));
  }
  if (on_host) return run_program_on_host(device, prog, hash, l, buffers, unsupported);
  be.run(*compiled, l);
}


// Copies `src` (viewed with `src_view`) into `dst` at every point of `shape`.
void copy_kernel(const Node& src, const View& src_view, const Shape& shape, const View& dst,
                 const std::vector<int64_t>& dst_strides, Device device) {
  if (shape.numel() == 0) return;
  kir::Builder b;
  int out = b.add_arg(src.dtype);
  int in = b.add_arg(src.dtype);
  b.store(out, b.load(in));
  Launch l;
  l.outer_rank = shape.rank();
  l.shape = shape.dims();
  l.add(dst, dst_strides);
  l.add(src_view, src_view.strides);
  l.run(device, b, "copy");
}

View materialize(const Node& n, const View& v) {
  View out;  // a fresh buffer (never the node's placement: this is a copy of one of its views)
  out.buffer = backend_for(n.device).alloc(n.device, size_t(n.shape.numel()) * dtype_size(n.dtype));
  if (WorkRecorder* r = active_work_recorder()) r->allocated(out.buffer);
  out.strides = n.shape.contiguous_strides();
  copy_kernel(n, v, n.shape, out, out.strides, n.device);
  return out;
}

}  // namespace ember
