// ember::version() and the plugin ABI version, as compiled into the library.
#include "backend/abi.h"
#include "ember/version.h"

namespace ember {
const char* version() { return EMBER_VERSION_STRING; }
unsigned backend_abi_version() { return EMBER_BACKEND_ABI_VERSION; }
}  // namespace ember
