// Movement ops: reshape (-1, copies of non-contiguous inputs), permute, transpose, slice (steps,
// negative and clamped bounds), expand/broadcast_to, squeeze, unsqueeze, flatten, contiguous
// and cat (mixed dtypes, non-contiguous inputs). Expected values come from host index math.
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

class OpMovement : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
  Array iota(const Shape& s, DType t = DType::F32) { return make(iota_d(s.numel()), s, t, dev); }
};

TEST_P(OpMovement, Reshape) {
  Array a = iota({2, 3, 4});
  Array r = reshape(a, {4, 6});
  EXPECT_TRUE(same_shape(r, {4, 6}));
  EXPECT_TRUE(same(r, iota_d(24)));
  EXPECT_TRUE(same_shape(reshape(a, {-1, 4}), {6, 4}));
  EXPECT_TRUE(same_shape(reshape(a, {3, -1, 2}), {3, 4, 2}));
  EXPECT_TRUE(same_shape(reshape(a, {-1}), {24}));
  EXPECT_TRUE(same(reshape(a, {24, 1, 1}), iota_d(24)));
  EXPECT_EQ(reshape(f32({7}, {1}, dev), {}).rank(), 0);
  EXPECT_TRUE(same_shape(reshape(f32({7}, {}, dev), {1, 1}), {1, 1}));
  EXPECT_TRUE(same_shape(reshape(zeros({2, 0}, {.device = dev}), {0, 5}), {0, 5}));
  // Every dtype keeps its values.
  for (DType t : all_dtypes()) {
    Array x = make({1, 0, 1, 1, 0, 1}, {2, 3}, t, dev);
    EXPECT_TRUE(same(reshape(x, {3, 2}), {1, 0, 1, 1, 0, 1})) << dtype_name(t);
  }
}

TEST_P(OpMovement, ReshapeOfNonContiguousCopies) {
  // A permuted tensor cannot be viewed as a flat one: reshape must copy in logical order.
  Array a = iota({2, 3, 4});
  Array p = permute(a, {2, 0, 1});  // [4,2,3]
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(j * 12 + k * 4 + i);
  Array r = reshape(p, {8, 3});
  EXPECT_TRUE(same_shape(r, {8, 3}));
  EXPECT_TRUE(same(r, want));
  EXPECT_TRUE(same(reshape(p, {-1}), want));
  EXPECT_TRUE(same(reshape(p, {4, 6}), want));  // merges the two non-mergeable inner dims
  // A transposed matrix, flattened, then used in an elementwise op.
  Array t = transpose(iota({3, 4}), 0, 1);
  EXPECT_TRUE(same(add(reshape(t, {12}), 0.5), {0.5, 4.5, 8.5, 1.5, 5.5, 9.5, 2.5, 6.5, 10.5, 3.5, 7.5, 11.5}));
  // A stepped slice reshaped.
  Array s = slice(iota({10}), 0, 1, 10, 3);  // 1 4 7
  EXPECT_TRUE(same(reshape(s, {3, 1}), {1, 4, 7}));
  // Splitting a permuted dim that is itself contiguous can stay a view; values must be right either way.
  Array q = permute(iota({4, 6}), {1, 0});  // [6,4]
  std::vector<double> wq;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) wq.push_back(j * 6 + i);
  EXPECT_TRUE(same(reshape(q, {2, 3, 4}), wq));
  EXPECT_TRUE(same(reshape(q, {6, 2, 2}), wq));
}

TEST_P(OpMovement, PermuteAndTranspose) {
  Array a = iota({2, 3, 4});
  Array p = permute(a, {1, 2, 0});
  EXPECT_TRUE(same_shape(p, {3, 4, 2}));
  std::vector<double> w;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k) w.push_back(k * 12 + i * 4 + j);
  EXPECT_TRUE(same(p, w));
  EXPECT_TRUE(same(permute(a, {-2, -1, -3}), w));  // negative dims
  EXPECT_TRUE(same(permute(p, {2, 0, 1}), iota_d(24)));  // inverse permutation
  Array t = transpose(a, 0, 2);
  EXPECT_TRUE(same_shape(t, {4, 3, 2}));
  std::vector<double> wt;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) wt.push_back(k * 12 + j * 4 + i);
  EXPECT_TRUE(same(t, wt));
  EXPECT_TRUE(same(transpose(a, -1, 0), wt));
  EXPECT_TRUE(same(transpose(a, 1, 1), iota_d(24)));
  EXPECT_TRUE(same(transpose(transpose(a, 0, 1), 0, 1), iota_d(24)));
  EXPECT_EQ(transpose(f32({1}, {}, dev), 0, -1).rank(), 0);
  EXPECT_TRUE(same_shape(permute(zeros({0, 2}, {.device = dev}), {1, 0}), {2, 0}));
  // Large enough to cross tiles: [300, 257] transposed.
  Array big = iota({300, 257});
  std::vector<double> got = vals(transpose(big, 0, 1));
  bool ok = true;
  for (int i = 0; i < 257 && ok; ++i)
    for (int j = 0; j < 300 && ok; ++j) ok = got[size_t(i * 300 + j)] == j * 257 + i;
  EXPECT_TRUE(ok);
}

