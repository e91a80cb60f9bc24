// dist::shard_order (ember/dist/sampler.h): one rank's positions of an epoch's order.
#include "ember/dist/sampler.h"

namespace ember::dist {

std::vector<size_t> shard_order(size_t n, const ShardOptions& opts, uint64_t epoch) {
  if (opts.size < 1 || opts.rank < 0 || opts.rank >= opts.size)
    throw Error("dist::shard: rank " + std::to_string(opts.rank) + " is not in [0, " + std::to_string(opts.size) + ")");
  std::vector<size_t> order = data::epoch_order(n, opts.shuffle, opts.seed, epoch);
  const size_t size = size_t(opts.size);
  size_t total = opts.drop_last ? n / size * size : opts.pad ? (n + size - 1) / size * size : n;
  std::vector<size_t> mine;
  if (n == 0) return mine;
  mine.reserve(total / size);
  for (size_t pos = size_t(opts.rank); pos < total; pos += size) mine.push_back(order[pos % n]);
  return mine;
}

}  // namespace ember::dist
