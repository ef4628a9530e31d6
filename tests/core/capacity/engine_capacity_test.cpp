// SPDX-License-Identifier: GPL-3.0-or-later
// Bytes per token of each engine's KV cache, as `capacity --engine` and the GUI's capacity
// calculator count them, against each engine's own allocation, derived by hand for one shape:
// Llama-3-8B (32 layers, 8 kv heads, D = 128), context 4096. docs/engines.md has the table.
#include <gtest/gtest.h>

#include <string>

#include "core/capacity/capacity.h"
#include "core/engine/engine.h"
#include "core/engine/presets.h"

namespace kvscope {
namespace {

constexpr int kLayers = 32, kHeads = 8, kDim = 128;
constexpr double kVectors = kLayers * kHeads;  // one K and one V vector per layer and kv head per token
constexpr double kContext = 4096;
// A per-layer-tensor fp32 scalar (vLLM's k_scale/v_scale, nvfp4's global scale) for K and V of
// every layer, spread over the context.
constexpr double kLayerScalars = 2.0 * kLayers * 4.0 / kContext;

double bytesPerToken(const std::string& engine) {
  const KvShape shape{kDim, kLayers, kHeads};
  auto resolved = resolveEngine(engine, shape);
  EXPECT_TRUE(resolved.hasValue()) << engine << ": " << (resolved ? "" : resolved.status().message());
  if (!resolved) return -1;
  auto plans = parseResolvedPlans(*resolved, engine);
  EXPECT_TRUE(plans.hasValue()) << engine;
  if (!plans) return -1;
  CapacityRequest r;
  r.shape = {kLayers, kHeads, kDim};
  r.key = plans->key;
  r.value = plans->value;
  r.context = static_cast<int64_t>(kContext);
  auto report = planCapacity(r);
  EXPECT_TRUE(report.hasValue()) << engine;
  return report ? report->quantized.bytesPerToken : -1;
}

// ggml/src/ggml-common.h block_q8_0 {ggml_half d; int8_t qs[32]} = 34 bytes per 32 values,
// block_q4_0 {d; qs[16]} = 18, block_q4_1 {d, m; qs[16]} = 20; f16 2 bytes, f32 4 bytes
// (src/llama-kv-cache.cpp allocates ggml tensors of type_k / type_v per layer).
TEST(EngineCapacity, LlamaCpp) {
  EXPECT_DOUBLE_EQ(bytesPerToken("llama.cpp"), kVectors * (256 + 256));  // 131072
  EXPECT_DOUBLE_EQ(bytesPerToken("llama.cpp -ctk f32 -ctv f32"), kVectors * (512 + 512));
  EXPECT_DOUBLE_EQ(bytesPerToken("llama.cpp -ctk q8_0 -ctv q8_0"), kVectors * 2 * (4 * 34));
  EXPECT_DOUBLE_EQ(bytesPerToken("llama.cpp -ctk q4_0 -ctv q4_0"), kVectors * 2 * (4 * 18));
  EXPECT_DOUBLE_EQ(bytesPerToken("llama.cpp -ctk q4_1"), kVectors * (4 * 20 + 256));  // V stays f16
}

// vllm/v1/kv_cache_interface.py: page bytes per token = (head_size_k + head_size_v) · dtype bytes,
// plus 2 · 4 bytes of fp32 scale per head for the per-token-head types; int4: D/2 + 4 (the zero
// point packed in the scale word); nvfp4: D/2 + D/16. Checkpoint/default scales: one per layer.
TEST(EngineCapacity, Vllm) {
  EXPECT_DOUBLE_EQ(bytesPerToken("vllm serve m"), kVectors * 512);
  EXPECT_NEAR(bytesPerToken("vllm --kv-cache-dtype fp8"), kVectors * 256, 1e-9);  // unit scales: none stored
  EXPECT_NEAR(bytesPerToken("vllm --kv-cache-dtype fp8 kv_cache_scheme=tensor"), kVectors * 256 + kLayerScalars, 1e-9);
  EXPECT_DOUBLE_EQ(bytesPerToken("vllm --kv-cache-dtype fp8_per_token_head"), kVectors * (256 + 8));
  EXPECT_DOUBLE_EQ(bytesPerToken("vllm --kv-cache-dtype int8_per_token_head"), kVectors * (256 + 8));
  EXPECT_DOUBLE_EQ(bytesPerToken("vllm --kv-cache-dtype int4_per_token_head"), kVectors * 2 * (64 + 4));
  EXPECT_NEAR(bytesPerToken("vllm --kv-cache-dtype nvfp4"), kVectors * 2 * (64 + 8) + kLayerScalars, 1e-9);
}

// python/sglang/srt/mem_cache/memory_pool.py: MHATokenToKVPool buffers (size, heads, D) in the
// store dtype (1 byte for fp8); MHATokenToKVPoolFP4 (m, heads, D // 2) uint8 plus
// (m, heads·D // 16) uint8 scales, for K and for V.
TEST(EngineCapacity, Sglang) {
  EXPECT_DOUBLE_EQ(bytesPerToken("sglang"), kVectors * 512);
  EXPECT_DOUBLE_EQ(bytesPerToken("sglang --kv-cache-dtype fp8_e4m3"), kVectors * 256);
  EXPECT_DOUBLE_EQ(bytesPerToken("sglang --kv-cache-dtype fp4_mx_block16"), kVectors * 2 * (64 + 8));
  EXPECT_DOUBLE_EQ(bytesPerToken("sglang@0.5.14 --kv-cache-dtype fp4_e2m1"), kVectors * 2 * (64 + 8));
}

// lmdeploy/pytorch/engine/cache_engine.py (commit 1263d5cd): int8 D bytes, int4 and TurboQuant K
// D/2, TurboQuant V D/4; get_quant_cache_descs adds [scale, zero] (TurboQuant K: [mse_norm,
// qjl_norm], V: [norm]) in the model dtype (2 bytes each).
TEST(EngineCapacity, Lmdeploy) {
  EXPECT_DOUBLE_EQ(bytesPerToken("lmdeploy --backend turbomind --quant-policy 8"), kVectors * 2 * (128 + 4));
  EXPECT_DOUBLE_EQ(bytesPerToken("lmdeploy --backend turbomind --quant-policy 4"), kVectors * 2 * (64 + 4));
  EXPECT_DOUBLE_EQ(bytesPerToken("lmdeploy --backend pytorch --quant-policy 16"), kVectors * 256);
  EXPECT_DOUBLE_EQ(bytesPerToken("lmdeploy --backend pytorch --quant-policy 42"), kVectors * ((64 + 4) + (32 + 2)));
}

// transformers cache_utils.py QuantizedLayer: quanto's packed codes plus a scale and a shift per
// group in the model dtype; HQQ's packed codes (bitpack.py: 3 bits as 10 values per int32 along
// the 64 rows of the axis-0 view, padded to 70) plus a scale and a zero per group. The residual
// (at most residual_length − 1 decode-time tokens in the model dtype) is not a per-token cost.
TEST(EngineCapacity, Transformers) {
  EXPECT_DOUBLE_EQ(bytesPerToken("transformers cache_implementation=quantized"), kVectors * 2 * (64 + 8));
  EXPECT_DOUBLE_EQ(bytesPerToken("transformers cache_implementation=quantized nbits=2"), kVectors * 2 * (32 + 8));
  EXPECT_DOUBLE_EQ(bytesPerToken("transformers cache_implementation=quantized backend=hqq nbits=4"),
                   kVectors * 2 * (64 + 8));
  // 3 bits: 7 int32 per 64 values = 28 bytes, two groups per vector.
  EXPECT_DOUBLE_EQ(bytesPerToken("transformers cache_implementation=quantized backend=hqq nbits=3"),
                   kVectors * 2 * (2 * 28 + 8));
  EXPECT_DOUBLE_EQ(bytesPerToken("transformers cache_implementation=quantized backend=hqq nbits=1"),
                   kVectors * 2 * (16 + 8));
  EXPECT_DOUBLE_EQ(bytesPerToken("transformers"), kVectors * 512);
}

// TensorRT-LLM: fp8 1 byte per value (scale 1 on the PyTorch backend; a per-layer scale from the
// checkpoint with backend=tensorrt); NVFP4 D/2 + D/16 and a per-layer global scale.
TEST(EngineCapacity, Trtllm) {
  EXPECT_NEAR(bytesPerToken("trtllm kv_cache_dtype=fp8"), kVectors * 256, 1e-9);
  EXPECT_NEAR(bytesPerToken("trtllm kv_cache_dtype=fp8 backend=tensorrt"), kVectors * 256 + kLayerScalars, 1e-9);
  EXPECT_NEAR(bytesPerToken("trtllm kv_cache_dtype=nvfp4"), kVectors * 2 * (64 + 8) + kLayerScalars, 1e-9);
  EXPECT_DOUBLE_EQ(bytesPerToken("trtllm"), kVectors * 512);
}

}  // namespace
}  // namespace kvscope
