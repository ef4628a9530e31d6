// SPDX-License-Identifier: GPL-3.0-or-later
// The engine strings of vLLM, SGLang, LMDeploy, transformers and TensorRT-LLM end to end:
// `--explain`, `eval --engine` and `capacity --engine` on a synthetic dump of head dim 128
// (tests/core/engine/engine_profiles_test.cpp holds the hand vectors; docs/engines.md the rules).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace kvscope {
namespace {

using Json = nlohmann::json;

class CliEngineProfiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    dump_ = dir_->file("d128.h5");
    auto r = test::runCli("synth -q --layers 2 --kv-heads 2 --heads 4 --tokens 64 --queries 4 --head-dim 128 '" +
                          dump_ + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static test::TempDir* dir_;
  static std::string dump_;
};

test::TempDir* CliEngineProfiles::dir_ = nullptr;
std::string CliEngineProfiles::dump_;

TEST_F(CliEngineProfiles, ExplainNamesTheRuleAndTheAssumption) {
  auto r = test::runCli("eval '" + dump_ + "' --engine 'vllm@0.18 --kv-cache-dtype fp8 --calculate-kv-scales' --explain");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("key:   fp8_e4m3,div=200\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("value: fp8_e4m3,div=100\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("assumes that batch was the dump's tokens"), std::string::npos) << r.out;
  auto hf = test::runCli("eval '" + dump_ + "' --engine 'transformers cache_implementation=quantized' --explain");
  ASSERT_EQ(hf.exitCode, 0) << hf.err;
  EXPECT_NE(hf.out.find("key:   int4,round=even,group=64,scale=bf16\n"), std::string::npos) << hf.out;
  EXPECT_NE(hf.out.find("residual_length=128 never protects prompt tokens"), std::string::npos) << hf.out;
  auto hqq = test::runCli("eval '" + dump_ + "' --engine 'transformers cache_implementation=quantized backend=HQQ "
                          "nbits=4' --explain");
  ASSERT_EQ(hqq.exitCode, 0) << hqq.err;
  EXPECT_NE(hqq.out.find("key:   hqq4,scale=bf16\n"), std::string::npos) << hqq.out;
  EXPECT_NE(hqq.out.find("#35185"), std::string::npos) << hqq.out;
  auto lm = test::runCli("eval '" + dump_ + "' --engine 'lmdeploy --backend pytorch --quant-policy 42' --explain");
  ASSERT_EQ(lm.exitCode, 0) << lm.err;
  EXPECT_NE(lm.out.find("key:   lmqjl4,scale=bf16\nvalue: lmtq2,scale=bf16\n"), std::string::npos) << lm.out;
  auto sg = test::runCli("eval '" + dump_ + "' --engine 'sglang --kv-cache-dtype fp4_mx_block16' --explain");
  ASSERT_EQ(sg.exitCode, 0) << sg.err;
  EXPECT_NE(sg.out.find("key:   kvfp4\n"), std::string::npos) << sg.out;
}

TEST_F(CliEngineProfiles, EvalRunsEachEnginesSpecs) {
  for (const char* engine : {"vllm --kv-cache-dtype int8_per_token_head", "sglang --kv-cache-dtype fp8_e4m3",
                             "lmdeploy --backend turbomind --quant-policy 4", "trtllm kv_cache_dtype=nvfp4",
                             "vllm --kv-cache-dtype nvfp4", "sglang --kv-cache-dtype fp4_mx_block16",
                             "sglang --kv-cache-dtype nvfp4", "vllm kv_cache_scheme=tensor",
                             "lmdeploy --backend pytorch --quant-policy 42",
                             "transformers cache_implementation=quantized backend=hqq nbits=2"}) {
    auto r = test::runCli("eval '" + dump_ + "' --engine '" + engine + "' --json -");
    ASSERT_EQ(r.exitCode, 0) << engine << "\n" << r.err;
    const Json j = Json::parse(r.out);
    EXPECT_EQ(j["engine"], engine);
  }
}

// Bytes per token = layers · kv heads · (K + V bytes per token and head): 2 · 2 · 256 for fp8
// with unit scales, 2 · 2 · 264 for vLLM's per-token-head caches (D + 4 bytes each), 2 · 2 · 136
// for LMDeploy int4 (D/2 + two bf16 values each).
TEST_F(CliEngineProfiles, CapacityCountsEachEnginesBytes) {
  auto bytes = [&](const std::string& engine) {
    auto r = test::runCli("capacity --dump '" + dump_ + "' --engine '" + engine + "' --json -");
    EXPECT_EQ(r.exitCode, 0) << engine << "\n" << r.err;
    if (r.exitCode != 0) return -1.0;
    return Json::parse(r.out)["entries"][1]["bytes_per_token"].get<double>();
  };
  EXPECT_EQ(bytes("vllm --kv-cache-dtype fp8"), 1024.0);
  EXPECT_EQ(bytes("vllm --kv-cache-dtype fp8_per_token_head"), 1056.0);
  EXPECT_EQ(bytes("lmdeploy --backend turbomind --quant-policy 4"), 544.0);
}

// vLLM's layers kept in the model dtype are plans: TurboQuant's boundary layers (n = min(2, L // 2):
// both layers of this 2-layer dump, so nothing is quantized, as vLLM would do) and
// --kv-cache-dtype-skip-layers. Capacity counts a skipped layer at fp16: layer 0 fp8 (2 heads ·
// 256 bytes) + layer 1 kept (2 · 512) = 1536 bytes per token.
TEST_F(CliEngineProfiles, VllmSkippedLayersArePlans) {
  auto tq = test::runCli("eval '" + dump_ + "' --engine 'vllm --kv-cache-dtype turboquant_k3v4_nc' --explain");
  ASSERT_EQ(tq.exitCode, 0) << tq.err;
  EXPECT_NE(tq.out.find("key:   tqg3,rot=hadamard;0-1:none\n"), std::string::npos) << tq.out;
  EXPECT_NE(tq.out.find("value: int4,codes=fp32,minscale=1e-08;0-1:none\n"), std::string::npos) << tq.out;
  auto skip = test::runCli("eval '" + dump_ + "' --engine 'vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 1' --json -");
  ASSERT_EQ(skip.exitCode, 0) << skip.err;
  auto cap = test::runCli("capacity --dump '" + dump_ + "' --engine 'vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 1' --json -");
  ASSERT_EQ(cap.exitCode, 0) << cap.err;
  EXPECT_EQ(Json::parse(cap.out)["entries"][1]["bytes_per_token"].get<double>(), 1536.0);
  // The formats themselves run through eval on every layer.
  for (const char* spec : {"tqg3", "int4,codes=fp32,minscale=1e-08", "nvfp4,gscale=1,4over6"}) {
    auto r = test::runCli("eval '" + dump_ + "' --key '" + spec + "' --value '" + spec + "' --json -");
    EXPECT_EQ(r.exitCode, 0) << spec << "\n" << r.err;
  }
}

TEST_F(CliEngineProfiles, RefusalsExitWithStatus2) {
  for (const auto& [engine, fragment] :
       std::initializer_list<std::pair<std::string, std::string>>{
           {"sglang --int8-kv-cache", "not an SGLang flag"},
           {"vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 2", "layer 2 does not exist: the dump has 2 layers"},
           {"vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window", "sliding_window_layers="},
           {"lmdeploy --quant-policy 42", "without --backend"},
           {"lmdeploy --backend turbomind --quant-policy 16", "FP8 quantization is not supported"},
           {"vllm --kv-cache-dtype fp8 --calculate-kv-scales", "removed by PR #49389"},
           {"vllm --kv-cache-dtype fp8_e5m2 kv_cache_scheme=tensor", "not supported with fp8 checkpoints"},
           {"sglang --kv-cache-dtype fp4_e2m1", "no longer auto-selects an FP4 KV recipe"},
           {"transformers@4.57 cache_implementation=quantized backend=HQQ", "renamed backend=hqq"},
           {"transformers cache_implementation=quantized backend=HQQ nbits=5", "HQQ"}}) {
    auto r = test::runCli("eval '" + dump_ + "' --engine '" + engine + "'");
    EXPECT_EQ(r.exitCode, 2) << engine << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << engine << " -> " << r.err;
  }
}

}  // namespace
}  // namespace kvscope
