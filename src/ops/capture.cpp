// Captured functions (ember/capture.h): the first call of an input signature runs the function
// with a WorkRecorder active (runtime/work_recorder.h), which collects every kernel launch and
// library call with the buffers they touch; later calls replay those calls on fresh buffers.
//
// Each buffer a recorded call names is a slot: an input (the buffer of input i, re-bound to the
// new input's buffer, offsets relative to the input's), scratch (allocated by the recorded work:
// allocated again before its first use in a replay and dropped after its last, so a replay needs
// no more memory than the graph did, unless it is an output) or a constant (any other buffer: a
// weight the function closes over, kept alive by the recording) or a random key (the Philox key
// of a random op drawn from the global sequence: a replay takes as many draws as the recording
// call did and writes the key at the same position, so it draws what the eager call would have).
// Recorded work may write only scratch. A replay runs as one task on the device's queue, in order
// with plans.
#include "ember/capture.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "runtime/kernel_checks.h"
#include "runtime/work_recorder.h"
#include "ember/autocast.h"
#include "ember/autograd.h"
#include "ember/error.h"
#include "ember/ops.h"
#include "scheduler/realize.h"
#include "scheduler/trace.h"
#include "ops/random_sequence.h"
#include "scheduler/launch.h"

namespace ember {

namespace {

struct SlotRef {
  enum Kind : uint8_t { None, Input, Scratch, Constant, RandomKey } kind = None;
  int index = 0;
};

struct RecordedCall {
  std::string where;  // the op (or fused kernel's root) and line, for replay errors
  // A kernel launch...
  std::shared_ptr<const CompiledProgram> program;
  ember_kir_launch launch{};
  std::vector<ember_kir_arg> args;
  // ... or a library call.
  int device = 0;
  int32_t op = 0;
  std::vector<ember_tensor_desc> descs;  // inputs, then outputs
  int n_inputs = 0;
  std::vector<unsigned char> attrs;
  // The slot of each arg / desc, and whether the call writes it.
  std::vector<SlotRef> slots;
  std::vector<uint8_t> written;
  // Scratch slots allocated before this call / released after it.
  std::vector<int> allocate, release;
};

struct RecordedOutput {
  SlotRef slot;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  Shape shape;
  DType dtype;
  // The eager output's op when it is a view (a movement op: only those may be non-contiguous,
  // which contiguous() relies on), else FromData: a leaf, as from_data makes (the recorded op's
  // attributes are not kept, and an op such as Full would be folded into consumers by them).
  Op op;
  Loc loc;
};

// The results of a recording's parameter-only calls (ParameterWork) from an earlier replay, and
// the bytes of the parameters they were computed from.
struct ParameterResults {
  bool valid = false;
  std::vector<std::vector<unsigned char>> parameter_bytes;  // per ParameterWork::inputs
  std::vector<std::shared_ptr<DeviceBuffer>> kept;          // per ParameterWork::kept
};

// Calls that read nothing but constants, parameters (the inputs from the first implicit one on:
// capture_module's weights and buffers) and the results of such calls, and write only scratch
// that no other call writes: an inference batch norm's scale and shift, say. A replay skips them
// while every parameter they read holds the bytes it held when they last ran (compared in full:
// parameters are mutable buffers, updated in place or replaced by ones at the same address), and
// reuses their results; on devices whose memory the host cannot read in place they always run.
struct ParameterWork {
  std::vector<uint8_t> calls;  // per call: parameter-only
  std::vector<int> inputs;     // the parameters those calls read
  std::vector<int> kept;       // scratch slots they write that other calls or the outputs read
  mutable std::mutex m;
  mutable ParameterResults results;
};

struct Recording {
  Device device;
  std::vector<RecordedCall> calls;
  std::vector<size_t> scratch_bytes;
  std::vector<std::shared_ptr<DeviceBuffer>> constants;
  std::vector<RecordedOutput> outputs;
  std::string name;  // prefixes replay errors: "captured function (recorded with 3 input(s))"
  ParameterWork parameter_work;
  // Draws the recording call took from the global random sequence, and per random key slot the
  // draw (counted from the call's first) whose key it holds.
  uint64_t random_draws = 0;
  std::vector<uint64_t> random_key_draws;
};

void plan_parameter_work(Recording& r, size_t n_explicit, const std::vector<NodePtr>& inputs);

// Collects the work of one recording call (thread-safe: the queue's worker and the calling
// thread may both report).
class Recorder final : public WorkRecorder {
 public:
  // Input i's buffer is slot i (the first input, when several share a buffer).
  explicit Recorder(const std::vector<NodePtr>& inputs) : sequence_start_(random_sequence_position()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      input_offsets_.push_back(inputs[i]->view.offset);
      if (inputs[i]->view.buffer) slots_.emplace(inputs[i]->view.buffer.get(), SlotRef{SlotRef::Input, int(i)});
    }
  }

