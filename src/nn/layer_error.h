// nn_error: the Error that nn code throws, located at the user's line when a layer runs (the
// composite ops' call_error, ops/call_error.h).
#pragma once

#include <string>

#include "ops/call_error.h"

namespace ember::nn {

inline Error nn_error(const std::string& message, Loc here = Loc::current()) { return call_error(message, here); }

}  // namespace ember::nn
