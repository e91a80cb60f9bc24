// Activation modules: configs (include/ember/nn/activation.h).
#include "ember/nn/activation.h"

#include "nn/json_util.h"

namespace ember::nn {

std::string LeakyReLU::config() const { return json{{"negative_slope", options.negative_slope}}.dump(); }
std::string ELU::config() const { return json{{"alpha", options.alpha}}.dump(); }
std::string GELU::config() const { return json{{"tanh_approximation", options.tanh_approximation}}.dump(); }
std::string Softplus::config() const { return json{{"beta", options.beta}, {"threshold", options.threshold}}.dump(); }
std::string Softmax::config() const { return json{{"dim", options.dim}}.dump(); }
std::string LogSoftmax::config() const { return json{{"dim", options.dim}}.dump(); }

}  // namespace ember::nn
