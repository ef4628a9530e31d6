// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli bench`: the structure of its output, on the quick shapes (no timing is judged).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "tests/support/test_support.h"

namespace kvscope {
namespace {

TEST(CliBench, QuickQuantizeReportsOneRowPerSpecWithVerdicts) {
  const test::RunResult r = test::runCli("bench --quick --only quantize --json -");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << "standard output is not JSON:\n" << r.out;
  EXPECT_EQ(doc.at("kvscope_bench"), 1);
  EXPECT_TRUE(doc.at("quick").get<bool>());
  const auto& machine = doc.at("machine");
  EXPECT_GE(machine.at("threads").get<int>(), 1);
  EXPECT_GT(machine.at("copy_bytes_per_s").get<double>(), 0.0);
  EXPECT_EQ(machine.at("gemm_n").get<int>(), 0) << "GEMM belongs to the attention group only";

  const std::set<std::string> specs{"int4,group=128", "int2,axis=channel,group=32", "q4_0",
                                    "fp8_e4m3", "nvfp4", "int4,rot=hadamard,outliers=0.01",
                                    "tq4", "tqp4", "nuq4,axis=channel"};
  const std::set<std::string> verdicts{"pass", "FAIL", "info", "not run"};
  std::set<std::string> seen;
  for (const auto& row : doc.at("rows")) {
    EXPECT_EQ(row.at("group"), "quantize");
    seen.insert(row.at("name").get<std::string>());
    const std::string verdict = row.at("verdict").get<std::string>();
    EXPECT_TRUE(verdicts.count(verdict)) << verdict;
    if (verdict == "not run") {
      EXPECT_FALSE(row.at("note").get<std::string>().empty()) << "a row that did not run says why";
      continue;
    }
    EXPECT_GT(row.at("seconds").get<double>(), 0.0);
    EXPECT_LE(row.at("seconds").get<double>(), row.at("median_seconds").get<double>());
    const auto& f = row.at("figures");
    const double n = 8.0 * 512 * 128;  // the quick shape
    EXPECT_NEAR(f.at("elements_per_s").get<double>() * row.at("seconds").get<double>(), n, n * 1e-9);
    // The ratio divides by the copies paired with the row's own runs (same bytes: the copy's
    // time over the pipeline's).
    EXPECT_NEAR(f.at("bandwidth_ratio").get<double>(),
                f.at("bytes_per_s").get<double>() / f.at("copy_bytes_per_s").get<double>(),
                1e-9 * f.at("bandwidth_ratio").get<double>());
    EXPECT_NEAR(f.at("bandwidth_ratio").get<double>(),
                f.at("copy_seconds").get<double>() / row.at("seconds").get<double>(),
                1e-9 * f.at("bandwidth_ratio").get<double>());
    // fp8 has no target; the integer and block formats do, and the codebook formats their own.
    EXPECT_EQ(verdict == "info", row.at("name") == "fp8_e4m3") << row.at("name");
  }
  EXPECT_EQ(seen, specs);
  // The table goes to standard error when the JSON takes standard output.
  EXPECT_NE(r.err.find("copy bandwidth"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("int2,axis=channel,group=32"), std::string::npos) << r.err;
}

TEST(CliBench, UnknownGroupIsBadInputNamingTheAllowedOnes) {
  const test::RunResult r = test::runCli("bench --quick --only quantise");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("'quantise'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("allowed: quantize, attention, interactive, eval, open"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace kvscope
