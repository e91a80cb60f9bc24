// The split of KIR launches whose argument windows exceed a device's largest binding
// (src/backend/vulkan/launch_pieces.h), without a device: every point of the launch is run by
// exactly one piece and reaches the same elements there as in the whole launch, every piece's
// windows fit, reductions are never split, IOTA counters and LOAD_UNIFORM scalars stay what they
// were, and what cannot be split is refused with the sizes.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "backend/vulkan/launch_pieces.h"

namespace ember::vk {
namespace {

struct Arg {
  int64_t offset;
  std::vector<int64_t> strides;
  ArgLayout layout;
};

ember_kir_launch make_launch(const std::vector<int64_t>& shape, int outer_rank, const std::vector<Arg>& args,
                             std::vector<ember_kir_arg>& storage) {
  ember_kir_launch l{};
  l.outer_rank = outer_rank;
  l.reduce_rank = int32_t(shape.size()) - outer_rank;
  for (size_t d = 0; d < shape.size(); ++d) l.shape[d] = shape[d];
  storage.assign(args.size(), ember_kir_arg{});
  for (size_t a = 0; a < args.size(); ++a) {
    storage[a].offset = args[a].offset;
    for (size_t d = 0; d < args[a].strides.size(); ++d) storage[a].strides[d] = args[a].strides[d];
  }
  l.n_args = int32_t(args.size());
  l.args = storage.data();
  return l;
}

// For each point of `l` (row-major over all its dims), the element each argument reaches.
std::vector<std::vector<int64_t>> elements(const ember_kir_launch& l) {
  const int rank = l.outer_rank + l.reduce_rank;
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= l.shape[d];
  std::vector<std::vector<int64_t>> out;
  for (int64_t p = 0; p < n; ++p) {
    std::vector<int64_t> e(size_t(l.n_args));
    for (int32_t a = 0; a < l.n_args; ++a) {
      int64_t rest = p, at = l.args[a].offset;
      for (int d = rank - 1; d >= 0; --d) {
        at += (rest % l.shape[d]) * l.args[a].strides[d];
        rest /= l.shape[d];
      }
      e[size_t(a)] = at;
    }
    out.push_back(e);
  }
  return out;
}

// A piece as run_in_pieces passed it (its arguments copied: they live only during the call).
struct Piece {
  std::vector<int64_t> shape;
  std::vector<ember_kir_arg> args;
};

struct Outcome {
  int32_t rc;
  std::string why;
  std::vector<Piece> pieces;
  std::multiset<std::vector<int64_t>> points;  // every point of every piece, as its elements
};

Outcome split(const ember_kir_launch& l, const std::vector<ArgLayout>& layout, uint64_t max_binding, uint64_t align) {
  Outcome o;
  o.rc = run_in_pieces(
      l, layout, max_binding, align,
      [&](const ember_kir_launch& piece) {
        for (int32_t a = 0; a < piece.n_args; ++a) {
          const ByteRange w = arg_window(piece, piece.args[a], layout[size_t(a)], align);
          EXPECT_LE(w.end - w.begin, max_binding) << "argument " << a << " of piece " << o.pieces.size();
          EXPECT_EQ(w.begin % align, 0u);
        }
        for (const auto& e : elements(piece)) o.points.insert(e);
        o.pieces.push_back({std::vector<int64_t>(piece.shape, piece.shape + piece.outer_rank + piece.reduce_rank),
                            std::vector<ember_kir_arg>(piece.args, piece.args + piece.n_args)});
        return EMBER_OK;
      },
      &o.why);
  return o;
}

std::multiset<std::vector<int64_t>> all_points(const ember_kir_launch& l) {
  std::multiset<std::vector<int64_t>> s;
  for (const auto& e : elements(l)) s.insert(e);
  return s;
}

TEST(VulkanLaunchPiecesTest, ALaunchThatFitsRunsWhole) {
  std::vector<ember_kir_arg> storage;
  const ember_kir_launch l = make_launch({1000}, 1, {{0, {1}, {4, 4000}}, {0, {1}, {4, 4000}}}, storage);
  const Outcome o = split(l, {{4, 4000}, {4, 4000}}, 4096, 64);
  ASSERT_EQ(o.rc, EMBER_OK);
  ASSERT_EQ(o.pieces.size(), 1u);
  EXPECT_EQ(o.pieces[0].shape[0], 1000);
}

TEST(VulkanLaunchPiecesTest, AnElementwiseLaunchIsCoveredOnceByPiecesThatFit) {
  // 10000 f32 (40000 bytes) through bindings of 4096 bytes: at least 10 pieces, each point once.
  std::vector<ember_kir_arg> storage;
  const std::vector<ArgLayout> layout{{4, 40000}, {4, 40000}};
  const ember_kir_launch l = make_launch({10000}, 1, {{0, {1}, layout[0]}, {0, {1}, layout[1]}}, storage);
  const Outcome o = split(l, layout, 4096, 64);
  ASSERT_EQ(o.rc, EMBER_OK) << o.why;
  EXPECT_GE(o.pieces.size(), 10u);
  EXPECT_LE(o.pieces.size(), 20u) << "halving overshoots by at most a factor of two";
  EXPECT_EQ(o.points, all_points(l));
}

TEST(VulkanLaunchPiecesTest, ATransposedReadSplitsTheDimThatMovesItMost) {
  // out[i, j] = in[j, i] over [100, 50] f32: the input's window is widest along dim 1.
  std::vector<ember_kir_arg> storage;
  const std::vector<ArgLayout> layout{{4, 20000}, {4, 20000}};
  const ember_kir_launch l = make_launch({100, 50}, 2, {{0, {50, 1}, layout[0]}, {0, {1, 100}, layout[1]}}, storage);
  const Outcome o = split(l, layout, 2048, 16);
  ASSERT_EQ(o.rc, EMBER_OK) << o.why;
  EXPECT_EQ(o.points, all_points(l));
}

TEST(VulkanLaunchPiecesTest, NegativeStridesAndOffsetsIntoALargerBuffer) {
  // A flipped view (offset at its last element, stride -1) of a slab in the middle of a buffer.
  std::vector<ember_kir_arg> storage;
  const std::vector<ArgLayout> layout{{4, 100000}, {4, 100000}};
  const ember_kir_launch l = make_launch({5000}, 1, {{1000, {1}, layout[0]}, {90000, {-1}, layout[1]}}, storage);
  const Outcome o = split(l, layout, 4096, 256);
  ASSERT_EQ(o.rc, EMBER_OK) << o.why;
  EXPECT_EQ(o.points, all_points(l));
}

TEST(VulkanLaunchPiecesTest, ReductionsKeepEachRowInOnePiece) {
  // out[i] = sum_j in[i, j] over [64, 256] f32: rows of 1024 bytes through bindings of 2048.
  std::vector<ember_kir_arg> storage;
  const std::vector<ArgLayout> layout{{4, 256}, {4, 65536}};
  const ember_kir_launch l = make_launch({64, 256}, 1, {{0, {1, 0}, layout[0]}, {0, {256, 1}, layout[1]}}, storage);
  const Outcome o = split(l, layout, 2048, 16);
  ASSERT_EQ(o.rc, EMBER_OK) << o.why;
  EXPECT_GE(o.pieces.size(), 32u);
  for (const Piece& p : o.pieces) EXPECT_EQ(p.shape[1], 256) << "a reduce dim was split";
  EXPECT_EQ(o.points, all_points(l));
}

TEST(VulkanLaunchPiecesTest, ARowLargerThanABindingIsRefusedWithTheSizes) {
  // One output point reads 2048 f32 (8192 bytes); no split of the outer dims can help.
  std::vector<ember_kir_arg> storage;
  const std::vector<ArgLayout> layout{{4, 32}, {4, 65536}};
  const ember_kir_launch l = make_launch({8, 2048}, 1, {{0, {1, 0}, layout[0]}, {0, {2048, 1}, layout[1]}}, storage);
  const Outcome o = split(l, layout, 4096, 16);
  EXPECT_EQ(o.rc, EMBER_ERR_UNSUPPORTED);
  EXPECT_NE(o.why.find("argument 1 spans 8192 bytes at a single output point"), std::string::npos) << o.why;
  EXPECT_NE(o.why.find("(4096 bytes)"), std::string::npos) << o.why;
  EXPECT_TRUE(o.pieces.empty()) << "nothing ran before the refusal";
}

TEST(VulkanLaunchPiecesTest, IotaCountersAdvanceAndUniformScalarsStay) {
  // Argument 1 has no buffer (an IOTA: its offset is the counter, e.g. a Philox counter), argument
  // 2 is a one-element scalar read by LOAD_UNIFORM (with a nonzero stride the split must ignore).
  std::vector<ember_kir_arg> storage;
  const std::vector<ArgLayout> layout{{4, 40000}, {8, 0}, {4, 4, true}};
  const ember_kir_launch l =
      make_launch({10000}, 1, {{0, {1}, layout[0]}, {0, {1}, layout[1]}, {0, {7}, layout[2]}}, storage);
  const Outcome o = split(l, layout, 4096, 64);
  ASSERT_EQ(o.rc, EMBER_OK) << o.why;
  ASSERT_GT(o.pieces.size(), 1u);
  std::set<int64_t> counters;
  for (const Piece& p : o.pieces) {
    EXPECT_EQ(p.args[2].offset, 0) << "the uniform scalar moved";
    for (int64_t i = 0; i < p.shape[0]; ++i) {
      EXPECT_EQ(p.args[1].offset + i, p.args[0].offset + i) << "the counter is no longer the element's index";
      counters.insert(p.args[1].offset + i);
    }
  }
  EXPECT_EQ(counters.size(), 10000u);
  EXPECT_EQ(*counters.rbegin(), 9999);
}

TEST(VulkanLaunchPiecesTest, AnErrorFromAPieceStopsTheRest) {
  std::vector<ember_kir_arg> storage;
  const std::vector<ArgLayout> layout{{4, 40000}};
  const ember_kir_launch l = make_launch({10000}, 1, {{0, {1}, layout[0]}}, storage);
  int runs = 0;
  std::string why;
  const int32_t rc = run_in_pieces(
      l, layout, 4096, 64, [&](const ember_kir_launch&) { return ++runs == 2 ? EMBER_ERR_INTERNAL : EMBER_OK; }, &why);
  EXPECT_EQ(rc, EMBER_ERR_INTERNAL);
  EXPECT_EQ(runs, 2);
  EXPECT_TRUE(why.empty()) << "the piece's own status carries its message";
}

}  // namespace
}  // namespace ember::vk
