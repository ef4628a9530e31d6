// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli sensitivity` and `kvscope-cli diagnose` end to end.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace kvscope {
namespace {

using test::runCli;

class CliSensitivity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    dump_ = dir_->file("s.h5");
    auto r = runCli("synth -q --layers 2 --kv-heads 2 --heads 4 --tokens 64 --queries 8 "
                    "--head-dim 32 '" + dump_ + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    bias_ = dir_->file("bias.h5");
    r = runCli("synth -q --profile qwen2-bias --layers 3 --kv-heads 2 --heads 4 --tokens 64 "
               "--queries 8 --head-dim 64 '" + bias_ + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    noQuery_ = dir_->file("nq.h5");
    r = runCli("synth -q --layers 1 --kv-heads 2 --heads 4 --tokens 32 --queries 0 --head-dim 32 '" +
               noQuery_ + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static inline test::TempDir* dir_ = nullptr;
  static inline std::string dump_, bias_, noQuery_;
};

TEST_F(CliSensitivity, JsonHasEveryLayerHeadAndCandidatePerSide) {
  auto r = runCli("sensitivity '" + dump_ + "' --candidates 'int4;q8_0;int2,axis=channel,group=32' --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kvscope_sensitivity"], 1);
  EXPECT_EQ(j["layers"], nlohmann::json::array({0, 1}));
  for (const char* side : {"key", "value"}) {
    ASSERT_EQ(j[side]["candidates"].size(), 3u) << side;
    EXPECT_EQ(j[side]["candidates"][1]["spec"], "q8_0");
    for (const auto& c : j[side]["candidates"]) {
      ASSERT_EQ(c["layers"].size(), 2u);
      for (const auto& l : c["layers"]) ASSERT_EQ(l["heads"].size(), 2u);
    }
  }
  EXPECT_EQ(j["key"]["case"], "key_only");
  EXPECT_TRUE(j["key"]["candidates"][0]["layers"][0]["heads"][0].contains("kl_mean"));
  // V reports output_rel_error only (the scores do not depend on V).
  EXPECT_FALSE(j["value"]["candidates"][0]["layers"][0]["heads"][0].contains("kl_mean"));
  // q8_0 damages less than int2 on every head.
  for (int l = 0; l < 2; ++l)
    for (int g = 0; g < 2; ++g)
      EXPECT_LT(j["key"]["candidates"][1]["layers"][l]["heads"][g]["kl_mean"].get<double>(),
                j["key"]["candidates"][2]["layers"][l]["heads"][g]["kl_mean"].get<double>());
}

TEST_F(CliSensitivity, CsvFileAndTextGrid) {
  const std::string csv = dir_->file("map.csv");
  auto r = runCli("sensitivity '" + dump_ + "' --candidates 'int4;q4_0' --side key --layers 1 --csv '" + csv + "'");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::ifstream in(csv);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_EQ(text.rfind("side,layer,kv_head,spec,bits_per_element,score_mae", 0), 0u) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 2 * 2);  // 2 heads × 2 candidates
  EXPECT_EQ(text.find("value,"), std::string::npos);
  r = runCli("sensitivity '" + dump_ + "' --candidates 'int4;q4_0' --metric top1_agreement");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("K (key_only, top1_agreement)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("V (value_only, output_rel_error)"), std::string::npos);
}

TEST_F(CliSensitivity, BadInputExitsTwoNamingTheFlagOrFile) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"sensitivity '" + dump_ + "' --metric kl_median", "--metric"},
      {"sensitivity '" + dump_ + "' --candidates 'int4;int11'", "--candidates"},
      {"sensitivity '" + dump_ + "' --side both-ways", "--side"},
      {"sensitivity '" + dump_ + "' --layers 9", "layer"},
      {"sensitivity '" + dump_ + "' --queries last:0", "--queries"},
      {"sensitivity '" + dump_ + "' --json - --csv -", "standard output"},
      {"sensitivity '" + dir_->file("missing.h5") + "'", "missing.h5"},
      {"sensitivity '" + noQuery_ + "'", "no queries"},
      {"diagnose '" + dir_->file("missing.h5") + "'", "missing.h5"},
      {"diagnose '" + dump_ + "' --layers 4", "layer"},
  };
  for (const Case& c : cases) {
    auto r = runCli(c.args);
    EXPECT_EQ(r.exitCode, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
}

TEST_F(CliSensitivity, DiagnoseReportsTheBiasWithEvidenceAndAdvice) {
  auto r = runCli("diagnose '" + bias_ + "' --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kvscope_diagnose"], 1);
  ASSERT_FALSE(j["findings"].empty());
  EXPECT_EQ(j["findings"][0]["kind"], "key_bias");
  const auto& e = j["findings"][0]["evidence"][0];
  EXPECT_TRUE(e.contains("layer") && e.contains("kv_head") && e.contains("channel") && e.contains("mean"));
  EXPECT_NE(j["findings"][0]["advice"].get<std::string>().find("axis=channel"), std::string::npos);
  r = runCli("diagnose '" + bias_ + "'");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("key_bias:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("what to do:"), std::string::npos);
  // The middle layer carries only the small bias: nothing to report there.
  r = runCli("diagnose '" + bias_ + "' --layers 1");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("0 finding(s)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvscope
