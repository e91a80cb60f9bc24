// The ONNX loader on small models built here with the protobuf classes: values against numbers
// computed by hand, initializers as parameters (with gradients checked by finite differences),
// constant folding, external data, and the errors for malformed and unsupported files.
#include <gtest/gtest.h>

#ifdef EMBER_HAVE_ONNX

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ember/ember.h"
#include "ember/onnx/onnx.h"
#include "onnx/proto.h"
#include "ops/op_coverage.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

void set_float_tensor(::onnx::TensorProto* t, const std::string& name, std::vector<int64_t> dims, std::vector<float> v,
                      bool f64 = false) {
  t->set_name(name);
  t->set_data_type(f64 ? 11 : 1);
  for (int64_t d : dims) t->add_dims(d);
  if (f64) {
    std::vector<double> d(v.begin(), v.end());
    t->set_raw_data(std::string(reinterpret_cast<const char*>(d.data()), d.size() * 8));
  } else {
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  }
}

void add_input(::onnx::GraphProto* g, const std::string& name, int32_t type, std::vector<int64_t> dims) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(type);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                            std::vector<std::string> out, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

// y = relu(x @ W^T + b) with Gemm(transB=1): W [2, 3], b [2], x [1, 3].
::onnx::ModelProto gemm_relu_model(bool f64 = false) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  add_input(g, "x", f64 ? 11 : 1, {1, 3});
  set_float_tensor(g->add_initializer(), "W", {2, 3}, {1, 2, 3, -1, -2, -3}, f64);
  set_float_tensor(g->add_initializer(), "b", {2}, {0.5f, 0.25f}, f64);
  auto* gemm = add_node(g, "Gemm", {"x", "W", "b"}, {"h"}, "fc");
  auto* a = gemm->add_attribute();
  a->set_name("transB");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(1);
  add_node(g, "Relu", {"h"}, {"y"}, "act");
  g->add_output()->set_name("y");
  return m;
}

std::string bytes_of(const ::onnx::ModelProto& m) { return m.SerializeAsString(); }

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(OnnxLoaderTest, GemmReluValuesAndParameters) {
  ember::onnx::Model model = ember::onnx::load_from_memory(bytes_of(gemm_relu_model()));
  auto params = model.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "W");
  EXPECT_EQ(params[1].name, "b");
  Array x = from_vector<float>({1, 1, 2}, {1, 3});
  // Row 0: 1 + 2 + 6 + 0.5 = 9.5; row 1: -9 + 0.25 -> relu 0.
  std::vector<float> y = model.forward({{"x", x}}).at("y").to_vector<float>();
  ASSERT_EQ(y.size(), 2u);
  EXPECT_FLOAT_EQ(y[0], 9.5f);
  EXPECT_FLOAT_EQ(y[1], 0.0f);
  // Positional form.
  std::vector<Array> out = model.forward(std::vector<Array>{x});
  EXPECT_EQ(out.at(0).shape(), (Shape{1, 2}));
}

TEST(OnnxLoaderTest, ParametersReceiveGradientsMatchingFiniteDifferences) {
  ember::onnx::Model model = ember::onnx::load_from_memory(bytes_of(gemm_relu_model(/*f64=*/true)));
  Array x = from_vector<double>({1, 1, 2}, {1, 3});
  auto loss_of = [&]() { return sum(square(model.forward({{"x", x}}).at("y"))); };
  Gradients grads = loss_of().backward();
  Array W = model.named_parameters()[0].param.array();
  std::vector<double> g = W.grad(grads).to_vector<double>();
  std::vector<double> w = W.to_vector<double>();
  const double h = 1e-6;
  for (size_t i = 0; i < w.size(); ++i) {
    auto with = [&](double delta) {
      std::vector<double> v = w;
      v[i] += delta;
      model.named_parameters()[0].param.set(from_vector(v, W.shape()));
      double l = loss_of().item<double>();
      model.named_parameters()[0].param.set(from_vector(w, W.shape()));
      return l;
    };
    double fd = (with(h) - with(-h)) / (2 * h);
    EXPECT_NEAR(g[i], fd, 1e-5) << "dW[" << i << "]";
  }
  // By hand: only row 0 is active; dL/dW[0, k] = 2 * 9.5 * x[k].
  EXPECT_NEAR(g[0], 19.0, 1e-9);
  EXPECT_NEAR(g[2], 38.0, 1e-9);
  EXPECT_NEAR(g[3], 0.0, 1e-12);
}

