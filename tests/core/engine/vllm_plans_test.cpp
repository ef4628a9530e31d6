// SPDX-License-Identifier: GPL-3.0-or-later
// vLLM's cache dtypes that keep some layers in the model dtype (turboquant_*'s boundary layers,
// --kv-cache-dtype-skip-layers) resolve to plans (quantization.md §12), and nvfp4_4over6 to the
// 4over6 option. Each expectation cites the vLLM code it was read from.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/capacity/capacity.h"
#include "core/engine/engine.h"
#include "core/quant/plan.h"
#include "core/engine/presets.h"

namespace kvscope {
namespace {

ResolvedKv resolved(std::string_view text, const KvShape& shape) {
  auto r = resolveEngine(text, shape);
  EXPECT_TRUE(r.hasValue()) << text << ": " << (r.hasValue() ? "" : r.status().message());
  return r.hasValue() ? *r : ResolvedKv{};
}

std::string errorOf(std::string_view text, const KvShape& shape) {
  auto r = resolveEngine(text, shape);
  EXPECT_FALSE(r.hasValue()) << text;
  return r.hasValue() ? std::string{} : r.status().message();
}

bool hasNote(const ResolvedKv& r, const std::string& part) {
  for (const std::string& n : r.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

/// vLLM's bytes per token of one layer's cache at head dim D for KVH kv heads (capacity).
double capacityBytesPerToken(std::string_view engine, const ModelShape& shape) {
  auto r = resolveEngine(engine, KvShape{shape.headDim, shape.layers, shape.kvHeads});
  EXPECT_TRUE(r.hasValue()) << engine;
  if (!r.hasValue()) return 0;
  auto plans = parseResolvedPlans(*r, engine);
  EXPECT_TRUE(plans.hasValue()) << engine << ": " << (plans.hasValue() ? "" : plans.status().message());
  if (!plans.hasValue()) return 0;
  CapacityRequest req;
  req.shape = shape;
  req.key = plans->key;
  req.value = plans->value;
  auto rep = planCapacity(req);
  EXPECT_TRUE(rep.hasValue()) << engine;
  return rep.hasValue() ? rep->quantized.bytesPerToken : 0;
}

const KvShape k32Layers{128, 32, 8};

// vllm/model_executor/layers/quantization/turboquant/config.py (commit 1471680b): TQ_PRESETS
// (lines 20–41; key_quant_bits 8/4/3/3, value_quant_bits 4/4/4/3, norm_correction on the _nc ones) and
// get_boundary_skip_layers: n = min(2, num_layers // 2), first n and last n layers skipped.
TEST(VllmTurboquant, PresetsAndTheirBoundaryLayers) {
  ResolvedKv r = resolved("vllm serve m --kv-cache-dtype turboquant_k3v4_nc", k32Layers);
  EXPECT_EQ(r.key, "tqg3,rot=hadamard;0-1+30-31:none");
  EXPECT_EQ(r.value, "int4,codes=fp32,minscale=1e-08;0-1+30-31:none");
  EXPECT_TRUE(hasNote(r, "get_boundary_skip_layers"));
  EXPECT_EQ(resolved("vllm --kv-cache-dtype turboquant_4bit_nc", k32Layers).key, "tqg4,rot=hadamard;0-1+30-31:none");
  r = resolved("vllm --kv-cache-dtype turboquant_3bit_nc", k32Layers);
  EXPECT_EQ(r.value, "int3,codes=fp32,minscale=1e-08;0-1+30-31:none");
  r = resolved("vllm --kv-cache-dtype turboquant_k8v4", k32Layers);
  EXPECT_EQ(r.key, "fp8_e4m3,unitscale;0-1+30-31:none");
  // n = min(2, L // 2): 3 layers skip 0 and 2; 1 layer skips none; 4 layers skip all four.
  EXPECT_EQ(resolved("vllm --kv-cache-dtype turboquant_k8v4", {128, 3, 8}).key, "fp8_e4m3,unitscale;0+2:none");
  EXPECT_EQ(resolved("vllm --kv-cache-dtype turboquant_k8v4", {128, 1, 8}).key, "fp8_e4m3,unitscale");
  EXPECT_EQ(resolved("vllm --kv-cache-dtype turboquant_k8v4", {128, 4, 8}).key, "fp8_e4m3,unitscale;0-3:none");
  // Without a layer count the rule is written as first2+last2.
  EXPECT_EQ(resolved("vllm --kv-cache-dtype turboquant_k8v4", {128, 0, 8}).key, "fp8_e4m3,unitscale;first2+last2:none");
  // Every resolved string parses as a plan.
  for (const char* t : {"turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc"}) {
    const std::string e = std::string("vllm --kv-cache-dtype ") + t;
    EXPECT_TRUE(parseResolvedPlans(resolved(e, k32Layers), e).hasValue()) << t;
  }
}

// backends/turboquant_attn.py (commit 0135d081) _build_hadamard_cached doubles a Sylvester
// matrix up to D; the MSE presets need a power-of-two D, k8v4's fp8 keys are not rotated.
TEST(VllmTurboquant, HeadDimRules) {
  EXPECT_NE(errorOf("vllm --kv-cache-dtype turboquant_k3v4_nc", {96, 32, 8}).find("power-of-two head dims"),
            std::string::npos);
  EXPECT_EQ(resolved("vllm --kv-cache-dtype turboquant_k8v4", {96, 32, 8}).key, "fp8_e4m3,unitscale;0-1+30-31:none");
}

// config.py key_packed_size / value_packed_size / slot_size_aligned: per token and kv head,
// MSE keys ceil(D·b/8) + 2 (fp16 norm) or D fp8 bytes; values ceil(D·b/8) + 4 (fp16 scale and
// zero); the slot rounded up to even. Skipped layers keep 2·D·2 bytes (bf16/fp16 K and V).
// D = 128, 8 kv heads, 32 layers (28 quantized, 4 skipped at 8·512 = 4096 bytes each):
//   k3v4_nc: 50 + 68 = 118 → 28·8·118 + 4·4096 = 42816
//   4bit_nc: 66 + 68 = 134 → 46400;  3bit_nc: 50 + 52 = 102 → 39232;  k8v4: 128 + 68 = 196 → 60288
TEST(VllmTurboquant, CapacityIsVllmsSlotBytes) {
  const ModelShape m{32, 8, 128};
  EXPECT_DOUBLE_EQ(capacityBytesPerToken("vllm --kv-cache-dtype turboquant_k3v4_nc", m), 42816.0);
  EXPECT_DOUBLE_EQ(capacityBytesPerToken("vllm --kv-cache-dtype turboquant_4bit_nc", m), 46400.0);
  EXPECT_DOUBLE_EQ(capacityBytesPerToken("vllm --kv-cache-dtype turboquant_3bit_nc", m), 39232.0);
  EXPECT_DOUBLE_EQ(capacityBytesPerToken("vllm --kv-cache-dtype turboquant_k8v4", m), 60288.0);
  // A skipped layer costs the fp16 K and V: fp8 (256 bytes per head) with layers 0 and 5 kept.
  EXPECT_DOUBLE_EQ(capacityBytesPerToken("vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0 5", m),
                   30.0 * 8 * 256 + 2.0 * 8 * 512);
}

// vllm/model_executor/layers/attention/attention.py (commit 0014ca6b), Attention.__init__: a
// layer is skipped when str(layer_idx) is in kv_cache_dtype_skip_layers, or when it has a
// sliding window and "sliding_window" is in the list; skipped layers get kv_cache_dtype "auto".
TEST(VllmSkipLayers, IndicesBecomeAPlan) {
  const KvShape s{128, 8, 2};
  ResolvedKv r = resolved("vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0 7 3", s);
  EXPECT_EQ(r.key, "fp8_e4m3,unitscale;0+3+7:none");
  EXPECT_EQ(r.value, "fp8_e4m3,unitscale;0+3+7:none");
  EXPECT_TRUE(hasNote(r, "keep the model dtype"));
  // Comma lists, the = form, and runs.
  EXPECT_EQ(resolved("vllm --kv-cache-dtype-skip-layers=1,2,3 --kv-cache-dtype nvfp4", s).key, "nvfp4,gscale=1;1-3:none");
  // Merged with TurboQuant's boundary layers.
  EXPECT_EQ(resolved("vllm --kv-cache-dtype turboquant_k8v4 --kv-cache-dtype-skip-layers 4", s).key,
            "fp8_e4m3,unitscale;0-1+4+6-7:none");
  // With auto nothing is quantized: the flag changes nothing, and says so.
  r = resolved("vllm --kv-cache-dtype-skip-layers 2", s);
  EXPECT_EQ(r.key, "none");
  EXPECT_TRUE(hasNote(r, "ignored --kv-cache-dtype-skip-layers"));
  // Words after the values are still read: kvscope's words and other flags.
  EXPECT_EQ(resolved("vllm --kv-cache-dtype-skip-layers 2 --kv-cache-dtype fp8_e5m2", s).value, "fp8_e5m2,unitscale;2:none");
}

TEST(VllmSkipLayers, IndicesAreCheckedAgainstTheDump) {
  const KvShape s{128, 8, 2};
  const std::string e = errorOf("vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 8", s);
  EXPECT_NE(e.find("layer 8 does not exist: the dump has 8 layers (allowed: 0 … 7"), std::string::npos) << e;
  EXPECT_NE(errorOf("vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 01", s).find("str(layer_idx)"),
            std::string::npos);
  EXPECT_NE(errorOf("vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers full_attention", s).find("sliding_window"),
            std::string::npos);
  EXPECT_NE(errorOf("vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers", s).find("at least one value"),
            std::string::npos);
}

// A dump does not say which layers have a sliding window: "sliding_window" needs kvscope's word
// sliding_window_layers=LIST (the model config's layer_types), and is refused by name without it.
TEST(VllmSkipLayers, SlidingWindowNeedsTheLayersNamed) {
  const KvShape s{128, 8, 2};
  const std::string e = errorOf("vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window", s);
  EXPECT_NE(e.find("a dump does not record which layers those are"), std::string::npos) << e;
  EXPECT_NE(e.find("sliding_window_layers="), std::string::npos) << e;
  EXPECT_EQ(resolved("vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window 6 "
                     "sliding_window_layers=0,2,4", s).key,
            "fp8_e4m3,unitscale;0+2+4+6:none");
  EXPECT_NE(errorOf("vllm --kv-cache-dtype fp8 sliding_window_layers=0,2", s).find("changes nothing"),
            std::string::npos);
  EXPECT_NE(errorOf("vllm --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window sliding_window_layers=9", s)
                .find("layer 9 does not exist"),
            std::string::npos);
}

// csrc/libtorch_stable/nvfp4_kv_cache_kernels.cu (commit 0cd789b3): nvfp4_4over6 keeps the
// nvfp4 layout (same bytes) and chooses the block scale per 16 values.
TEST(VllmNvfp4FourOverSix, ResolvesToTheOption) {
  const ResolvedKv r = resolved("vllm --kv-cache-dtype nvfp4_4over6", k32Layers);
  EXPECT_EQ(r.key, "nvfp4,gscale=1,4over6");
  EXPECT_EQ(r.value, "nvfp4,gscale=1,4over6");
  EXPECT_NE(errorOf("vllm --kv-cache-dtype nvfp4_4over6", {72, 4, 2}).find("divisible by 16"), std::string::npos);
  const ModelShape m{32, 8, 128};
  EXPECT_DOUBLE_EQ(capacityBytesPerToken("vllm --kv-cache-dtype nvfp4_4over6", m),
                   capacityBytesPerToken("vllm --kv-cache-dtype nvfp4", m));
}

}  // namespace
}  // namespace kvscope
