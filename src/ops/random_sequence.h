// The global random sequence behind every random op called without an explicit seed: draw d
// after manual_seed(s) uses the Philox key splitmix64(s + d). Captured functions (graph/
// capture.cpp) use it to replay random ops: a recording notes which draw each random kernel's
// key was, and a replay reserves as many draws as the recorded call made and uses the keys at
// the same positions, so a replay gives what the eager function would have given.
#pragma once

#include <cstdint>

namespace ember {

struct RandomSequencePosition {
  uint64_t seed = 0;        // the last manual_seed
  uint64_t draws = 0;       // draws taken since
  uint64_t restarts = 0;    // manual_seed calls so far (a restart with the same seed counts)
};

// Where the sequence is now.
RandomSequencePosition random_sequence_position();
// The key of draw `draw` after manual_seed(seed).
uint64_t random_sequence_key(uint64_t seed, uint64_t draw);
// Takes `n` consecutive draws (as n random ops would) and returns the position of the first.
RandomSequencePosition take_random_draws(uint64_t n);

}  // namespace ember
