// A training run for tests/train/checkpoint_test.cpp KillAtEveryCheckpointStep...: the fixed
// checkpointed setup of fixtures.h in a run folder, as its own process so that the test-only hook
// EMBER_TEST_CHECKPOINT_KILL_AFTER=N can end it after the N-th checkpoint file operation.
// Usage: ember_checkpoint_kill_helper DIR EPOCHS fresh|resume   (exit 0, or 1 with a message)
#include <iostream>
#include <sstream>

#include "train/fixtures.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: ember_checkpoint_kill_helper DIR EPOCHS fresh|resume\n";
    return 2;
  }
  try {
    std::ostringstream out;
    ember::fixtures::run_checkpointed({.dir = argv[1], .epochs = std::stoll(argv[2]), .resume = std::string(argv[3]) == "resume"},
                                     out);
  } catch (const std::exception& e) {
    std::cerr << "ember_checkpoint_kill_helper: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
