// Realization: running the pending nodes a result depends on (src/scheduler/realize.cpp plans
// them with the scheduler and enqueues the plans on the devices' queues), and waiting for them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/node.h"

namespace ember {

// Schedules the nodes (and the pending nodes they depend on) on their devices' queues and
// returns; with asynchronous execution off, runs them first. Thread-safe.
void realize(const std::vector<NodePtr>& roots);
// Realizes the nodes among `nodes` that are still pending, taking as roots those that no other
// of them consumes, so chains stay fused: interior nodes are computed inside the roots' kernels
// (and stored only where something outside the graph holds them). The automatic evaluation.
void realize_frontier(std::vector<NodePtr> nodes);
// Runs `task` on `device`'s queue, in order with the plans queued before it (here, at once,
// when the queue is idle: a replayed recording, ops/capture.cpp). `outputs` are Queued nodes
// whose views the task sets: they are published Ready when it returns, or Failed with its error
// (prefixed by `what`). `keep_alive` lives until the task has run.
void run_on_queue(Device device, std::function<void()> task, std::vector<NodePtr> outputs,
                  std::vector<NodePtr> keep_alive, const std::string& what);
// realize(), then waits until every root is computed; throws the error of a root that failed,
// naming the op and the user's line.
void realize_and_wait(const std::vector<NodePtr>& roots);
// The error of a node that failed, or of a computed node whose value depends on a kernel that
// failed on an asynchronous device (runtime/kernel_checks.h: known once the device ran it); null
// otherwise.
std::shared_ptr<const std::string> failure_of(const Node& n);

}  // namespace ember
