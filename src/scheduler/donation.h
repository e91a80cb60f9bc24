// Buffer donation: a fused kernel may write an output into the buffer of an input that dies with
// it (nothing else references the input). choose_donors marks the candidates when a plan is
// made; run_fused (lower_fused.cpp) takes one when the buffers exist and the kernel reads it only
// at the points it writes, before writing them.
#pragma once

#include "scheduler/fusion.h"

namespace ember {

// Sets FusedKernel::donors for every kernel of `plan` (none with EMBER_DONATION=0). Reads reference counts: call it before
// taking references to the plan's nodes.
void choose_donors(Plan& plan);

}  // namespace ember