  void begin_step(const std::string& where) override {
    std::lock_guard lock(m_);
    where_ = where;
  }

  void allocated(const std::shared_ptr<DeviceBuffer>& buffer) override {
    std::lock_guard lock(m_);
    if (!on_device(buffer->device)) return;
    slots_[buffer.get()] = {SlotRef::Scratch, int(scratch_.size())};
    scratch_.push_back(buffer);  // held, so that no later buffer reuses the address
  }

  void kernel(const std::shared_ptr<const CompiledProgram>& program, const ember_kir_launch& launch,
              const std::vector<std::shared_ptr<DeviceBuffer>>& buffers, const std::vector<bool>& stored,
              const std::vector<bool>& random_key) override {
    std::lock_guard lock(m_);
    RecordedCall c;
    c.where = where_;
    c.program = program;
    c.launch = launch;
    c.launch.args = nullptr;  // the replay points it at its own copy of `args`
    c.args.assign(launch.args, launch.args + launch.n_args);
    c.slots.resize(c.args.size());
    c.written.assign(stored.begin(), stored.end());
    c.written.resize(c.args.size());
    for (size_t a = 0; a < c.args.size(); ++a) {
      if (!program && !random_key[a]) continue;  // the host fallback: only the keys are checked
      if (random_key[a]) {
        if (!bind_random_key(c, a)) return;
        continue;
      }
      if (!buffers[a]) continue;
      if (!bind(c, a, buffers[a], stored[a], c.args[a].offset)) return;
    }
    if (program) calls_.push_back(std::move(c));
  }

  void library(int device, int32_t op, const ember_tensor_desc* inputs, int n_inputs,
               const ember_tensor_desc* outputs, int n_outputs, const void* attrs,
               const std::vector<std::shared_ptr<DeviceBuffer>>& buffers) override {
    std::lock_guard lock(m_);
    RecordedCall c;
    c.where = where_;
    c.device = device;
    c.op = op;
    c.descs.assign(inputs, inputs + n_inputs);
    c.descs.insert(c.descs.end(), outputs, outputs + n_outputs);
    c.n_inputs = n_inputs;
    if (size_t bytes = library_attrs_size(op); bytes && attrs)
      c.attrs.assign(static_cast<const unsigned char*>(attrs), static_cast<const unsigned char*>(attrs) + bytes);
    c.slots.resize(c.descs.size());
    c.written.resize(c.descs.size());
    for (size_t d = size_t(n_inputs); d < c.descs.size(); ++d) c.written[d] = 1;
    for (size_t d = 0; d < c.descs.size(); ++d) {
      if (!c.descs[d].buffer) continue;
      auto owner = std::find_if(buffers.begin(), buffers.end(),
                                [&](const auto& b) { return b && b->handle == c.descs[d].buffer; });
      if (owner == buffers.end()) return refuse_locked(fmt::format("{}: a library call's buffer has no owner", where_));
      if (!bind(c, d, *owner, int(d) >= n_inputs, c.descs[d].offset)) return;
    }
    calls_.push_back(std::move(c));
  }