TEST(OnnxLoaderTest, ConstantAndConstantOfShapeAreFolded) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", 1, {2, 3});
  auto* c = add_node(g, "Constant", {}, {"shape"});
  auto* a = c->add_attribute();
  a->set_name("value_ints");
  a->set_type(::onnx::AttributeProto::INTS);
  a->add_ints(2);
  a->add_ints(3);
  auto* cos = add_node(g, "ConstantOfShape", {"shape"}, {"fill"});
  auto* v = cos->add_attribute();
  v->set_name("value");
  v->set_type(::onnx::AttributeProto::TENSOR);
  set_float_tensor(v->mutable_t(), "", {1}, {2.5f});
  add_node(g, "Add", {"x", "fill"}, {"y"});
  g->add_output()->set_name("y");
  ember::onnx::Model model = ember::onnx::load_from_memory(bytes_of(m));
  ASSERT_EQ(model.graph().nodes.size(), 1u);  // only Add is left to run
  EXPECT_EQ(model.graph().nodes[0].op_type, "Add");
  std::vector<float> y = model.forward({{"x", from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3})}}).at("y").to_vector<float>();
  EXPECT_EQ(y, (std::vector<float>{2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f}));
}

TEST(OnnxLoaderTest, ExternalDataIsReadBesideTheModel) {
  fs::path dir = fs::temp_directory_path() / ("ember_onnx_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<float> w = {1, 2, 3, -1, -2, -3};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f << "pad!";  // the tensor starts at offset 4
    f.write(reinterpret_cast<const char*>(w.data()), 24);
  }
  ::onnx::ModelProto m = gemm_relu_model();
  auto* init = m.mutable_graph()->mutable_initializer(0);
  init->clear_raw_data();
  init->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const char* v) {
    auto* e = init->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "4");
  kv("length", "24");
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    f << bytes_of(m);
  }
  ember::onnx::Model model = ember::onnx::load((dir / "model.onnx").string());
  EXPECT_EQ(model.initializer("W").to_vector<float>(), w);
  // A location outside the folder is refused.
  kv("location", "../etc/passwd");
  init->mutable_external_data(0)->set_value("../x.bin");
  std::string err = error_of([&] { ember::onnx::load_from_memory(bytes_of(m), {.base_dir = dir.string()}); });
  EXPECT_NE(err.find("must be a relative path inside the model's folder"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(OnnxLoaderTest, MalformedFilesAreRejectedWithAMessage) {
  std::string good = bytes_of(gemm_relu_model());
  // Truncated at every length: an error (or, for a prefix that happens to parse, a smaller
  // model that fails a later check), never a crash.
  for (size_t n = 1; n < good.size(); n += 7) {
    try {
      ember::onnx::load_from_memory(good.substr(0, n));
    } catch (const Error&) {
    }
  }
  EXPECT_NE(error_of([&] { ember::onnx::load_from_memory(good.substr(0, good.size() / 2)); }).find("onnx::load"), std::string::npos);

  // A huge declared size with a small payload.
  ::onnx::ModelProto huge = gemm_relu_model();
  huge.mutable_graph()->mutable_initializer(0)->set_dims(0, int64_t(1) << 40);
  std::string err = error_of([&] { ember::onnx::load_from_memory(bytes_of(huge)); });
  EXPECT_NE(err.find("initializer 'W'"), std::string::npos) << err;
  EXPECT_NE(err.find("bytes expected"), std::string::npos) << err;

  // A node reading an undefined value.
  ::onnx::ModelProto missing = gemm_relu_model();
  missing.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
  err = error_of([&] { ember::onnx::load_from_memory(bytes_of(missing)); });
  EXPECT_NE(err.find("node 'act' (Relu) reads 'nowhere'"), std::string::npos) << err;

  // A cycle: fc reads act's output, act reads fc's.
  ::onnx::ModelProto cycle = gemm_relu_model();
  cycle.mutable_graph()->mutable_node(0)->set_input(0, "y");
  err = error_of([&] { ember::onnx::load_from_memory(bytes_of(cycle)); });
  EXPECT_NE(err.find("cycle"), std::string::npos) << err;

  // Random byte flips (a fixed seed, so the cases are the same every run): an Error or a model
  // that loads and runs, never a crash.
  std::mt19937 rng(1234);
  int loaded = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = good;
    for (int f = 0; f < 3; ++f) bad[rng() % bad.size()] = char(rng() & 0xff);
    try {
      ember::onnx::Model mm = ember::onnx::load_from_memory(bad);
      for (auto& [name, value] : mm.forward({{"x", zeros({1, 3})}})) value.eval();
      ++loaded;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(loaded, 0);  // some flips hit values only (weights), so the loop also runs models

  // A constant asking for 2^40 floats is refused at load (folding), before any allocation.
  ::onnx::ModelProto big;
  big.set_ir_version(8);
  big.add_opset_import()->set_version(13);
  auto* g = big.mutable_graph();
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(7);
  shape->add_dims(2);
  shape->add_int64_data(int64_t(1) << 20);
  shape->add_int64_data(int64_t(1) << 20);
  add_node(g, "ConstantOfShape", {"shape"}, {"y"}, "fill");
  g->add_output()->set_name("y");
  err = error_of([&] { ember::onnx::load_from_memory(bytes_of(big)); });
  EXPECT_NE(err.find("node 'fill' (ConstantOfShape, opset 13): output 0 would have shape [1048576, 1048576]"),
            std::string::npos) << err;

  // Not a protobuf at all.
  err = error_of([&] { ember::onnx::load_from_memory(std::string("\xff\xff\xff\xff garbage", 12)); });
  EXPECT_NE(err.find("not a valid ONNX model"), std::string::npos) << err;
}

TEST(OnnxLoaderTest, UnsupportedOperatorNamesNodeOpAndOpset) {
  ::onnx::ModelProto m = gemm_relu_model();
  m.mutable_graph()->mutable_node(1)->set_op_type("FancyOp");
  try {
    ember::onnx::load_from_memory(bytes_of(m));
    FAIL() << "no error";
  } catch (const ember::onnx::Unsupported& e) {
    std::string s = e.what();
    EXPECT_NE(s.find("node 'act' (FancyOp), opset 17: operator FancyOp is not supported"), std::string::npos) << s;
  }
  // Without the support check (onnx-check) the model loads, lists the op, and fails at forward.
  ember::onnx::Model listed = ember::onnx::load_from_memory(bytes_of(m), {.check_support = false});
  EXPECT_EQ(listed.graph().nodes.at(1).op_type, "FancyOp");
  std::string err = error_of([&] { listed.forward({{"x", zeros({1, 3})}}); });
  EXPECT_NE(err.find("(FancyOp, opset 17): operator FancyOp is not supported"), std::string::npos) << err;
  EXPECT_FALSE(ember::onnx::is_supported("FancyOp", "", 17));
  EXPECT_TRUE(ember::onnx::is_supported("Conv", "", 11));
}

TEST(OnnxLoaderTest, InputsAreCheckedByNameDtypeAndShape) {
  ember::onnx::Model model = ember::onnx::load_from_memory(bytes_of(gemm_relu_model()));
  EXPECT_NE(error_of([&] { model.forward(std::map<std::string, Array>{}); }).find("graph input 'x' is not given"), std::string::npos);
  EXPECT_NE(error_of([&] { model.forward({{"x", zeros({1, 3}, {.dtype = DType::F64})}}); }).find("must be float32, got float64"),
            std::string::npos);
  EXPECT_NE(error_of([&] { model.forward({{"x", zeros({2, 3})}}); }).find("must have shape [1, 3], got [2, 3]"), std::string::npos);
}

TEST(OnnxLoaderTest, TensorRoundTripsThroughBytes) {
  Array a = from_vector<int64_t>({-3, 0, 7, 1LL << 40}, {2, 2});
  Array b = ember::onnx::tensor_from_memory(ember::onnx::tensor_to_bytes(a, "t"));
  EXPECT_EQ(b.dtype(), DType::I64);
  EXPECT_EQ(b.shape(), (Shape{2, 2}));
  EXPECT_EQ(b.to_vector<int64_t>(), a.to_vector<int64_t>());
  // Typed fields (int32_data) load as well.
  ::onnx::TensorProto t;
  t.set_data_type(6);
  t.add_dims(3);
  for (int v : {4, -5, 6}) t.add_int32_data(v);
  EXPECT_EQ(ember::onnx::tensor_from_memory(t.SerializeAsString()).to_vector<int32_t>(), (std::vector<int32_t>{4, -5, 6}));
}

// 3-D ConvTranspose (built from 2-D ones per depth tap) against the definition, summed in double:
// y[n, o, i * s + k * d - pad_begin] += x[n, c, i] * W[c, o, k] over every spatial dim, with a
// stride, a dilation and asymmetric pads that differ per dim.
TEST(OnnxLoaderTest, ConvTranspose3dMatchesTheDefinition) {
  const int64_t C = 2, O = 3, D = 2, H = 3, W = 2, KD = 2, KH = 2, KW = 3;
  const std::vector<int64_t> s = {2, 1, 2}, dl = {1, 2, 1}, pb = {1, 0, 0}, pe = {0, 1, 2};
  std::vector<float> xv(size_t(C * D * H * W)), wv(size_t(C * O * KD * KH * KW));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i * 7 % 11) - 5) / 4.0f;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = float(int(i * 5 % 13) - 6) / 8.0f;
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  add_input(g, "x", 1, {1, C, D, H, W});
  set_float_tensor(g->add_initializer(), "W", {C, O, KD, KH, KW}, wv);
  auto* n = add_node(g, "ConvTranspose", {"x", "W"}, {"y"});
  auto ints = [&](const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  ints("strides", s);
  ints("dilations", dl);
  std::vector<int64_t> pads = pb;
  pads.insert(pads.end(), pe.begin(), pe.end());
  ints("pads", pads);
  g->add_output()->set_name("y");
  ember::onnx::Model model = ember::onnx::load_from_memory(bytes_of(m));
  Array y = model.forward({{"x", from_vector(xv, {1, C, D, H, W})}}).at("y");
  const int64_t in[3] = {D, H, W}, k[3] = {KD, KH, KW};
  int64_t full[3], out[3];
  for (int i = 0; i < 3; ++i) {
    full[i] = (in[i] - 1) * s[size_t(i)] + (k[i] - 1) * dl[size_t(i)] + 1;
    out[i] = full[i] - pb[size_t(i)] - pe[size_t(i)];
  }
  ASSERT_EQ(y.shape(), (Shape{1, O, out[0], out[1], out[2]}));
  std::vector<double> want(size_t(O * out[0] * out[1] * out[2]), 0.0);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t a = 0; a < D; ++a)
        for (int64_t b = 0; b < H; ++b)
          for (int64_t e = 0; e < W; ++e)
            for (int64_t ka = 0; ka < KD; ++ka)
              for (int64_t kb = 0; kb < KH; ++kb)
                for (int64_t ke = 0; ke < KW; ++ke) {
                  int64_t p0 = a * s[0] + ka * dl[0] - pb[0], p1 = b * s[1] + kb * dl[1] - pb[1],
                          p2 = e * s[2] + ke * dl[2] - pb[2];
                  if (p0 < 0 || p0 >= out[0] || p1 < 0 || p1 >= out[1] || p2 < 0 || p2 >= out[2]) continue;
                  want[size_t(((o * out[0] + p0) * out[1] + p1) * out[2] + p2)] +=
                      double(xv[size_t(((c * D + a) * H + b) * W + e)]) *
                      double(wv[size_t((((c * O + o) * KD + ka) * KH + kb) * KW + ke)]);
                }
  std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

// Loop: a body that adds the iteration number and a value captured from the enclosing graph to
// a carried sum, stops through its condition output, and emits the running sum as a scan output.
// Expected: M = 5, stop once the sum passes 10, step = 2: sums 2, 5, 9, 14 (4 iterations).
TEST(OnnxLoaderTest, LoopRunsTheBodyWithCapturesConditionAndScanOutputs) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  add_input(g, "M", 7, {});
  add_input(g, "step", 7, {});
  add_input(g, "s0", 7, {});
  auto* t = g->add_initializer();  // cond = true
  t->set_name("cond0");
  t->set_data_type(9);
  t->set_raw_data(std::string(1, '\1'));
  auto* loop = add_node(g, "Loop", {"M", "cond0", "s0"}, {"s_final", "sums"}, "loop");
  auto* a = loop->add_attribute();
  a->set_name("body");
  a->set_type(::onnx::AttributeProto::GRAPH);
  auto* b = a->mutable_g();
  add_input(b, "i", 7, {});
  add_input(b, "c_in", 9, {});
  add_input(b, "s_in", 7, {});
  auto* ten = b->add_initializer();
  ten->set_name("ten");
  ten->set_data_type(7);
  int64_t ten_v = 10;
  ten->set_raw_data(std::string(reinterpret_cast<const char*>(&ten_v), 8));
  add_node(b, "Add", {"s_in", "i"}, {"t1"});
  add_node(b, "Add", {"t1", "step"}, {"s_out"});  // "step" comes from the enclosing graph
  add_node(b, "LessOrEqual", {"s_out", "ten"}, {"c_out"});
  add_node(b, "Identity", {"s_out"}, {"scan"});
  for (const char* o : {"c_out", "s_out", "scan"}) b->add_output()->set_name(o);
  g->add_output()->set_name("s_final");
  g->add_output()->set_name("sums");
  ember::onnx::Model model = ember::onnx::load_from_memory(bytes_of(m));
  auto out = model.forward({{"M", from_vector<int64_t>({5}, Shape{})},
                            {"step", from_vector<int64_t>({2}, Shape{})},
                            {"s0", from_vector<int64_t>({0}, Shape{})}});
  EXPECT_EQ(out.at("s_final").to_vector<int64_t>(), std::vector<int64_t>{14});
  EXPECT_EQ(out.at("sums").shape(), (Shape{4}));
  EXPECT_EQ(out.at("sums").to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 9, 14}));
  // The trip count bounds it: M = 2 gives sums 2, 5.
  auto two = model.forward({{"M", from_vector<int64_t>({2}, Shape{})},
                            {"step", from_vector<int64_t>({2}, Shape{})},
                            {"s0", from_vector<int64_t>({0}, Shape{})}});
  EXPECT_EQ(two.at("sums").to_vector<int64_t>(), (std::vector<int64_t>{2, 5}));
  // A body reading a name nobody defines is refused at load, naming it.
  ::onnx::ModelProto bad = m;
  bad.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g()->mutable_node(1)->set_input(1, "nowhere");
  EXPECT_NE(error_of([&] { ember::onnx::load_from_memory(bytes_of(bad)); }).find("'nowhere'"), std::string::npos);
}