TEST_P(OpMovement, Slice) {
  Array v = iota({10});
  EXPECT_TRUE(same(slice(v, 0, 2, 5), {2, 3, 4}));
  EXPECT_TRUE(same(slice(v, 0, 0, 10, 3), {0, 3, 6, 9}));
  EXPECT_TRUE(same(slice(v, 0, 1, 10, 4), {1, 5, 9}));
  EXPECT_TRUE(same(slice(v, 0, -3, 10), {7, 8, 9}));       // negative start
  EXPECT_TRUE(same(slice(v, 0, 0, -7), {0, 1, 2}));        // negative end
  EXPECT_TRUE(same(slice(v, 0, -4, -1, 2), {6, 8}));
  EXPECT_TRUE(same(slice(v, 0, -100, 2), {0, 1}));         // clamped like Python
  EXPECT_TRUE(same(slice(v, 0, 8, 100), {8, 9}));
  EXPECT_TRUE(same_shape(slice(v, 0, 5, 5), {0}));         // empty
  EXPECT_TRUE(same_shape(slice(v, 0, 7, 3), {0}));         // end before start: empty
  EXPECT_TRUE(same_shape(slice(v, 0, 20, 30), {0}));
  EXPECT_TRUE(same(slice(v, 0, 0, 10), iota_d(10)));
  // On a matrix, along each dim, and slices of slices.
  Array m = iota({4, 5});
  EXPECT_TRUE(same(slice(m, 1, 1, 5, 2), {1, 3, 6, 8, 11, 13, 16, 18}));
  EXPECT_TRUE(same(slice(m, 0, 1, 4, 2), {5, 6, 7, 8, 9, 15, 16, 17, 18, 19}));
  EXPECT_TRUE(same(slice(m, -1, -2, 5), {3, 4, 8, 9, 13, 14, 18, 19}));
  Array ss = slice(slice(m, 0, 1, 4), 1, 0, 5, 2);  // rows 1..3, cols 0,2,4
  EXPECT_TRUE(same(ss, {5, 7, 9, 10, 12, 14, 15, 17, 19}));
  EXPECT_TRUE(same(slice(transpose(m, 0, 1), 1, 1, 3), {5, 10, 6, 11, 7, 12, 8, 13, 9, 14}));
  // Slices of integer and bool tensors.
  EXPECT_TRUE(same(slice(iota({6}, DType::I64), 0, 1, 6, 2), {1, 3, 5}));
  EXPECT_TRUE(same(slice(make({1, 0, 1, 1}, {4}, DType::Bool, dev), 0, 1, 4, 2), {0, 1}));
}

