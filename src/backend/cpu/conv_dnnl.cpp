// Convolution and pooling for the CPU backend (abi.h EMBER_LIB_CONV2D ... AVG_POOL2D_BACKWARD).
//  - f32: oneDNN convolution forward / backward-data / backward-weights with `any` layouts (oneDNN
//    picks its blocked layout; operands are reordered from and to plain NCHW / OIHW), and oneDNN
//    average pooling forward on NCHW. bf16 operands go to oneDNN as bf16 on CPUs with bf16 units
//    (dnnl_bf16.h); otherwise, and for f16, they are widened to f32 and the result rounded back.
//  - max pooling (NaN must win, which oneDNN's does not do), max-pool indices, the avg-pool
//    backward and f64 pooling and convolution: loops (library_loops.cpp).
//  - operands holding an infinity or NaN: the f64 loops too. oneDNN 2.6's AVX-512 convolutions
//    turn an infinite weight into NaN in outputs whose sum is +-inf (measured: 694 of 1568 outputs
//    of a 16-channel 3x3 convolution with a few infinite weights and inputs), so a vectorized scan
//    of the operands (convert.h all_finite) picks the loops, which sum in f64 like the reference.
// EMBER_LIB_CONV2D_EPILOGUE: the forward convolution with post-ops: oneDNN eltwise post-ops when the
// chain has only those and oneDNN computes them as Ember does (dnnl_post_ops.h), else post_ops.h's
// loops over each output plane right after the convolution. Chains with tensor operands (a
// per-channel scale and shift: an inference batch norm; a residual) always take the loops: oneDNN
// 2.6's per-channel binary post-ops made the convolutions of the exported CNN 2-3x slower
// (3 -> 8 channels, 16x16, batch 32: 58 -> 200 us), while the loops add about a tenth.
// Primitive descriptors and primitives are cached by geometry, as matmul_dnnl.cpp does; each
// execution brings its own scratchpad (dnnl_scratchpad.h: a primitive may run on another thread
// than the one that created it).
#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/dnnl_bf16.h"
#include "backend/cpu/dnnl_post_ops.h"
#include "backend/cpu/library.h"
#include "backend/cpu/dnnl_scratchpad.h"
#include "backend/cpu/post_ops.h"
#include "backend/cpu/reordered_activations.h"
#include "backend/cpu/reordered_weights.h"

