// Array methods: metadata, evaluation, host reads and PyTorch-style printing.
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>

#include "ember/ops.h"
#include "graph/anomaly.h"
#include "scheduler/realize.h"
#include "ops/frontend.h"

namespace ember {

const Shape& Array::shape() const { return node_of(*this, "shape", Loc::current())->shape; }
DType Array::dtype() const { return node_of(*this, "dtype", Loc::current())->dtype; }
Device Array::device() const { return node_of(*this, "device", Loc::current())->device; }

int64_t Array::size(int dim) const {
  const Shape& s = shape();
  return s[dim_arg(dim, s.rank(), "size", Loc::current())];
}

const Array& Array::eval() const {
  realize({node_of(*this, "eval", Loc::current())});
  throw_unreported_anomaly();  // anomaly detection realizes before returning
  return *this;
}

bool Array::is_evaluated() const { return node_ && node_->is_ready(); }

void eval(const std::vector<Array>& arrays) {
  std::vector<NodePtr> roots;
  for (const Array& a : arrays)
    if (a.defined()) roots.push_back(a.node());
  realize(roots);
  throw_unreported_anomaly();
}

void eval_and_wait(const std::vector<Array>& arrays) {
  std::vector<NodePtr> roots;
  for (const Array& a : arrays)
    if (a.defined()) roots.push_back(a.node());
  realize_and_wait(roots);
}

void Array::check_single_element() const {
  if (numel() != 1)
    throw Error(fmt::format("item: tensor of shape {} has {} elements, expected exactly one",
                            shape().str(), numel()));
}

void Array::read_host(DType as, void* dst) const {
  Loc here = Loc::current();
  Array a = contiguous(cast(*this, as, here), here);
  realize_and_wait({a.node()});
  const Node& n = *a.node();
  size_t bytes = size_t(n.shape.numel()) * dtype_size(as);
  if (bytes == 0) return;
  n.view.buffer->backend->read(*n.view.buffer, size_t(n.view.offset) * dtype_size(as), dst, bytes);
}

void Array::read_host_chunks(DType as, void* reserved, void (*append)(void*, const void*, size_t),
                             void* context) const {
  Loc here = Loc::current();
  Array a = contiguous(cast(*this, as, here), here);
  realize_and_wait({a.node()});
  const Node& n = *a.node();
  const size_t bytes = size_t(n.shape.numel()) * dtype_size(as);
  if (bytes == 0) return;
#ifdef MADV_HUGEPAGE
  // As NumPy does for its arrays: a 64 MB read costs 16,384 page faults on 4 KiB pages, 32 on 2 MiB
  // ones (where the kernel grants them; a hint that changes no data).
  constexpr uintptr_t kHuge = uintptr_t(1) << 21;
  if (reserved && bytes >= 2 * kHuge) {
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(reserved) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(reserved) + bytes) & ~(kHuge - 1);
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
#else
  (void)reserved;
#endif
  const DeviceBuffer& buffer = *n.view.buffer;
  const size_t start = size_t(n.view.offset) * dtype_size(as);
  if (const unsigned char* host = buffer.backend->host_bytes(buffer)) {  // read in place
    append(context, host + start, bytes);
    return;
  }
  if (!buffer.backend->properties(buffer.device.index).host_visible) {
    // A GPU's read is a transfer with a fixed cost per call: one call.
    std::vector<unsigned char> whole(bytes);
    buffer.backend->read(buffer, start, whole.data(), bytes);
    append(context, whole.data(), bytes);
    return;
  }
  // Host memory: chunks small enough to stay in the L2 cache between the read and the append.
  constexpr size_t kChunk = size_t(1) << 18;
  thread_local std::vector<unsigned char> staging;
  if (staging.size() < std::min(bytes, kChunk)) staging.resize(std::min(bytes, kChunk));
  for (size_t done = 0; done < bytes;) {
    const size_t len = std::min(kChunk, bytes - done);
    buffer.backend->read(buffer, start + done, staging.data(), len);
    append(context, staging.data(), len);
    done += len;
  }
}

Array to_device(const Array& x, Device device, Loc loc) {
  const NodePtr& src = node_of(x, "to_device", loc);
  if (src->device == device) return x;
  Backend& target = Backend::get(device.kind);  // a clear error if the target's plugin is missing
  Array c = contiguous(x, loc);
  realize_and_wait({c.node()});
  const Node& n = *c.node();
  size_t bytes = size_t(n.shape.numel()) * dtype_size(n.dtype);
  const size_t src_offset = size_t(n.view.offset) * dtype_size(n.dtype);
  if (&target == n.view.buffer->backend) {  // two devices of one plugin: copied by the plugin
    View v;
    v.buffer = target.alloc(device, bytes);
    v.strides = n.shape.contiguous_strides();
    target.copy(*v.buffer, 0, *n.view.buffer, src_offset, bytes);
    return make_ready_array(Op::FromData, std::move(v), n.shape, n.dtype, device, loc);
  }
  // Between plugins: staged through host memory.
  std::vector<unsigned char> host(bytes);
  if (bytes) n.view.buffer->backend->read(*n.view.buffer, src_offset, host.data(), bytes);
  return from_buffer(host.data(), n.shape, n.dtype, device, loc);
}

// ---- printing -----------------------------------------------------------------------------
namespace {

struct Formatter {
  bool is_bool = false, is_int = false, is_u64 = false, sci = false, integral_floats = false;
  int width = 0;

