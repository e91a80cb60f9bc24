// Typed op attributes (src/op_table/op_attrs.h): each op family's node holds its named struct with the
// values the front end resolved (padding 'same' in numbers, a pool stride of 0 as the kernel,
// wrapped dims); a wrong struct is an internal error naming both; cache keys tell every field
// apart; graph_text (ember/debug.h) prints them.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "ember/ember.h"
#include "graph/node.h"
#include "test_util.h"

namespace ember {
namespace {

const OpAttrs& attrs_of(const Array& a) { return a.node()->attrs; }

TEST(OpAttrsTest, ConvNodeHoldsResolvedOptions) {
  Array x = zeros({1, 2, 7, 7});
  Array w = zeros({4, 2, 3, 2});
  // 'same' with dilation 2: totals 4 (rows) and 2 (columns), split evenly.
  Array y = conv2d(x, w, {.padding = Padding2d::same(), .dilation = 2});
  const Conv2dOptions& c = attrs_of(y).get<Conv2dOptions>();
  EXPECT_EQ(c.stride.h, 1);
  EXPECT_EQ(c.stride.w, 1);
  EXPECT_FALSE(c.padding.is_same);
  EXPECT_EQ(c.padding.top, 2);
  EXPECT_EQ(c.padding.bottom, 2);
  EXPECT_EQ(c.padding.left, 1);
  EXPECT_EQ(c.padding.right, 1);
  EXPECT_EQ(c.dilation.h, 2);
  EXPECT_EQ(c.groups, 1);
  EXPECT_EQ(y.shape(), (Shape{1, 4, 7, 7}));
  // Asymmetric padding keeps its sides (the old positional layout stored top, left, bottom,
  // right and reshuffled it in the backward rules).
  Array z = conv2d(x, w, {.stride = {2, 1}, .padding = {1, 0, 2, 3}});
  const Conv2dOptions& d = attrs_of(z).get<Conv2dOptions>();
  EXPECT_EQ(d.padding.top, 1);
  EXPECT_EQ(d.padding.bottom, 0);
  EXPECT_EQ(d.padding.left, 2);
  EXPECT_EQ(d.padding.right, 3);
  EXPECT_EQ(d.stride.h, 2);
  // (7 + 1 - 3) / 2 + 1 = 3 rows, (7 + 5 - 2) + 1 = 11 columns.
  EXPECT_EQ(z.shape(), (Shape{1, 4, 3, 11}));
}

TEST(OpAttrsTest, EachFamilyHoldsItsStruct) {
  Array x = reshape(arange(0.0, 24.0, 1.0, DType::F32), {2, 3, 4});
  EXPECT_EQ(attrs_of(sum(x, {-1, 0})).get<ReduceAttrs>().dims, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(attrs_of(permute(x, {2, 0, 1})).get<PermuteAttrs>().order, (std::vector<int64_t>{2, 0, 1}));
  // (The arrays stay alive while their attributes are read.)
  Array sliced = slice(x, 2, 1, 4, 2);
  const SliceAttrs& s = attrs_of(sliced).get<SliceAttrs>();
  EXPECT_EQ(s.start, (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(s.step, (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(attrs_of(cat({x, x}, -2)).get<AxisAttrs>().dim, 1);
  Array idx = from_vector<int64_t>({0, 2}, {2});
  EXPECT_EQ(attrs_of(index_select(x, -1, idx)).get<AxisAttrs>().dim, 2);
  Array top = topk(x, 3, 2, true).indices;
  const SortAttrs& t = attrs_of(top).get<SortAttrs>();
  EXPECT_EQ(t.dim, 2);
  EXPECT_TRUE(t.descending);
  EXPECT_EQ(t.k, 3);
  Array scanned = cumsum(x, -1);
  const ScanAttrs& c = attrs_of(scanned).get<ScanAttrs>();
  EXPECT_EQ(c.dim, 2);
  EXPECT_FALSE(c.reverse);
  // A pool stride of 0 means the kernel (PyTorch's default).
  Array pooled = max_pool2d(zeros({1, 1, 6, 6}), {.kernel = {3, 2}});
  const Pool2dOptions& p = attrs_of(pooled).get<Pool2dOptions>();
  EXPECT_EQ(p.stride.h, 3);
  EXPECT_EQ(p.stride.w, 2);
  // Attention's lse is output 1 of the node that computes output and lse together.
  Array q = zeros({1, 2, 4}), k = zeros({1, 3, 4}), v = zeros({1, 3, 4});
  Array lse = fused_attention_lse(q, k, v, {.scale = 0.5, .causal = true}).lse;
  const Node* n = lse.node().get();
  while (n->op != Op::OutputOf && !n->inputs.empty()) n = n->inputs[0].get();
  ASSERT_EQ(n->op, Op::OutputOf);
  EXPECT_EQ(n->attrs.get<OutputAttrs>().index, 1);
  n = n->inputs[0].get();
  ASSERT_EQ(n->op, Op::FusedAttention);
  ASSERT_EQ(n->extra_outputs.size(), 1u);
  EXPECT_EQ(n->extra_outputs[0].spec.shape, Shape({1, 2}));
  EXPECT_EQ(n->extra_outputs[0].spec.dtype, DType::F32);
  EXPECT_EQ(n->attrs.get<AttentionAttrs>().scale, 0.5);
  EXPECT_TRUE(n->attrs.get<AttentionAttrs>().causal);
}

TEST(OpAttrsTest, WrongStructIsAnInternalErrorNamingBoth) {
  Array y = sum(zeros({2, 3}), {1});
  try {
    (void)attrs_of(y).get<Conv2dOptions>();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hold ReduceAttrs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expects Conv2dOptions"), std::string::npos) << e.what();
  }
}

std::vector<OpParams> sample_params() {
  return {
      std::monostate{},
      ReduceAttrs{{0, 1}},
      ReduceAttrs{{0}},
      ReduceAttrs{{1}},
      PermuteAttrs{{0, 1}},
      SliceAttrs{{0, 1}, {1, 1}},
      SliceAttrs{{0, 1}, {1, 2}},
      SliceAttrs{{0}, {1}},
      AxisAttrs{1},
      AxisAttrs{0},
      Conv2dOptions{},
      Conv2dOptions{.padding = {1, 0, 0, 0}},
      Conv2dOptions{.padding = {0, 1, 0, 0}},
      Conv2dOptions{.padding = {0, 0, 1, 0}},
      Conv2dOptions{.groups = 2},
      Pool2dOptions{},
      Pool2dOptions{.count_include_pad = false},
      SortAttrs{1, false, 0},
      SortAttrs{1, true, 0},
      SortAttrs{1, true, 2},
      ScanAttrs{1, false},
      ScanAttrs{1, true},
      AttentionAttrs{0.5, false},
      AttentionAttrs{0.1, false},  // not exact in binary: the JSON form keeps every bit
      AttentionAttrs{0.5, true},
      EpilogueAttrs{.ops = {PostOp{.kind = 1}}},
      EpilogueAttrs{.ops = {PostOp{.kind = 1, .alpha = 2}}},
      EpilogueAttrs{.has_bias = true, .conv = {.stride = 2}, .ops = {PostOp{.kind = 3, .input = 2, .beta = -1e-300}}},
      EpilogueAttrs{.ops = {PostOp{.kind = 1}}, .pool = {.kernel = 2}},
      EpilogueAttrs{.ops = {PostOp{.kind = 1}}, .pool = {.kernel = 2, .stride = 1}},
      OutputAttrs{1},
      OutputAttrs{2},
      RecurrenceAttrs{false},
      RecurrenceAttrs{true},
  };
}

std::vector<int64_t> key_of(const OpParams& p) {
  std::vector<int64_t> k;
  append_key(p, k);
  return k;
}

// Every struct survives its JSON form field for field (the form graph_json writes).
TEST(OpAttrsTest, JsonRoundTripsEveryStruct) {
  for (const OpParams& p : sample_params()) {
    const std::string text = params_json(p);
    EXPECT_EQ(key_of(params_from_json(text)), key_of(p)) << text;
  }
  EXPECT_EQ(params_json(SliceAttrs{{0, 2}, {1, 3}}), R"({"start":[0,2],"step":[1,3],"type":"SliceAttrs"})");
  EXPECT_NE(testing::error_of([] { params_from_json(R"({"type":"AxisAttrs"})"); }).find("missing field 'dim'"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { params_from_json(R"({"type":"Blur"})"); }).find("unknown type 'Blur'"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { params_from_json(R"({"type":"SliceAttrs","start":[0],"step":[1,1]})"); })
                .find("1 starts and 2 steps"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { params_from_json("[1, 2"); }).find("not a JSON object"), std::string::npos);
}

// Two attribute values that differ in any field have different keys (the partition cache keys
// plans by them), including values of different structs with the same numbers.
TEST(OpAttrsTest, KeysTellEveryFieldApart) {
  std::set<std::vector<int64_t>> keys;
  for (const OpParams& p : sample_params())
    EXPECT_TRUE(keys.insert(key_of(p)).second) << "duplicate key for " << params_name(p) << " {" << describe(p) << "}";
}

TEST(OpAttrsTest, GraphTextPrintsOpsOperandsAndAttributes) {
  Array x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});  // a value: computed already
  Array y = sum(exp(x), {1});
  const std::string text = graph_text({y});
  // Three lines in run order: the value, exp of it, the sum with its dims, each with the line.
  const std::string file = "op_attrs_test.cpp";
  EXPECT_NE(text.find("%0 = value float32[2, 3]  # "), std::string::npos) << text;
  EXPECT_NE(text.find("%1 = exp(%0) float32[2, 3]  # "), std::string::npos) << text;
  EXPECT_NE(text.find("%2 = sum(%1) float32[2] {dims [1]}  # "), std::string::npos) << text;
  EXPECT_NE(text.find(file), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
  // A node read twice is printed once; conv attributes by name.
  Array w = from_vector<float>(std::vector<float>(2 * 2 * 1 * 1, 1.0f), {2, 2, 1, 1});
  Array c = conv2d(reshape(x, {1, 2, 3, 1}), w, {.padding = {0, 0, 1, 2}});
  const std::string conv = graph_text({c, c});
  EXPECT_NE(conv.find("%3 = conv2d(%1, %2) float32[1, 2, 3, 4] {stride (1, 1), padding (top 0, left 1, bottom 0, right 2), "
                      "dilation (1, 1), groups 1}"),
            std::string::npos)
      << conv;
  EXPECT_EQ(std::count(conv.begin(), conv.end(), '\n'), 4) << conv;
  // The JSON form: the same nodes, operands and attributes.
  const std::string json = graph_json({c});
  EXPECT_NE(json.find(R"({"device":"cpu","dtype":"float32","id":0,"loc":)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("attrs":{"dilation":[1,1],"groups":1,"padding":{"bottom":0,"left":1,"right":2,"top":0},)"
                      R"("stride":[1,1],"type":"Conv2dOptions"},"device":"cpu","dtype":"float32","id":3,"inputs":[1,2],)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("outputs":[3])"), std::string::npos) << json;
  // Once computed, the array is a value without history.
  (void)y.to_vector<float>();
  EXPECT_EQ(graph_text({y}), "%0 = value float32[2]  # " + format_location(y.node()->loc) + "\n");
}

}  // namespace
}  // namespace ember