// If: the chosen branch runs with the enclosing values in scope; a branch may pass an outer
// value straight through as its output. then: y = x + 1 (its own initializer); else: y = x.
TEST(OnnxLoaderTest, IfRunsTheChosenBranchOnly) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  add_input(g, "cond", 9, {});
  add_input(g, "x", 1, {2});
  auto* node = add_node(g, "If", {"cond"}, {"y"}, "branch");
  auto branch = [&](const char* name) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::GRAPH);
    return a->mutable_g();
  };
  auto* then_g = branch("then_branch");
  set_float_tensor(then_g->add_initializer(), "one", {}, {1.0f});
  add_node(then_g, "Add", {"x", "one"}, {"x_plus_one"});
  then_g->add_output()->set_name("x_plus_one");
  branch("else_branch")->add_output()->set_name("x");  // the outer value itself
  g->add_output()->set_name("y");
  ember::onnx::Model model = ember::onnx::load_from_memory(bytes_of(m));
  Array x = from_vector<float>({2.5f, -4.0f}, Shape{2});
  auto yes = model.forward({{"cond", from_vector<bool>({true}, Shape{})}, {"x", x}});
  EXPECT_EQ(yes.at("y").to_vector<float>(), (std::vector<float>{3.5f, -3.0f}));
  auto no = model.forward({{"cond", from_vector<bool>({false}, Shape{})}, {"x", x}});
  EXPECT_EQ(no.at("y").to_vector<float>(), (std::vector<float>{2.5f, -4.0f}));
  // A condition with two values is refused, naming the node.
  std::string e = error_of([&] { model.forward({{"cond", from_vector<bool>({true, false}, Shape{2})}, {"x", x}}); });
  EXPECT_NE(e.find("'branch'"), std::string::npos) << e;
  EXPECT_NE(e.find("cond must hold one value"), std::string::npos) << e;
}

