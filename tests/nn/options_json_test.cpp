// The JSON configs of every layer-options struct: to_json then from_json gives the same JSON
// back (defaults and a non-default instance), and a key from_json does not know — a typo such as
// "momentom" — is an Error naming the key and listing the real ones, never a default kept
// silently. A null value (an unset optional) is accepted.
#include <gtest/gtest.h>

#include <ember/ember.h>

#include <nlohmann/json.hpp>

namespace ember::nn {
namespace {

using json = nlohmann::json;

template <class T>
class OptionsJsonTest : public ::testing::Test {};

using AllOptions = ::testing::Types<
    LinearOptions, DropoutOptions, EmbeddingOptions, BatchNormOptions, LayerNormOptions, RMSNormOptions,
    GroupNormOptions, InstanceNormOptions, Conv1dLayerOptions, Conv2dLayerOptions, Conv3dLayerOptions,
    ConvTranspose1dLayerOptions, ConvTranspose2dLayerOptions, PReLUOptions, InterpolateOptions,
    RecurrentCellOptions, RecurrentOptions, MultiheadAttentionOptions, TransformerLayerOptions,
    TransformerStackOptions, SinusoidalPositionalEncodingOptions, RotaryEmbeddingOptions>;
TYPED_TEST_SUITE(OptionsJsonTest, AllOptions);

TYPED_TEST(OptionsJsonTest, RoundTripsAndRefusesUnknownKeys) {
  const std::string written = TypeParam{}.to_json();
  EXPECT_EQ(json::parse(TypeParam::from_json(written).to_json()), json::parse(written));
  json j = json::parse(written);
  ASSERT_TRUE(j.is_object());
  j["bogus_key"] = 1;
  try {
    (void)TypeParam::from_json(j.dump());
    FAIL() << "accepted " << j.dump();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unknown key 'bogus_key'"), std::string::npos) << m;
    const json keys = json::parse(written);
    for (const auto& [key, value] : keys.items())
      EXPECT_NE(m.find(key), std::string::npos) << "the message does not list '" << key << "': " << m;
  }
  j.erase("bogus_key");
  j["bogus_optional"] = nullptr;  // null: nothing set, nothing lost
  EXPECT_NO_THROW((void)TypeParam::from_json(j.dump()));
}

TEST(OptionsJsonTest, ATypoInATrainingSettingIsNamed) {
  try {
    (void)BatchNormOptions::from_json(R"({"features": 8, "momentom": 0.2})");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BatchNormOptions::from_json: unknown key 'momentom'"), std::string::npos)
        << e.what();
  }
  BatchNormOptions o = BatchNormOptions::from_json(R"({"features": 8, "momentum": 0.2, "seed": null})");
  EXPECT_EQ(o.features, 8);
  EXPECT_EQ(o.momentum, 0.2);
}

}  // namespace
}  // namespace ember::nn