namespace ember::cpu {

using ember::host::set_status;

namespace {

dnnl::engine& engine() {
  // Never destroyed (like the caches below): work may still run on a queue thread during exit.
  static dnnl::engine& e = *new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return e;
}

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// A floating operand as a dense f32 array (in place when it already is one).
struct DenseF32 {
  const float* p = nullptr;
  std::vector<float> own;
};
DenseF32 dense_f32(const ember_tensor_desc& d) {
  DenseF32 r;
  if (d.dtype == EMBER_F32 && desc_contiguous(d)) {
    r.p = static_cast<const float*>(d.buffer->data) + d.offset;
  } else {
    r.own = pack_dense<float>(d);
    r.p = r.own.data();
  }
  return r;
}

// A 16-bit floating operand as a dense array of its own dtype (in place when it already is one;
// a strided one goes through f32, exactly).
struct Dense16 {
  const uint16_t* p = nullptr;
  std::vector<uint16_t> own;
  explicit Dense16(const ember_tensor_desc& d) {
    if (desc_contiguous(d)) {
      p = static_cast<const uint16_t*>(d.buffer->data) + d.offset;
      return;
    }
    std::vector<float> f = pack_dense<float>(d);
    own.resize(f.size());
    narrow_from_f32(d.dtype, f.data(), own.data(), int64_t(f.size()));
    p = own.data();
  }
};

// An output written as a dense array of its 16-bit dtype: in place when contiguous.
struct Out16 {
  const ember_tensor_desc& d;
  std::vector<uint16_t> tmp;
  uint16_t* p;
  explicit Out16(const ember_tensor_desc& desc) : d(desc) {
    if (desc_contiguous(d)) {
      p = static_cast<uint16_t*>(d.buffer->data) + d.offset;
    } else {
      tmp.resize(size_t(desc_numel(d)));
      p = tmp.data();
    }
  }
  void finish() {
    if (tmp.empty()) return;
    std::vector<float> f(tmp.size());
    widen_to_f32(d.dtype, tmp.data(), f.data(), int64_t(f.size()));
    unpack_dense(f, d);
  }
};

// ---- convolution -------------------------------------------------------------------------------
// kFwdKept: the forward of weights that stay the same from call to call (forward_as_inference).
enum Kind : int64_t { kFwd, kBwdData, kBwdWeights, kFwdKept };

struct Geometry {
  int64_t N, C, H, W, O, KH, KW, OH, OW;
};

using Key = std::array<int64_t, 21>;

// A cached primitive with the three tensors it reads/writes: two inputs, then the output. `want`
// is the layout the primitive chose, `user` the plain layout of Ember's buffers.
struct Entry {
  dnnl::primitive prim;
  std::array<int, 3> args;
  std::array<dnnl::memory::desc, 3> user, want;
  dnnl::memory::desc bias;
  dnnl::memory::desc scratchpad;
  bool post = false;           // the forward primitive runs the call's post-ops
  // Reorders between `user` and `want` (inputs: user -> want; output: want -> user) where they
  // differ, made once: creating one per call was ~10 % of a batch-1 CNN's time.
  std::array<std::optional<dnnl::reorder>, 3> reorder;
  std::array<dnnl::memory::desc, 3> reorder_scratchpad;
  uint64_t id = 0;  // distinct per cached entry: the key of its memory objects (execute)
};

// Fills e.reorder for the layouts e.user / e.want.
void make_reorders(Entry& e) {
  for (size_t i = 0; i < 3; ++i) {
    if (e.want[i] == e.user[i]) continue;
    const dnnl::memory::desc& from = i < 2 ? e.user[i] : e.want[i];
    const dnnl::memory::desc& to = i < 2 ? e.want[i] : e.user[i];
    dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, user_scratchpad_attr());
    e.reorder[i].emplace(pd);
    e.reorder_scratchpad[i] = pd.scratchpad_desc();
  }
}


// Whether the forward primitive is asked for as inference. A convolution forward keeps nothing for
// its backward, so the two kinds compute the same function, but oneDNN offers other kernels for
// each. Measured per convolution with the layout reorders Ember pays (oneDNN 2.6, AVX-512, 1
// thread, forward with ReLU, median of 20-400 calls), training against inference:
//  - Winograd as inference keeps its weights transformed and at batch 1 takes F(2x2, 3x3) kernels:
//    batch 1, 32 -> 32 at 32x32: 148 against 89 us; 128 -> 128 at 8x8: 530 against 56; batch 32,
//    128 -> 128 at 8x8: 2809 against 2117. But its weights go through oneDNN's reference reorder
//    (7.4 ms for 128x128x3x3), so it is taken only for weights that stay (kFwdKept, below):
//    every training step has new ones (the CIFAR ResNet's step was 9 % slower with it).
//  - 1x1 convolutions with a stride take the brgemm kernels, which skip the strided input copy:
//    batch 32, 32 -> 64 at 32x32: 2337 against 823; 8 -> 16 at 8x8: 33.9 against 13.6; batch 1,
//    64 -> 128 at 16x16: 22.9 against 17.4 (32 -> 64 at 32x32: 18.6 against 23.4). Unstrided
//    1x1 convolutions are the same or slower as inference (batch 8, 64 -> 256 at 56x56: 8693
//    against 9607).
//  - Direct convolutions with 32+ input channels and at most 256 output pixels (small planes at
//    small batches), brgemm kernels too: batch 1, 128 -> 128 at 4x4: 42.0 against 25.1; 64 -> 128
//    at 16x16, stride 2: 68.4 against 62.0; 32 -> 64 at 32x32, stride 2 (bench/ab
//    conv2d.b1.32x64x32.k3.s2, whole call): 106 against 65 at 1 thread, 61 against 41
//    at 2. Larger outputs are the same or slower (batch 8, 128 -> 128 at 28x28, stride 2: 3028
//    against 3176), as are fewer channels (batch 32, 8 -> 8 at 8x8: 31.4 against 50.5).
// Grouped and bf16 convolutions stay training (not measured).
bool forward_as_inference(Kind kind, const Geometry& g, const ember_conv_attrs& a, dnnl::algorithm alg, dt cdt) {
  if (alg == dnnl::algorithm::convolution_winograd) return kind == kFwdKept;
  if (a.groups != 1 || cdt != dt::f32) return false;
  if (g.KH == 1 && g.KW == 1) return a.stride[0] > 1 || a.stride[1] > 1;
  return g.C >= 32 && g.N * g.OH * g.OW <= 256;
}

// `post`: eltwise post-ops for the forward primitive (none with a tensor operand), or nullptr.
// `cdt`: the operands' data type, f32 or (dnnl_bf16.h) bf16; the bias and post-op operands are f32.
Entry make_entry(Kind kind, const Geometry& g, const ember_conv_attrs& a, bool has_bias, dnnl::algorithm alg,
                 const ember_epilogue_attrs* post, dt cdt) {
  const int64_t G = a.groups;
  dnnl::memory::dims src{g.N, g.C, g.H, g.W}, dst{g.N, g.O, g.OH, g.OW};
  dnnl::memory::dims wei = G > 1 ? dnnl::memory::dims{G, g.O / G, g.C / G, g.KH, g.KW}
                                 : dnnl::memory::dims{g.O, g.C, g.KH, g.KW};
  const tag wtag = G > 1 ? tag::goihw : tag::oihw;
  dnnl::memory::dims strides{a.stride[0], a.stride[1]}, dil{a.dilation[0] - 1, a.dilation[1] - 1};
  dnnl::memory::dims pad_l{a.pad_begin[0], a.pad_begin[1]}, pad_r{a.pad_end[0], a.pad_end[1]};
  // Every operand in oneDNN's choice of layout (blocked by 16 channels; activations reordered
  // from and to NCHW through reused buffers, see execute). Measured with bench/cnn_layers_bench.cpp:
  // forcing NCHW activations (oneDNN's gemm-based kernels) is 1.5-2.5x slower at 32 -> 64
  // channels and no faster for a 1-channel first layer's forward and backward-weights passes.
  auto any = [cdt](const dnnl::memory::dims& d) { return dnnl::memory::desc(d, cdt, tag::any); };
  const dnnl::memory::desc src_u(src, cdt, tag::nchw), dst_u(dst, cdt, tag::nchw), wei_u(wei, cdt, wtag);
  const dnnl::memory::desc bias_md({g.O}, dt::f32, tag::x);

  const auto prop = (kind == kFwd || kind == kFwdKept) && forward_as_inference(kind, g, a, alg, cdt)
                        ? dnnl::prop_kind::forward_inference
                        : dnnl::prop_kind::forward_training;
  auto fd = has_bias ? dnnl::convolution_forward::desc(prop, alg, any(src), any(wei), bias_md, any(dst), strides, dil,
                                                       pad_l, pad_r)
                     : dnnl::convolution_forward::desc(prop, alg, any(src), any(wei), any(dst), strides, dil, pad_l,
                                                       pad_r);
  Entry e;
  e.bias = bias_md;
  dnnl::primitive_attr attr = user_scratchpad_attr();
  if (post) {
    dnnl::post_ops po;
    for (int k = 0; k < post->n_ops; ++k) {
      append_eltwise_post_op(po, post->ops[k]);
    }
    attr.set_post_ops(po);
    e.post = true;
  }
  dnnl::convolution_forward::primitive_desc fpd(fd, attr, engine());
  // oneDNN's reference kernels are far slower than a convolution plus Ember's own loops.
  if (post && std::string(fpd.impl_info_str()).find("ref") != std::string::npos)
    throw dnnl::error(dnnl_unimplemented, "post-ops only in oneDNN's reference convolution");
  switch (kind) {
    case kFwd: case kFwdKept:
      e.prim = dnnl::convolution_forward(fpd);
      e.args = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
      e.user = {src_u, wei_u, dst_u};
      e.want = {fpd.src_desc(), fpd.weights_desc(), fpd.dst_desc()};
      e.scratchpad = fpd.scratchpad_desc();
      break;
    case kBwdData: {
      dnnl::convolution_backward_data::desc bd(alg, any(src), any(wei), any(dst), strides, dil, pad_l, pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(bd, user_scratchpad_attr(), engine(), fpd);
      e.prim = dnnl::convolution_backward_data(pd);
      e.args = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};
      e.user = {dst_u, wei_u, src_u};
      e.want = {pd.diff_dst_desc(), pd.weights_desc(), pd.diff_src_desc()};
      e.scratchpad = pd.scratchpad_desc();
      break;
    }
    case kBwdWeights: {
      dnnl::convolution_backward_weights::desc wd(alg, any(src), any(wei), any(dst), strides, dil, pad_l, pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(wd, user_scratchpad_attr(), engine(), fpd);
      e.prim = dnnl::convolution_backward_weights(pd);
      e.args = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS};
      e.user = {src_u, dst_u, wei_u};
      e.want = {pd.src_desc(), pd.diff_dst_desc(), pd.diff_weights_desc()};
      e.scratchpad = pd.scratchpad_desc();
      break;
    }
  }
  make_reorders(e);
  return e;
}

// The algorithm: Winograd for 3x3, stride-1, undilated, ungrouped convolutions with at least 16
// input and output channels and 64 output pixels over the batch; direct elsewhere (a 1-channel
// first layer is 3-5x slower in Winograd). The forward of weights that stay runs as inference
// (forward_as_inference), where oneDNN keeps the weights transformed and at batch 1 takes
// F(2x2, 3x3) kernels. Measured per convolution (oneDNN 2.6, AVX-512, 1 thread, forward with ReLU,
// median of 400):
//   batch 1, 32 -> 32 at 32x32: direct 118 us, Winograd 89 (as training: 148);
//   batch 1, 128 -> 128 at 8x8: direct 106 us, Winograd 56 (as training: 530);
//   batch 32, 128 -> 128 at 8x8: direct 3138 us, Winograd 2117 (as training: 2809);
//   batch 64, 32 -> 64 at 28x28: direct 10950 us, Winograd 5861.
// At 2 threads Winograd loses below 64 output pixels (16 -> 16 at 4x4: 5.9 against 2.6 us) and on
// 8x8 planes with up to 64 channels; those are under cpu_backend.cpp's kSerialMacs, so they run on
// one thread, where it wins. Winograd's transforms round differently: f32 results are within
// ~5e-6 of the output's largest magnitude, against ~1e-6 for the direct kernels (ConvDnnlTest.*
// checks both against the reference backend).
// EMBER_CONV_ALG=direct turns it off, =winograd asks for it wherever oneDNN has it.
// EMBER_CONV_SMALL_C=0 sends convolutions with one input channel to oneDNN too (for comparisons).
bool small_conv_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("EMBER_CONV_SMALL_C");
    return !e || std::string(e) != "0";
  }();
  return on;
}