  // A random op's key (argument a of call c, a launch-time scalar holding the seed): which draw of
  // the sequence since the call began made it (searched, not passed down: the op kept only its
  // seed). Not found: a fixed seed, which a replay cannot tell from a value the function baked in
  // (nn::Dropout's seed option counts calls on the host), and the recording is refused.
  bool bind_random_key(RecordedCall& c, size_t a) {
    const uint64_t seed = uint64_t(c.args[a].offset);
    const RandomSequencePosition now = random_sequence_position();
    if (restarted(now)) {
      refuse_locked(kRestarted);
      return false;
    }
    constexpr uint64_t kMaxSearch = uint64_t(1) << 20;
    std::optional<uint64_t> draw;
    for (uint64_t d = sequence_start_.draws; d < now.draws && d - sequence_start_.draws < kMaxSearch; ++d)
      if (random_sequence_key(now.seed, d) == seed) {
        draw = d - sequence_start_.draws;
        break;
      }
    if (!draw) {
      refuse_locked(fmt::format("{} draws random numbers with a fixed seed (a replay would repeat them)", c.where));
      return false;
    }
    c.slots[a] = {SlotRef::RandomKey, int(random_key_draws_.size())};
    random_key_draws_.push_back(*draw);
    return true;
  }

  void refuse(const std::string& why) override {
    std::lock_guard lock(m_);
    refuse_locked(why);
  }

  std::string refusal() {
    std::lock_guard lock(m_);
    return refusal_;
  }

  // The recording, once the call's outputs are computed; null (with refusal() set) when it
  // cannot be replayed.
  // Inputs from n_explicit on are parameters (plan_parameter_work).
  std::shared_ptr<const Recording> finish(const std::vector<Array>& outputs, const std::string& name,
                                          const std::vector<NodePtr>& inputs, size_t n_explicit) {
    std::lock_guard lock(m_);
    const RandomSequencePosition sequence_end = random_sequence_position();
    if (restarted(sequence_end)) refuse_locked(kRestarted);
    if (!refusal_.empty()) return nullptr;
    auto r = std::make_shared<Recording>();
    r->name = name;
    r->random_draws = sequence_end.draws - sequence_start_.draws;
    r->random_key_draws = random_key_draws_;
    for (const Array& o : outputs) {
      const Node& n = *o.node();
      if (n.current() != Node::State::Ready) {
        refuse_locked("an output failed");
        return nullptr;
      }
      RecordedOutput spec{{}, n.view.offset, n.view.strides, n.shape, n.dtype,
                      op_info(n.op).kind == OpKind::Movement ? n.op : Op::FromData, n.loc};
      if (n.view.buffer) {
        if (!on_device(n.device)) return nullptr;
        spec.slot = slot_of(n.view.buffer);
        if (spec.slot.kind == SlotRef::Input) spec.offset -= input_offsets_[size_t(spec.slot.index)];
      }
      r->outputs.push_back(std::move(spec));
    }
    if (!device_) device_ = outputs.empty() ? Device::cpu() : outputs.front().device();
    r->device = *device_;
    for (const auto& b : scratch_) r->scratch_bytes.push_back(b->bytes);
    r->constants = constants_;
    // First and last use of each scratch slot; outputs are never released.
    const int n_calls = int(calls_.size());
    std::vector<int> first(scratch_.size(), n_calls), last(scratch_.size(), -1);
    for (int i = 0; i < n_calls; ++i)
      for (const SlotRef& s : calls_[size_t(i)].slots)
        if (s.kind == SlotRef::Scratch) {
          first[size_t(s.index)] = std::min(first[size_t(s.index)], i);
          last[size_t(s.index)] = i;
        }
    for (const RecordedOutput& o : r->outputs)
      if (o.slot.kind == SlotRef::Scratch) {
        last[size_t(o.slot.index)] = n_calls;  // kept
        first[size_t(o.slot.index)] = std::min(first[size_t(o.slot.index)], n_calls - 1);
      }
    for (size_t s = 0; s < scratch_.size(); ++s) {
      if (last[s] < 0) continue;  // allocated but never used
      calls_[size_t(std::max(first[s], 0))].allocate.push_back(int(s));
      if (last[s] < n_calls) calls_[size_t(last[s])].release.push_back(int(s));
    }
    // An output in a scratch slot no call touches (impossible today) would not be allocated.
    for (const RecordedOutput& o : r->outputs)
      if (o.slot.kind == SlotRef::Scratch && calls_.empty()) {
        refuse_locked("an output has no recorded work");
        return nullptr;
      }
    r->calls = std::move(calls_);
    plan_parameter_work(*r, n_explicit, inputs);
    return r;
  }

