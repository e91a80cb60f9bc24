// Library-call epilogues (docs/backends.md, "Fusion"): a matmul or conv2d whose result is used only
// by a chain of elementwise ops that the backend library can apply as it stores the product
// (bias or residual add, scale, relu, tanh, sigmoid, gelu) becomes one library call
// (EMBER_LIB_MATMUL_EPILOGUE / EMBER_LIB_CONV2D_EPILOGUE, oneDNN post-ops on the CPU) instead of a
// call plus a kernel that reads the product back. Likewise a max-pooling gradient followed by a
// ReLU's gradient, where(gt(o, 0), dx, 0) with o the ReLU's output (the pooling's input in a
// conv -> relu -> pool network): EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE, which masks each plane of
// dx while it is in cache instead of a kernel reading dx and o back.
#pragma once

#include <vector>

#include "backend/abi.h"
#include "graph/node.h"

namespace ember {

// Rewrites such chains among the pending nodes `order` (topological order; `roots` the nodes asked
// for): the chain's last node becomes a MatmulEpilogue / Conv2dEpilogue / MaxPool2dBackwardEpilogue
// node in place (its inputs become the head's inputs and the added operands), and the absorbed
// nodes, needed nowhere else, leave `order`. A node referenced from anywhere but its one consumer (a user handle,
// saved for backward, a root) ends a chain. Runs before plan_fusion, so the partition cache sees
// the rewritten graph. Off with fusion, or with EMBER_FUSION_EPILOGUE=0.
void fold_epilogues(std::vector<Node*>& order, const std::vector<Node*>& roots);

bool epilogue_folding_enabled();
void set_epilogue_folding_enabled(bool on);

// A convolution's and a pooling's attributes as a library call takes them.
ember_conv_attrs conv_call_attrs(const Conv2dOptions& c);
ember_pool_attrs pool_call_attrs(const Pool2dOptions& p);
// The library attrs of an epilogue node (its EpilogueAttrs).
ember_epilogue_attrs epilogue_attrs(const Node& n);

// Lowering of an epilogue node: one library call (sets its view).
void run_epilogue(Node& n);

}  // namespace ember