bool takes_winograd(const Geometry& g, const ember_conv_attrs& a) {
  static const int choice = [] {
    const char* e = std::getenv("EMBER_CONV_ALG");
    return !e ? 0 : std::string(e) == "direct" ? 1 : std::string(e) == "winograd" ? 2 : 0;
  }();
  const bool fits = a.groups == 1 && g.KH == 3 && g.KW == 3 && a.stride[0] == 1 && a.stride[1] == 1 &&
                    a.dilation[0] == 1 && a.dilation[1] == 1 && g.C >= 16 && g.O >= 16 && g.N * g.OH * g.OW >= 64;
  return choice == 2 || (choice == 0 && fits);
}

Entry make_entry(Kind kind, const Geometry& g, const ember_conv_attrs& a, bool has_bias,
                 const ember_epilogue_attrs* post, dt cdt) {
  if (takes_winograd(g, a)) {
    try {
      return make_entry(kind, g, a, has_bias, dnnl::algorithm::convolution_winograd, post, cdt);
    } catch (const dnnl::error&) {  // not implemented for this shape, CPU or post-ops
    }
    // oneDNN 2.6's Winograd takes no elu / abs post-ops (Ember's ReLU, dnnl_post_ops.h), so a
    // convolution + ReLU took the direct kernels; Winograd with the post-ops in post_ops.h's loops
    // is faster (batch 64, 32 -> 64 at 14x14, training, 1 thread, oneDNN's time: 5.16 ms direct
    // with the ReLU, 2.96 ms Winograd without it).
    if (post) {
      try {
        return make_entry(kind, g, a, has_bias, dnnl::algorithm::convolution_winograd, nullptr, cdt);
      } catch (const dnnl::error&) {
      }
    }
  }
  return make_entry(kind, g, a, has_bias, dnnl::algorithm::convolution_direct, post, cdt);
}

