// The plugin side of ember_host_services (host_services.h).
#include "backend/common/host_services.h"

#include <atomic>
#include <cstring>

namespace ember::plugin {

namespace {
std::atomic<const ember_host_services*> g_host{nullptr};

// The table's field if the core's struct has it (a core built before a field existed lacks it).
template <typename F>
F field(const ember_host_services* h, F ember_host_services::*member, size_t end_offset) {
  return h && h->struct_size >= end_offset ? h->*member : nullptr;
}
}  // namespace

void attach_host(const ember_host_services* host) { g_host.store(host, std::memory_order_release); }

std::optional<std::vector<uint8_t>> cache_load(const char* plugin, const std::string& key) {
  const ember_host_services* h = g_host.load(std::memory_order_acquire);
  auto load = field(h, &ember_host_services::cache_load, offsetof(ember_host_services, cache_store) + sizeof(void*));
  auto release = field(h, &ember_host_services::cache_free, offsetof(ember_host_services, cache_store) + sizeof(void*));
  void* data = nullptr;
  size_t bytes = 0;
  if (!load || !release || !load(plugin, key.data(), key.size(), &data, &bytes)) return std::nullopt;
  std::vector<uint8_t> out(bytes);
  if (bytes) std::memcpy(out.data(), data, bytes);
  release(data);
  return out;
}

bool cache_store(const char* plugin, const std::string& key, const void* data, size_t bytes) {
  const ember_host_services* h = g_host.load(std::memory_order_acquire);
  auto store = field(h, &ember_host_services::cache_store, offsetof(ember_host_services, cache_store) + sizeof(void*));
  return store && store(plugin, key.data(), key.size(), data, bytes) == 1;
}

}  // namespace ember::plugin
