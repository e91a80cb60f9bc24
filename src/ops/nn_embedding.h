// The lookup behind embedding() (src/ops/nn_embedding.cpp), for the Embedding layer: errors are
// named by the caller's UserCall ("Embedding: indices must be integers ...").
#pragma once

#include <cstdint>
#include <optional>

#include "ember/array.h"

namespace ember {

Array embedding_lookup(const UserCall& call, const Array& indices, const Array& weight,
                       std::optional<int64_t> padding_idx);

}  // namespace ember