// Shared, so a concurrent cache clear cannot pull it away (copying the entry instead was 4 % of a
// batch-1 CNN forward). With `post`, the entry may come back without them (Entry::post false) when
// oneDNN has no fast kernel with these post-ops.
std::shared_ptr<const Entry> entry(Kind kind, const Geometry& g, const ember_conv_attrs& a, bool has_bias,
                                   const ember_epilogue_attrs* post = nullptr, dt cdt = dt::f32) {
  static std::mutex& mutex = *new std::mutex;
  static std::map<std::pair<Key, std::vector<int64_t>>, std::shared_ptr<const Entry>>& cache =
      *new std::map<std::pair<Key, std::vector<int64_t>>, std::shared_ptr<const Entry>>;
  const Key key{kind, g.N, g.C, g.H, g.W, g.O, g.KH, g.KW, g.OH, g.OW, a.stride[0], a.stride[1], a.pad_begin[0],
                a.pad_begin[1], a.pad_end[0], a.pad_end[1], a.dilation[0], a.dilation[1], a.groups, has_bias,
                int64_t(cdt)};
  std::vector<int64_t> sig;
  for (int k = 0; post && k < post->n_ops; ++k)
    sig.insert(sig.end(), {int64_t(post->ops[k].kind), std::bit_cast<int64_t>(post->ops[k].alpha),
                           std::bit_cast<int64_t>(post->ops[k].beta)});
  std::lock_guard lock(mutex);
  auto it = cache.find({key, sig});
  if (it != cache.end()) return it->second;
  if (cache.size() > 256) cache.clear();
  auto e = std::make_shared<Entry>();
  try {
    *e = make_entry(kind, g, a, has_bias, post, cdt);
  } catch (const dnnl::error&) {
    if (!post) throw;
    *e = make_entry(kind, g, a, has_bias, nullptr, cdt);  // the loops apply the post-ops
  }
  static std::atomic<uint64_t> next_id{1};
  e->id = next_id.fetch_add(1, std::memory_order_relaxed);
  return cache.emplace(std::make_pair(key, sig), std::move(e)).first->second;
}

// The oneDNN memory objects and argument maps of one entry, made once per thread and pointed at
// each call's buffers (set_data_handle): making them per call (a stream, up to ten memory objects
// and three maps) was about a tenth of a batch-1 CNN forward.
struct EntryMemories {
  dnnl::stream stream;
  std::array<dnnl::memory, 3> user, want;  // want: only where it differs from user
  dnnl::memory bias, scratchpad;
  std::array<dnnl::memory, 3> reorder_scratchpad;
  std::unordered_map<int, dnnl::memory> args;            // the primitive's
  std::array<std::unordered_map<int, dnnl::memory>, 3> reorder_args;
};

EntryMemories& memories_of(const Entry& e) {
  thread_local std::unordered_map<uint64_t, EntryMemories> by_entry;
  auto it = by_entry.find(e.id);
  if (it != by_entry.end()) return it->second;
  if (by_entry.size() > 512) by_entry.clear();  // entries of a cleared primitive cache
  EntryMemories& m = by_entry[e.id];
  m.stream = dnnl::stream(engine());
  auto none = [](const dnnl::memory::desc& d) { return dnnl::memory(d, engine(), DNNL_MEMORY_NONE); };
  for (size_t i = 0; i < 3; ++i) {
    m.user[i] = none(e.user[i]);
    const bool reordered = !(e.want[i] == e.user[i]);
    if (reordered) {
      m.want[i] = none(e.want[i]);
      m.reorder_args[i] = {{DNNL_ARG_FROM, i < 2 ? m.user[i] : m.want[i]}, {DNNL_ARG_TO, i < 2 ? m.want[i] : m.user[i]}};
      if (e.reorder_scratchpad[i].get_size() > 0) {
        m.reorder_scratchpad[i] = none(e.reorder_scratchpad[i]);
        m.reorder_args[i].emplace(DNNL_ARG_SCRATCHPAD, m.reorder_scratchpad[i]);
      }
    }
    m.args.emplace(e.args[i], reordered ? m.want[i] : m.user[i]);
  }
  m.bias = none(e.bias);
  if (e.scratchpad.get_size() > 0) {
    m.scratchpad = none(e.scratchpad);
    m.args.emplace(DNNL_ARG_SCRATCHPAD, m.scratchpad);
  }
  return m;
}

// Runs a cached primitive on dense f32 operands, reordering from/to the plain layouts as needed.
// Buffers for the operands in oneDNN's layouts are kept per thread and reused (GrowingBuffer): a
// fresh allocation per call (megabytes for a batch of activations) would come back from the
// kernel as new pages, and the page faults cost as much as the reorder itself. Weights reordered
// by an earlier call are reused when they have not changed (reordered_weights.h).
// This thread's kept weights (the calls of one thread share them; see execute).
ReorderedWeights& kept_weights() {
  thread_local ReorderedWeights kept;
  return kept;
}

// Whether the weights at `plain`, with write stamp `stamp` (host_memory.h; 0: unknown), are the
// ones this thread's previous call of forward entry `id` had there: no write since, so they likely
// stay (inference), and the forward may take kernels that transform them once (forward_as_inference).
// Remembers them for the next call.
bool weights_stay(uint64_t id, const void* plain, uint64_t stamp) {
  thread_local std::map<std::pair<uint64_t, const void*>, uint64_t> last;
  if (stamp == 0) return false;
  if (last.size() > 4096) last.clear();  // addresses of weights long gone
  uint64_t& seen = last[{id, plain}];
  const bool same = seen == stamp;
  seen = stamp;
  return same;
}

