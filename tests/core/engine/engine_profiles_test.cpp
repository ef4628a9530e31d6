// SPDX-License-Identifier: GPL-3.0-or-later
// Engine strings of vLLM, SGLang, LMDeploy, transformers and TensorRT-LLM (core/engine/*.cpp):
// what each resolves to, its refusals, and hand vectors derived by reading each engine's code
// (repository, file, function and commit cited at each test; docs/engines.md has the details).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/quant/formats.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

const KvShape kD128{128, 4, 2};

struct Specs {
  std::string key, value;
  std::vector<std::string> notes;
  PresetSpecs parsed;
};

Specs resolved(std::string_view text, const KvShape& shape = kD128) {
  auto r = resolveEngine(text, shape);
  EXPECT_TRUE(r.hasValue()) << text << ": " << (r.hasValue() ? "" : r.status().message());
  if (!r.hasValue()) return {};
  auto p = parseResolved(*r, text);
  EXPECT_TRUE(p.hasValue()) << text << ": " << (p.hasValue() ? "" : p.status().message());
  if (!p.hasValue()) return {};
  return {toString(p->key), toString(p->value), r->notes, *p};
}

std::string errorOf(std::string_view text, const KvShape& shape = kD128) {
  auto r = resolveEngine(text, shape);
  EXPECT_FALSE(r.hasValue()) << text;
  if (r.hasValue()) return {};
  EXPECT_EQ(r.status().code(), StatusCode::InvalidArgument) << text;
  return r.status().message();
}