// Scan: a running sum over the rows of X (state s, scan output the sum after each step), with
// the input and output directions and axes as attributes. X = [[1,2],[3,4],[5,6]], s0 = [0,0].
namespace {
::onnx::ModelProto scan_model(std::vector<int64_t> in_dirs, std::vector<int64_t> in_axes, std::vector<int64_t> out_dirs,
                              std::vector<int64_t> out_axes, std::vector<int64_t> x_dims) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(16);
  auto* g = m.mutable_graph();
  add_input(g, "s0", 1, {2});
  add_input(g, "X", 1, x_dims);
  auto* scan = add_node(g, "Scan", {"s0", "X"}, {"s_final", "sums"}, "scan");
  auto ints = [&](const char* name, const std::vector<int64_t>& v) {
    if (v.empty()) return;
    auto* a = scan->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  auto* n = scan->add_attribute();
  n->set_name("num_scan_inputs");
  n->set_type(::onnx::AttributeProto::INT);
  n->set_i(1);
  ints("scan_input_directions", in_dirs);
  ints("scan_input_axes", in_axes);
  ints("scan_output_directions", out_dirs);
  ints("scan_output_axes", out_axes);
  auto* a = scan->add_attribute();
  a->set_name("body");
  a->set_type(::onnx::AttributeProto::GRAPH);
  auto* b = a->mutable_g();
  add_input(b, "s_in", 1, {2});
  add_input(b, "row", 1, {2});
  add_node(b, "Add", {"s_in", "row"}, {"s_out"});
  add_node(b, "Identity", {"s_out"}, {"scan_out"});
  for (const char* o : {"s_out", "scan_out"}) b->add_output()->set_name(o);
  g->add_output()->set_name("s_final");
  g->add_output()->set_name("sums");
  return m;
}
}  // namespace

