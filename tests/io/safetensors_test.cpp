// safetensors records: bit-exact round trips of every dtype, a PyTorch-written file (torch names
// remapped onto an Ember model) giving PyTorch's outputs, atomic saves (a crash mid-save leaves
// the previous file intact), clear errors for malformed files, and the fuzz corpus replayed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io/corpus_replay.h"
#include "io/safetensors_internal.h"
#include "nn/nn_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::det;
using ember::testing::tests_dir;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(SafetensorsTest, EveryDtypeRoundTripsBitExact) {
  Array base = mul(det({2, 3}, 0.7, 0.1, DType::F32), 100.0);
  io::TensorMap t{{"f32", base},
                  {"f64", det({4}, 0.3, 0.2)},
                  {"f16", cast(base, DType::F16)},
                  {"bf16", cast(base, DType::BF16)},
                  {"i32", cast(base, DType::I32)},
                  {"i64", cast(base, DType::I64)},
                  {"u8", cast(abs(base), DType::U8)},
                  {"bool", gt(base, 0.0)},
                  {"empty", zeros({0, 3})},
                  {"scalar", full(Shape{}, 2.5)}};
  std::string path = temp_path("all_dtypes.safetensors");
  io::save_file(path, t, {{"note", "hello"}});
  io::SafetensorsFile f = io::load_file(path);
  EXPECT_EQ(f.metadata.at("note"), "hello");
  ASSERT_EQ(f.tensors.size(), t.size());
  for (auto& [name, a] : t) {
    const Array& b = f.tensors.at(name);
    EXPECT_EQ(b.dtype(), a.dtype()) << name;
    EXPECT_EQ(b.shape(), a.shape()) << name;
    // Bit-exact: compare the serialized bytes of the reloaded tensor with the original's.
    EXPECT_EQ(io::serialize({{name, b}}), io::serialize({{name, a}})) << name;
  }
  // Saving again gives the same bytes.
  EXPECT_EQ(read_bytes(path), io::serialize(t, {{"note", "hello"}}));
}

TEST(SafetensorsTest, ReadsPyTorchDtypes) {
  io::SafetensorsFile f = io::load_file(tests_dir() + "/io/data/torch_dtypes.safetensors");
  auto want = ember::testing::read_reference(tests_dir() + "/io/data/torch_dtypes.txt");
  std::map<std::string, DType> dtypes{{"f32", DType::F32}, {"f64", DType::F64}, {"f16", DType::F16},
                                      {"bf16", DType::BF16}, {"i32", DType::I32}, {"i64", DType::I64},
                                      {"u8", DType::U8},     {"bool", DType::Bool}};
  for (auto& [name, dt] : dtypes) {
    const Array& a = f.tensors.at(name);
    EXPECT_EQ(a.dtype(), dt) << name;
    EXPECT_EQ(a.to_vector<double>(), want.at(name)) << name;  // exact: same rounding as PyTorch
  }
}

// PyTorch's TorchMlp: features = Sequential(Linear(6, 8), BatchNorm1d(8)), head = Linear(8, 3).
struct Mlp : Module {
  Linear fc1{{.in = 6, .out = 8}};
  BatchNorm1d bn{{.features = 8}};
  Linear fc2{{.in = 8, .out = 3}};
  EMBER_MODULE(fc1, bn, fc2)
  Array forward(const Array& x) { return fc2.forward(relu(bn.forward(fc1.forward(x)))); }
};

TEST(SafetensorsTest, PyTorchModelLoadsWithRemappedKeysAndMatches) {
  Mlp model;
  std::string path = tests_dir() + "/io/data/torch_mlp.safetensors";
  try {
    load(model, path);  // torch's names do not match without remapping
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected keys: features.0.bias"), std::string::npos) << e.what();
  }
  load(model, path, {.remap = io::rename_prefixes({{"features.0.", "fc1."}, {"features.1.", "bn."}, {"head.", "fc2."}})});
  model.eval();
  Array out = model.forward(det({4, 6}, 0.45, 0.3, DType::F32));
  auto want = ember::testing::read_reference(tests_dir() + "/io/data/torch_mlp_output.txt").at("out");
  EXPECT_TRUE(all_close(out, want, 1e-5, 1e-6));
  EXPECT_GT(model.bn.num_batches_tracked.array().item<int64_t>(), 0);
}

