// Shared by the epilogue tests (CPU, reference and Vulkan): restores the fusion switch and the
// epilogue rewrite's switch (scheduler/epilogue.h) when a test that flips them ends.
#pragma once

#include "ember/ember.h"
#include "scheduler/epilogue.h"

namespace ember::testing {

struct EpilogueSwitchesGuard {
  bool fusion = fusion_enabled(), epilogue = epilogue_folding_enabled();
  ~EpilogueSwitchesGuard() {
    set_fusion_enabled(fusion);
    set_epilogue_folding_enabled(epilogue);
  }
};

}  // namespace ember::testing