// `in0_stamp`, `in1_stamp`: the inputs' write stamps (host_memory.h; 0 when unknown, as for a
// packed copy). `weights_same_as_kept`: ReorderedWeights::holds() said yes for in1 in this call.
void execute(const Entry& e, const void* in0, const void* in1, void* out, const float* bias,
             uint64_t in1_stamp = 0, bool weights_same_as_kept = false, uint64_t in0_stamp = 0) {
  thread_local std::array<GrowingBuffer, 3> operands;
  thread_local GrowingBuffer scratch;
  thread_local ReorderedActivations kept_activations;
  ReorderedWeights& kept_weights = cpu::kept_weights();
  EntryMemories& m = memories_of(e);
  const void* data[3] = {in0, in1, out};
  const uint64_t stamps[2] = {in0_stamp, in1_stamp};
  ReorderedWeights::Use weights;
  std::array<ReorderedActivations::Use, 2> activations;
  for (size_t i = 0; i < 3; ++i) {
    m.user[i].set_data_handle(const_cast<void*>(data[i]));
    if (!m.want[i]) continue;
    if (i == 1 && e.args[1] == DNNL_ARG_WEIGHTS) {  // forward and backward-data
      weights = kept_weights.use(e.id, in1, e.user[1].get_size(), in1_stamp, e.want[1].get_size(), operands[1],
                                 weights_same_as_kept);
      m.want[1].set_data_handle(weights.data);
    } else if (i < 2) {  // x or dy (reordered_activations.h)
      activations[i] = kept_activations.use(data[i], stamps[i], e.user[i], e.want[i]);
      m.want[i].set_data_handle(activations[i].data ? activations[i].data : operands[i].get(e.want[i].get_size()));
    } else {
      m.want[i].set_data_handle(operands[i].get(e.want[i].get_size()));
    }
  }
  // One scratch buffer serves every step in turn (they run one after the other on this thread).
  auto point_scratchpad = [&](dnnl::memory& pad, const dnnl::memory::desc& d) {
    if (pad) pad.set_data_handle(scratch.get(d.get_size()));
  };
  for (size_t i = 0; i < 2; ++i)
    if (m.want[i] && !(i == 1 && weights.ready) && !activations[i].ready) {
      point_scratchpad(m.reorder_scratchpad[i], e.reorder_scratchpad[i]);
      e.reorder[i]->execute(m.stream, m.reorder_args[i]);
    }
  if (bias) {
    m.bias.set_data_handle(const_cast<float*>(bias));
    m.args[DNNL_ARG_BIAS] = m.bias;
  }
  point_scratchpad(m.scratchpad, e.scratchpad);
  e.prim.execute(m.stream, m.args);
  if (m.want[2]) {
    point_scratchpad(m.reorder_scratchpad[2], e.reorder_scratchpad[2]);
    e.reorder[2]->execute(m.stream, m.reorder_args[2]);
  }
  m.stream.wait();
  if (weights.slot) ReorderedWeights::keep(weights.slot, in1, in1_stamp);
  for (size_t i = 0; i < 2; ++i)
    if (activations[i].slot >= 0 && !activations[i].ready)
      kept_activations.keep(activations[i].slot, data[i], stamps[i], e.user[i], e.want[i]);
}

// The post-ops over a 4-D output [N, O, OH, OW], one OH x OW block at a time (the blocks of a
// large output split over the OpenMP threads).
template <class T>
void post_ops_4d(const ember_epilogue_attrs& e, const ember_tensor_desc* in, const ember_tensor_desc& y) {
  T* base = static_cast<T*>(y.buffer->data) + y.offset;
  const int64_t blocks = y.shape[0] * y.shape[1];
  // Whole planes as one row when the output is dense along (OH, OW) and every operand is too or is
  // broadcast over both (a per-channel scale or shift): rows of OW values are too short to vectorize.
  const int64_t plane = y.shape[2] * y.shape[3];
  auto dense = [](const ember_tensor_desc& t) { return t.strides[3] == 1 && (t.shape[2] == 1 || t.strides[2] == t.shape[3]); };
  auto spread = [](const ember_tensor_desc& t) {
    return (t.strides[2] == 0 || t.shape[2] == 1) && (t.strides[3] == 0 || t.shape[3] == 1);
  };
  bool planes = dense(y);
  for (int k = 0; planes && k < e.n_ops; ++k)
    if (ember_post_has_operand(e.ops[k].kind)) planes = dense(in[e.ops[k].input]) || spread(in[e.ops[k].input]);
  if (planes) {
    run_tasks(blocks, blocks * plane, [&](int64_t b0, int64_t b1) {
      PostScratch<T> s;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t n = b / y.shape[1], o = b % y.shape[1];
        T* row = base + n * y.strides[0] + o * y.strides[1];
        for (int k = 0; k < e.n_ops; ++k) {
          const T* arg = nullptr;
          int64_t cs = 0;
          if (ember_post_has_operand(e.ops[k].kind)) {
            const ember_tensor_desc& t = in[e.ops[k].input];
            arg = static_cast<const T*>(t.buffer->data) + t.offset + n * t.strides[0] + o * t.strides[1];
            cs = spread(t) ? 0 : 1;
          }
          post_op_row(e.ops[k], row, plane, arg, cs, s);
        }
      }
    });
    return;
  }
  run_tasks(blocks, blocks * y.shape[2] * y.shape[3], [&](int64_t b0, int64_t b1) {
    std::array<PostArg<T>, EMBER_MAX_POST_OPS> args{};
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n = b / y.shape[1], o = b % y.shape[1];
      for (int k = 0; k < e.n_ops; ++k) {
        if (!ember_post_has_operand(e.ops[k].kind)) continue;
        const ember_tensor_desc& t = in[e.ops[k].input];
        args[size_t(k)] = {static_cast<const T*>(t.buffer->data) + t.offset + n * t.strides[0] + o * t.strides[1],
                           t.strides[2], t.strides[3]};
      }
      apply_post_ops<T>(e, args.data(), base + n * y.strides[0] + o * y.strides[1], y.strides[2], y.strides[3],
                        y.shape[2], y.shape[3]);
    }
  });
}

