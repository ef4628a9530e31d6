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
  EXPECT_EQ(engineNameList(), "llama.cpp, vllm, sglang, lmdeploy, transformers, trtllm");
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

// vllm/model_executor/layers/attention/attention.py Attention.calc_kv_scales: k_scale =
// max|k|/K_SCALE_CONSTANT, v_scale = max|v|/V_SCALE_CONSTANT; vllm/envs.py defaults 200 and 100.
// K: a = 10 → s = 0.05, x/s → e4m3 [10, −24, 60, 192, −144, 2, 44, −0.625] (200 and 25 are
// ties in exact arithmetic, just below them in fp32: 192 and 24 either way).
// V: [1, −2.5, 20]: a = 20 → s = 0.2, x/s = [5, −12.5, 100] → [5, −12, 96].
TEST(Vllm, CalculatedScalesDivideBy200And100) {
  const Specs s = resolved("vllm --kv-cache-dtype fp8 --calculate-kv-scales");
  EXPECT_EQ(s.key, "fp8_e4m3,div=200");
  EXPECT_EQ(s.value, "fp8_e4m3,div=100");
  EXPECT_TRUE(hasNote(s, "first batch it serves"));
  EXPECT_EQ(quantized(s.parsed.key, kX), times({10, -24, 60, 192, -144, 2, 44, -0.625f}, 0.05f));
  EXPECT_EQ(quantized(s.parsed.value, {1.0f, -2.5f, 20.0f}), times({5, -12, 96}, 0.2f));
  const Specs env = resolved("K_SCALE_CONSTANT=300 vllm --kv-cache-dtype fp8_e5m2 --calculate-kv-scales");
  EXPECT_EQ(env.key, "fp8_e5m2,div=300");
  EXPECT_EQ(env.value, "fp8_e5m2,div=100");
  EXPECT_NE(errorOf("V_SCALE_CONSTANT=abc vllm --kv-cache-dtype fp8 --calculate-kv-scales").find("int()"),
            std::string::npos);
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
  EXPECT_NE(errorOf("vllm --kv-cache-dtype nvfp4 kv_cache_scheme=tensor").find("only --kv-cache-dtype fp8"),
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
  EXPECT_NE(errorOf("sglang --kv-cache-dtype nvfp4").find("was not read"), std::string::npos);
}

// python/sglang/srt/mem_cache/memory_pool.py MHATokenToKVPoolFP4.set_kv_buffer (the stored version
// of that file, 2026) calls kvfp4_tensor.py (commit 0dae407b) FP4MXBlock16KVQuantizeUtil.
// batched_quantize on [tokens, heads, D]: 16 values, e = ceil(log2(max/6)). For kX (a = 10):
// log2(10/6) = 0.74 → e = 1, scale 2; x/2 = [0.25, −0.625, 1.5, 5, −3.5, 0.05, 1.1, −0.015] →
// #(≥ bounds) → [0.5, −0.5, 1.5, 6, −4, 0, 1, −0] · 2 (0.25 and 3.5 sit on bounds and go up).
TEST(Sglang, Fp4E2m1IsKvfp4) {
  const Specs s = resolved("sglang --kv-cache-dtype fp4_e2m1");
  EXPECT_EQ(s.key, "kvfp4");
  EXPECT_EQ(s.value, "kvfp4");
  std::vector<float> x = kX;
  x.resize(16, 0.0f);
  std::vector<float> expected{1.0f, -1.0f, 3.0f, 12.0f, -8.0f, 0.0f, 2.0f, -0.0f};
  expected.resize(16, 0.0f);
  EXPECT_EQ(quantized(s.parsed.key, x), expected);
  // _create_buffers: (m, heads, D // 2) uint8 + (m, heads·D // 16) uint8 per layer, for K and V.
  EXPECT_NEAR(bytesPerTokenHead(s, 128), 2 * (64 + 8), 0.0);
  EXPECT_EQ(resolved("sglang --kv-cache-dtype fp4_mx_block16").key, "kvfp4");
  EXPECT_NE(errorOf("sglang --kv-cache-dtype fp4_e2m1 --quantization-param-path kv.json").find("k_scale"),
            std::string::npos);
}

// ---- LMDeploy --------------------------------------------------------------------------------

// src/turbomind/kernels/attention/quantization.h (commit 1263d5cd) warp_stats / quantize:
// fp16 model, int4: lo = −7, scale = fp16(17/15) = 1.1337891, zero = −7; (x − zero)·(1/scale) =
// [6.615, 5.071, 8.820, 14.994, 0, 6.262, 8.114, 6.148] → round-to-even [7, 5, 9, 15, 0, 6, 8, 6];
// x̂ = q·scale + zero.
TEST(Lmdeploy, TurboMindInt4RoundsToEvenWithModelDtypeMetadata) {
  const Specs s = resolved("lmdeploy serve api_server internlm2 --quant-policy 4 --dtype float16");
  EXPECT_EQ(s.key, "int4,round=even");
  EXPECT_EQ(quantized(s.parsed.key, kX), times({7, 5, 9, 15, 0, 6, 8, 6}, 1.1337890625f, -7.0f));
  const Specs eight = resolved("lmdeploy --quant-policy 8");
  EXPECT_EQ(eight.value, "int8,round=even,scale=bf16");
  EXPECT_TRUE(hasNote(eight, "assumes bf16"));
  // lmdeploy/pytorch/engine/cache_engine.py: D (int8) bytes + [scale, zero] in the model dtype.
  EXPECT_NEAR(bytesPerTokenHead(eight, 128), 264.0, 0.0);
  EXPECT_NEAR(bytesPerTokenHead(s, 128), 136.0, 0.0);
  EXPECT_EQ(resolved("lmdeploy --quant-policy 0").key, "none");
}

TEST(Lmdeploy, PyTorchEngineAndRefusals) {
  const Specs p = resolved("lmdeploy --backend pytorch --quant-policy 8");
  EXPECT_EQ(p.key, "int8,scale=bf16");
  EXPECT_TRUE(hasNote(p, "equal in distribution only"));
  EXPECT_NE(errorOf("lmdeploy --quant-policy 16").find("FP8 quantization is not supported"), std::string::npos);
  EXPECT_NE(errorOf("lmdeploy --quant-policy 42").find("only in the PyTorch engine"), std::string::npos);
  EXPECT_NE(errorOf("lmdeploy --quant-policy 2").find("0, 4, 8, 16, 17, 42"), std::string::npos);
  EXPECT_NE(errorOf("lmdeploy --backend pytorch --quant-policy 42", {96, 4, 2}).find("power-of-2"), std::string::npos);
  // lmdeploy/cli/utils.py ArgumentHelper.quant_policy: the enum's names, any case.
  EXPECT_EQ(resolved("lmdeploy --quant-policy INT8").key, "int8,round=even,scale=bf16");
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

// Issue 33: residual_length=999999999 was accepted without a word; transformers accepts it too,
// and then quantizes only the prompt (cache_utils.py QuantizedLayer.update: the residual is
// re-quantized only when it reaches residual_length). Said in a note; a number beyond a long is
// refused rather than clamped.
TEST(Transformers, AResidualLongerThanAnyContextIsSaid) {
  const Specs s = resolved("transformers cache_implementation=quantized residual_length=999999999");
  EXPECT_TRUE(hasNote(s, "residual_length=999999999 is longer than any context (2^20 tokens): a generation with "
                         "this cache keeps every decode-time token in full precision and quantizes only the prompt"));
  EXPECT_FALSE(hasNote(resolved("transformers cache_implementation=quantized residual_length=128"),
                       "longer than any context"));
  EXPECT_NE(errorOf("transformers cache_implementation=quantized residual_length=99999999999999999999")
                .find("residual_length takes a whole number"),
            std::string::npos);
}

TEST(Transformers, RefusalsUseQuantosMessages) {
  EXPECT_NE(errorOf("transformers cache_implementation=quantized nbits=3")
                .find("\"`nbits` for `quanto` backend has to be one of [`2`, `4`] but got 3\""),
            std::string::npos);
  EXPECT_NE(errorOf("transformers cache_implementation=quantized axis_value=1").find("`axis_value` for `quanto`"),
            std::string::npos);
  EXPECT_NE(errorOf("transformers cache_implementation=quantized backend=HQQ nbits=5")
                .find("\"`nbits` for `HQQ` backend has to be one of [`1`, `2`, `3`, `4`, `8`] but got 5\""),
            std::string::npos);
  EXPECT_NE(errorOf("transformers cache_implementation=quantized backend=HQQ axis_key=-1").find("`axis_key` for `HQQ`"),
            std::string::npos);
  // stories260K's D = 8: quanto's groups of 64 would straddle tokens.
  EXPECT_NE(errorOf("transformers cache_implementation=quantized", {8, 5, 4}).find("straddle tokens"), std::string::npos);
  EXPECT_NE(errorOf("transformers cache_implementation quantized").find("not a name=value pair"), std::string::npos);
}

// src/transformers/cache_utils.py (commit 004999d9) HQQQuantizedLayer: nbits 1, 2, 3, 4, 8, axes 0
// and 1, quantize(tensor, axis, compute_dtype = the model dtype, nbits, group_size); hqq's rule
// and its hand vectors are in tests/core/quant/formats/hqq_test.
TEST(Transformers, HqqBackendIsHqqWithTheGivenAxes) {
  const Specs s = resolved("transformers cache_implementation=quantized backend=HQQ nbits=2 q_group_size=64 "
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

// ---- TensorRT-LLM ----------------------------------------------------------------------------

// TensorRT-Model-Optimizer modelopt/torch/export/quant_utils.py postprocess_state_dict (commit
// 5a4242fa): fp8 kv scales are amax/448 clamped at min 1. With a = 10 the scale is 1: e4m3(x).
TEST(Trtllm, Fp8ScaleIsAtLeastOne) {
  const Specs s = resolved("trtllm kv_cache_dtype=fp8");
  EXPECT_EQ(s.key, "fp8_e4m3,minscale=1");
  EXPECT_EQ(quantized(s.parsed.key, kX),
            (std::vector<float>{0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1015625f, 2.25f, -0.029296875f}));
  EXPECT_EQ(resolved("trtllm --kv_cache_dtype fp8").value, "fp8_e4m3,minscale=1");
  EXPECT_EQ(resolved("trtllm kv_cache_qformat=nvfp4").key, "nvfp4");
  EXPECT_EQ(resolved("trtllm kv_cache_quant_algo=NVFP4 kv_cache_config.dtype=nvfp4").key, "nvfp4");
  EXPECT_EQ(resolved("trtllm kv_cache_quant_algo=FP8").value, "fp8_e4m3,minscale=1");
  EXPECT_EQ(resolved("trtllm").key, "none");
  EXPECT_NEAR(bytesPerTokenHead(resolved("trtllm kv_cache_dtype=nvfp4"), 128), 144.0, 0.0);
  EXPECT_NE(errorOf("trtllm kv_cache_dtype=int8").find("per-tensor scale is not modelled"), std::string::npos);
  EXPECT_NE(errorOf("trtllm kv_cache_dtype=fp8 kv_cache_qformat=nvfp4").find("contradicts"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
