// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli eval` and `kvscope-cli presets` end to end on a synthetic dump.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/quant/spec.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

using Json = nlohmann::json;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CliEval : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    dump_ = dir_->file("s.h5");
    // 3 layers × 2 kv heads, D = 32: small enough for a fast test, with queries and pre-RoPE keys.
    auto r = test::runCli("synth -q --layers 3 --kv-heads 2 --heads 4 --tokens 96 --queries 8 --head-dim 32 '" +
                          dump_ + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static test::RunResult eval(const std::string& args) { return test::runCli("eval '" + dump_ + "' " + args); }

  static test::TempDir* dir_;
  static std::string dump_;
};

test::TempDir* CliEval::dir_ = nullptr;
std::string CliEval::dump_;

TEST_F(CliEval, PresetJsonOnStandardOutputParsesWithEveryHead) {
  auto r = eval("--preset kivi-2 --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["kvscope_report"], 1);
  EXPECT_EQ(j["preset"], "kivi-2");
  EXPECT_EQ(j["key"]["spec"], toString(*parseSpec("int2,axis=channel,group=32,chunk=128")));
  // T = 96 < 128: the key chunk never fills and every value is in the residual, 16 bits per element.
  EXPECT_EQ(j["key"]["bits_per_element"], 16.0);
  ASSERT_EQ(j["layers"].size(), 3u);
  for (const auto& l : j["layers"]) {
    ASSERT_EQ(l["heads"].size(), 2u);
    for (const auto& h : l["heads"]) {
      EXPECT_EQ(h["key"]["mse"], 0.0) << "all tokens kept";
      EXPECT_FALSE(h["attention"].is_null());
    }
  }
}

TEST_F(CliEval, SpecsCsvAndJsonFiles) {
  const std::string json = dir_->file("r.json"), csv = dir_->file("r.csv");
  auto r = eval("--key int4,axis=channel,prerope --value q4_0 --layers 0,2 --queries last:4 --json '" + json +
                "' --csv '" + csv + "'");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << "with --json/--csv to files nothing goes to standard output";
  Json j = Json::parse(slurp(json));
  EXPECT_EQ(j["key"]["spec"], "int4,prerope,axis=channel");
  EXPECT_EQ(j["value"]["bits_per_element"], 4.5);
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][1]["layer"], 2);
  EXPECT_EQ(j["options"]["queries"], "last:4");
  EXPECT_GT(j["summary"]["key"]["mse"].get<double>(), 0.0);
  std::istringstream lines(slurp(csv));
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) ++rows;
  EXPECT_EQ(rows, 1 + 2 * 2) << "header + layers × kv heads";
}

TEST_F(CliEval, ReadableSummaryWithoutOutputOptions) {
  auto r = eval("--key int8 --value int8");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("int8"), std::string::npos);
  EXPECT_NE(r.out.find("all"), std::string::npos);
  EXPECT_NE(r.out.find("bits/element"), std::string::npos);
}

