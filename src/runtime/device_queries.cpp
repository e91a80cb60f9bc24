// Which devices exist: the plugins that loaded and the devices each reports (include/ember/device.h).
#include "ember/device.h"

#include "core/device_kinds.h"
#include "runtime/registry.h"

namespace ember {

bool Device::available() const {
  Backend* b = Backend::try_get(kind);
  return b && index >= 0 && index < b->device_count();
}

std::vector<Device> available_devices() {
  std::vector<Device> out;
  for (DeviceKind k : device_kinds())
    if (Backend* b = Backend::try_get(k))
      for (int i = 0; i < b->device_count(); ++i) out.push_back(Device{k, i});
  return out;
}

}  // namespace ember
