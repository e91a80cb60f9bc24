// call_error: the Error that composite ops (ops/nn_*.cpp) and nn layers throw, located at the
// user's line when they run inside a UserCall (ember/error.h).
#pragma once

#include <string>

#include "ember/error.h"

namespace ember {

// Inside a layer or functional the user called (an open ember::UserCall), the message gets the
// user's line and, unless it already starts with it, the layer's name: "Linear: expected input
// [..., 9216], got [2, 10816] (at mnist.cpp:42)". Elsewhere (constructors, options parsing) the
// message alone: a line inside Ember would not help the user.
inline Error call_error(const std::string& message, Loc here = Loc::current()) {
  return attributed_layer(here) ? Error(with_location(message, here)) : Error(message);
}

}  // namespace ember
