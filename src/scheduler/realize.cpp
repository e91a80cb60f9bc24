// Realization: orders the pending nodes a set of roots depends on (iteratively, so deep graphs
// cannot overflow the stack), plans kernels (scheduler/fusion.h) and hands the plan to the
// device's in-order queue. The queue's worker (on a host device, the calling thread itself when
// the queue is idle: worker_pays) executes the steps, publishes views, drops inputs and records
// failures on the nodes; host reads wait for their node. Errors name the op and the
// user's line that created it. With anomaly detection on (ember/anomaly.h) a realization runs
// every node alone, checks each output for NaN/inf (graph/anomaly.h) and finishes before it
// returns, so the next read or eval can report the first anomaly.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_set>

#include "runtime/kernel_checks.h"
#include "runtime/registry.h"
#include "runtime/work_recorder.h"
#include "ember/anomaly.h"
#include "graph/anomaly.h"
#include "scheduler/realize.h"
#include "graph/pointer_table.h"
#include "runtime/stats.h"
#include "scheduler/trace.h"
#include "scheduler/donation.h"
#include "scheduler/epilogue.h"
#include "scheduler/fusion.h"
#include "scheduler/launch.h"
#include "scheduler/scheduler.h"

namespace ember {

namespace {

bool log_fusion() {
  static bool on = [] {
    const char* s = std::getenv("EMBER_LOG");
    return s && std::string(s).find("fusion") != std::string::npos;
  }();
  return on;
}

void log_plan(const Plan& plan) {
  if (!log_fusion()) return;
  for (const Step& s : plan.steps) {
    if (s.kernel < 0) {
      const std::string attrs = describe(s.node->attrs.params);
      std::cerr << "[ember fusion] alone: " << s.node->where() << (attrs.empty() ? "" : " {" + attrs + "}") << "\n";
      continue;
    }
    const FusedKernel& k = plan.kernels[size_t(s.kernel)];
    std::cerr << "[ember fusion] kernel of " << k.members.size() << " ops, " << k.outputs.size()
              << " output(s), root " << k.root->where() << ":";
    for (auto it = k.members.rbegin(); it != k.members.rend(); ++it) std::cerr << " " << op_name((*it)->op);
    std::cerr << "\n";
  }
  for (const std::string& b : plan.boundaries) std::cerr << "[ember fusion] boundary at " << b << "\n";
}

// Planning is serialized (graph building stays concurrent); execution happens on the queues.
std::recursive_mutex& plan_mutex() {
  static std::recursive_mutex m;
  return m;
}

// Completion of any step: host readers wait on this.
struct Completion {
  std::mutex m;
  std::condition_variable cv;
};
Completion& completion() {
  static auto* c = new Completion;  // never destroyed: workers may notify during exit
  return *c;
}

// Publishes the new state of several nodes at once (a reader woken by one of a kernel's outputs
// sees all of them done).
void publish_all(std::span<Node* const> nodes, Node::State s) {
  {
    std::lock_guard lock(completion().m);
    for (Node* n : nodes) n->state.store(s, std::memory_order_release);
  }
  completion().cv.notify_all();
}
void publish(Node* n, Node::State s) { publish_all(std::span<Node* const>(&n, 1), s); }

void fail(Node* n, std::shared_ptr<const std::string> error) {
  n->error = std::move(error);
  n->view = View{};
  n->inputs.clear();
  publish(n, Node::State::Failed);
}

// The first failed input of a step, if any (its error propagates to the step's outputs): a
// failed node, or a node whose buffer depends on a kernel check that failed (kernel_checks.h).
std::shared_ptr<const std::string> failed_input(const std::vector<Node*>& nodes) {
  for (Node* n : nodes)
    for (const NodePtr& in : n->inputs) {
      const Node::State s = in->current();  // (the common case without a call: failure_of below)
      if (s == Node::State::Failed) return in->error;
      if (s == Node::State::Ready && in->view.buffer && in->view.buffer->has_checks.load(std::memory_order_acquire))
        if (auto error = failure_of(*in)) return error;
    }
  return nullptr;
}

// Deferred kernel checks (runtime/kernel_checks.h): a checked launch of an unfused step is
// attributed to its node; one of a fused kernel to the one member that can fail while it runs
// (an integer division, remainder or power), or to the kernel's root when that is not one op.
void attribute_node(const void* step, KernelCheck& c) { c.where = static_cast<const Node*>(step)->where(); }
void attribute_kernel(const void* step, KernelCheck& c) {
  const FusedKernel& k = *static_cast<const FusedKernel*>(step);
  const Node* failing = nullptr;
  int candidates = 0;
  for (const Node* m : k.members)
    if (is_integral(m->dtype) && (m->op == Op::FloorDiv || m->op == Op::Rem || m->op == Op::Fmod || m->op == Op::Pow)) {
      failing = m;
      ++candidates;
    }
  if (candidates == 1) {
    c.where = failing->where();
    c.op = op_name(failing->op);
  } else {
    c.where = k.root->where();
  }
}

// Passes the deferred checks of a step's inputs, and those its own launches made, on to its
// outputs' buffers. Where there are none (always, on a synchronous device) this is one atomic
// test per input.
void carry_step_checks(std::span<Node* const> members, std::span<Node* const> outputs, CheckSetPtr carried) {
  for (const Node* m : members)
    for (const NodePtr& in : m->inputs)
      if (in->current() == Node::State::Ready && in->view.buffer &&
          in->view.buffer->has_checks.load(std::memory_order_acquire))
        carried = merge_checks(carried, checks_of(*in->view.buffer));
  if (!carried) return;
  for (Node* o : outputs) {
    if (o->view.buffer) carry_checks(*o->view.buffer, carried);
    for (const Node::ExtraOutput& e : o->extra_outputs)
      if (e.view.buffer) carry_checks(*e.view.buffer, carried);
  }
}

// A fused kernel failed: run its ops one at a time to find the one that fails, so the error
// names that op and its line (not just the kernel). Only on the error path.
std::string pinpoint(FusedKernel& k, const std::string& kernel_error) {
  for (auto it = k.members.rbegin(); it != k.members.rend(); ++it) {  // producers first
    try {
      execute_node(**it);
    } catch (const Error& e) {
      return fmt::format("{}: {}", (*it)->where(), e.what());
    }
  }
  return kernel_error;
}

// A cat whose inputs are computed by this plan gets its buffer before they run, and each such
// input (seen through reshapes, which are views) is computed straight into its slab, so the cat
// copies nothing for it (the optimizer concatenates every gradient into one flat array each step).
// Only where a slab is contiguous: the dims before the cat dim all have size 1.
void place_cat_inputs(Plan& plan) {
  // Runs on every realization: nothing to do (and no set to build) for plans without a cat.
  if (std::none_of(plan.steps.begin(), plan.steps.end(),
                   [](const Step& s) { return s.kernel < 0 && s.node->op == Op::Cat; }))
    return;
  thread_local NodeTable<char> in_plan;
  in_plan.clear();
  for (const Step& s : plan.steps) {
    if (s.kernel < 0) in_plan.insert(s.node);
    else
      for (Node* o : plan.kernels[size_t(s.kernel)].outputs) in_plan.insert(o);
  }
  for (const Step& s : plan.steps) {
    Node* c = s.kernel < 0 ? s.node : nullptr;
    if (!c || c->op != Op::Cat || c->placement || c->shape.numel() == 0) continue;
    const int dim = int(c->attrs.get<AxisAttrs>().dim);
    bool slabs = true;
    for (int d = 0; d < dim; ++d) slabs = slabs && c->shape[d] == 1;
    if (!slabs) continue;
    c->placement = alloc_contiguous(*c);
    const int64_t slab_stride = c->placement->strides[size_t(dim)];
    int64_t start = 0;
    for (const NodePtr& in : c->inputs) {
      // Down through views run by this plan (reshapes, permutes) to the node that computes the
      // values; placeable when those views, applied to a contiguous result, give a contiguous
      // view again (e.g. a transposed gradient transposed back), checked by replaying them.
      std::vector<Node*> chain = {in.get()};
      while ((chain.back()->op == Op::Reshape || chain.back()->op == Op::Permute) && chain.back()->inputs.size() == 1 &&
             in_plan.find(chain.back()) && chain.back()->current() == Node::State::Queued)
        chain.push_back(chain.back()->inputs[0].get());
      Node* p = chain.back();
      if (p->current() != Node::State::Queued || !in_plan.find(p) || p->placement || p->dtype != c->dtype ||
          p->device != c->device || p->op == Op::Reshape || p->op == Op::Permute) {
        start += in->shape[dim];
        continue;
      }
      View v;
      v.strides = p->shape.contiguous_strides();
      bool contiguous = true;
      for (size_t i = chain.size() - 1; i-- > 0 && contiguous;) {
        const Node& m = *chain[i];
        if (m.op == Op::Permute) {
          const std::vector<int64_t>& order = m.attrs.get<PermuteAttrs>().order;
          std::vector<int64_t> st(order.size());
          for (size_t j = 0; j < st.size(); ++j) st[j] = v.strides[size_t(order[j])];
          v.strides = std::move(st);
        } else {  // a reshape is a view with contiguous strides only of a contiguous input
          contiguous = is_contiguous(v, chain[i + 1]->shape);
          v.strides = m.shape.contiguous_strides();
        }
      }
      if (contiguous && is_contiguous(v, in->shape)) {
        View slab = *c->placement;
        slab.offset += start * slab_stride;
        slab.strides = p->shape.contiguous_strides();
        p->placement = std::move(slab);
      }
      start += in->shape[dim];
    }
  }
}

// A plan with the nodes it must keep alive until it has run.
struct WorkItem {
  Plan plan;
  std::vector<NodePtr> keep_alive;
  bool check_anomaly = false;  // every node alone, its output checked (planned so)
  WorkRecorder* recorder = nullptr;  // the planning thread's, which records this work
  // Instead of a plan: a task that computes `task_outputs` (run_on_queue).
  std::function<void()> task;
  std::vector<NodePtr> task_outputs;
  std::string task_name;
};

void execute_task(WorkItem& item) {
  try {
    item.task();
  } catch (const Error& e) {
    auto err = std::make_shared<const std::string>(fmt::format("{}: {}", item.task_name, e.what()));
    for (const NodePtr& o : item.task_outputs) fail(o.get(), err);
    return;
  }
  std::vector<Node*> outs;
  for (const NodePtr& o : item.task_outputs) outs.push_back(o.get());
  publish_all(outs, Node::State::Ready);
}

void execute(WorkItem& item) {
  if (item.task) return execute_task(item);
  WorkRecorderScope recording(item.recorder);
  Plan& plan = item.plan;
  place_cat_inputs(plan);
  for (const Step& step : plan.steps) {
    if (item.recorder)
      item.recorder->begin_step(step.kernel < 0 ? step.node->where() : plan.kernels[size_t(step.kernel)].root->where());
    if (step.kernel < 0) {
      Node* n = step.node;
      if (!n->is_pending() && n->current() != Node::State::Queued) continue;
      if (auto err = failed_input({n})) {
        fail(n, err);
        continue;
      }
      try {
        trace::Span span([n](KernelRecord& r) {
          r.name = op_name(n->op);
          r.ops = op_name(n->op);
          r.where = n->where();
          r.device = n->device.str();
        });
        // Anomaly mode checks each output as it is made: its kernels' checks are waited for.
        std::optional<CheckScope> checks;
        if (!item.check_anomaly) checks.emplace(n, attribute_node);
        execute_node(*n);
        carry_step_checks(std::span<Node* const>(&n, 1), std::span<Node* const>(&n, 1),
                          checks ? checks->made() : nullptr);
      } catch (const Error& e) {
        fail(n, std::make_shared<const std::string>(fmt::format("{}: {}", n->where(), e.what())));
        continue;
      }
      if (item.check_anomaly) {
        std::shared_ptr<const std::string> anomaly;
        try {
          anomaly = check_anomaly(*n);
        } catch (const Error& e) {  // its output depends on a kernel check that failed
          anomaly = std::make_shared<const std::string>(e.what());
        }
        if (anomaly) {  // its consumers fail with the same error
          fail(n, std::move(anomaly));
          continue;
        }
      }
      n->inputs.clear();
      publish(n, Node::State::Ready);
      continue;
    }
    FusedKernel& k = plan.kernels[size_t(step.kernel)];
    if (auto err = failed_input(k.members)) {
      for (Node* o : k.outputs) fail(o, err);
      continue;
    }
    try {
      trace::Span span([&k](KernelRecord& r) {
        r.name = k.members.size() == 1 ? op_name(k.root->op) : "fused kernel";
        for (auto it = k.members.rbegin(); it != k.members.rend(); ++it) {
          if (!r.ops.empty()) r.ops.push_back(' ');
          r.ops.append(op_name((*it)->op));
        }
        r.where = k.root->where();
        r.device = k.root->device.str();
      });
      CheckScope checks(&k, attribute_kernel);
      run_fused(k);
      carry_step_checks(k.members, k.outputs, checks.made());
    } catch (const Error& e) {
      auto err = std::make_shared<const std::string>(pinpoint(k, fmt::format("{}: {}", k.root->where(), e.what())));
      for (Node* o : k.outputs) fail(o, err);
      continue;
    }
    publish_all(k.outputs, Node::State::Ready);
    // Inputs are dropped only after every output is published: dropping the root's inputs can
    // free members that other outputs still point to.
    for (Node* o : k.outputs) o->inputs.clear();
  }
}

// One in-order queue per device, with a worker thread that runs its work items. At process exit
// the queues finish their work and their threads are joined (see queue_for).
class DeviceQueue {
 public:
  explicit DeviceQueue(bool worker_pays) : worker_pays_(worker_pays), worker_([this] { loop(); }) {}