 private:
  // manual_seed inside the function: the eager calls would repeat its numbers, a replay would not.
  static constexpr const char* kRestarted = "it restarts the random sequence (manual_seed)";
  bool restarted(const RandomSequencePosition& now) const {
    return now.restarts != sequence_start_.restarts || now.draws < sequence_start_.draws;
  }

  bool on_device(Device d) {
    if (!device_) device_ = d;
    if (*device_ == d) return true;
    refuse_locked(fmt::format("it runs on two devices ({} and {})", device_->str(), d.str()));
    return false;
  }

  SlotRef slot_of(const std::shared_ptr<DeviceBuffer>& b) {
    auto it = slots_.find(b.get());
    if (it != slots_.end()) return it->second;
    SlotRef s{SlotRef::Constant, int(constants_.size())};
    constants_.push_back(b);
    slots_[b.get()] = s;
    return s;
  }

  // Binds arg/desc `i` of `c` to its buffer's slot; false (refused) if the work writes a buffer
  // that existed before the call.
  bool bind(RecordedCall& c, size_t i, const std::shared_ptr<DeviceBuffer>& b, bool written, int64_t& offset) {
    if (!on_device(b->device)) return false;
    SlotRef s = slot_of(b);
    if (written && s.kind != SlotRef::Scratch) {
      refuse_locked(fmt::format("{} writes into a buffer that existed before the call", where_));
      return false;
    }
    if (s.kind == SlotRef::Input) offset -= input_offsets_[size_t(s.index)];
    c.slots[i] = s;
    return true;
  }

  void refuse_locked(const std::string& why) {
    if (refusal_.empty()) refusal_ = why.empty() ? "refused" : why;
  }