TEST(OnnxLoaderTest, ScanCarriesStateAndStacksOutputsWithDirectionsAndAxes) {
  Array s0 = from_vector<float>({0, 0}, Shape{2});
  Array x = from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{3, 2});
  auto run = [&](auto&& model, const Array& input) { return model.forward({{"s0", s0}, {"X", input}}); };
  auto forward = run(ember::onnx::load_from_memory(bytes_of(scan_model({}, {}, {}, {}, {3, 2}))), x);
  EXPECT_EQ(forward.at("s_final").to_vector<float>(), (std::vector<float>{9, 12}));
  EXPECT_EQ(forward.at("sums").shape(), (Shape{3, 2}));
  EXPECT_EQ(forward.at("sums").to_vector<float>(), (std::vector<float>{1, 2, 4, 6, 9, 12}));
  // Input read in reverse: rows 5,6 then 3,4 then 1,2.
  auto reversed = run(ember::onnx::load_from_memory(bytes_of(scan_model({1}, {}, {}, {}, {3, 2}))), x);
  EXPECT_EQ(reversed.at("sums").to_vector<float>(), (std::vector<float>{5, 6, 8, 10, 9, 12}));
  // Outputs prepended instead of appended.
  auto out_rev = run(ember::onnx::load_from_memory(bytes_of(scan_model({}, {}, {1}, {}, {3, 2}))), x);
  EXPECT_EQ(out_rev.at("sums").to_vector<float>(), (std::vector<float>{9, 12, 4, 6, 1, 2}));
  // Scanning X^T along axis -1 and stacking along axis 1: the forward result transposed.
  Array xt = from_vector<float>({1, 3, 5, 2, 4, 6}, Shape{2, 3});
  auto axes = run(ember::onnx::load_from_memory(bytes_of(scan_model({}, {-1}, {}, {1}, {2, 3}))), xt);
  EXPECT_EQ(axes.at("s_final").to_vector<float>(), (std::vector<float>{9, 12}));
  EXPECT_EQ(axes.at("sums").shape(), (Shape{2, 3}));
  EXPECT_EQ(axes.at("sums").to_vector<float>(), (std::vector<float>{1, 4, 9, 2, 6, 12}));
  // A direction other than 0 or 1 is refused, naming the attribute.
  std::string e = error_of([&] { run(ember::onnx::load_from_memory(bytes_of(scan_model({2}, {}, {}, {}, {3, 2}))), x); });
  EXPECT_NE(e.find("scan_input_directions"), std::string::npos) << e;
}

