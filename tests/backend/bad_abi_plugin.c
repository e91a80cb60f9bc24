/* A backend plugin that claims a future ABI version: the loader must refuse it with a clear
 * message instead of calling into a table whose layout it does not know. */
#include "backend/abi.h"

static ember_backend_v1 table = {999u, sizeof(ember_backend_v1), "badabi"};

__attribute__((visibility("default"))) const ember_backend_v1* ember_backend_entry(uint32_t abi) {
  (void)abi;
  return &table;
}