TEST(SafetensorsTest, ModelRoundTripIsBitExact) {
  Mlp a, b;
  a.forward(ones({3, 6}));  // running statistics move
  std::string path = temp_path("mlp.safetensors");
  save(a, path);
  load(b, path);
  for (auto& [name, v] : a.state_dict())
    EXPECT_EQ(io::serialize({{name, v}}), io::serialize({{name, b.state_dict().at(name)}})) << name;
  Array x = det({2, 6}, 0.2, 0.1, DType::F32);
  a.eval();
  b.eval();
  EXPECT_EQ(a.forward(x).to_vector<float>(), b.forward(x).to_vector<float>());
}

// save() records each leaf module's type and options; load() into a model built with other
// options (which the shapes do not show) names the module and both, unless told not to check.
TEST(SafetensorsTest, LoadChecksTheRecordedModuleOptions) {
  auto model = [](double eps, bool tanh_gelu, DType dtype, uint64_t seed = 1) {
    return std::make_shared<nn::Sequential>(nn::Linear({.in = 3, .out = 4, .seed = seed, .dtype = dtype}),
                                            nn::GELU({.tanh_approximation = tanh_gelu}),
                                            nn::BatchNorm1d({.features = 4, .eps = eps, .dtype = dtype}));
  };
  const std::string path = temp_path("config.safetensors");
  auto saved = model(1e-3, false, DType::F32);
  save(*saved, path);
  const io::Metadata meta = io::load_file(path).metadata;
  ASSERT_TRUE(meta.count("ember.config"));
  EXPECT_NE(meta.at("ember.config").find("BatchNorm1d"), std::string::npos) << meta.at("ember.config");
  // The same options, in another dtype (load converts values): no complaint; values equal.
  auto same = model(1e-3, false, DType::F64);
  load(*same, path);
  EXPECT_EQ(same->state_dict().at("0.weight").to_vector<double>(),
            cast(saved->state_dict().at("0.weight"), DType::F64).to_vector<double>());
  // Other eps and another GELU: both modules named, with the saved and current options.
  auto other = model(1e-5, true, DType::F32, 2);  // seeds are not compared
  const std::string e = testing::error_of([&] { load(*other, path); });
  EXPECT_NE(e.find("load: " + path + " was saved from a model with other module options (2 modules differ)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("module '1': saved as GELU {\"tanh_approximation\":false}, this model has GELU "
                   "{\"tanh_approximation\":true}"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("module '2': saved as BatchNorm1d"), std::string::npos) << e;
  EXPECT_NE(e.find("\"eps\":0.001"), std::string::npos) << e;
  EXPECT_NE(e.find("check_config = false"), std::string::npos) << e;
  // Nothing was loaded by the failed call; with the check off the values load.
  EXPECT_NE(other->state_dict().at("0.weight").to_vector<float>(), saved->state_dict().at("0.weight").to_vector<float>());
  load(*other, path, {.check_config = false});
  EXPECT_EQ(other->state_dict().at("0.weight").to_vector<float>(), saved->state_dict().at("0.weight").to_vector<float>());
  // A file without the record (written by another tool) loads as before; a malformed record is
  // refused, naming the file, rather than skipped.
  io::save_file(path, saved->state_dict());
  load(*other, path);
  for (const char* bad : {"[1, 2]", "{\"0\": 3}", "{not json"}) {
    io::save_file(path, saved->state_dict(), {{"ember.config", bad}});
    EXPECT_NE(testing::error_of([&] { load(*other, path); }).find("load: " + path + " has a malformed 'ember.config' record"),
              std::string::npos)
        << bad;
  }
  std::remove(path.c_str());
}

// A saved file gets 0666 less the umask, as any file the program creates (mkstemp's 0600 hid
// saved models from the user's group even where the umask allowed it).
TEST(SafetensorsTest, SavedFilesHonorTheUmask) {
  const std::string path = temp_path("umask.safetensors");
  for (mode_t mask : {mode_t(022), mode_t(077), mode_t(002)}) {
    const mode_t old = ::umask(mask);
    io::save_file(path, {{"w", full({4}, 1.0)}});
    ::umask(old);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask) << "umask " << std::oct << mask;
  }
  std::remove(path.c_str());
}

TEST(SafetensorsTest, CrashDuringSaveLeavesPreviousFileIntact) {
  std::string path = temp_path("atomic.safetensors");
  io::TensorMap first{{"w", full({256}, 1.0)}};
  io::save_file(path, first);
  std::vector<uint8_t> before = read_bytes(path);
  std::vector<uint8_t> second = io::serialize({{"w", full({256}, 2.0)}});
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // dies half-way through writing, as a crash would
    io::detail::write_atomically(path, second.data(), second.size(), int64_t(second.size() / 2));
    std::_Exit(0);  // not reached
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);  // the simulated crash happened
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(io::load_file(path).tensors.at("w").to_vector<float>(), std::vector<float>(256, 1.0f));
  // A save that completes replaces the file.
  io::detail::write_atomically(path, second.data(), second.size());
  EXPECT_EQ(io::load_file(path).tensors.at("w").to_vector<float>(), std::vector<float>(256, 2.0f));
  // A save into a folder that does not exist fails cleanly.
  EXPECT_THROW(io::save_file(temp_path("no/such/dir/x.safetensors"), first), Error);
  // The killed writer leaves its temporary file behind (as a real crash would); remove it so
  // repeated runs do not litter the temp folder.
  for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir()))
    if (entry.path().filename().string().starts_with("atomic.safetensors.tmp-")) std::filesystem::remove(entry.path());
  std::filesystem::remove(path);
}

