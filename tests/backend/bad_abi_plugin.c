/* Plugins the loader must refuse with a clear message instead of calling into a table whose
 * layout it does not know. Built three times (tests/CMakeLists.txt):
 *   - EMBER_TEST_FUTURE_ABI: claims ABI version 999;
 *   - EMBER_TEST_V1_ABI: an ABI v1 plugin (serves only version 1, as v1 plugins did);
 *   - EMBER_TEST_SHORT_TABLE: a v2 table smaller than the fields v2 requires. */
#include <string.h>

#include "backend/abi.h"

#if defined(EMBER_TEST_V1_ABI)
/* The first fields of the v1 table: abi_version, struct_size, name. */
typedef struct { uint32_t abi_version, struct_size; const char* name; } v1_head;
static v1_head table = {1u, 128u, "v1plugin"};
__attribute__((visibility("default"))) const void* ember_backend_entry(uint32_t abi) {
  return abi == 1u ? &table : NULL;
}
#else
#if defined(EMBER_TEST_SHORT_TABLE)
static ember_backend_v2 table = {EMBER_BACKEND_ABI_VERSION, 24u, "short"};
#else
static ember_backend_v2 table = {999u, sizeof(ember_backend_v2), "badabi"};
#endif
__attribute__((visibility("default"))) const ember_backend_v2* ember_backend_entry(uint32_t abi) {
  (void)abi;
  return &table;
}
#endif