void post_ops_4d(const ember_epilogue_attrs& e, const ember_tensor_desc* in, const ember_tensor_desc& y) {
  if (y.dtype == EMBER_F64) post_ops_4d<double>(e, in, y);
  else post_ops_4d<float>(e, in, y);
}

void dims4(const ember_tensor_desc& d, int64_t out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = d.shape[i];
}

bool has_negative_zero(const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (v[i] == 0.0f && std::signbit(v[i])) return true;
  return false;
}

// The reference sums a forward output from its bias, then the products in order, so an output is
// -0 exactly when its bias and every product are -0 (a sum of zeros is +0 unless all are -0, and
// no sum with a nonzero term is a zero of either sign but +0). oneDNN adds the bias to a sum that
// starts at +0, which gives +0 there. For the channels whose bias is -0, each output that came out
// zero is given the reference's sign by checking its products (the padding takes no part, as in
// the reference; the one-channel loops multiply it, which can turn -0 into +0 the same way).
// Dense NCHW x, OIHW w, bias [O], y.
void keep_negative_zero_sums(const Geometry& g, const ember_conv_attrs& a, const float* x, const float* w,
                             const float* bias, float* y) {
  const int64_t group_out = g.O / a.groups, group_in = g.C / a.groups;
  for (int64_t o = 0; o < g.O; ++o) {
    if (!(bias[o] == 0.0f && std::signbit(bias[o]))) continue;
    const int64_t c0 = o / group_out * group_in;
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          float& out = y[((n * g.O + o) * g.OH + oh) * g.OW + ow];
          if (out != 0.0f) continue;
          bool all_negative_zero = true;
          for (int64_t c = 0; c < group_in && all_negative_zero; ++c)
            for (int64_t kh = 0; kh < g.KH && all_negative_zero; ++kh) {
              const int64_t ih = oh * a.stride[0] - a.pad_begin[0] + kh * a.dilation[0];
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t iw = ow * a.stride[1] - a.pad_begin[1] + kw * a.dilation[1];
                if (iw < 0 || iw >= g.W) continue;
                const float p =
                    x[((n * g.C + c0 + c) * g.H + ih) * g.W + iw] * w[((o * group_in + c) * g.KH + kh) * g.KW + kw];
                if (!(p == 0.0f && std::signbit(p))) {
                  all_negative_zero = false;
                  break;
                }
              }
            }
          out = all_negative_zero ? -0.0f : 0.0f;
        }
  }
}

int32_t conv_f64(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out,
                 const ember_conv_attrs& a) {
  std::vector<double> i0 = pack_dense<double>(in[0]), i1 = pack_dense<double>(in[1]);
  std::vector<double> b = n_in == 3 ? pack_dense<double>(in[2]) : std::vector<double>();
  std::vector<double> y(size_t(desc_numel(out)));
  int64_t s0[4], s1[4], so[4];
  dims4(in[0], s0);
  dims4(in[1], s1);
  dims4(out, so);
  if (op == EMBER_LIB_CONV2D) conv2d_f64(i0.data(), i1.data(), n_in == 3 ? b.data() : nullptr, y.data(), s0, s1, so, a);
  else if (op == EMBER_LIB_CONV2D_BACKWARD_DATA) conv2d_backward_data_f64(i0.data(), i1.data(), y.data(), so, s1, s0, a);
  else conv2d_backward_weights_f64(i0.data(), i1.data(), y.data(), s0, so, s1, a);
  unpack_dense(y, out);
  return EMBER_OK;
}

}  // namespace

