// Library-backed ops: convolution, pooling, sorting and scans (declared here, included by
// ember/ops.h). Each runs as one backend library call (oneDNN on the CPU where it applies).
#pragma once

#include "ember/array.h"

namespace ember {}  // namespace ember
