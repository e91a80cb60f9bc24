// Synchronized batch normalization (ember/dist/sync_batch_norm.h): a differentiable all-reduce
// and the walk that gives it to a model's BatchNorm layers.
#include "ember/dist/sync_batch_norm.h"

#include <fmt/format.h>

#include "ember/autograd.h"
#include "ember/nn/norm.h"

namespace ember::dist {

namespace {

Array reduce_or_explain(Communicator& comm, const Array& x, const char* what) {
  try {
    return comm.all_reduce(x, ReduceOp::Sum).wait();
  } catch (const Error& e) {
    throw Error(fmt::format("dist::all_reduce_sum ({}, rank {} of {}): {}", what, comm.rank(), comm.size(), e.what()));
  }
}

}  // namespace

Array all_reduce_sum(Communicator& comm, const Array& x, Loc loc) {
  if (!x.defined()) throw Error("dist::all_reduce_sum: the array is undefined");
  Communicator* c = &comm;
  CustomFunction fn{
      .forward = [c](const std::vector<Array>& in) { return reduce_or_explain(*c, in[0], "forward"); },
      // d(sum_r x_r)/dx_q = 1, and every rank's loss depends on the sum: the gradient of x_q
      // is the sum of all ranks' output gradients.
      .backward = [c](const std::vector<Array>&, const Array& out, const Array& g) -> std::vector<Array> {
        return {reduce_or_explain(*c, g.defined() ? g : zeros_like(out), "backward")};
      },
      .name = "dist::all_reduce_sum",
  };
  return apply(fn, {x}, loc);
}

namespace {

// Calls fn on `model` and every submodule that is a BatchNorm (walk_modules skips the root).
template <class Fn>
int for_each_batch_norm(nn::Module& model, Fn fn) {
  int changed = 0;
  auto one = [&](nn::Module& m) {
    if (auto* bn = dynamic_cast<nn::BatchNorm*>(&m)) changed += fn(*bn) ? 1 : 0;
  };
  one(model);
  model.walk_modules([&](const std::string&, nn::Module& m) { one(m); });
  return changed;
}

}  // namespace

int synchronize_batch_norm(nn::Module& model, Communicator& comm) {
  Communicator* c = &comm;
  return for_each_batch_norm(model, [c](nn::BatchNorm& bn) {
    bn.group_sum = [c](const Array& x) { return all_reduce_sum(*c, x); };
    return true;
  });
}

int desynchronize_batch_norm(nn::Module& model) {
  return for_each_batch_norm(model, [](nn::BatchNorm& bn) {
    bool was = bool(bn.group_sum);
    bn.group_sum = nullptr;
    return was;
  });
}

}  // namespace ember::dist