bool hasNote(const Specs& s, const std::string& part) {
  for (const std::string& n : s.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

/// One token of one head (a [1, 1, D] tensor) through the format step of `spec`.
std::vector<float> quantized(const QuantSpec& spec, const std::vector<float>& x) {
  Tensor3 t(1, 1, static_cast<int64_t>(x.size()));
  t.data = x;
  EXPECT_TRUE(quantizeFormatInPlace(t, spec).isOk()) << toString(spec);
  return t.data;
}

std::vector<float> times(const std::vector<float>& codes, float s, float m = 0.0f) {
  std::vector<float> out;
  for (float c : codes) out.push_back(c * s + m);
  return out;
}

/// K plus V bytes per token and kv head at head dim D, T tokens, one kv head, without the
/// per-layer-tensor scalars (nvfp4's global scale, fp8's per-tensor scale).
double bytesPerTokenHead(const Specs& s, int64_t d, int64_t tokens = 64) {
  double bits = 0;
  for (const QuantSpec* q : {&s.parsed.key, &s.parsed.value}) {
    const StorageCount c = storageFor(*q, 1, tokens, d);
    double meta = c.metadataBits;
    if (q->format == FormatId::Nvfp4) meta -= 32;
    if (q->format == FormatId::Fp8E4M3 && q->axis == Axis::Tensor && !q->unitscale) meta -= 32;
    bits += (q->format == FormatId::None ? 16.0 * static_cast<double>(tokens * d) : c.payloadBits) + meta;
  }
  return bits / 8.0 / static_cast<double>(tokens);
}

const std::vector<float> kX{0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1f, 2.2f, -0.03f};

TEST(EngineProfiles, EveryEngineIsInTheTable) {
  EXPECT_EQ(engineNameList(), "llama.cpp, ik_llama.cpp, vllm, sglang, lmdeploy, transformers, trtllm");
  // Every row is complete: cache types, options, refusals, the releases read, a plan shape.
  for (const EngineDef* e : engineTable()) {
    EXPECT_FALSE(e->cacheTypes.empty()) << e->name;
    EXPECT_FALSE(e->options.empty()) << e->name;
    EXPECT_FALSE(e->refusals.empty()) << e->name;
    EXPECT_FALSE(e->releases.empty()) << e->name;
    EXPECT_FALSE(e->planSummary.empty()) << e->name;
    EXPECT_EQ(e->planTypes == nullptr, e->planFlags == nullptr) << e->name;
  }
  EXPECT_EQ(findEngine("tensorrt-llm"), findEngine("trtllm"));
  EXPECT_EQ(findEngine("sglang.launch_server"), findEngine("sglang"));
}

// ---- vLLM ------------------------------------------------------------------------------------

// vllm/config/cache.py (commit 002f10e0): "fp8 (=fp8_e4m3)"; with no checkpoint scales and no
// --calculate-kv-scales, set_default_quant_scales fills k_scale = v_scale = 1.0.
TEST(Vllm, Fp8DefaultsToUnitScales) {
  const Specs s = resolved("vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype fp8 --max-model-len 4096");
  EXPECT_EQ(s.key, "fp8_e4m3,unitscale");
  EXPECT_EQ(s.value, "fp8_e4m3,unitscale");
  EXPECT_TRUE(hasNote(s, "set_default_quant_scales"));
  EXPECT_TRUE(hasNote(s, "ignored --max-model-len 4096"));
  EXPECT_TRUE(hasNote(s, "ignored 'meta-llama/Llama-3.1-8B'"));
  EXPECT_EQ(resolved("vllm --kv-cache-dtype=fp8_e5m2").key, "fp8_e5m2,unitscale");
  EXPECT_EQ(resolved("vllm").key, "none");  // auto
  EXPECT_EQ(resolved("vllm --kv-cache-dtype bfloat16").value, "bf16");
  EXPECT_EQ(resolved("vllm --kv-cache-dtype float16").value, "fp16");
  EXPECT_NEAR(bytesPerTokenHead(resolved("vllm --kv-cache-dtype fp8"), 128), 256.0, 0.0);
  EXPECT_NEAR(bytesPerTokenHead(resolved("vllm"), 128), 512.0, 0.0);
}

// vllm/model_executor/layers/attention/attention.py Attention.calc_kv_scales (vLLM before PR
// #49389): k_scale = max|k|/K_SCALE_CONSTANT, v_scale = max|v|/V_SCALE_CONSTANT; vllm/envs.py
// defaults 200 and 100. K: a = 10 → s = 0.05, x/s → e4m3 [10, −24, 60, 192, −144, 2, 44, −0.625]
// (200 and 25 are ties in exact arithmetic, just below them in fp32: 192 and 24 either way).
// V: [1, −2.5, 20]: a = 20 → s = 0.2, x/s = [5, −12.5, 100] → [5, −12, 96].
TEST(Vllm, CalculatedScalesDivideBy200And100BeforeTheirRemoval) {
  const Specs s = resolved("vllm@0.18 --kv-cache-dtype fp8 --calculate-kv-scales");
  EXPECT_EQ(s.key, "fp8_e4m3,div=200");
  EXPECT_EQ(s.value, "fp8_e4m3,div=100");
  EXPECT_TRUE(hasNote(s, "first batch it serves"));
  EXPECT_EQ(quantized(s.parsed.key, kX), times({10, -24, 60, 192, -144, 2, 44, -0.625f}, 0.05f));
  EXPECT_EQ(quantized(s.parsed.value, {1.0f, -2.5f, 20.0f}), times({5, -12, 96}, 0.2f));
  const Specs env = resolved("K_SCALE_CONSTANT=300 vllm@0.25 --kv-cache-dtype fp8_e5m2 --calculate-kv-scales");
  EXPECT_EQ(env.key, "fp8_e5m2,div=300");
  EXPECT_EQ(env.value, "fp8_e5m2,div=100");
  EXPECT_NE(errorOf("V_SCALE_CONSTANT=abc vllm@0.18 --kv-cache-dtype fp8 --calculate-kv-scales").find("int()"),
            std::string::npos);
}

// PR #49389 (merged 2026-07-22) removed calculate_kv_scales from vllm/config/cache.py (CacheConfig
// at 002f10e0 has no such field): scales come from the checkpoint, else 1.0. The newest release
// and 0.26 on refuse the flag naming the release and what replaced it.
TEST(Vllm, CalculatedScalesAreRefusedFromTheirRemovalOn) {
  for (const char* text : {"vllm --kv-cache-dtype fp8 --calculate-kv-scales", "vllm@0.26 --kv-cache-dtype fp8 "
                                                                              "--calculate-kv-scales"}) {
    const std::string e = errorOf(text);
    EXPECT_NE(e.find("vllm: --calculate-kv-scales: removed by PR #49389"), std::string::npos) << e;
    EXPECT_NE(e.find("(vllm 0.26)"), std::string::npos) << e;
    EXPECT_NE(e.find("kv_cache_scheme=tensor"), std::string::npos) << e;
    EXPECT_NE(e.find("write vllm@0.18"), std::string::npos) << e;
  }
  EXPECT_NE(errorOf("vllm --no-calculate-kv-scales").find("removed by PR #49389"), std::string::npos);
  // A release newer than the newest read, or older than the oldest, is named in the notes.
  EXPECT_TRUE(hasNote(resolved("vllm@0.10 --kv-cache-dtype fp8 --calculate-kv-scales"), "older than the oldest"));
  EXPECT_NE(errorOf("vllm@0.x --kv-cache-dtype fp8").find("not a release number"), std::string::npos);
}

// llm-compressor src/llmcompressor/observers/helpers.py _flatten_attention (commit ab1ba3ef) and
// compressed-tensors calculate_qparams (52792be0): tensor → one scale per layer, amax/448;
// attn_head → one per kv head. With a = 10: s = 10/448, x/s → e4m3 [22, −56, 128, 448, −320,
// 4.5, 96, −1.375].
TEST(Vllm, CheckpointScalesFromLlmCompressor) {
  const Specs t = resolved("vllm --kv-cache-dtype fp8 kv_cache_scheme=tensor");
  EXPECT_EQ(t.key, "fp8_e4m3");
  EXPECT_EQ(quantized(t.parsed.key, kX), times({22, -56, 128, 448, -320, 4.5f, 96, -1.375f}, 10.0f / 448.0f));
  EXPECT_EQ(resolved("vllm --kv-cache-dtype fp8 kv_cache_scheme=attn_head").value, "fp8_e4m3,axis=head");
  EXPECT_NE(errorOf("vllm --kv-cache-dtype fp8 kv_cache_scheme=token").find("cannot be applied to attention"),
            std::string::npos);
}

// vllm/model_executor/layers/attention/attention.py, Attention.__init__ (_init_kv_cache_quant):
// with a kv_cache_scheme checkpoint, --kv-cache-dtype auto becomes fp8 (e4m3 with the checkpoint's
// scales) and fp8_e5m2 is refused ("fp8_e5m2 kv-cache is not supported with fp8 checkpoints");
// kvscope used to refuse the first and accept the second.
TEST(Vllm, CheckpointWithKvSchemeTurnsAutoIntoFp8AndRefusesE5m2) {
  const Specs a = resolved("vllm --kv-cache-dtype auto kv_cache_scheme=tensor");
  EXPECT_EQ(a.key, "fp8_e4m3");
  EXPECT_EQ(a.value, "fp8_e4m3");
  EXPECT_TRUE(hasNote(a, "turns auto into fp8"));
  EXPECT_EQ(resolved("vllm kv_cache_scheme=attn_head").key, "fp8_e4m3,axis=head");  // auto is the default
  // Same codes as kv_cache_scheme=tensor with fp8 above (s = 10/448).
  EXPECT_EQ(quantized(a.parsed.key, kX), times({22, -56, 128, 448, -320, 4.5f, 96, -1.375f}, 10.0f / 448.0f));
  const std::string e = errorOf("vllm --kv-cache-dtype fp8_e5m2 kv_cache_scheme=tensor");
  EXPECT_NE(e.find("fp8_e5m2 kv-cache is not supported with fp8 checkpoints"), std::string::npos) << e;
  // The per-token-head caches compute their own scales; an unquantized cache forces 1.0.
  EXPECT_TRUE(hasNote(resolved("vllm --kv-cache-dtype fp8_per_token_head kv_cache_scheme=tensor"),
                      "ignored kv_cache_scheme=tensor"));
}

// csrc/libtorch_stable/nvfp4_kv_cache_kernels.cu (commit 5a5fc068), reshape_and_cache_nvfp4_kernel:
// global_scale = 1/k_scale. A checkpoint's k_scale = amax/(6·448) makes the block scale
// e4m3(max_block/(6·k_scale)), the contract's nvfp4 with g = amax/2688. A block [1, 0, …]: with
// k_scale = 1 (no checkpoint) the block scale is e4m3(1/6) = 0.171875 and 1/0.171875 = 5.82 → e2m1
// 6 → 1.03125; the calibrated g = 1/2688 gives block scale e4m3(448) = 448 and 1 (to fp32).
TEST(Vllm, Nvfp4WithCheckpointScales) {
  const Specs c = resolved("vllm --kv-cache-dtype nvfp4 kv_cache_scheme=tensor");
  EXPECT_EQ(c.key, "nvfp4");
  EXPECT_EQ(resolved("vllm --kv-cache-dtype nvfp4").key, "nvfp4,gscale=1");
  EXPECT_EQ(resolved("vllm --kv-cache-dtype nvfp4_4over6 kv_cache_scheme=tensor").key, "nvfp4,4over6");
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;
  EXPECT_NEAR(quantized(c.parsed.key, x)[0], 1.0f, 1e-6f);  // 448·fp32(1/2688)·6
  EXPECT_EQ(quantized(resolved("vllm --kv-cache-dtype nvfp4").parsed.key, x)[0], 1.03125f);
  EXPECT_NE(errorOf("vllm --kv-cache-dtype nvfp4 kv_cache_scheme=attn_head").find("one global scale per layer"),
            std::string::npos);
}

// vllm/v1/attention/ops/triton_quant_kv/_per_token_head_kernel.py (commit 8940d7db):
// s = max(max|x|/448, 1e-6) per token and head; same codes as the tensor case above for one token.
TEST(Vllm, Fp8PerTokenHead) {
  const Specs s = resolved("vllm --kv-cache-dtype fp8_per_token_head");
  EXPECT_EQ(s.key, "fp8_e4m3,axis=token,minscale=1e-06");
  EXPECT_EQ(quantized(s.parsed.key, kX), times({22, -56, 128, 448, -320, 4.5f, 96, -1.375f}, 10.0f / 448.0f));
  // kv_cache_interface.py: content = (hs_k + hs_v)·1 + 2·4 bytes per token and head.
  EXPECT_NEAR(bytesPerTokenHead(s, 128), 264.0, 0.0);
}

// Same kernel, int8: s = fp32(10/127), y = x·fp32(1/s) = [6.35, −15.875, 38.1, 127, −88.9, 1.27,
// 27.94, −0.381]; the implicit float→int8 store truncates (before PR #45361) → [6, −15, 38, 127,
// −88, 1, 27, 0]; the fix rounds → [6, −16, 38, 127, −89, 1, 28, 0].
TEST(Vllm, Int8PerTokenHeadRoundsOrTruncates) {
  const Specs now = resolved("vllm --kv-cache-dtype int8_per_token_head");
  EXPECT_EQ(now.key, "int8,sym,round=even,scale=fp32,minscale=1e-06");
  EXPECT_EQ(quantized(now.parsed.key, kX), times({6, -16, 38, 127, -89, 1, 28, 0}, 10.0f / 127.0f));
  const Specs old = resolved("vllm --kv-cache-dtype int8_per_token_head int8_rounding=trunc");
  EXPECT_EQ(old.value, "int8,sym,round=trunc,scale=fp32,minscale=1e-06");
  EXPECT_EQ(quantized(old.parsed.value, kX), times({6, -15, 38, 127, -88, 1, 27, 0}, 10.0f / 127.0f));
  EXPECT_NEAR(bytesPerTokenHead(now, 128), 264.0, 0.0);
  EXPECT_NE(errorOf("vllm --kv-cache-dtype int8_per_token_head int8_rounding=up").find("int8_rounding=trunc"),
            std::string::npos);
}

// vllm/v1/attention/ops/triton_quant_kv/_hadamard.py (commit db6806eb) fast_hadamard_transform:
// assert d & (d - 1) == 0, f"Requires power-of-2 dim, got {d}".
TEST(Vllm, Int4PerTokenHeadNeedsAPowerOfTwoHeadDim) {
  const std::string e = errorOf("vllm --kv-cache-dtype int4_per_token_head", {96, 4, 2});
  EXPECT_NE(e.find("\"Requires power-of-2 dim, got 96\""), std::string::npos) << e;
  const Specs s = resolved("vllm --kv-cache-dtype int4_per_token_head");
  EXPECT_EQ(s.key, "int4,zero=packed,rot=rht,scale=fp32,minscale=1e-06");
  EXPECT_TRUE(hasNote(s, "only in distribution"));
  // kv_cache_interface.py: content = (hs_k/2 + hs_v/2)·1 + 2·4 (the zero point lives in the scale word).
  EXPECT_NEAR(bytesPerTokenHead(s, 128), 136.0, 0.0);
}

// vllm/v1/attention/ops/int4_per_token_head.py (commit 055e47c2) _reshape_cache_int4_kernel, on an
// already rotated vector y (the format step alone): lo = −7, hi = 10, s = fp32(17/15) = 1.1333333
// (0x3F911111), z = rnd(7/s = 6.18) = 6, q = rnd(y·(1/s) + 6) = [6, 5, 9, 15, 0, 6, 8, 6]; the scale
// word is 0x3F911116 and the scale read back is 0x3F911110 = 1.1333332: x̂ = (q − 6)·1.1333332.
// An all-positive vector [1, 2, 3, 4]: s = 0.2, z = clamp(rnd(−5), 0, 15) = 0, q = [5, 10, 15, 15]
// (20 clamps: vLLM's int4 cannot reach 4 here), x̂ = q·(0.2 with 4 bits cleared).
TEST(Vllm, Int4PerTokenHeadQuantizerPacksTheZeroPoint) {
  const Specs s = resolved("vllm --kv-cache-dtype int4_per_token_head");
  const float packed = std::bit_cast<float>(uint32_t{0x3F911110});
  EXPECT_EQ(quantized(s.parsed.key, kX), times({0, -1, 3, 9, -6, 0, 2, 0}, packed));
  const float fifth = std::bit_cast<float>(std::bit_cast<uint32_t>(0.2f) & ~uint32_t{0xF});
  EXPECT_EQ(quantized(s.parsed.key, {1.0f, 2.0f, 3.0f, 4.0f}), times({5, 10, 15, 15}, fifth));
}

// csrc/libtorch_stable/nvfp4_kv_cache_kernels.cu (commit 5a5fc068): global_scale = 1/k_scale,
// k_scale 1.0 without checkpoint scales; head_size % 16 checked.
TEST(Vllm, Nvfp4HasGlobalScaleOne) {
  const Specs s = resolved("vllm --kv-cache-dtype nvfp4");
  EXPECT_EQ(s.key, "nvfp4,gscale=1");
  std::vector<float> x{1.0f, 0.9f, 0.8f, 0.7f, 0.5f, 0.3f, 0.2f, 0.1f};
  x.resize(16, 0.0f);
  std::vector<float> expected = times({6, 6, 4, 4, 3, 1.5f, 1, 0.5f}, 0.171875f);  // d = e4m3(1/6)
  expected.resize(16, 0.0f);
  EXPECT_EQ(quantized(s.parsed.key, x), expected);
  EXPECT_NEAR(bytesPerTokenHead(s, 128), 144.0, 0.0);
  EXPECT_NE(errorOf("vllm --kv-cache-dtype nvfp4", {72, 4, 2}).find("head_size must be divisible by 16"),
            std::string::npos);
}

TEST(Vllm, WhatIsNotModelledIsRefusedByName) {
  EXPECT_NE(errorOf("vllm --kv-cache-dtype fp8_ds_mla").find("DeepSeek MLA"), std::string::npos);
  EXPECT_NE(errorOf("vllm --kv-cache-dtype fp8_inc").find("Gaudi"), std::string::npos);
  const std::string e = errorOf("vllm --kv-cache-dtype int4");
  EXPECT_NE(e.find("is not a cache dtype vLLM accepts (it accepts auto, float16, bfloat16, fp8,"), std::string::npos) << e;
  EXPECT_NE(errorOf("vllm --kv-cache-dtype").find("needs a value"), std::string::npos);
}

// ---- SGLang ----------------------------------------------------------------------------------

// python/sglang/srt/mem_cache/memory_pool.py MHATokenToKVPool.set_kv_buffer: divides by k_scale
// only when one was loaded (--quantization-param-path), then .to(fp8).
TEST(Sglang, Fp8ScalesComeFromTheParamFileOrAreOne) {
  const Specs s = resolved("sglang --model-path m --kv-cache-dtype fp8_e4m3");
  EXPECT_EQ(s.key, "fp8_e4m3,unitscale");
  EXPECT_TRUE(hasNote(s, "NaN"));
  // Scale 1: e4m3(x) itself (0.1 → 13·2^−7, 2.2 → 2.25, −0.03 → −15·2^−9).
  EXPECT_EQ(quantized(s.parsed.key, kX),
            (std::vector<float>{0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1015625f, 2.25f, -0.029296875f}));
  EXPECT_EQ(resolved("sglang --kv-cache-dtype fp8_e5m2 --quantization-param-path kv.json").value, "fp8_e5m2");
  EXPECT_EQ(resolved("sglang --kv-cache-dtype bfloat16").key, "bf16");
  EXPECT_EQ(resolved("sglang").key, "none");
}

TEST(Sglang, Int8KvCacheIsNotAnSglangFlag) {
  const std::string e = errorOf("sglang --int8-kv-cache");
  EXPECT_NE(e.find("--int8-kv-cache is not an SGLang flag"), std::string::npos) << e;
  EXPECT_NE(e.find("auto, fp8_e5m2, fp8_e4m3, bf16, bfloat16, fp4_e2m1, fp4_mx_block16"), std::string::npos) << e;
  EXPECT_NE(errorOf("sglang --kv-cache-dtype fp8").find("is not a cache dtype SGLang accepts"), std::string::npos);
  EXPECT_NE(errorOf("sglang --kv-cache-dtype mxfp8").find("was not read"), std::string::npos);
}

// python/sglang/srt/mem_cache/memory_pool.py MHATokenToKVPoolFP4.set_kv_buffer (the stored version
// of that file, 2026) calls kvfp4_tensor.py (commit 0dae407b) FP4MXBlock16KVQuantizeUtil.
// batched_quantize on [tokens, heads, D]: 16 values, e = ceil(log2(max/6)). For kX (a = 10):
// log2(10/6) = 0.74 → e = 1, scale 2; x/2 = [0.25, −0.625, 1.5, 5, −3.5, 0.05, 1.1, −0.015] →
// #(≥ bounds) → [0.5, −0.5, 1.5, 6, −4, 0, 1, −0] · 2 (0.25 and 3.5 sit on bounds and go up).
TEST(Sglang, Fp4MxBlock16IsKvfp4) {
  const Specs s = resolved("sglang --kv-cache-dtype fp4_mx_block16");
  EXPECT_EQ(s.key, "kvfp4");
  EXPECT_EQ(s.value, "kvfp4");
  std::vector<float> x = kX;
  x.resize(16, 0.0f);
  std::vector<float> expected{1.0f, -1.0f, 3.0f, 12.0f, -8.0f, 0.0f, 2.0f, -0.0f};
  expected.resize(16, 0.0f);
  EXPECT_EQ(quantized(s.parsed.key, x), expected);
  // _create_buffers: (m, heads, D // 2) uint8 + (m, heads·D // 16) uint8 per layer, for K and V.
  EXPECT_NEAR(bytesPerTokenHead(s, 128), 2 * (64 + 8), 0.0);
  EXPECT_NE(errorOf("sglang --kv-cache-dtype fp4_mx_block16 --quantization-param-path kv.json").find("k_scale"),
            std::string::npos);
}

// The KV cache quantization methods module (late 2026), resolve_kv_cache_quant: fp4_e2m1 is refused
// ("--kv-cache-dtype=fp4_e2m1 no longer auto-selects an FP4 KV recipe. Use --kv-cache-dtype=nvfp4 or
// --kv-cache-dtype=fp4_mx_block16"). Mid-2026 releases (fp4_kv_cache_quant_method.py,
// FP4_KV_CACHE_QUANT_REGISTRY: nvfp4, mxfp4, blockfp4) chose the recipe with --fp4-kv-cache-recipe,
// mxfp4 (the block-16 recipe) by default; kvscope used to ignore the flag.
TEST(Sglang, Fp4E2m1ChoseItsRecipeUntilItWasRefused) {
  for (const char* text : {"sglang --kv-cache-dtype fp4_e2m1", "sglang@0.5.15 --kv-cache-dtype=fp4_e2m1"}) {
    const std::string e = errorOf(text);
    EXPECT_NE(e.find("no longer auto-selects an FP4 KV recipe"), std::string::npos) << e;
    EXPECT_NE(e.find("--kv-cache-dtype nvfp4 or --kv-cache-dtype fp4_mx_block16"), std::string::npos) << e;
    EXPECT_NE(e.find("write sglang@0.5.14"), std::string::npos) << e;
  }
  EXPECT_NE(errorOf("sglang --fp4-kv-cache-recipe nvfp4").find("removed with fp4_e2m1"), std::string::npos);
  EXPECT_EQ(resolved("sglang@0.5.14 --kv-cache-dtype fp4_e2m1").key, "kvfp4");  // mxfp4 by default
  EXPECT_EQ(resolved("sglang@0.5.14 --kv-cache-dtype fp4_e2m1 --fp4-kv-cache-recipe mxfp4").key, "kvfp4");
  EXPECT_EQ(resolved("sglang@0.5.14 --kv-cache-dtype fp4_e2m1 --fp4-kv-cache-recipe blockfp4").key, "kvfp4");
  EXPECT_EQ(resolved("sglang@0.5.14 --kv-cache-dtype fp4_e2m1 --fp4-kv-cache-recipe nvfp4").key, "nvfp4,gscale=1");
  EXPECT_NE(errorOf("sglang@0.5.14 --kv-cache-dtype fp4_e2m1 --fp4-kv-cache-recipe fp8").find("nvfp4 and mxfp4"),
            std::string::npos);
}

// NVFP4KVCacheMethod (the same module): blocks of 16 per head with e4m3 scales and a per-layer
// global scale from the checkpoint's k_scale, 1.0 without one (load_scales_from_model); kvscope
// used to refuse --kv-cache-dtype nvfp4 as unread. The same block [1, 0, …] as vLLM's nvfp4 test:
// 1.03125 with scale 1.
TEST(Sglang, Nvfp4WithCheckpointOrUnitGlobalScale) {
  const Specs s = resolved("sglang --kv-cache-dtype nvfp4");
  EXPECT_EQ(s.key, "nvfp4,gscale=1");
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;
  EXPECT_EQ(quantized(s.parsed.key, x)[0], 1.03125f);
  EXPECT_EQ(resolved("sglang --kv-cache-dtype nvfp4 kv_cache_scheme=tensor").key, "nvfp4");
  EXPECT_NE(errorOf("sglang --kv-cache-dtype nvfp4", {72, 4, 2}).find("multiple of 16"), std::string::npos);
}

// ---- LMDeploy --------------------------------------------------------------------------------

// src/turbomind/kernels/attention/quantization.h (commit 1263d5cd) warp_stats, ConvertKvCache<T,
// uint4_t>: fp16 model, int4: lo = −7, scale = fp16(fp32(17·fp32(1/15))) = 1161/1024, zero = −7,
// inv_scale = fp16(1/scale) = 903/1024; y = fp16(fp16(x − zero)·inv_scale) → round half to even →
// [7, 5, 9, 15, 0, 6, 8, 6]; read back fp16(fp16(q·scale) + zero).
TEST(Lmdeploy, TurboMindInt4InTheModelDtype) {
  const Specs s = resolved("lmdeploy serve api_server internlm2 --backend turbomind --quant-policy 4 --dtype float16");
  EXPECT_EQ(s.key, "int4,round=even,codes=meta");
  EXPECT_EQ(quantized(s.parsed.key, kX), (std::vector<float>{0.9375f, -1.33203125f, 3.203125f, 10.0f, -7.0f,
                                                               -0.1953125f, 2.0703125f, -0.1953125f}));
  const Specs eight = resolved("lmdeploy --backend turbomind --quant-policy 8");
  EXPECT_EQ(eight.value, "int8,round=even,codes=meta,scale=bf16");
  EXPECT_TRUE(hasNote(eight, "assumes bf16"));
  // lmdeploy/pytorch/engine/cache_engine.py: D (int8) bytes + [scale, zero] in the model dtype.
  EXPECT_NEAR(bytesPerTokenHead(eight, 128), 264.0, 0.0);
  EXPECT_NEAR(bytesPerTokenHead(s, 128), 136.0, 0.0);
  EXPECT_EQ(resolved("lmdeploy --quant-policy 0").key, "none");  // both backends: no --backend needed
}

// The same ConvertKvCache<T, uint8_t> with T = bf16, int8, kX: scale = bf16(17·fp32(1/255)) =
// 137/2048, inv_scale = bf16(1/scale) = 239/16. x = 2.2 is bf16 2.203125, x − zero = 9.203125 →
// bf16 9.1875, ·239/16 = 137.24 → bf16 137 → code 137, where fp32 arithmetic gives 9.2·14.9489 =
// 137.53 → 138. Codes [112, 86, 149, 254, 0, 106, 137, 104], read back bf16(bf16(q·s) + zero).
TEST(Lmdeploy, TurboMindBf16Int8CodesDifferFromFp32Arithmetic) {
  const Specs s = resolved("lmdeploy --backend turbomind --quant-policy 8 --dtype bfloat16");
  EXPECT_EQ(quantized(s.parsed.key, kX),
            (std::vector<float>{0.5f, -1.25f, 2.9375f, 10.0f, -7.0f, 0.09375f, 2.1875f, -0.03125f}));
  auto fp32Codes = parseSpec("int8,round=even,scale=bf16");
  ASSERT_TRUE(fp32Codes.hasValue());
  EXPECT_EQ(quantized(*fp32Codes, kX)[6], 138.0f * (137.0f / 2048.0f) - 7.0f);
  // The fp16 model's codes: [112, 86, 150, 255, 0, 106, 138, 104] with scale 273/4096.
  const Specs h = resolved("lmdeploy --backend turbomind --quant-policy 8 --dtype float16");
  EXPECT_EQ(quantized(h.parsed.key, kX)[3], 10.0f);  // fp16(fp16(255·273/4096) − 7)
}

// lmdeploy/archs.py autoget_backend and lmdeploy/turbomind/supported_models.py (commit 008d8e5b)
// is_supported: TurboMind when the architecture is in SUPPORTED_ARCHS (Llama and Qwen2 with head
// dim 64 or 128), else the PyTorch engine. TurboMind reads --quant-policy as a bit mask: 42 has the
// int8 bit (kvscope used to say TurboMind refuses 42). PyTorch engine 16/17: fp8 with scale 1.0.
TEST(Lmdeploy, BackendFromTheArchitectureAndRefusals) {
  EXPECT_EQ(resolved("lmdeploy --quant-policy 8 architecture=LlamaForCausalLM").key,
            "int8,round=even,codes=meta,scale=bf16");
  EXPECT_EQ(resolved("lmdeploy --quant-policy 8 architecture=LlamaForCausalLM", {96, 4, 2}).key, "int8,scale=bf16");
  EXPECT_EQ(resolved("lmdeploy --quant-policy 8 architecture=GemmaForCausalLM").key, "int8,scale=bf16");
  EXPECT_EQ(resolved("lmdeploy --quant-policy 8", KvShape{128, 4, 2, "Qwen2ForCausalLM"}).key,
            "int8,round=even,codes=meta,scale=bf16");  // the dump's model names its architecture
  const std::string both = errorOf("lmdeploy --quant-policy 8");
  EXPECT_NE(both.find("without --backend"), std::string::npos) << both;
  EXPECT_NE(both.find("TurboMind stores K int8,round=even,codes=meta,scale=bf16"), std::string::npos) << both;
  EXPECT_NE(both.find("the PyTorch engine stores K int8,scale=bf16"), std::string::npos) << both;
  const Specs tm42 = resolved("lmdeploy --backend turbomind --quant-policy 42");
  EXPECT_EQ(tm42.key, "int8,round=even,codes=meta,scale=bf16");
  EXPECT_TRUE(hasNote(tm42, "bit mask"));
  EXPECT_EQ(resolved("lmdeploy --backend pytorch --quant-policy 16").key, "fp8_e4m3,unitscale");
  EXPECT_EQ(resolved("lmdeploy --backend pytorch --quant-policy fp8_e5m2").value, "fp8_e5m2,unitscale");
  const Specs p = resolved("lmdeploy --backend pytorch --quant-policy 8");
  EXPECT_EQ(p.key, "int8,scale=bf16");
  EXPECT_TRUE(hasNote(p, "equal in distribution only"));
  EXPECT_NE(errorOf("lmdeploy --backend turbomind --quant-policy 16").find("FP8 quantization is not supported"),
            std::string::npos);
  EXPECT_NE(errorOf("lmdeploy --quant-policy 2").find("0, 4, 8, 16, 17, 42"), std::string::npos);
  EXPECT_NE(errorOf("lmdeploy --backend pytorch --quant-policy 42", {96, 4, 2}).find("power-of-2"), std::string::npos);
  // lmdeploy/cli/utils.py ArgumentHelper.quant_policy: the enum's names, any case.
  EXPECT_EQ(resolved("lmdeploy --backend turbomind --quant-policy INT8").key, "int8,round=even,codes=meta,scale=bf16");
}

// lmdeploy/messages.py QuantPolicy.TURBO_QUANT = 42 ("K=4bit QJL4 + V=2bit MSE"), PyTorch engine
// only (commit 1263d5cd); the key and value rules are in tests/core/quant/codebook/lmdeploy_tq_test.
// cache_engine.py get_k_block_shape/get_quant_cache_descs: K D/2 bytes + 2 model-dtype values,
// V D/4 bytes + 1: (64 + 4) + (32 + 2) = 102 bytes per token and head at D = 128.
TEST(Lmdeploy, TurboQuantIsLmqjl4KeysAndLmtq2Values) {
  const Specs s = resolved("lmdeploy serve api_server m --backend pytorch --quant-policy 42 --dtype float16");
  EXPECT_EQ(s.key, "lmqjl4");  // scale=fp16 is the vector formats' default
  EXPECT_EQ(s.value, "lmtq2");
  EXPECT_TRUE(hasNote(s, "nothing is drawn at random"));
  const Specs b = resolved("lmdeploy --backend pytorch --quant-policy turbo_quant");
  EXPECT_EQ(b.key, "lmqjl4,scale=bf16");
  EXPECT_EQ(b.value, "lmtq2,scale=bf16");
  EXPECT_NEAR(bytesPerTokenHead(b, 128), 102.0, 0.0);
  EXPECT_TRUE(b.parsed.key.rotation == Rotation::None);  // the format's own rotation: Hadamard at D = 128
  EXPECT_EQ(effectiveRotation(b.parsed.key, 128), Rotation::Hadamard);
}

// ---- transformers ----------------------------------------------------------------------------

// src/transformers/cache_utils.py QuantoQuantizedLayer (commit 67dd5524) with optimum-quanto
// (commit e33f8202) MaxOptimizer and quantize_affine: bf16 model, int4, a group of 64 channels of
// one token (8 values + 56 zeros, which leave min −7 and max 10): scale = bf16(17/15) = 1.1328125,
// shift 7; (x + 7)/scale for the bf16 inputs = [6.621, 5.076, 8.828, 15.007, 0, 6.268, 8.124,
// 6.153] → half-to-even [7, 5, 9, 15, 0, 6, 8, 6], zeros (7/scale = 6.18) → 6.
TEST(Transformers, QuantoGroupsOf64ChannelsRoundToEven) {
  const KvShape d64{64, 4, 2};
  const Specs s = resolved("transformers cache_implementation=quantized backend=quanto nbits=4 q_group_size=64 "
                           "residual_length=128",
                           d64);
  EXPECT_EQ(s.key, "int4,round=even,group=64,scale=bf16");
  EXPECT_EQ(s.value, "int4,round=even,group=64,scale=bf16");
  EXPECT_TRUE(hasNote(s, "never protects prompt tokens"));
  std::vector<float> x{0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.10009765625f, 2.203125f, -0.030029296875f};
  x.resize(64, 0.0f);
  std::vector<float> expected = times({7, 5, 9, 15, 0, 6, 8, 6}, 1.1328125f, -7.0f);
  expected.resize(64, 6.0f * 1.1328125f - 7.0f);
  EXPECT_EQ(quantized(s.parsed.key, x), expected);
  // cache_utils.py: 4 bits + a scale and a shift per 64 values in the model dtype.
  EXPECT_NEAR(bytesPerTokenHead(resolved("transformers cache_implementation=quantized"), 128), 144.0, 0.0);
  EXPECT_EQ(resolved("transformers cache_implementation=quantized nbits=2 axis_key=-1 dtype=float16", d64).key,
            "int2,round=even,axis=channel,group=64");
  EXPECT_EQ(resolved("transformers").key, "none");
}

TEST(Transformers, RefusalsUseQuantosMessages) {
  EXPECT_NE(errorOf("transformers cache_implementation=quantized nbits=3")
                .find("\"`nbits` for `quanto` backend has to be one of [`2`, `4`] but got 3\""),
            std::string::npos);
  EXPECT_NE(errorOf("transformers cache_implementation=quantized axis_value=1").find("`axis_value` for `quanto`"),
            std::string::npos);
  EXPECT_NE(errorOf("transformers cache_implementation=quantized backend=hqq nbits=5")
                .find("\"`nbits` for `HQQ` backend has to be one of [`1`, `2`, `3`, `4`, `8`] but got 5\""),
            std::string::npos);
  EXPECT_NE(errorOf("transformers cache_implementation=quantized backend=hqq axis_key=-1").find("`axis_key` for `HQQ`"),
            std::string::npos);
  // stories260K's D = 8: quanto's groups of 64 would straddle tokens.
  EXPECT_NE(errorOf("transformers cache_implementation=quantized", {8, 5, 4}).find("straddle tokens"), std::string::npos);
  EXPECT_NE(errorOf("transformers cache_implementation quantized").find("not a name=value pair"), std::string::npos);
}

// src/transformers/cache_utils.py (commit 004999d9) HQQQuantizedLayer: nbits 1, 2, 3, 4, 8, axes 0
// and 1, quantize(tensor, axis, compute_dtype = the model dtype, nbits, group_size); hqq's rule
// and its hand vectors are in tests/core/quant/formats/hqq_test.
TEST(Transformers, HqqBackendIsHqqWithTheGivenAxes) {
  const Specs s = resolved("transformers cache_implementation=quantized backend=hqq nbits=2 q_group_size=64 "
                           "residual_length=128 axis_value=1");
  EXPECT_EQ(s.key, "hqq2,scale=bf16");  // axis 0: HQQ's strided groups (axis=tensor, the default)
  EXPECT_EQ(s.value, "hqq2,axis=token,scale=bf16");
  EXPECT_TRUE(hasNote(s, "never protects prompt tokens"));
  EXPECT_TRUE(hasNote(s, "#35185"));
  EXPECT_TRUE(hasNote(s, "proximal"));
  EXPECT_EQ(resolved("transformers cache_implementation=quantized backend=HQQ nbits=8 q_group_size=32 dtype=float16").key,
            "hqq8,group=32");
  // 2 bits per value + a bf16 scale and zero per 64 values: 32 + 2·4 bytes per token and head at
  // D = 128, for K and for V.
  EXPECT_NEAR(bytesPerTokenHead(s, 128), 2 * (32 + 8), 0.0);
}

// cache_utils.py at 004999d9, QuantizedCache.__init__: backend "quanto" or "hqq", anything else
// raises "Unknown quantization backend"; releases before the cache refactor (4.56) spelled it
// "HQQ" (QuantizedCacheConfig). kvscope used to accept only HQQ. Both are accepted without
// @RELEASE; a release refuses the other spelling.
TEST(Transformers, HqqIsSpelledHqqSince456AndHQQBefore) {
  const Specs lower = resolved("transformers cache_implementation=quantized backend=hqq nbits=4");
  const Specs upper = resolved("transformers cache_implementation=quantized backend=HQQ nbits=4");
  EXPECT_EQ(lower.key, "hqq4,scale=bf16");
  EXPECT_EQ(upper.key, lower.key);
  EXPECT_TRUE(hasNote(upper, "spelling of transformers before 4.56"));
  EXPECT_EQ(resolved("transformers@4.57 cache_implementation=quantized backend=hqq").key, "hqq4,scale=bf16");
  EXPECT_EQ(resolved("transformers@4.50 cache_implementation=quantized backend=HQQ").key, "hqq4,scale=bf16");
  const std::string newer = errorOf("transformers@4.56 cache_implementation=quantized backend=HQQ");
  EXPECT_NE(newer.find("renamed backend=hqq"), std::string::npos) << newer;
  EXPECT_NE(newer.find("Unknown quantization backend"), std::string::npos) << newer;
  EXPECT_NE(errorOf("transformers@4.50 cache_implementation=quantized backend=hqq").find("spells it backend=HQQ"),
            std::string::npos);
  EXPECT_NE(errorOf("transformers cache_implementation=quantized backend=Hqq").find("quanto and hqq"),
            std::string::npos);
}

// ---- TensorRT-LLM ----------------------------------------------------------------------------

// tensorrt_llm/_torch/attention_backend/trtllm.py, TrtllmAttention (the PyTorch backend, the
// default): an fp8 cache gets kv_cache_scaling_factor = 1, checkpoint scales are passed for FP4
// only. So a layer whose |K| exceeds 448 saturates: 1000 → 448 (kvscope used ModelOpt's
// max(amax/448, 1), which would scale it to 1000/448 and not saturate).
TEST(Trtllm, Fp8UsesScaleOneOnThePyTorchBackend) {
  const Specs s = resolved("trtllm kv_cache_dtype=fp8");
  EXPECT_EQ(s.key, "fp8_e4m3,unitscale");
  EXPECT_EQ(quantized(s.parsed.key, kX),
            (std::vector<float>{0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1015625f, 2.25f, -0.029296875f}));
  EXPECT_EQ(quantized(s.parsed.key, {1000.0f, -600.0f, 3.0f})[0], 448.0f);
  EXPECT_EQ(quantized(s.parsed.key, {1000.0f, -600.0f, 3.0f})[1], -448.0f);
  EXPECT_EQ(resolved("trtllm --kv_cache_dtype fp8").value, "fp8_e4m3,unitscale");
  EXPECT_EQ(resolved("trtllm kv_cache_quant_algo=FP8").value, "fp8_e4m3,unitscale");
  EXPECT_EQ(resolved("trtllm kv_cache_qformat=nvfp4").key, "nvfp4");
  EXPECT_EQ(resolved("trtllm kv_cache_quant_algo=NVFP4 kv_cache_config.dtype=nvfp4").key, "nvfp4");
  EXPECT_EQ(resolved("trtllm").key, "none");
  EXPECT_NEAR(bytesPerTokenHead(resolved("trtllm kv_cache_dtype=nvfp4"), 128), 144.0, 0.0);
  EXPECT_NE(errorOf("trtllm kv_cache_dtype=int8").find("per-tensor scale is not modelled"), std::string::npos);
  EXPECT_NE(errorOf("trtllm kv_cache_dtype=fp8 kv_cache_qformat=nvfp4").find("contradicts"), std::string::npos);
  EXPECT_NE(errorOf("trtllm kv_cache_dtype=fp8 backend=onnx").find("backend=pytorch"), std::string::npos);
}

// TensorRT-Model-Optimizer modelopt/torch/export/quant_utils.py postprocess_state_dict (commit
// 5a4242fa): fp8 kv scales are amax/448 clamped at min 1, which engines built from the checkpoint
// (backend=tensorrt) load. With a = 10 the scale is 1: e4m3(x); with a = 1000, 1000/448.
TEST(Trtllm, Fp8OnTheTensorRtBackendTakesModelOptsScale) {
  const Specs s = resolved("trtllm kv_cache_dtype=fp8 --backend tensorrt");
  EXPECT_EQ(s.key, "fp8_e4m3,minscale=1");
  EXPECT_EQ(quantized(s.parsed.key, kX),
            (std::vector<float>{0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1015625f, 2.25f, -0.029296875f}));
  EXPECT_FLOAT_EQ(quantized(s.parsed.key, {1000.0f, -600.0f, 3.0f})[0], 1000.0f);  // 448·(1000/448)
}

}  // namespace
}  // namespace kvscope
