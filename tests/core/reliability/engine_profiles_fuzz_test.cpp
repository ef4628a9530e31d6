// SPDX-License-Identifier: GPL-3.0-or-later
// The engine-string fuzz properties (tests/fuzz/fuzz_entries.h fuzzEngine) on the engines of
// issue 20 — vLLM, SGLang, LMDeploy, transformers, TensorRT-LLM — for chosen strings and 3000
// deterministic mutations of them: every refusal explains itself (a shape refusal names the head
// dim), every acceptance gives specs that parse and validate at each shape.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_entries.h"

namespace kvscope {
namespace {

std::string property(const std::string& text) {
  return fuzz::fuzzEngine(reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

const std::vector<std::string> kSeeds = {
    "vllm@0.18 serve m --kv-cache-dtype fp8 --calculate-kv-scales",
    "K_SCALE_CONSTANT=300 vllm --kv-cache-dtype=fp8_e4m3 kv_cache_scheme=attn_head",
    "sglang@0.5.14 --kv-cache-dtype fp4_e2m1 --fp4-kv-cache-recipe nvfp4",
    "lmdeploy --quant-policy 8 architecture=LlamaForCausalLM",
    "vllm --kv-cache-dtype int8_per_token_head int8_rounding=trunc",
    "vllm --kv-cache-dtype int4_per_token_head",
    "vllm --kv-cache-dtype nvfp4 --max-model-len 4096",
    "sglang --kv-cache-dtype fp8_e4m3 --quantization-param-path kv.json",
    "lmdeploy serve api_server m --backend pytorch --quant-policy 4 --dtype float16",
    "transformers cache_implementation=quantized backend=quanto nbits=2 q_group_size=32 axis_key=-1",
    "trtllm kv_cache_dtype=nvfp4",
};

TEST(EngineProfilesFuzz, ChosenStringsKeepEveryProperty) {
  for (const std::string& s : kSeeds) EXPECT_EQ(property(s), "") << s;
  for (const char* s : {"vllm --kv-cache-dtype", "sglang --int8-kv-cache", "lmdeploy --quant-policy 42",
                        "vllm --calculate-kv-scales", "sglang --kv-cache-dtype fp4_e2m1", "vllm@x",
                        "transformers nbits", "trtllm --", "vllm --kv-cache-dtype-skip-layers sliding_window",
                        "transformers cache_implementation=quantized q_group_size=0"}) {
    EXPECT_EQ(property(s), "") << s;
  }
}

TEST(EngineProfilesFuzz, MutatedStringsKeepEveryProperty) {
  const std::vector<std::string> pieces = {" ", "=", "'", "--kv-cache-dtype", "fp8", "int4_per_token_head", "nvfp4",
                                           "--calculate-kv-scales", "--quant-policy", "8", "nbits=", "4",
                                           "q_group_size=", "96", "axis_key=", "-1", "kv_cache_dtype=", "--backend",
                                           "pytorch", "kv_cache_scheme=", "tensor", "0", "9999999999", "@0.18",
                                           "fp4_e2m1", "architecture="};
  std::mt19937 rng(2026120220);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = kSeeds[rng() % kSeeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0: if (!s.empty() && at < s.size()) s[at] = static_cast<char>(rng() % 256); break;
        case 1: s.insert(at, pieces[rng() % pieces.size()]); break;
        case 2: if (at < s.size()) s.erase(at, 1 + rng() % 3); break;
        default: s.insert(at, " " + pieces[rng() % pieces.size()]); break;
      }
    }
    ASSERT_EQ(property(s), "") << "input: '" << s << "'";
    if (resolveEngine(s, {}).hasValue()) ++accepted;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 3000);
}

}  // namespace
}  // namespace kvscope