// LSTM and GRU (linear_before_reset, what PyTorch exports) run each direction as one library call
// (ops_recurrent.cpp); with clip = 1e30, a no-op on these values that the call does not take, the
// same model runs the unrolled loop. Both directions, biases and initial states; the outputs of
// the two paths agree, and the first one's graph holds the library ops.
TEST(OnnxLoaderTest, RecurrentLibraryCallsMatchTheUnrolledLoop) {
  const int64_t T = 5, N = 3, I = 4, H = 6;
  for (const std::string op : {"LSTM", "GRU"}) {
    SCOPED_TRACE(op);
    const int64_t G = op == "LSTM" ? 4 : 3;
    auto values = [](size_t n, int seed) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = float(int((i * 7 + size_t(seed) * 13) % 19) - 9) / 12.0f;
      return v;
    };
    auto model = [&](bool unrolled) {
      ::onnx::ModelProto m;
      m.set_ir_version(8);
      m.add_opset_import()->set_version(17);
      auto* g = m.mutable_graph();
      add_input(g, "x", 1, {T, N, I});
      set_float_tensor(g->add_initializer(), "W", {2, G * H, I}, values(size_t(2 * G * H * I), 1));
      set_float_tensor(g->add_initializer(), "R", {2, G * H, H}, values(size_t(2 * G * H * H), 2));
      set_float_tensor(g->add_initializer(), "B", {2, 2 * G * H}, values(size_t(4 * G * H), 3));
      set_float_tensor(g->add_initializer(), "h0", {2, N, H}, values(size_t(2 * N * H), 4));
      std::vector<std::string> in{"x", "W", "R", "B", "", "h0"}, out{"Y", "Yh"};
      if (op == "LSTM") {
        set_float_tensor(g->add_initializer(), "c0", {2, N, H}, values(size_t(2 * N * H), 5));
        in.push_back("c0");
        out.push_back("Yc");
      }
      auto* n = add_node(g, op, in, out);
      auto attr = [&](const char* name) {
        auto* a = n->add_attribute();
        a->set_name(name);
        return a;
      };
      auto* hs = attr("hidden_size");
      hs->set_type(::onnx::AttributeProto::INT);
      hs->set_i(H);
      auto* dir = attr("direction");
      dir->set_type(::onnx::AttributeProto::STRING);
      dir->set_s("bidirectional");
      if (op == "GRU") {
        auto* lbr = attr("linear_before_reset");
        lbr->set_type(::onnx::AttributeProto::INT);
        lbr->set_i(1);
      }
      if (unrolled) {
        auto* clip = attr("clip");
        clip->set_type(::onnx::AttributeProto::FLOAT);
        clip->set_f(1e30f);
      }
      for (const std::string& o : out) g->add_output()->set_name(o);
      return ember::onnx::load_from_memory(bytes_of(m));
    };
    const Array x = from_vector(values(size_t(T * N * I), 6), {T, N, I});
    ember::onnx::Model fused = model(false), unrolled = model(true);
    auto a = fused.forward({{"x", x}}), b = unrolled.forward({{"x", x}});
    const Op call = op == "LSTM" ? Op::LstmRecurrence : Op::GruRecurrence;
    EXPECT_TRUE(ember::testing::ops_in_graph(a.at("Y")).count(call));
    EXPECT_FALSE(ember::testing::ops_in_graph(b.at("Y")).count(call));
    for (const auto& [name, want] : b) {
      std::vector<float> got = a.at(name).to_vector<float>(), ref = want.to_vector<float>();
      ASSERT_EQ(got.size(), ref.size()) << name;
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 2e-6) << name << " element " << i;
    }
  }
}

#endif  // EMBER_HAVE_ONNX

// ONNX integer Div truncates toward zero, exactly for every int64: quotients computed by hand,
// with operands past 2^53 (where a detour through f64 rounds) and every sign combination.
TEST(OnnxLoaderTest, IntegerDivTruncatesExactlyPastTwoToThe53) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  auto* g = m.mutable_graph();
  add_input(g, "a", 7, {6});  // 7: INT64
  add_input(g, "b", 7, {6});
  add_node(g, "Div", {"a", "b"}, {"q"});
  g->add_output()->set_name("q");
  ember::onnx::Model model = ember::onnx::load_from_memory(bytes_of(m));
  const int64_t big = (int64_t(1) << 53) + 1;  // 9007199254740993: not a double
  Array a = from_vector<int64_t>({big, -big, 7, -7, 7, -7}, {6});
  Array b = from_vector<int64_t>({1, 1, 2, 2, -2, -2}, {6});
  Array q = model.forward({{"a", a}, {"b", b}}).at("q");
  EXPECT_EQ(q.dtype(), DType::I64);
  EXPECT_EQ(q.to_vector<int64_t>(), (std::vector<int64_t>{big, -big, 3, -3, -3, 3}));
}