  std::string one(double v, int64_t i) const {
    if (is_bool) return i ? "True" : "False";
    if (is_u64) return std::to_string(uint64_t(i));  // i holds the bits
    if (is_int) return std::to_string(i);
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci) return fmt::format("{:.4e}", v);
    if (integral_floats) return fmt::format("{:.0f}.", v);
    return fmt::format("{:.4f}", v);
  }
};

void print_rec(std::string& out, const std::vector<double>& f, const std::vector<int64_t>& iv,
               const Shape& shape, int dim, int64_t offset, const Formatter& fm, int indent) {
  const int64_t edge = 3;
  int64_t n = shape[dim];
  bool summarize = shape.numel() > 1000 && n > 2 * edge;
  int64_t inner = 1;
  for (int d = dim + 1; d < shape.rank(); ++d) inner *= shape[d];
  out += "[";
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && i == edge) {
      out += dim == shape.rank() - 1 ? "..., " : fmt::format("...,\n{:{}}", "", indent + 1);
      i = n - edge;
    }
    if (dim == shape.rank() - 1) {
      std::string s = fm.one(f[size_t(offset + i)], iv[size_t(offset + i)]);
      out += fmt::format("{:>{}}", s, fm.width);
    } else {
      print_rec(out, f, iv, shape, dim + 1, offset + i * inner, fm, indent + 1);
    }
    if (i + 1 < n) {
      out += ",";
      if (dim == shape.rank() - 1) out += " ";
      else out += std::string(size_t(shape.rank() - dim - 1), '\n') + std::string(size_t(indent + 1), ' ');
    }
  }
  out += "]";
}

}  // namespace

std::string Array::str() const {
  if (!defined()) return "tensor(undefined)";
  Formatter fm;
  fm.is_bool = dtype() == DType::Bool;
  fm.is_int = is_integral(dtype());
  fm.is_u64 = dtype() == DType::U64;
  std::vector<double> f;
  std::vector<int64_t> iv;
  if (fm.is_u64) {
    std::vector<uint64_t> u = to_vector<uint64_t>();
    iv.assign(u.begin(), u.end());
    f.assign(iv.size(), 0);
  } else if (fm.is_bool || fm.is_int) {
    iv = to_vector<int64_t>();
    f.assign(iv.size(), 0);
  } else {
    f = to_vector<double>();
    iv.assign(f.size(), 0);
    double lo = INFINITY, hi = 0;
    bool all_integral = true;
    for (double v : f) {
      if (!std::isfinite(v)) continue;
      double a = std::fabs(v);
      if (a > 0) lo = std::min(lo, a);
      hi = std::max(hi, a);
      all_integral &= v == std::nearbyint(v);
    }
    fm.integral_floats = all_integral;
    fm.sci = hi >= 1e8 || (!all_integral && lo < 1e-4) || (hi > 0 && hi / lo > 1000 && !all_integral && hi >= 1e4);
  }
  for (size_t i = 0; i < f.size(); ++i) fm.width = std::max(fm.width, int(fm.one(f[i], iv[i]).size()));
  std::string body;
  const int prefix = 7;  // "tensor("
  if (rank() == 0) body = numel() ? fm.one(f[0], iv[0]) : "";
  else print_rec(body, f, iv, shape(), 0, 0, fm, prefix);
  std::string extra;
  DType dt = dtype();
  if (dt != DType::F32 && dt != DType::I64 && dt != DType::Bool)
    extra += fmt::format(", dtype=ember.{}", dtype_name(dt));
  if (numel() == 0 && rank() > 1) extra += fmt::format(", size={}", shape().str());
  if (!(device() == Device::cpu())) extra += fmt::format(", device='{}'", device().str());
  return fmt::format("tensor({}{})", body, extra);
}

std::ostream& operator<<(std::ostream& os, const Array& a) { return os << a.str(); }

}  // namespace ember