TEST_P(OpMovement, ExpandAndBroadcastTo) {
  Array c = f32({1, 2, 3}, {3, 1}, dev);
  Array e = expand(c, {3, 4});
  EXPECT_TRUE(same_shape(e, {3, 4}));
  EXPECT_TRUE(same(e, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
  EXPECT_TRUE(same(expand(c, {2, -1, 2}), {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));  // new leading dim, -1 keeps
  EXPECT_TRUE(same(broadcast_to(f32({5}, {}, dev), {2, 2}), {5, 5, 5, 5}));
  EXPECT_TRUE(same(expand(c, {3, 1}), {1, 2, 3}));
  EXPECT_TRUE(same_shape(expand(c, {3, 0}), {3, 0}));
  // Expanding a transposed tensor.
  Array t = transpose(f32({1, 2}, {1, 2}, dev), 0, 1);  // [2,1]
  EXPECT_TRUE(same(expand(t, {2, 3}), {1, 1, 1, 2, 2, 2}));
  EXPECT_TRUE(same(contiguous(e), {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
}

TEST_P(OpMovement, SqueezeUnsqueezeFlatten) {
  Array a = iota({2, 1, 3});
  EXPECT_TRUE(same_shape(squeeze(a, 1), {2, 3}));
  EXPECT_TRUE(same_shape(squeeze(a, -2), {2, 3}));
  EXPECT_TRUE(same(squeeze(a, 1), iota_d(6)));
  EXPECT_TRUE(same_shape(unsqueeze(a, 0), {1, 2, 1, 3}));
  EXPECT_TRUE(same_shape(unsqueeze(a, 3), {2, 1, 3, 1}));
  EXPECT_TRUE(same_shape(unsqueeze(a, -1), {2, 1, 3, 1}));
  EXPECT_TRUE(same_shape(unsqueeze(a, -4), {1, 2, 1, 3}));
  Array s = f32({4}, {}, dev);
  EXPECT_TRUE(same_shape(unsqueeze(s, 0), {1}));
  EXPECT_EQ(squeeze(unsqueeze(s, 0), 0).rank(), 0);
  Array b = iota({2, 3, 4, 5});
  EXPECT_TRUE(same_shape(flatten(b), {120}));
  EXPECT_TRUE(same_shape(flatten(b, 1), {2, 60}));
  EXPECT_TRUE(same_shape(flatten(b, 1, 2), {2, 12, 5}));
  EXPECT_TRUE(same_shape(flatten(b, -2, -1), {2, 3, 20}));
  EXPECT_TRUE(same_shape(flatten(b, 2, 2), {2, 3, 4, 5}));
  EXPECT_TRUE(same_shape(flatten(s), {1}));
  EXPECT_TRUE(same(flatten(b, 0, 1), iota_d(120)));
  // Flatten of a non-contiguous tensor copies in logical order.
  Array t = transpose(iota({2, 3}), 0, 1);
  EXPECT_TRUE(same(flatten(t), {0, 3, 1, 4, 2, 5}));
  // Unsqueeze of a transposed tensor keeps its values.
  EXPECT_TRUE(same(unsqueeze(t, 1), {0, 3, 1, 4, 2, 5}));
}

TEST_P(OpMovement, Contiguous) {
  Array a = iota({3, 4});
  EXPECT_TRUE(same(contiguous(a), iota_d(12)));
  Array t = contiguous(transpose(a, 0, 1));
  EXPECT_TRUE(same_shape(t, {4, 3}));
  EXPECT_TRUE(same(t, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_TRUE(same(contiguous(slice(a, 1, 0, 4, 3)), {0, 3, 4, 7, 8, 11}));
  EXPECT_TRUE(same(contiguous(expand(f32({1, 2}, {2, 1}, dev), {2, 2})), {1, 1, 2, 2}));
  EXPECT_TRUE(same(contiguous(contiguous(transpose(a, 0, 1))), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_TRUE(vals(contiguous(zeros({0, 3}, {.device = dev}))).empty());
  EXPECT_EQ(contiguous(f32({1}, {}, dev)).item<float>(), 1.0f);
}

TEST_P(OpMovement, Cat) {
  Array a = iota({2, 3}), b = f32({10, 11, 12}, {1, 3}, dev);
  Array c0 = cat({a, b}, 0);
  EXPECT_TRUE(same_shape(c0, {3, 3}));
  EXPECT_TRUE(same(c0, {0, 1, 2, 3, 4, 5, 10, 11, 12}));
  Array c1 = cat({a, f32({7, 8}, {2, 1}, dev), a}, 1);
  EXPECT_TRUE(same_shape(c1, {2, 7}));
  EXPECT_TRUE(same(c1, {0, 1, 2, 7, 0, 1, 2, 3, 4, 5, 8, 3, 4, 5}));
  EXPECT_TRUE(same(cat({a, a}, -1), {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  // Mixed dtypes promote: i32 with f32 -> f32; u8 with i64 -> i64; bool with bool stays bool.
  Array m = cat({i32({1, 2}, {2}, dev), f32({0.5}, {1}, dev)}, 0);
  EXPECT_EQ(m.dtype(), DType::F32);
  EXPECT_TRUE(same(m, {1, 2, 0.5}));
  Array u = cat({make({255}, {1}, DType::U8, dev), i64({-1}, {1}, dev)}, 0);
  EXPECT_EQ(u.dtype(), DType::I64);
  EXPECT_TRUE(same(u, {255, -1}));
  EXPECT_EQ(cat({make({1}, {1}, DType::Bool, dev), make({0}, {1}, DType::Bool, dev)}, 0).dtype(), DType::Bool);
  Array hb = cat({make({0.5}, {1}, DType::F16, dev), make({2}, {1}, DType::BF16, dev)}, 0);
  EXPECT_EQ(hb.dtype(), DType::F32);
  EXPECT_TRUE(same(hb, {0.5, 2}));
  // Non-contiguous inputs (transposed, stepped slice, expanded).
  Array t = transpose(iota({3, 2}), 0, 1);                          // [2,3]: 0 2 4 / 1 3 5
  Array s = slice(iota({2, 6}), 1, 0, 6, 2);                        // [2,3]: 0 2 4 / 6 8 10
  Array e = expand(f32({9}, {1, 1}, dev), {2, 3});
  EXPECT_TRUE(same(cat({t, s, e}, 0), {0, 2, 4, 1, 3, 5, 0, 2, 4, 6, 8, 10, 9, 9, 9, 9, 9, 9}));
  EXPECT_TRUE(same(cat({t, s}, 1), {0, 2, 4, 0, 2, 4, 1, 3, 5, 6, 8, 10}));
  // Empty inputs contribute nothing; one input is returned as is.
  EXPECT_TRUE(same(cat({a, zeros({0, 3}, {.device = dev}), b}, 0), {0, 1, 2, 3, 4, 5, 10, 11, 12}));
  EXPECT_TRUE(same(cat({a}, 1), iota_d(6)));
  EXPECT_TRUE(same_shape(cat({zeros({2, 0}, {.device = dev}), zeros({2, 0}, {.device = dev})}, 1), {2, 0}));
  // Many inputs, crossing tile sizes.
  std::vector<Array> parts;
  std::vector<double> want;
  for (int i = 0; i < 9; ++i) {
    int64_t n = 1 + i * 37;
    std::vector<double> v = iota_d(n, i * 1000);
    want.insert(want.end(), v.begin(), v.end());
    parts.push_back(f32(v, {n}, dev));
  }
  EXPECT_TRUE(same(cat(parts, 0), want));
}

TEST_P(OpMovement, Errors) {
  Array a = iota({2, 3});
  EMBER_EXPECT_ERROR(reshape(a, {4}), "reshape", "[2, 3]", "6", "[4]", "movement_test.cpp:");
  EMBER_EXPECT_ERROR(reshape(a, {4, -1}), "reshape", "[2, 3]", "[4, -1]");
  EMBER_EXPECT_ERROR(reshape(a, {-1, -1}), "reshape", "-1");
  EMBER_EXPECT_ERROR(reshape(a, {-2, -3}), "reshape", "negative");
  // -1 next to a zero-sized dim could be any size: rejected rather than guessed.
  EMBER_EXPECT_ERROR(reshape(zeros({2, 0}, {.device = dev}), {0, -1}), "reshape", "[2, 0]", "[0, -1]");
  EMBER_EXPECT_ERROR(permute(a, {0}), "permute", "1 dims", "rank 2");
  EMBER_EXPECT_ERROR(permute(a, {0, 0}), "permute", "more than once");
  EMBER_EXPECT_ERROR(permute(a, {0, 2}), "permute", "dim 2");
  EMBER_EXPECT_ERROR(transpose(a, 0, 2), "transpose", "dim 2");
  EMBER_EXPECT_ERROR(slice(a, 2, 0, 1), "slice", "dim 2");
  EMBER_EXPECT_ERROR(slice(a, 0, 0, 1, 0), "slice", "step", "0");
  EMBER_EXPECT_ERROR(slice(a, 0, 0, 1, -1), "slice", "step", "-1");
  EMBER_EXPECT_ERROR(slice(f32({1}, {}, dev), 0, 0, 1), "slice", "rank-0");
  EMBER_EXPECT_ERROR(expand(a, {3, 3}), "expand", "[2, 3]", "[3, 3]");
  EMBER_EXPECT_ERROR(expand(a, {3}), "expand", "[2, 3]", "[3]");
  EMBER_EXPECT_ERROR(expand(a, {-1, 2, 3}), "expand", "-1");
  EMBER_EXPECT_ERROR(squeeze(a, 0), "squeeze", "size 2");
  EMBER_EXPECT_ERROR(squeeze(a, 2), "squeeze", "dim 2");
  EMBER_EXPECT_ERROR(unsqueeze(a, 3), "unsqueeze", "dim 3");
  EMBER_EXPECT_ERROR(unsqueeze(a, -4), "unsqueeze", "dim -4");
  EMBER_EXPECT_ERROR(flatten(a, 1, 0), "flatten", "start dim 1", "end dim 0");
  EMBER_EXPECT_ERROR(flatten(a, 0, 5), "flatten", "dim 5");
  EMBER_EXPECT_ERROR(cat({}, 0), "cat", "at least one");
  EMBER_EXPECT_ERROR(cat({a, iota({2, 4})}, 0), "cat", "[2, 4]", "[2, 3]");
  EMBER_EXPECT_ERROR(cat({a, iota({6})}, 0), "cat", "[6]");
  EMBER_EXPECT_ERROR(cat({a, a}, 2), "cat", "dim 2");
  EMBER_EXPECT_ERROR(cat({f32({1}, {}, dev), f32({1}, {}, dev)}, 0), "cat", "rank-0");
}

EMBER_OP_SUITE(OpMovement);

}  // namespace
}  // namespace ember::testing