  std::mutex m_;
  std::string where_;
  std::string refusal_;
  std::optional<Device> device_;
  std::unordered_map<const DeviceBuffer*, SlotRef> slots_;
  std::vector<int64_t> input_offsets_;
  std::vector<std::shared_ptr<DeviceBuffer>> scratch_;
  std::vector<std::shared_ptr<DeviceBuffer>> constants_;
  std::vector<RecordedCall> calls_;
  RandomSequencePosition sequence_start_;
  std::vector<uint64_t> random_key_draws_;
};

// Finds r's parameter-only calls (ParameterWork); inputs from n_explicit on are parameters.
void plan_parameter_work(Recording& r, size_t n_explicit, const std::vector<NodePtr>& inputs) {
  // Larger parameters are not compared on every call: recomputing costs about what comparing does.
  constexpr size_t kMaxParameterBytes = size_t(16) << 20;
  ParameterWork& w = r.parameter_work;
  const size_t n_calls = r.calls.size();
  auto parameter = [&](int i) {  // contiguous: its bytes are one range
    const Node& n = *inputs[size_t(i)];
    return size_t(i) >= n_explicit && n.view.buffer && is_contiguous(n.view, n.shape);
  };
  w.calls.assign(n_calls, 1);
  for (bool changed = true; changed;) {  // drop calls until the rest only read parameter-only results
    changed = false;
    std::vector<uint8_t> produced(r.scratch_bytes.size(), 1);  // every writer is parameter-only
    for (size_t c = 0; c < n_calls; ++c)
      for (size_t a = 0; a < r.calls[c].slots.size(); ++a)
        if (r.calls[c].written[a] && r.calls[c].slots[a].kind == SlotRef::Scratch && !w.calls[c])
          produced[size_t(r.calls[c].slots[a].index)] = 0;
    for (size_t c = 0; c < n_calls; ++c) {
      if (!w.calls[c]) continue;
      const RecordedCall& call = r.calls[c];
      bool ok = true;
      for (size_t a = 0; a < call.slots.size() && ok; ++a) {
        const SlotRef sl = call.slots[a];
        if (sl.kind == SlotRef::None || sl.kind == SlotRef::Constant) continue;
        if (sl.kind == SlotRef::Scratch) ok = produced[size_t(sl.index)] != 0;
        else if (sl.kind == SlotRef::RandomKey) ok = false;  // new numbers on every call
        else ok = !call.written[a] && parameter(sl.index);
      }
      if (!ok) {
        w.calls[c] = 0;
        changed = true;
      }
    }
  }
  std::vector<uint8_t> read_elsewhere(r.scratch_bytes.size(), 0), written_here(r.scratch_bytes.size(), 0);
  std::vector<uint8_t> input_read(inputs.size(), 0);
  for (size_t c = 0; c < n_calls; ++c)
    for (size_t a = 0; a < r.calls[c].slots.size(); ++a) {
      const SlotRef sl = r.calls[c].slots[a];
      if (sl.kind == SlotRef::Scratch && w.calls[c] && r.calls[c].written[a]) written_here[size_t(sl.index)] = 1;
      if (sl.kind == SlotRef::Scratch && !w.calls[c]) read_elsewhere[size_t(sl.index)] = 1;
      if (sl.kind == SlotRef::Input && w.calls[c]) input_read[size_t(sl.index)] = 1;
    }
  for (const RecordedOutput& o : r.outputs)
    if (o.slot.kind == SlotRef::Scratch) read_elsewhere[size_t(o.slot.index)] = 1;
  size_t bytes = 0;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (input_read[i]) {
      w.inputs.push_back(int(i));
      bytes += size_t(inputs[i]->shape.numel()) * dtype_size(inputs[i]->dtype);
    }
  for (size_t sl = 0; sl < written_here.size(); ++sl)
    if (written_here[sl] && read_elsewhere[sl]) w.kept.push_back(int(sl));
  // Nothing to skip, or calls that read no parameter (only constants): those run every time.
  static const bool enabled = [] {  // EMBER_PARAMETER_REUSE=0 turns it off (to compare)
    const char* e = std::getenv("EMBER_PARAMETER_REUSE");
    return !(e && std::string(e) == "0");
  }();
  if (!enabled || w.inputs.empty() || bytes > kMaxParameterBytes) {
    w.inputs.clear();
    w.kept.clear();
    w.calls.assign(n_calls, 0);
  }
}

// The bytes of input i (contiguous, plan_parameter_work) when the host can read them in place.
const unsigned char* parameter_bytes(const Node& n, size_t& bytes) {
  bytes = size_t(n.shape.numel()) * dtype_size(n.dtype);
  const DeviceBuffer& b = *n.view.buffer;
  const unsigned char* host = b.backend->host_bytes(b);
  return host ? host + size_t(n.view.offset) * dtype_size(n.dtype) : nullptr;
}

// Runs a recording's calls with `inputs` (ready, laid out as when recorded) bound to its input
// slots and `keys` (per random key slot) as the random ops' keys; sets the views of `outputs`. On
// the device's queue (run_on_queue). Parameter-only calls are skipped when their parameters have
// not changed since they last ran (ParameterWork).
// Returns whether they were.
bool replay(const Recording& r, const std::vector<NodePtr>& inputs, const std::vector<NodePtr>& outputs,
            const std::vector<uint64_t>& keys) {
  Backend& be = Backend::get(r.device.kind);
  std::vector<std::shared_ptr<DeviceBuffer>> scratch(r.scratch_bytes.size());
  const ParameterWork& pw = r.parameter_work;
  // Skip the parameter-only calls (reuse), or run them and keep what they made (remember).
  bool reuse = false, remember = false;
  ParameterResults made;
  if (!pw.inputs.empty()) {
    std::vector<std::pair<const unsigned char*, size_t>> now;
    for (int i : pw.inputs) {
      size_t bytes = 0;
      const unsigned char* p = parameter_bytes(*inputs[size_t(i)], bytes);
      if (!p) break;
      now.push_back({p, bytes});
    }
    if (now.size() == pw.inputs.size()) {
      std::lock_guard lock(pw.m);
      const ParameterResults& last = pw.results;
      reuse = last.valid;
      for (size_t k = 0; k < now.size() && reuse; ++k)
        reuse = last.parameter_bytes[k].size() == now[k].second &&
                std::memcmp(last.parameter_bytes[k].data(), now[k].first, now[k].second) == 0;
      if (reuse)
        for (size_t k = 0; k < pw.kept.size(); ++k) scratch[size_t(pw.kept[k])] = last.kept[k];
    }
    remember = !reuse && now.size() == pw.inputs.size();
    if (remember) {
      made.valid = true;
      for (const auto& [p, bytes] : now) made.parameter_bytes.emplace_back(p, p + bytes);
      made.kept.resize(pw.kept.size());
    }
  }
  auto buffer_of = [&](SlotRef s) -> const std::shared_ptr<DeviceBuffer>& {
    switch (s.kind) {
      case SlotRef::Input: return inputs[size_t(s.index)]->view.buffer;
      case SlotRef::Scratch: return scratch[size_t(s.index)];
      default: return r.constants[size_t(s.index)];
    }
  };
  auto offset_of = [&](SlotRef s) { return s.kind == SlotRef::Input ? inputs[size_t(s.index)]->view.offset : 0; };
  thread_local std::vector<ember_kir_arg> args;
  thread_local std::vector<ember_tensor_desc> descs;
  // On an asynchronous device the calls that can fail while they run (gathers, integer division)
  // are not waited for (runtime/kernel_checks.h): their checks, attributed to the recorded line,
  // go to the outputs' buffers with those of the inputs and of reused parameter work.
  struct ReplayStep {
    const RecordedCall* call = nullptr;
  } step;
  CheckScope checks(&step, [](const void* s, KernelCheck& k) { k.where = static_cast<const ReplayStep*>(s)->call->where; });
  for (size_t ci = 0; ci < r.calls.size(); ++ci) {
    const RecordedCall& c = r.calls[ci];
    step.call = &c;
    const bool parameter_only = !pw.calls.empty() && pw.calls[ci];
    if (reuse && parameter_only) continue;
    for (int s : c.allocate) scratch[size_t(s)] = be.alloc(r.device, r.scratch_bytes[size_t(s)]);
    trace::Span span([&](KernelRecord& k) {
      k.name = c.program ? "replayed kernel" : "replayed library call";
      k.where = c.where;
      k.device = r.device.str();
    });
    try {
      if (c.program) {
        args.assign(c.args.begin(), c.args.end());
        for (size_t a = 0; a < args.size(); ++a)
          if (c.slots[a].kind == SlotRef::RandomKey) {
            args[a].offset = int64_t(keys[size_t(c.slots[a].index)]);  // a launch-time scalar
          } else if (c.slots[a].kind != SlotRef::None) {
            args[a].buffer = buffer_of(c.slots[a])->handle;
            args[a].offset += offset_of(c.slots[a]);
          }
        ember_kir_launch l = c.launch;
        l.args = args.data();
        be.run(*c.program, l);
      } else {
        descs.assign(c.descs.begin(), c.descs.end());
        for (size_t d = 0; d < descs.size(); ++d)
          if (c.slots[d].kind != SlotRef::None) {
            descs[d].buffer = buffer_of(c.slots[d])->handle;
            descs[d].offset += offset_of(c.slots[d]);
          }
        be.library_call(c.device, c.op, descs.data(), c.n_inputs, descs.data() + c.n_inputs,
                        int(descs.size()) - c.n_inputs, c.attrs.empty() ? nullptr : c.attrs.data());
      }
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", c.where, e.what()));
    }
    if (remember && parameter_only)
      for (size_t k = 0; k < pw.kept.size(); ++k)
        if (scratch[size_t(pw.kept[k])]) made.kept[k] = scratch[size_t(pw.kept[k])];
    for (int s : c.release) scratch[size_t(s)].reset();
  }
  CheckSetPtr carried = checks.made();
  for (const NodePtr& in : inputs)
    if (in->view.buffer) carried = merge_checks(carried, checks_of(*in->view.buffer));
  for (const std::shared_ptr<DeviceBuffer>& b : scratch)
    if (b) carried = merge_checks(carried, checks_of(*b));  // reused parameter work among them
  if (remember) {
    for (const std::shared_ptr<DeviceBuffer>& b : made.kept)
      if (b) carry_checks(*b, carried);
    std::lock_guard lock(pw.m);
    pw.results = std::move(made);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const RecordedOutput& o = r.outputs[i];
    View v;
    if (o.slot.kind != SlotRef::None) {
      v.buffer = buffer_of(o.slot);
      v.offset = o.offset + offset_of(o.slot);
    }
    v.strides = o.strides;
    if (v.buffer) carry_checks(*v.buffer, carried);
    outputs[i]->view = std::move(v);
  }
  return reuse;
}

// What a recording depends on besides the function: each input's shape, dtype, device and
// layout (strides, and which earlier input shares its buffer at what offset), read once the
// inputs are computed; and for an input made by full() (zeros, ones: a module's initial weights
// and statistics), its value, which the kernels that read it fold in as a constant instead of
// reading its buffer (so another value, or an array with data, needs another recording).
struct Signature {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  std::vector<Device> devices;
  std::vector<std::vector<int64_t>> strides;
  std::vector<std::pair<int, int64_t>> aliases;  // (earlier input with the same buffer or -1, offset delta)
  std::vector<std::optional<std::pair<uint64_t, int64_t>>> fills;  // full()'s value (f bits, i)
};

std::optional<std::pair<uint64_t, int64_t>> fill_of(const Node& n) {
  if (n.op != Op::Full) return std::nullopt;
  return std::make_pair(std::bit_cast<uint64_t>(n.attrs.value.f), n.attrs.value.i);
}

// Whether `inputs` have signature `s` (without building one: this runs on every call).
bool matches(const Signature& s, const std::vector<NodePtr>& inputs) {
  if (s.shapes.size() != inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& n = *inputs[i];
    if (n.shape != s.shapes[i] || n.dtype != s.dtypes[i] || n.device != s.devices[i] ||
        n.view.strides != s.strides[i] || fill_of(n) != s.fills[i])
      return false;
    const auto [j, delta] = s.aliases[i];
    if (j >= 0 ? (inputs[size_t(j)]->view.buffer != n.view.buffer || n.view.offset - inputs[size_t(j)]->view.offset != delta)
               : false)
      return false;
    // An input that shares no buffer in the signature must not share one now.
    if (j < 0 && n.view.buffer)
      for (size_t k = 0; k < i; ++k)
        if (inputs[k]->view.buffer == n.view.buffer) return false;
  }
  return true;
}

Signature signature_of(const std::vector<NodePtr>& inputs) {
  Signature s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& n = *inputs[i];
    s.shapes.push_back(n.shape);
    s.dtypes.push_back(n.dtype);
    s.devices.push_back(n.device);
    s.strides.push_back(n.view.strides);
    s.fills.push_back(fill_of(n));
    std::pair<int, int64_t> alias{-1, 0};
    for (size_t j = 0; j < i && n.view.buffer; ++j)
      if (inputs[j]->view.buffer == n.view.buffer) {
        alias = {int(j), n.view.offset - inputs[j]->view.offset};
        break;
      }
    s.aliases.push_back(alias);
  }
  return s;
}

}  // namespace

