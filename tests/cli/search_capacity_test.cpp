// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli search` and `kvscope-cli capacity` end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace kvscope {
namespace {

using test::runCli;

TEST(CliCapacity, Llama3ShapeReportsFp16AndQuantizedBytesPerToken) {
  auto r = runCli("capacity --layers 32 --kv-heads 8 --head-dim 128 --key int4 --value int4 "
                  "--memory 80GiB --weights 16GiB --context 8192 --device h200 --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kvscope_capacity"], 1);
  EXPECT_DOUBLE_EQ(j["entries"][0]["bytes_per_token"].get<double>(), 131072.0);
  EXPECT_DOUBLE_EQ(j["entries"][1]["bytes_per_token"].get<double>(), 34816.0);
  EXPECT_EQ(j["entries"][0]["sequences_fit"], 64);
  EXPECT_DOUBLE_EQ(j["hardware"]["bandwidth_bytes_per_second"].get<double>(), 4.8e12);
  EXPECT_DOUBLE_EQ(j["entries"][0]["decode"]["kv_bytes_read"].get<double>(), 8192.0 * 131072);
  EXPECT_FALSE(j["formulas"].empty());
}

TEST(CliCapacity, APlanCountsEachLayerUnderItsOwnSpec) {
  // 2 layers × 8 kv heads × D 128 = 1024 elements per token and layer. K: q8_0 then q4_0
  // (8.5 + 4.5 bits per element), V: q4_0 twice: (13 + 9) · 1024 / 8 bytes per token.
  auto r = runCli("capacity --layers 2 --kv-heads 8 --head-dim 128 --key 'q8_0;1:q4_0' --value q4_0 "
                  "--context 8192 --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["entries"][1]["key_spec"], "q8_0;1:q4_0");
  EXPECT_DOUBLE_EQ(j["entries"][1]["key_bits_per_element"].get<double>(), 6.5);
  EXPECT_DOUBLE_EQ(j["entries"][1]["bytes_per_token"].get<double>(), 22.0 * 1024 / 8);
  auto bad = runCli("capacity --layers 2 --kv-heads 8 --head-dim 128 --key 'q8_0;2:q4_0' --value q4_0");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("--key: plan 'q8_0;2:q4_0': part 2 '2:q4_0': layer 2 does not exist"), std::string::npos)
      << bad.err;
}

TEST(CliCapacity, TextOutputStatesTheFormula) {
  auto r = runCli("capacity --layers 2 --kv-heads 2 --head-dim 64 --key q4_0 --value q8_0 "
                  "--decode --bandwidth 1TB/s --ops 10Tops/s");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("time = max(bytes_read / bandwidth, dequant_ops / op_rate)"),
            std::string::npos);
  EXPECT_NE(r.out.find("memory-bound"), std::string::npos);
}

TEST(CliCapacity, BadSizesAndMissingHardwareAreClearErrors) {
  auto r = runCli("capacity --layers 2 --kv-heads 2 --head-dim 64 --key int4 --value int4 "
                  "--memory 80XB");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--memory '80XB'"), std::string::npos) << r.err;
  r = runCli("capacity --layers 2 --kv-heads 2 --head-dim 64 --key int4 --value int4 --decode");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
  r = runCli("capacity --key int4 --value int4");
  EXPECT_EQ(r.exitCode, 2);
  r = runCli("capacity --layers 2 --kv-heads 2 --head-dim 64 --key int4 --value int4 "
             "--device tpu9");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("h200"), std::string::npos) << r.err;
}

class CliSearch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    dump_ = dir_->file("s.h5");
    auto r = runCli("synth -q --layers 2 --kv-heads 2 --heads 4 --tokens 64 --queries 8 "
                    "--head-dim 32 '" + dump_ + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    candidates_ = dir_->file("candidates.txt");
    std::ofstream(candidates_) << "# cheapest first does not matter\nfp16\nint2\nint8 # ok\n";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static inline test::TempDir* dir_ = nullptr;
  static inline std::string dump_, candidates_;
};

TEST_F(CliSearch, JsonNamesTheChosenSpecsAndTheirTables) {
  auto r = runCli("search '" + dump_ + "' --key-budget kl_mean=1e9 --value-budget "
                  "output_rel_error=0 --candidates '" + candidates_ + "' --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kvscope_search"], 1);
  EXPECT_EQ(j["key"]["spec"], "int2");          // any damage allowed: the cheapest
  EXPECT_EQ(j["value"]["spec"], "fp16");        // no damage allowed: exact fp16 of an fp16 dump
  EXPECT_EQ(j["key"]["budget"]["kind"], "maximum");
  EXPECT_EQ(j["key"]["candidates"].size(), 3u);
  EXPECT_EQ(j["value"]["judged_on"], "value_only");
  EXPECT_FALSE(j["joint"].is_null());
  EXPECT_DOUBLE_EQ(j["bytes_per_token"]["baseline_fp16"].get<double>(), 512.0);
}

