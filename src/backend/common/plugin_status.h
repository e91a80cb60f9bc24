// Status and property helpers every plugin shares (cpu, reference, vulkan): filling an
// ember_status with a printf-style message, and copying device properties into a caller's struct
// of possibly older (smaller) size. Plugins link no part of libember; they use only this and the
// C ABI.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "backend/abi.h"

namespace ember::plugin {

// Fills *st (if given) and returns code.
__attribute__((format(printf, 3, 4))) inline int32_t set_status(ember_status* st, int32_t code, const char* fmt,
                                                                 ...) {
  if (st) {
    st->code = code;
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(st->message, sizeof st->message, fmt, args);
    va_end(args);
  }
  return code;
}

// Fills the fields of `out` that the caller's struct has (its struct_size) from `full`.
inline int32_t copy_properties(const ember_device_properties& full, ember_device_properties* out, ember_status* st) {
  if (!out || out->struct_size < sizeof(uint32_t))
    return set_status(st, EMBER_ERR_INVALID, "device_properties: no struct_size");
  size_t n = out->struct_size < sizeof full ? out->struct_size : sizeof full;
  uint32_t caller_size = out->struct_size;
  std::memcpy(out, &full, n);
  out->struct_size = caller_size;
  return EMBER_OK;
}

}  // namespace ember::plugin