struct CaptureCache {
  std::mutex m;
  struct Entry {
    Signature signature;
    std::shared_ptr<const Recording> recording;  // null: refused
  };
  std::list<Entry> entries;  // most recently used first
  CaptureStats stats;
  std::atomic<int64_t> parameter_work_reused{0};  // counted by replays, on the device's queue
};

CapturedFunction::CapturedFunction(Fn fn, CaptureOptions options)
    : fn_(std::move(fn)), options_(std::move(options)), cache_(std::make_shared<CaptureCache>()) {}

std::vector<Array> CapturedFunction::operator()(const std::vector<Array>& inputs) const {
  auto eagerly = [&] {
    std::vector<Array> outs = fn_(inputs);
    if (!options_.outputs_need_grad)
      for (Array& a : outs)
        if (a.defined()) a = a.detach();
    return outs;
  };
  std::vector<Array> all = inputs;
  if (options_.implicit_inputs)
    for (Array& a : options_.implicit_inputs()) all.push_back(std::move(a));
  bool eager = options_.run_eagerly && options_.run_eagerly();
  eager = eager || autocast_dtype().has_value();  // its cast cache would be baked in
  for (const Array& a : all) {
    if (!a.defined()) throw Error("captured function: an input is undefined");
    // A replay has no backward: outputs that need one come from the eager function.
    eager = eager || (options_.outputs_need_grad && grad_enabled() && a.requires_grad());
  }
  if (eager) {
    {
      std::lock_guard lock(cache_->m);
      ++cache_->stats.eager_calls;
    }
    return eagerly();
  }
  // Inputs are computed first: a replay reads their buffers, and the signature their layout.
  std::vector<NodePtr> in_nodes;
  for (const Array& a : all) in_nodes.push_back(a.node());
  realize_and_wait(in_nodes);
  std::shared_ptr<const Recording> recording;
  bool known = false;
  {
    std::lock_guard lock(cache_->m);
    for (auto it = cache_->entries.begin(); it != cache_->entries.end(); ++it)
      if (matches(it->signature, in_nodes)) {
        cache_->entries.splice(cache_->entries.begin(), cache_->entries, it);
        recording = it->recording;
        known = true;
        if (recording) ++cache_->stats.replays;
        else ++cache_->stats.eager_calls;
        break;
      }
  }
  if (known && !recording) return eagerly();
  if (recording) {
    std::vector<NodePtr> out_nodes;
    std::vector<Array> outs;
    for (const RecordedOutput& o : recording->outputs) {
      auto node = std::make_shared<Node>(o.op, OpAttrs{}, std::vector<NodePtr>{}, o.shape, o.dtype,
                                         recording->device, o.loc);
      out_nodes.push_back(node);
      outs.push_back(Array(std::move(node)));
    }
    const Device device = recording->device;
    const std::string& name = recording->name;
    // The random ops' keys come from the sequence now, on this thread, as eager calls take them.
    std::vector<uint64_t> keys;
    if (recording->random_draws) {
      const RandomSequencePosition at = take_random_draws(recording->random_draws);
      for (uint64_t d : recording->random_key_draws) keys.push_back(random_sequence_key(at.seed, at.draws + d));
    }
    std::vector<NodePtr> task_outputs = out_nodes;
    run_on_queue(
        device,
        [recording, cache = cache_, in = std::move(in_nodes), out = std::move(out_nodes), keys = std::move(keys)] {
          if (replay(*recording, in, out, keys)) cache->parameter_work_reused.fetch_add(1, std::memory_order_relaxed);
        },
        std::move(task_outputs), {}, name);
    return outs;
  }
  // Record: run the function with the recorder on this thread, compute its outputs, and keep
  // the recording if every piece of work could be recorded.
  Recorder recorder(in_nodes);
  std::vector<Array> outs;
  {
    WorkRecorderScope scope(&recorder);
    outs = fn_(inputs);
    std::vector<NodePtr> roots;
    for (Array& a : outs) {
      if (!a.defined()) throw Error("captured function: it returned an undefined array");
      if (!options_.outputs_need_grad) a = a.detach();  // as a replay's outputs
      roots.push_back(a.node());
    }
    try {
      realize_and_wait(roots);
    } catch (const Error&) {
      recorder.refuse("an output failed");  // the error surfaces when the output is read
    }
    for (const Array& a : outs) synchronize(a.device());
  }
  std::string name = fmt::format("captured function (recorded with {} input(s))", in_nodes.size());
  Signature sig = signature_of(in_nodes);
  std::shared_ptr<const Recording> made = recorder.finish(outs, name, in_nodes, inputs.size());
  std::lock_guard lock(cache_->m);
  if (made) ++cache_->stats.recordings;
  else {
    ++cache_->stats.eager_calls;
    cache_->stats.last_refusal = recorder.refusal();
  }
  // An output that failed is not a property of the signature: record again next time.
  if (made || recorder.refusal() != "an output failed") {
    cache_->entries.push_front({std::move(sig), std::move(made)});
    while (cache_->entries.size() > std::max<size_t>(options_.max_signatures, 1)) cache_->entries.pop_back();
  }
  return outs;
}

CaptureStats CapturedFunction::stats() const {
  std::lock_guard lock(cache_->m);
  CaptureStats s = cache_->stats;
  s.parameter_work_reused = cache_->parameter_work_reused.load(std::memory_order_relaxed);
  return s;
}

void CapturedFunction::clear() {
  std::lock_guard lock(cache_->m);
  cache_->entries.clear();
}

SignatureOnlyScope::SignatureOnlyScope() : previous_(active_work_recorder()) { set_active_work_recorder(nullptr); }
SignatureOnlyScope::~SignatureOnlyScope() { set_active_work_recorder(previous_); }

CapturedFunction capture(CapturedFunction::Fn fn, CaptureOptions options) {
  return CapturedFunction(std::move(fn), std::move(options));
}

}  // namespace ember