TEST_F(CliSearch, AFixedSideIsStoredUnderItsPlanInTheJointResult) {
  // Values searched, keys fixed to a plan: layer 0 int4, layer 1 int8.
  auto r = runCli("search '" + dump_ + "' --value-budget output_rel_error=1e9 --key 'int8;0:int4' --candidates '" +
                  candidates_ + "' --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["key"]["searched"], false);
  EXPECT_EQ(j["key"]["spec"], "int8;0:int4");
  EXPECT_EQ(j["value"]["spec"], "int2");
  ASSERT_FALSE(j["joint"].is_null());
  ASSERT_EQ(j["joint"]["layers"].size(), 2u);
  EXPECT_EQ(j["joint"]["layers"][0]["key_spec"], "int4");
  EXPECT_EQ(j["joint"]["layers"][1]["key_spec"], "int8");
  // Bytes per token over the 2 layers, KVH·D = 64 elements each: K int4 (5 bpe: token groups of
  // D = 32, fp16 scale and min) + int8 (9), V int2 (2 + 1 = 3) on both.
  EXPECT_DOUBLE_EQ(j["bytes_per_token"]["chosen"].get<double>(), 64.0 * (5 + 9 + 3 + 3) / 8);
  auto both = runCli("search '" + dump_ + "' --key-budget kl_mean=1 --key int4");
  EXPECT_EQ(both.exitCode, 2);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
  auto bad = runCli("search '" + dump_ + "' --value-budget kl_mean=1 --key 'int4;2:int8'");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("--key: plan 'int4;2:int8'"), std::string::npos) << bad.err;
}

TEST_F(CliSearch, TextSaysWhenNoCandidateMeets) {
  auto r = runCli("search '" + dump_ + "' --key-budget top1_agreement=1 --candidates '" +
                  candidates_ + "' --layers 0");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("K budget top1_agreement ≥ 1"), std::string::npos) << r.out;
  auto none = runCli("search '" + dump_ + "' --key-budget kl_mean=0 --value-budget "
                     "output_rel_error=0 --candidates '" + candidates_ + "' --layers 0");
  ASSERT_EQ(none.exitCode, 0) << none.err;
  // fp16 is exact, so both budgets are met; a list without it meets neither.
  std::ofstream(dir_->file("lossy.txt")) << "int2\n";
  auto lossy = runCli("search '" + dump_ + "' --key-budget kl_mean=0 --candidates '" +
                      dir_->file("lossy.txt") + "'");
  ASSERT_EQ(lossy.exitCode, 0) << lossy.err;
  EXPECT_NE(lossy.out.find("NO CANDIDATE MEETS THE BUDGET"), std::string::npos) << lossy.out;
}

TEST_F(CliSearch, BadBudgetsAndCandidateFilesAreClearErrors) {
  auto r = runCli("search '" + dump_ + "' --key-budget kl=1");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("kl_mean"), std::string::npos) << r.err;
  r = runCli("search '" + dump_ + "'");
  EXPECT_EQ(r.exitCode, 2);
  std::ofstream(dir_->file("bad.txt")) << "int4\nint4,axis=diagonal\n";
  r = runCli("search '" + dump_ + "' --key-budget kl_mean=1 --candidates '" + dir_->file("bad.txt") + "'");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("bad.txt:2"), std::string::npos) << r.err;
}

TEST_F(CliSearch, PlanJsonHasAPlanPerLayerItsEngineFlagsAndTheJointReport) {
  // Any key damage allowed: the cheapest candidate (int2) on every layer; no value damage: the
  // fp16 of an fp16 dump, exact.
  auto r = runCli("search '" + dump_ + "' --key-budget kl_mean=1e9 --value-budget output_rel_error=0 --plan "
                  "--candidates '" + candidates_ + "' --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kvscope_plan_search"], 1);
  EXPECT_EQ(j["shape"], "per-layer");
  EXPECT_TRUE(j["found"].get<bool>());
  EXPECT_EQ(j["key_plan"], "int2");
  EXPECT_EQ(j["value_plan"], "fp16");
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][1]["key_spec"], "int2");
  EXPECT_DOUBLE_EQ(j["layers"][1]["value_damage"].get<double>(), 0.0);
  // The joint report is eval's.
  EXPECT_EQ(j["joint"]["kvscope_report"], 1);
  // fp16 keys of no llama.cpp type: int2 is none, so no flags.
  bool sawLlama = false;
  for (const auto& f : j["engine_flags"]) {
    if (f["engine"] == "llama.cpp") {
      sawLlama = true;
      EXPECT_FALSE(f["expressible"].get<bool>());
    }
  }
  EXPECT_TRUE(sawLlama);
}