  // Whether handing work to the worker pays on this device (see worker_pays below): where it does
  // not, AsyncMode::automatic runs work on the calling thread whenever the queue is idle.
  bool worker_pays() const { return worker_pays_; }

  void shutdown() {  // idempotent
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    work_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  void push(WorkItem item) {
    std::unique_lock lock(m_);
    if (stop_) {  // during exit: run it here
      lock.unlock();
      execute(item);
      return;
    }
    // Throttle: a host that runs far ahead of the device waits (bounds memory in flight).
    space_.wait(lock, [&] { return items_.size() < kMaxInFlight; });
    items_.push_back(std::make_unique<WorkItem>(std::move(item)));
    work_.notify_one();
  }

  // A host about to block on this queue's result runs the work itself when the queue is idle:
  // no hand-off to the worker and back (two thread wake-ups) for a synchronous read. So does every
  // host, under AsyncMode::automatic, on a device where the worker does not pay. The queue
  // counts as busy meanwhile, so work pushed by other threads still runs after it, in order.
  // claim_if_idle() must be called under the plan lock (like push): a plan made later, maybe by
  // another thread, may read this plan's outputs, so it must not start first (a claim taken
  // after releasing the plan lock let it, found by ThreadSanitizer/ThreadStressTest).
  bool claim_if_idle() {
    std::lock_guard lock(m_);
    if (stop_ || !items_.empty() || busy_) return false;
    busy_ = true;
    return true;
  }
  void run_claimed(WorkItem& item) {
    struct Release {
      DeviceQueue* q;
      ~Release() {
        bool pending;
        {
          std::lock_guard lock(q->m_);
          q->busy_ = false;
          pending = !q->items_.empty() || q->stop_;  // (a stopping worker waits for busy_ to clear)
          if (q->items_.empty()) q->idle_.notify_all();
        }
        // The worker waits only for items: with none queued meanwhile, waking it would cost two
        // context switches for nothing.
        if (pending) q->work_.notify_one();
      }
    } release{this};
    execute(item);
  }

  // Blocks until everything pushed so far has run.
  void drain() {
    std::unique_lock lock(m_);
    idle_.wait(lock, [&] { return items_.empty() && !busy_; });
  }

 private:
  static constexpr size_t kMaxInFlight = 64;

  void loop() {
    for (;;) {
      std::unique_ptr<WorkItem> item;
      {
        std::unique_lock lock(m_);
        work_.wait(lock, [&] { return !busy_ && (!items_.empty() || stop_); });
        if (items_.empty()) return;  // stopping, and nothing left to run
        item = std::move(items_.front());
        items_.pop_front();
        busy_ = true;
        space_.notify_all();
      }
      execute(*item);
      item.reset();  // frees what only the plan still held
      {
        std::lock_guard lock(m_);
        busy_ = false;
        if (items_.empty()) idle_.notify_all();
      }
    }
  }

  const bool worker_pays_;
  std::mutex m_;
  std::condition_variable work_, space_, idle_;
  std::deque<std::unique_ptr<WorkItem>> items_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;
};

// Whether a queue worker pays for device d: yes for a device that computes elsewhere (an
// asynchronous plugin, or one that reports no host threads: a GPU), where the host plans and
// records the next work while the device runs. No for a host device whose calls compute on the
// host's own threads before they return (the cpu and reference plugins): the worker would only
// move the work to another core, away from the caches that hold its inputs, and make a producer
// that is still queued keep its buffer from donation. Measured on 2 cores (2026-12-06, same
// binary, `EMBER_ASYNC=1` against the calling thread): Fashion-MNIST epochs (`ember train`) MLP
// 2.04 against 1.52 s at 2 threads and 2.12-2.46 against 1.91-2.04 s at 1 thread, CNN (12,000
// images) 14.4-15.1 against 12.4-12.7 s at 2 and 21.4-23.2 against 19.7-20.0 s at 1; suite model
// rows at 2 threads: ResNet training step 61 against 46 ms, GRU language model 53 against 43 ms,
// GPT training step 66-84 against 57-61 ms, none slower (at 1 thread all within noise). A short
// spin before the worker and a waiting host sleep (50 us) made the 1-thread epoch slower still.
bool worker_pays(Device d) {
  const ember_device_properties& p = backend_for(d).properties(d.index);
  return p.async || p.host_threads == 0;
}

struct Queues {
  std::mutex m;
  std::map<std::pair<int, int>, std::unique_ptr<DeviceQueue>> by_device;
};
Queues& queues() {
  static auto* q = new Queues;  // never destroyed: detached workers outlive static destruction
  return *q;
}

void shutdown_queues() {
  Queues& qs = queues();
  std::lock_guard lock(qs.m);
  for (auto& [key, q] : qs.by_device) q->shutdown();
}

// Blocks until every queue has run what was pushed so far (the queues are never destroyed, so
// the list is copied and the lock released before waiting: a worker may need it meanwhile).
void drain_all_queues() {
  std::vector<DeviceQueue*> all;
  {
    Queues& qs = queues();
    std::lock_guard lock(qs.m);
    for (auto& [key, q] : qs.by_device) all.push_back(q.get());
  }
  for (DeviceQueue* q : all) q->drain();
}

// At exit the queues must finish their work before the static objects it uses (in plugins and
// the libraries they call, such as oneDNN's primitive cache, created lazily while the first work
// runs) are destroyed: a program that returned from main with a matmul still queued crashed in
// oneDNN. glibc's exit() runs the exiting thread's thread_local destructors before any exit
// handler or static destructor, so every thread that queues work owns a guard whose destructor
// drains every queue (at the end of any other thread it waits likewise: what that thread
// queued finishes before it ends). The exit handler stays as a second line (exit() called
// by a thread that never queued work): it is registered again at the 1st, 2nd, 4th, 8th, ...
// push, since handlers run in reverse order of registration and only one registered after those
// objects exist runs before their destructors.
struct DrainAtThreadExit {
  ~DrainAtThreadExit() { drain_all_queues(); }
};
void register_exit_drain() {
  thread_local DrainAtThreadExit guard;
  (void)guard;
  static std::atomic<uint64_t> pushes{0};
  uint64_t n = pushes.fetch_add(1, std::memory_order_relaxed) + 1;
  if ((n & (n - 1)) == 0) std::atexit(shutdown_queues);
}

DeviceQueue& queue_for(Device d) {
  Queues& qs = queues();
  std::lock_guard lock(qs.m);
  auto& q = qs.by_device[{int(d.kind), d.index}];
  if (!q) q = std::make_unique<DeviceQueue>(worker_pays(d));
  return *q;
}


}  // namespace

namespace {

// Plans the pending nodes `roots` depend on and queues (or, with `will_wait` and an idle queue,
// runs) the work.
void realize_impl(const std::vector<NodePtr>& roots, bool will_wait) {
  std::unique_lock lock(plan_mutex());
  // Scratch kept by the thread (this runs for every realization). `order` is read until the work
  // item is made, before anything below could realize again on this thread.
  struct Frame {
    Node* node;
    size_t next_input;
  };
  thread_local std::vector<Node*> order;
  thread_local std::vector<NodePtr> keep;
  thread_local std::vector<Frame> stack;
  thread_local NodeTable<char> seen;
  order.clear();
  keep.clear();
  stack.clear();
  seen.clear();
  for (const auto& root : roots) {
    if (!root || !root->is_pending() || !seen.insert(root.get()).second) continue;
    stack.push_back({root.get(), 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next_input < f.node->inputs.size()) {
        const NodePtr& in = f.node->inputs[f.next_input++];
        if (in->is_pending() && !folds_into_consumer(*f.node, *in) && seen.insert(in.get()).second) {
          keep.push_back(in);
          stack.push_back({in.get(), 0});
        }
        continue;
      }
      order.push_back(f.node);
      stack.pop_back();
    }
  }
  if (order.empty()) return;
  WorkRecorder* recorder = active_work_recorder();
  if (recorder) {
    // Pending nodes made before the recording began are values the recorded function reads, not
    // work it does: they are realized first, unrecorded, then this realization is planned again.
    std::vector<NodePtr> before;
    for (const NodePtr& r : roots)
      if (r && r->is_pending() && !r->made_while_recording) before.push_back(r);
    for (const NodePtr& n : keep)
      if (!n->made_while_recording) before.push_back(n);
    if (!before.empty()) {
      keep.clear();
      {
        WorkRecorderScope unrecorded(nullptr);
        realize_impl(before, false);
      }
      return realize_impl(roots, will_wait);
    }
  }
  std::vector<Node*> root_nodes;
  for (const auto& r : roots)
    if (r) root_nodes.push_back(r.get());
  // Planning reads reference counts: it runs before this function takes references of its own.
  keep.clear();
  // Read once: the plan and its execution agree even if another thread flips the switch.
  const bool check_anomaly = detect_anomaly_enabled();
  if (!check_anomaly) fold_epilogues(order, root_nodes);  // matmul/conv + elementwise chains -> one library call
  int64_t plan_start = trace::enabled() ? trace::now_ns() : 0;
  Plan plan = plan_fusion(order, root_nodes, !check_anomaly);
  // (Not while recording: a replay keeps a buffer per value, and a donor may be a constant.)
  if (!check_anomaly && !recorder) choose_donors(plan);  // reads reference counts too (a donor's values would be overwritten)
  if (trace::enabled())
    trace::record(plan_start, trace::now_ns(), [&](KernelRecord& r) {
      r.name = "plan";
      r.ops = fmt::format("{} nodes, {} steps", order.size(), plan.steps.size());
      r.where = root_nodes.front()->where();
      r.device = "host";
    });
  log_plan(plan);
  stats().realizations.fetch_add(1, std::memory_order_relaxed);
  WorkItem item;
  item.check_anomaly = check_anomaly;
  item.recorder = recorder;
  size_t held = roots.size();
  for (Node* n : order) held += n->inputs.size();
  item.keep_alive.reserve(held);
  for (const auto& r : roots)
    if (r) item.keep_alive.push_back(r);
  for (Node* n : order)
    for (const NodePtr& in : n->inputs) item.keep_alive.push_back(in);
  for (Node* n : order) n->state.store(Node::State::Queued, std::memory_order_release);
  item.plan = std::move(plan);
  Device device = order.front()->device;
  bool one_device = true;
  for (Node* n : order) one_device &= n->device == device;
  const AsyncMode mode = runtime_policy().async;
  if (mode == AsyncMode::never || !one_device) {
    execute(item);
    return;
  }
  register_exit_drain();
  DeviceQueue& queue = queue_for(device);
  // Claiming or pushing happens under the plan lock, so the queue's order is the planning order.
  // Anomaly detection waits for the work too: an eval() must find the anomaly it computed.
  const bool run_here = will_wait || check_anomaly || (mode == AsyncMode::automatic && !queue.worker_pays());
  if (run_here && queue.claim_if_idle()) {
    lock.unlock();  // other threads may plan (and queue behind this work) while this one executes
    queue.run_claimed(item);
    return;
  }
  queue.push(std::move(item));
  if (check_anomaly) {
    lock.unlock();
    queue.drain();
  }
}

}  // namespace

void realize(const std::vector<NodePtr>& roots) { realize_impl(roots, false); }

std::shared_ptr<const std::string> failure_of(const Node& n) {
  const Node::State s = n.current();
  if (s == Node::State::Failed) return n.error;
  if (s == Node::State::Ready && n.view.buffer && n.view.buffer->has_checks.load(std::memory_order_acquire))
    if (const KernelCheck* failed = failed_check(checks_of(*n.view.buffer)))
      return std::make_shared<const std::string>(failed->error);
  return nullptr;
}

void run_on_queue(Device device, std::function<void()> task, std::vector<NodePtr> outputs,
                  std::vector<NodePtr> keep_alive, const std::string& what) {
  WorkItem item;
  item.task = std::move(task);
  item.task_outputs = std::move(outputs);
  item.keep_alive = std::move(keep_alive);
  item.task_name = what;
  std::unique_lock lock(plan_mutex());
  for (const NodePtr& o : item.task_outputs) o->state.store(Node::State::Queued, std::memory_order_release);
  if (runtime_policy().async == AsyncMode::never) {
    execute(item);
    return;
  }
  register_exit_drain();
  DeviceQueue& queue = queue_for(device);
  // An idle queue: the caller runs the task itself (no hand-off to the worker and back).
  if (queue.claim_if_idle()) {
    lock.unlock();
    queue.run_claimed(item);
    return;
  }
  queue.push(std::move(item));
}

void realize_frontier(std::vector<NodePtr> nodes) {
  // Under the plan lock a pending node stays pending, so its inputs cannot be dropped while read.
  std::lock_guard lock(plan_mutex());
  std::unordered_set<const Node*> consumed;
  consumed.reserve(nodes.size());
  for (const NodePtr& n : nodes)
    if (n->is_pending())
      for (const NodePtr& in : n->inputs) consumed.insert(in.get());
  std::vector<NodePtr> roots;
  for (NodePtr& n : nodes)
    if (n->is_pending() && !consumed.count(n.get())) roots.push_back(std::move(n));
  // Planning reads reference counts (is a node held outside the graph?): only roots stay held.
  nodes.clear();
  realize_impl(roots, false);
}

void realize_and_wait(const std::vector<NodePtr>& roots) {
  realize_impl(roots, true);
  for (const NodePtr& r : roots) {
    if (!r) continue;
    Completion& c = completion();
    std::unique_lock lock(c.m);
    c.cv.wait(lock, [&] { return r->current() == Node::State::Ready || r->current() == Node::State::Failed; });
    if (r->current() == Node::State::Failed) {
      lock.unlock();
      throw_unreported_anomaly();  // the first anomaly comes first (it may be why this root failed)
      throw Error(*r->error);
    }
  }
  throw_unreported_anomaly();
  // On an asynchronous device the error of a kernel that fails while it runs is known only once
  // the device has run it (runtime/kernel_checks.h): where a root depends on such a kernel, wait
  // for the device, and throw the error if it failed, as on a synchronous device.
  for (const NodePtr& r : roots) {
    if (!r || !r->view.buffer) continue;
    const DeviceBuffer& b = *r->view.buffer;
    if (any_pending(checks_of(b))) b.backend->synchronize(b.device.index);
    if (const KernelCheck* failed = failed_check(checks_of(b))) throw Error(failed->error);
  }
}

// The host-side queue first (plans not yet handed to the device), then the device's own queue
// (work the plugin may still be running). A kernel's deferred error goes to the reads of what
// depends on it (runtime/kernel_checks.h); one the core cannot attribute surfaces here.
void synchronize(Device device) {
  queue_for(device).drain();
  if (Backend* b = Backend::try_get(device.kind); b && device.index >= 0 && device.index < b->device_count())
    b->synchronize(device.index);
}

void synchronize() {
  std::vector<std::pair<Device, DeviceQueue*>> all;
  {
    Queues& qs = queues();
    std::lock_guard lock(qs.m);
    for (auto& [key, q] : qs.by_device) all.emplace_back(Device{DeviceKind(key.first), key.second}, q.get());
  }
  for (auto& [device, q] : all) q->drain();
  for (auto& [device, q] : all)
    if (Backend* b = Backend::try_get(device.kind)) b->synchronize(device.index);
}

// Memory statistics and cache control wait for the device first: a buffer a queued kernel still
// uses is not free yet.
MemoryStats memory_stats(Device device) {
  Backend& b = Backend::get(device.kind);
  synchronize(device);
  return b.stats(device.index);
}

void empty_cache(Device device) {
  Backend& b = Backend::get(device.kind);
  synchronize(device);
  b.empty_cache(device.index);
}

void reset_peak_memory(Device device) {
  Backend& b = Backend::get(device.kind);
  synchronize(device);
  b.reset_peak(device.index);
}

}  // namespace ember