int32_t conv_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out,
                     const void* attrs, ember_status* st) {
  const ember_epilogue_attrs* post =
      op == EMBER_LIB_CONV2D_EPILOGUE ? static_cast<const ember_epilogue_attrs*>(attrs) : nullptr;
  const auto& a = post ? post->conv : *static_cast<const ember_conv_attrs*>(attrs);
  if (post) {
    if (const char* why = check_epilogue(post, in, n_in, out))
      return set_status(st, EMBER_ERR_INVALID, "conv2d epilogue: %s", why);
    const int32_t base = post->has_bias ? 3 : 2;
    if (n_in < base) return set_status(st, EMBER_ERR_INVALID, "conv2d epilogue: %d inputs", n_in);
    for (int k = 0; k < post->n_ops; ++k)
      if (ember_post_has_operand(post->ops[k].kind) && post->ops[k].input < base)
        return set_status(st, EMBER_ERR_INVALID, "conv2d epilogue: post-op operand %d is a convolution input",
                          post->ops[k].input);
    n_in = base;
    op = EMBER_LIB_CONV2D;
  }
  const ember_tensor_desc* post_in = in;
  const bool fwd = op == EMBER_LIB_CONV2D;
  if (n_in != 2 && !(fwd && n_in == 3)) return set_status(st, EMBER_ERR_INVALID, "conv2d: %d inputs", n_in);
  for (int i = 0; i < n_in; ++i)
    if (in[i].rank != (i == 2 ? 1 : 4) || in[i].dtype != out.dtype)
      return set_status(st, EMBER_ERR_INVALID, "conv2d: input %d has rank %d, dtype %d", i, in[i].rank, in[i].dtype);
  if (out.rank != 4 || a.groups < 1) return set_status(st, EMBER_ERR_INVALID, "conv2d: bad output or groups");
  // Geometry: x [N, C, H, W], w [O, C/G, KH, KW], y [N, O, OH, OW].
  const ember_tensor_desc& x = op == EMBER_LIB_CONV2D_BACKWARD_DATA ? out : in[0];
  const ember_tensor_desc& w = op == EMBER_LIB_CONV2D_BACKWARD_WEIGHTS ? out : in[1];
  const ember_tensor_desc& y = fwd ? out : op == EMBER_LIB_CONV2D_BACKWARD_DATA ? in[0] : in[1];
  Geometry g{x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[2], w.shape[3], y.shape[2], y.shape[3]};
  if (desc_numel(out) == 0) return EMBER_OK;
  if (desc_numel(x) == 0 || desc_numel(w) == 0 || desc_numel(y) == 0) {  // an empty sum: zeros (plus bias)
    std::vector<double> z(size_t(desc_numel(out)), 0.0);
    if (fwd && n_in == 3) {
      std::vector<double> b = pack_dense<double>(in[2]);
      for (size_t i = 0; i < z.size(); ++i) z[i] = b[(i / size_t(g.OH * g.OW)) % size_t(g.O)];
    }
    unpack_dense(z, out);
    if (post) post_ops_4d(*post, post_in, out);
    return EMBER_OK;
  }
  if (out.dtype == EMBER_F64) {
    int32_t rc = conv_f64(op, in, n_in, out, a);
    if (post && rc == EMBER_OK) post_ops_4d(*post, post_in, out);
    return rc;
  }
  if (out.dtype != EMBER_F32 && out.dtype != EMBER_F16 && out.dtype != EMBER_BF16)
    return set_status(st, EMBER_ERR_UNSUPPORTED, "conv2d: dtype %d is not floating", out.dtype);
  try {
    const Kind kind = fwd ? kFwd : op == EMBER_LIB_CONV2D_BACKWARD_DATA ? kBwdData : kBwdWeights;
    // oneDNN runs the post-ops when they are all eltwise and faithful (see the file comment).
    bool in_dnnl = post != nullptr && dnnl_post_ops_faithful(*post);
    for (int k = 0; post && k < post->n_ops; ++k)
      if (ember_post_has_operand(post->ops[k].kind)) in_dnnl = false;
    const int64_t n0 = desc_numel(in[0]), n1 = desc_numel(in[1]);
    if (out.dtype == EMBER_BF16 && !post && dnnl_native_bf16()) {
      Dense16 i0(in[0]), i1(in[1]);
      if (!all_finite(EMBER_BF16, i0.p, n0) || !all_finite(EMBER_BF16, i1.p, n1)) return conv_f64(op, in, n_in, out, a);
      const auto e = entry(kind, g, a, fwd && n_in == 3, nullptr, dt::bf16);
      DenseF32 b;
      if (fwd && n_in == 3) b = dense_f32(in[2]);
      Out16 o(out);
      execute(*e, i0.p, i1.p, o.p, b.p);
      o.finish();
      return EMBER_OK;
    }
    DenseF32 i0 = dense_f32(in[0]), i1 = dense_f32(in[1]);
    DenseF32 b;
    if (fwd && n_in == 3) b = dense_f32(in[2]);
    // The gradients scan their output, not their operands: a sum with an infinite or NaN term is
    // infinite or NaN, so an operand that is not finite (and takes part in a product) leaves a
    // result that is not finite, and then the f64 loops compute the reference's values (oneDNN's
    // and the loops' sums can differ from them there: oneDNN turns some infinite sums into NaN,
    // and both multiply the padding, where the reference skips it). Any other result is the
    // reference's up to rounding. For the weight gradient this scans the few weights instead of
    // the input and the output gradient (4.8 MB per step in the Fashion-MNIST CNN's second layer,
    // 6.6 MB in its first). The forward keeps scanning its operands: its epilogue (a ReLU) could
    // hide an infinite sum.
    const int64_t n_out = desc_numel(out);
    auto redo_if_not_finite = [&](const float* result) {
      return all_finite(EMBER_F32, result, n_out) ? EMBER_OK : conv_f64(op, in, n_in, out, a);
    };
    // One input channel: conv_small_c.cpp's loops on NCHW (no layout reorders). They sum in f32
    // in a fixed order, so infinities and NaN give what the reference's sums give, given finite
    // weights (forward; the weights are scanned, the input is not).
    // A bias of exactly -0: the outputs that come out zero get the reference's sign afterwards
    // (keep_negative_zero_sums), and the post-ops run after that, in Ember's loops.
    const bool negative_zero_bias = b.p != nullptr && has_negative_zero(b.p, g.O);
    if (negative_zero_bias) in_dnnl = false;
    const SmallConv sc{g.N, g.C, g.H, g.W, g.O, g.KH, g.KW, g.OH, g.OW, a.pad_begin[0], a.pad_begin[1]};
    if (kind != kBwdData && small_channel_conv_fits(sc, a) && small_conv_enabled()) {
      if (kind == kFwd && !all_finite(EMBER_F32, i1.p, n1)) {
        int32_t rc = conv_f64(op, in, n_in, out, a);
        if (post && rc == EMBER_OK) post_ops_4d(*post, post_in, out);
        return rc;
      }
      DenseOut<float> o(out);
      bool post_done = false;
      if (kind == kFwd) {
        // Post-ops without operands on each plane as it is computed, where the output is dense.
        bool planes = post != nullptr && o.copy.empty() && !negative_zero_bias;
        for (int k = 0; planes && k < post->n_ops; ++k) planes = !ember_post_has_operand(post->ops[k].kind);
        small_channel_conv_forward(sc, i0.p, i1.p, b.p, o.data, planes ? post : nullptr);
        if (negative_zero_bias) keep_negative_zero_sums(g, a, i0.p, i1.p, b.p, o.data);
        post_done = planes;
      } else {
        small_channel_conv_backward_weights(sc, i0.p, i1.p, o.data);
        o.finish();
        return redo_if_not_finite(o.data);
      }
      o.finish();
      if (post && !post_done) post_ops_4d(*post, post_in, out);
      return EMBER_OK;
    }
    auto e = entry(kind, g, a, fwd && n_in == 3, in_dnnl ? post : nullptr);
    const uint64_t weights_stamp = i1.own.empty() ? ember::host::write_stamp(in[1].buffer) : 0;
    if (kind == kFwd && takes_winograd(g, a) && weights_stay(e->id, i1.p, weights_stamp))
      e = entry(kFwdKept, g, a, fwd && n_in == 3, in_dnnl ? post : nullptr);
    // Weights whose reorder is kept from an earlier call, unchanged, were scanned then (inference
    // calls the same weights every time: their scan was ~4 % of a batch-1 CNN).
    const bool weights_known_finite =
        e->args[1] == DNNL_ARG_WEIGHTS && !(e->want[1] == e->user[1]) &&
        kept_weights().holds(e->id, i1.p, size_t(n1) * sizeof(float), weights_stamp);
    if (fwd && (!all_finite(EMBER_F32, i0.p, n0) || (!weights_known_finite && !all_finite(EMBER_F32, i1.p, n1)))) {
      int32_t rc = conv_f64(op, in, n_in, out, a);
      if (post && rc == EMBER_OK) post_ops_4d(*post, post_in, out);
      return rc;
    }
    DenseOut<float> o(out);
    const uint64_t in0_stamp = i0.own.empty() ? ember::host::write_stamp(in[0].buffer) : 0;
    execute(*e, i0.p, i1.p, o.data, b.p, weights_stamp, weights_known_finite, in0_stamp);
    if (negative_zero_bias) keep_negative_zero_sums(g, a, i0.p, i1.p, b.p, o.data);
    o.finish();
    if (!fwd) return redo_if_not_finite(o.data);
    if (post && !(in_dnnl && e->post)) post_ops_4d(*post, post_in, out);
  } catch (const dnnl::error& err) {
    return set_status(st, EMBER_ERR_INTERNAL, "conv2d: oneDNN failed: %s (status %d)", err.what(), int(err.status));
  }
  return EMBER_OK;
}