TEST_F(CliSearch, PlanForLlamaCppIsUniformAndSaysSo) {
  auto r = runCli("search '" + dump_ + "' --key-budget kl_mean=1e9 --value-budget output_rel_error=1e9 --plan "
                  "--engine llama.cpp");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("llama.cpp has no per-layer cache types"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("llama.cpp: llama.cpp -ctk "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("joint evaluation"), std::string::npos) << r.out;
}

TEST_F(CliSearch, PlanFlagsThatDoNotFitAreClearErrors) {
  auto r = runCli("search '" + dump_ + "' --key-budget kl_mean=1e-3 --plan --per-layer");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("drop --per-layer"), std::string::npos) << r.err;
  r = runCli("search '" + dump_ + "' --key-budget kl_mean=1e-3 --plan --engine 'llama.cpp -ctk q4_0'");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("with --plan, --engine names the engine"), std::string::npos) << r.err;
  r = runCli("search '" + dump_ + "' --key-budget kl_mean=1e-3 --e2e");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--e2e and --model go with --plan"), std::string::npos) << r.err;
  // A synthetic dump carries no model.
  r = runCli("search '" + dump_ + "' --key-budget kl_mean=1e9 --plan --e2e");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("no model_path attribute"), std::string::npos) << r.err;
}

TEST(CliSearchPlan, E2eComparesThePlanWithTheUniformPairOfItsBytes) {
  const std::filesystem::path model = test::storiesModel();
  if (model.empty()) GTEST_SKIP() << "../shared/models/stories260K.bin is absent";
  test::TempDir dir;
  const std::string out = dir.file("rec.h5");
  auto rec = runCli("record '" + model.string() + "' --out '" + out + "' --steps 48 --seed 3");
  ASSERT_EQ(rec.exitCode, 0) << rec.err;
  auto r = runCli("search '" + out + "' --key-budget kl_mean=0.05 --value-budget output_rel_error=0.2 --plan --e2e "
                  "--json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["found"].get<bool>()) << r.out;
  const auto& e = j["e2e"];
  EXPECT_EQ(e["tokens"], 48);
  EXPECT_EQ(e["plan"]["key"], j["key_plan"]);
  EXPECT_EQ(e["uniform"]["key"], j["uniform_at_bytes"]["key_spec"]);
  EXPECT_GE(e["uniform"]["bytes_per_token"].get<double>(), e["plan"]["bytes_per_token"].get<double>());
  for (const char* side : {"plan", "uniform"}) {
    EXPECT_GE(e[side]["kl_mean"].get<double>(), 0.0);
    EXPECT_LE(e[side]["top1_agreement"].get<double>(), 1.0);
  }
  auto text = runCli("search '" + out + "' --key-budget kl_mean=0.05 --value-budget output_rel_error=0.2 --plan --e2e");
  ASSERT_EQ(text.exitCode, 0) << text.err;
  EXPECT_NE(text.out.find("end to end (stories260K"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("uniform "), std::string::npos);
}

TEST_F(CliSearch, CapacityTakesShapeAndContextFromADump) {
  auto r = runCli("capacity --dump '" + dump_ + "' --preset kivi-4 --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["shape"]["layers"], 2);
  EXPECT_EQ(j["context"], 64);
  // 2 tensors · 2 layers · 2 kv heads · 32 dims · 2 bytes.
  EXPECT_DOUBLE_EQ(j["entries"][0]["bytes_per_token"].get<double>(), 512.0);
  // residual=128 keeps all 64 tokens in fp16: the same bytes, and a note.
  EXPECT_DOUBLE_EQ(j["entries"][1]["bytes_per_token"].get<double>(), 512.0);
  EXPECT_FALSE(j["notes"].empty());
  r = runCli("capacity --dump '" + dump_ + "' --layers 4 --key int4 --value int4");
  EXPECT_EQ(r.exitCode, 2);
}

TEST_F(CliSearch, OutliersReportsChannelsTokensAndUtilisation) {
  auto r = runCli("outliers '" + dump_ + "' --spec int4,axis=channel --layers 1 --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kvscope_outliers"], 1);
  ASSERT_EQ(j["layers"].size(), 1u);
  EXPECT_EQ(j["layers"][0]["layer"], 1);
  EXPECT_TRUE(j["layers"][0]["key_code_utilisation"].is_number());
  const auto& key = j["layers"][0]["heads"][0]["key"];
  EXPECT_EQ(key["channel_ratio"].size(), 32u);
  EXPECT_FALSE(key["outlier_channels"].empty());  // synthetic keys carry outlier channels
  EXPECT_FALSE(j["layers"][0]["heads"][0]["key_pre_rope"].is_null());
  auto bad = runCli("outliers '" + dump_ + "' --spec fp16");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("no codes"), std::string::npos) << bad.err;
  bad = runCli("outliers '" + dump_ + "' --threshold 0");
  EXPECT_EQ(bad.exitCode, 2);
}

}  // namespace
}  // namespace kvscope
