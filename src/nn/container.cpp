// Containers (include/ember/nn/container.h).
#include "ember/nn/container.h"

#include "nn/json_util.h"

namespace ember::nn {

std::string Sequential::config() const {
  json layers = json::array();
  for (const auto& item : items_)
    layers.push_back({{"type", item.module->type_name()}, {"config", json::parse(item.module->config())}});
  return json{{"layers", layers}}.dump();
}

}  // namespace ember::nn
