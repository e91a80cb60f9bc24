// capture_module (ember/capture.h): a captured function that binds a module's current parameters
// and buffers as inputs at every call, and runs eagerly while the module is training.
#include "ember/capture.h"
#include "ember/nn/module.h"

namespace ember {

CapturedFunction capture_module(nn::Module& module, CapturedFunction::Fn fn, CaptureOptions options) {
  nn::Module* m = &module;
  auto user_eager = std::move(options.run_eagerly);
  // Training has effects besides the outputs (batch norm statistics) and draws random numbers.
  options.run_eagerly = [m, user_eager] { return m->is_training() || (user_eager && user_eager()); };
  auto user_implicit = std::move(options.implicit_inputs);
  options.implicit_inputs = [m, user_implicit] {
    std::vector<Array> all = user_implicit ? user_implicit() : std::vector<Array>{};
    m->walk([&](const std::string&, nn::ParamRef& p) { all.push_back(p.array()); });
    return all;
  };
  return CapturedFunction(std::move(fn), std::move(options));
}

}  // namespace ember