void expect_parse_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  try {
    io::parse(bytes.data(), bytes.size());
    ADD_FAILURE() << "parsed a malformed file; expected an error with '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

std::vector<uint8_t> with_header(const std::string& json, size_t data_bytes) {
  std::vector<uint8_t> out(8 + json.size() + data_bytes, 0);
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  std::copy(json.begin(), json.end(), out.begin() + 8);
  return out;
}

TEST(SafetensorsTest, MalformedFilesGiveClearErrors) {
  expect_parse_error({1, 2, 3}, "too short");
  expect_parse_error({}, "too short");
}

TEST(SafetensorsTest, MalformedHeaders) {
  std::vector<uint8_t> ok = io::serialize({{"x", full({2, 2}, 1.0)}});
  EXPECT_NO_THROW(io::parse(ok.data(), ok.size()));
  EXPECT_EQ(io::parse(with_header("{}", 0).data(), 8 + 2).tensors.size(), 0u);
  std::vector<uint8_t> truncated(ok.begin(), ok.end() - 4);
  expect_parse_error(truncated, "outside the data section");
  std::vector<uint8_t> huge = ok;
  huge[7] = 0x7f;
  expect_parse_error(huge, "exceeds the limit");
  std::vector<uint8_t> past = ok;
  past[0] = uint8_t(past[0] + 64);
  expect_parse_error(past, "runs past the end");
  expect_parse_error(with_header("[1, 2]", 0), "header must start with '{'");
  expect_parse_error(with_header("{\"x\": ", 0), "not valid JSON");
  expect_parse_error(with_header(R"({"x": {"dtype": "F32", "shape": [2]}})", 8), "needs dtype, shape and data_offsets");
  expect_parse_error(with_header(R"({"x": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", 2),
                     "unsupported dtype 'F8_E4M3'");
  expect_parse_error(with_header(R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
                     "needs 12 bytes, data_offsets give 8");
  expect_parse_error(with_header(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
                     "non-negative");
  expect_parse_error(
      with_header(R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 4]}})", 4),
      "overflows int64");
  expect_parse_error(with_header(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8),
                     "outside the data section");
  expect_parse_error(with_header(R"({"__metadata__": {"a": 1}})", 0), "not a string");
  expect_parse_error(with_header(R"({"x": {"dtype": "F32", "shape": [1,1,1,1,1,1,1,1,1], "data_offsets": [0, 4]}})", 4),
                     "rank 9");
  EXPECT_THROW(io::load_file(temp_path("does-not-exist.safetensors")), Error);
}

TEST(SafetensorsTest, FuzzCorpusReplaysWithoutCrashing) {
  // tools/fuzz/safetensors_fuzz.cpp's committed corpus (tools/fuzz/make_corpus.py): valid_* files
  // parse, fuzz_* files parse or raise ember::Error, every other file raises ember::Error.
  auto counts = ember::testing::replay_corpus(tests_dir() + "/io/data/safetensors_corpus",
                                              [](const std::vector<uint8_t>& b) { (void)io::parse(b.data(), b.size()); });
  EXPECT_GE(counts.files, 10);
  EXPECT_GE(counts.parsed, 6);
  EXPECT_GE(counts.refused, 30);
}

}  // namespace
}  // namespace ember