// ---- pooling -----------------------------------------------------------------------------------
int32_t pool_library(int32_t op, const ember_tensor_desc& in, const ember_tensor_desc& out, const void* attrs,
                     ember_status* st) {
  const auto& a = *static_cast<const ember_pool_attrs*>(attrs);
  if (in.rank != 4 || out.rank != 4) return set_status(st, EMBER_ERR_INVALID, "pool2d: operands must be 4-D");
  if (desc_numel(out) == 0) return EMBER_OK;
  // oneDNN serves average pooling; its max pooling does not propagate NaN (a NaN in a window must
  // be the maximum, as in PyTorch), so max pooling runs pool_max.cpp's loops.
  if (op == EMBER_LIB_MAX_POOL2D || op == EMBER_LIB_MAX_POOL2D_INDICES) return max_pool_library(op, &in, 1, out, a, st);
  const bool dnnl_ok = op == EMBER_LIB_AVG_POOL2D &&
                       (in.dtype == EMBER_F32 || in.dtype == EMBER_F16 || in.dtype == EMBER_BF16);
  if (!dnnl_ok) return pool_loops(op, in, out, a, st);
  try {
    using Key5 = std::array<int64_t, 16>;
    static std::mutex& mutex = *new std::mutex;
    struct Pool {
      dnnl::pooling_forward prim;
      dnnl::memory::desc scratchpad;
    };
    static std::map<Key5, Pool>& cache = *new std::map<Key5, Pool>;
    const dnnl::algorithm alg = a.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                                    : dnnl::algorithm::pooling_avg_exclude_padding;
    const dnnl::memory::desc src({in.shape[0], in.shape[1], in.shape[2], in.shape[3]}, dt::f32, tag::nchw);
    const dnnl::memory::desc dst({out.shape[0], out.shape[1], out.shape[2], out.shape[3]}, dt::f32, tag::nchw);
    Pool pool;
    {
      const Key5 key{int64_t(alg), in.shape[0], in.shape[1], in.shape[2], in.shape[3], out.shape[2], out.shape[3],
                     a.kernel[0], a.kernel[1], a.stride[0], a.stride[1], a.pad_begin[0], a.pad_begin[1],
                     a.pad_end[0], a.pad_end[1], 0};
      std::lock_guard lock(mutex);
      auto it = cache.find(key);
      if (it == cache.end()) {
        dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, src, dst, {a.stride[0], a.stride[1]},
                                      {a.kernel[0], a.kernel[1]}, {a.pad_begin[0], a.pad_begin[1]},
                                      {a.pad_end[0], a.pad_end[1]});
        if (cache.size() > 256) cache.clear();
        dnnl::pooling_forward::primitive_desc pd(d, user_scratchpad_attr(), engine());
        it = cache.emplace(key, Pool{dnnl::pooling_forward(pd), pd.scratchpad_desc()}).first;
      }
      pool = it->second;
    }
    DenseF32 x = dense_f32(in);
    DenseOut<float> o(out);
    dnnl::stream s(engine());
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(src, engine(), const_cast<float*>(x.p))},
                                               {DNNL_ARG_DST, dnnl::memory(dst, engine(), o.data)}};
    add_scratchpad(args, pool.scratchpad, engine());
    pool.prim.execute(s, args);
    s.wait();
    o.finish();
  } catch (const dnnl::error& err) {
    return set_status(st, EMBER_ERR_INTERNAL, "pool2d: oneDNN failed: %s (status %d)", err.what(), int(err.status));
  }
  return EMBER_OK;
}

}  // namespace ember::cpu