TEST_F(CliEval, BadInputExitsTwoWithTheReason) {
  struct Case {
    std::string args;
    std::string fragment;
  };
  const Case cases[] = {
      {"--key int9 --value int4", "int1 … int8"},
      {"--key int4 --value int4,prerope", "keys only"},
      {"--key int4", "--value"},
      {"--preset kivi-2 --key int4 --value int4", "not both"},
      {"--preset kivi-3", "kivi-2"},
      {"--key int4 --value int4 --queries last:0", "last:N"},
      {"--key int4 --value int4 --queries last:99", "8"},
      {"--key int4 --value int4 --nonfinite ignore", "skip-heads"},
      {"--key int4 --value int4 --layers 5", "layers"},
      {"--key int4 --value int4 --sequence 3", "sequence"},
      {"--key q4_0,group=32 --value int4", "group"},
      {"--key int4 --value int4 --json - --csv -", "standard output"},
  };
  for (const Case& c : cases) {
    auto r = eval(c.args);
    EXPECT_EQ(r.exitCode, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.args << " -> " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
  auto missing = test::runCli("eval '" + dir_->file("nope.h5") + "' --key int4 --value int4");
  EXPECT_EQ(missing.exitCode, 2) << missing.err;
}

TEST_F(CliEval, APlanQuantizesEachLayerWithItsOwnSpec) {
  auto r = eval("--key 'q4_0;first1+last1:q8_0' --value 'int4;1:int8' --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Json plan = Json::parse(r.out);
  EXPECT_EQ(plan["key"]["spec"], "q4_0;first1+last1:q8_0");
  EXPECT_EQ(plan["value"]["spec"], "int4;1:int8");
  // q8_0, q4_0, q8_0: (8.5 + 4.5 + 8.5) / 3 bits per element; int4 (token groups of D = 32,
  // fp16 scale and min) is 5, int8 is 9: (5 + 9 + 5) / 3.
  EXPECT_DOUBLE_EQ(plan["key"]["bits_per_element"].get<double>(), 21.5 / 3);
  EXPECT_DOUBLE_EQ(plan["value"]["bits_per_element"].get<double>(), 19.0 / 3);
  // Bytes per token: KVH·D = 64 elements per token and layer, K and V.
  EXPECT_DOUBLE_EQ(plan["bytes_per_token"]["quantized"].get<double>(), 64 * (21.5 + 19) / 8);
  ASSERT_EQ(plan["layers"].size(), 3u);
  const char* keys[] = {"q8_0", "q4_0", "q8_0"};
  const char* values[] = {"int4", "int8", "int4"};
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(plan["layers"][l]["key_spec"], keys[l]) << l;
    EXPECT_EQ(plan["layers"][l]["value_spec"], values[l]) << l;
    // Each layer's metrics are those of a uniform run with that layer's specs.
    auto u = eval(std::string("--key ") + keys[l] + " --value " + values[l] + " --json -");
    ASSERT_EQ(u.exitCode, 0) << u.err;
    const Json uniform = Json::parse(u.out);
    EXPECT_EQ(plan["layers"][l]["heads"], uniform["layers"][l]["heads"]) << "layer " << l;
    EXPECT_EQ(uniform["layers"][l]["key_spec"], keys[l]);
  }
}

TEST_F(CliEval, ABadPlanExitsTwoNamingTheFlagAndThePart) {
  struct Case {
    std::string args;
    std::string fragment;
  };
  const Case cases[] = {
      {"--key 'q4_0;3-1:q8_0' --value int4", "--key: plan 'q4_0;3-1:q8_0': part 2 '3-1:q8_0'"},
      {"--key 'q4_0;3-1:q8_0' --value int4", "M ≥ N"},
      {"--key int4 --value 'int4;first0:int8'", "--value: plan 'int4;first0:int8': part 2 'first0:int8'"},
      {"--key 'int4;' --value int4", "--key: plan 'int4;': part 2 '' is empty"},
      {"--key 'int4;1:int9' --value int4", "--key: plan 'int4;1:int9': part 2 '1:int9': spec 'int9'"},
      {"--key 'int4;3:int8' --value int4", "--key: plan 'int4;3:int8': part 2 '3:int8': layer 3 does not exist"},
      {"--key int4 --value 'int4;last4:int8'", "--value: plan 'int4;last4:int8'"},
  };
  for (const Case& c : cases) {
    auto r = eval(c.args);
    EXPECT_EQ(r.exitCode, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.args << " -> " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
}

TEST_F(CliEval, FailedRunLeavesNoOutputFile) {
  const std::string json = dir_->file("never.json");
  auto r = eval("--key int4 --value int4,prerope --json '" + json + "'");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_FALSE(std::filesystem::exists(json));
}

TEST(CliPresets, JsonListsEveryPresetWithBitsAtTheReferenceShape) {
  auto r = test::runCli("presets --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["reference_shape"]["tokens"], 32768);
  ASSERT_EQ(j["presets"].size(), 25u);
  EXPECT_EQ(j["presets"][0]["name"], "kivi-2");
  // chunk=128 divides T = 32768: every key is quantized, 2 payload bits + a 16-bit scale and a
  // 16-bit min per group of 32 tokens = 2 + 32/32 = 3 bits per element.
  EXPECT_EQ(j["presets"][0]["key_bits_per_element"], 3.0);
  // Shape-dependent rows give their rule without a dump.
  bool sawRule = false;
  for (const auto& p : j["presets"]) {
    if (p["name"] == "llamacpp-q4_0") {
      sawRule = true;
      EXPECT_TRUE(p["depends_on_shape"].get<bool>());
      EXPECT_NE(p["key_rule"].get<std::string>().find("D % 64 = 0"), std::string::npos);
    }
  }
  EXPECT_TRUE(sawRule);
  auto text = test::runCli("presets");
  ASSERT_EQ(text.exitCode, 0);
  EXPECT_NE(text.out.find("kvquant-3-1pct"), std::string::npos);
  EXPECT_NE(text.out.find("non-uniform"), std::string::npos);  // kvquant-* on nuq (§11)
}

}  // namespace
}  // namespace kvscope
