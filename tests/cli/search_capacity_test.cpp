// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli search` and `kvscope-cli capacity` end to end.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kvscope
