// SPDX-License-Identifier: GPL-3.0-or-later
// The spec options that engines' KV caches need beyond quantization.md §2 (docs/formats.md,
// "Engine rules"): round=trunc|even, div=N, minscale=S, gscale=S. Each vector is worked out by
// hand in the comment beside it; the fast path and the scalar reference must both give it.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "core/quant/formats.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

Tensor3 row(const std::vector<float>& values) {
  Tensor3 x(1, 1, static_cast<int64_t>(values.size()));
  x.data = values;
  return x;
}

QuantSpec parsed(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << (s.hasValue() ? "" : s.status().message());
  return s.hasValue() ? *s : QuantSpec{};
}

void expectQuantizesTo(const std::string& text, const std::vector<float>& in, const std::vector<float>& expected) {
  const QuantSpec spec = parsed(text);
  Tensor3 fast = row(in), ref = row(in);
  ASSERT_TRUE(quantizeFormatInPlace(fast, spec).isOk()) << text;
  ASSERT_TRUE(quantizeFormatReference(ref, spec).isOk()) << text;
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(fast.data[i], expected[i]) << text << ", fast, value " << i << " (" << in[i] << ")";
    EXPECT_EQ(ref.data[i], expected[i]) << text << ", reference, value " << i << " (" << in[i] << ")";
  }
}

std::string errorOf(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_FALSE(s.hasValue()) << text;
  return s.hasValue() ? std::string{} : s.status().message();
}

TEST(EngineOptions, ParseAndPrintInCanonicalOrder) {
  EXPECT_EQ(toString(parsed("int8,minscale=1e-6,scale=fp32,round=trunc,sym")), "int8,sym,round=trunc,scale=fp32,minscale=1e-06");
  EXPECT_EQ(toString(parsed("int4,round=even,group=64,scale=bf16")), "int4,round=even,group=64,scale=bf16");
  EXPECT_EQ(toString(parsed("int4,round=away")), "int4");  // the contract's rounding is the default
  EXPECT_EQ(toString(parsed("fp8_e4m3,div=200")), "fp8_e4m3,div=200");
  EXPECT_EQ(toString(parsed("fp8_e5m2,axis=token,minscale=1")), "fp8_e5m2,axis=token,minscale=1");
  EXPECT_EQ(toString(parsed("nvfp4,gscale=1")), "nvfp4,gscale=1");
  EXPECT_EQ(toString(parsed("nvfp4,gscale=0.25,rot=hadamard")), "nvfp4,rot=hadamard,gscale=0.25");
  // Round trip: the canonical string parses back to the same spec.
  for (const char* t : {"int8,sym,round=trunc,scale=fp32,minscale=1e-06", "fp8_e4m3,div=100", "nvfp4,gscale=2"}) {
    EXPECT_EQ(parsed(toString(parsed(t))), parsed(t)) << t;
  }
}

TEST(EngineOptions, RefusalsNameWhatIsAllowed) {
  EXPECT_NE(errorOf("fp8_e4m3,round=even").find("'round=' does not apply to fp8_e4m3 (allowed with int1 … int8 only)"),
            std::string::npos);
  EXPECT_NE(errorOf("int4,round=up").find("unknown rounding 'up' (allowed: round=away, round=trunc or round=even)"),
            std::string::npos);
  EXPECT_NE(errorOf("int4,zero=int,round=even").find("zero=int keeps the contract's rounding"), std::string::npos);
  EXPECT_NE(errorOf("int8,div=200").find("'div=' does not apply to int8 (allowed with fp8_e4m3 and fp8_e5m2 only)"),
            std::string::npos);
  EXPECT_NE(errorOf("fp8_e4m3,div=0").find("is not a positive number"), std::string::npos);
  EXPECT_NE(errorOf("fp8_e4m3,div=-3").find("is not a positive number"), std::string::npos);
  EXPECT_NE(errorOf("fp8_e4m3,div").find("needs a value"), std::string::npos);
  EXPECT_NE(errorOf("fp8_e4m3,unitscale,div=200").find("unitscale fixes it at 1"), std::string::npos);
  EXPECT_NE(errorOf("nf4,minscale=1").find("allowed with int1 … int8, fp8_e4m3 and fp8_e5m2 only"), std::string::npos);
  EXPECT_NE(errorOf("mxfp4,gscale=1").find("allowed with nvfp4 only"), std::string::npos);
  EXPECT_NE(errorOf("int4,round=even,round=trunc").find("more than once"), std::string::npos);
  // Specs built in code are checked too.
  QuantSpec s = parsed("fp8_e4m3");
  s.rounding = Rounding::Even;
  EXPECT_FALSE(validateSpec(s, {}).isOk());
}

// Symmetric int8, scale=fp32: a = 127 → s = 1, 1/s = 1, so y = x and only the rounding differs.
// trunc: 2.5 → 2, −3.5 → −3, 0.5 → 0, −126.9 → −126; even: 2, −4, 0, −127; away (rnd): 3, −4, 1, −127.
TEST(EngineOptions, RoundingModesOfTheSymmetricGrid) {
  const std::vector<float> x{127.0f, 2.5f, -3.5f, 0.5f, -126.9f};
  expectQuantizesTo("int8,sym,scale=fp32,round=trunc", x, {127, 2, -3, 0, -126});
  expectQuantizesTo("int8,sym,scale=fp32,round=even", x, {127, 2, -4, 0, -127});
  expectQuantizesTo("int8,sym,scale=fp32", x, {127, 3, -4, 1, -127});
}

// Asymmetric int4, scale=fp32: lo = 0, hi = 15 → s = 1, m = 0; y = x − 0.
// trunc: 2.5 → 2, 7.5 → 7, 8.5 → 8; even: 2, 8, 8; away: 3, 8, 9.
TEST(EngineOptions, RoundingModesOfTheAsymmetricGrid) {
  const std::vector<float> x{0.0f, 15.0f, 2.5f, 7.5f, 8.5f};
  expectQuantizesTo("int4,scale=fp32,round=trunc", x, {0, 15, 2, 7, 8});
  expectQuantizesTo("int4,scale=fp32,round=even", x, {0, 15, 2, 8, 8});
  expectQuantizesTo("int4,scale=fp32", x, {0, 15, 3, 8, 9});
}

// vLLM int8_per_token_head before PR #45361 (vllm/v1/attention/ops/triton_quant_kv/
// _per_token_head_kernel.py, commit 8940d7db, _reshape_cache_per_token_head_kernel):
// s = fp32(10/127) = 0.07874016, 1/s = fp32 12.7 (12.69999981); y = x·(1/s) =
// [6.35, −15.875, 38.1, 127, −88.9, 1.27, 27.94, −0.381]; trunc → [6, −15, 38, 127, −88, 1, 27, 0].
TEST(EngineOptions, TruncationOfVllmsInt8PerTokenHead) {
  const std::vector<float> x{0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1f, 2.2f, -0.03f};
  const float s = 10.0f / 127.0f;
  std::vector<float> expected;
  for (int q : {6, -15, 38, 127, -88, 1, 27, 0}) expected.push_back(static_cast<float>(q) * s);
  expectQuantizesTo("int8,sym,round=trunc,scale=fp32,minscale=1e-06", x, expected);
  // Round to even (the fix) moves −15.875 → −16, −88.9 → −89, 27.94 → 28.
  expected.clear();
  for (int q : {6, -16, 38, 127, -89, 1, 28, 0}) expected.push_back(static_cast<float>(q) * s);
  expectQuantizesTo("int8,sym,round=even,scale=fp32,minscale=1e-06", x, expected);
}

// minscale: a tiny token a = 1e-5 has a/127 = 7.9e-8 < 1e-6, so s = 1e-6 (fp32):
// 3.3e-6/1e-6 = 3.3 → 3 and 1e-5/1e-6 = 10 → 10. Without the floor s = 1e-5/127 and
// 3.3e-6/s = 41.91 → 42.
TEST(EngineOptions, MinscaleFloorsTheScale) {
  const std::vector<float> x{3.3e-6f, 1e-5f};
  const float floor = 1e-6f;
  const std::vector<float> floored{3.0f * floor, 10.0f * floor};
  expectQuantizesTo("int8,sym,scale=fp32,minscale=1e-6", x, floored);
  const float s = 1e-5f / 127.0f;
  expectQuantizesTo("int8,sym,scale=fp32", x, {42.0f * s, 127.0f * s});
  // fp8 with minscale=1 (TensorRT-LLM's exported scale): a = 10 → a/448 < 1 → s = 1, plain e4m3.
  // 0.1 → 0.1015625 (13·2^−7), 2.2 → 2.25 (step 0.25), −0.03 → −0.029296875 (15·2^−9).
  expectQuantizesTo("fp8_e4m3,minscale=1", {0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1f, 2.2f, -0.03f},
                    {0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1015625f, 2.25f, -0.029296875f});
  // Above 448 the floor does not bind: a = 896 → s = 2, so 896 → 448·2 survives (unitscale would
  // saturate it at 448) and 3 → 1.5·2.
  expectQuantizesTo("fp8_e4m3,minscale=1", {896.0f, 3.0f}, {896.0f, 3.0f});
  expectQuantizesTo("fp8_e4m3,unitscale", {896.0f, 3.0f}, {448.0f, 3.0f});
}

// div=N: vLLM --calculate-kv-scales (Attention.calc_kv_scales, k_scale = max|k|/200).
// a = 10 → s = 0.05; x/s = [10, −25, 60, 200, −140, 2, 44, −0.6] (fp32: 200 is 199.999997,
// −25 is −24.9999996) → e4m3 [10, −24, 60, 192, −144, 2, 44, −0.625].
TEST(EngineOptions, DivisorOfVllmsCalculatedScales) {
  const std::vector<float> x{0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1f, 2.2f, -0.03f};
  const float s = 0.05f;
  std::vector<float> expected;
  for (float q : {10.0f, -24.0f, 60.0f, 192.0f, -144.0f, 2.0f, 44.0f, -0.625f}) expected.push_back(q * s);
  expectQuantizesTo("fp8_e4m3,div=200", x, expected);
  // e5m2 with div=100: a = 20 → s = 0.2; 20/s = 100 → [96, 112) step 16 → 96; 1/s = 5 → 5.
  expectQuantizesTo("fp8_e5m2,div=100", {20.0f, 1.0f}, {96.0f * 0.2f, 5.0f * 0.2f});
}

// gscale=1 (vLLM nvfp4 without checkpoint scales, csrc/libtorch_stable/nvfp4_kv_cache_kernels.cu):
// d = e4m3(1/6) = 0.171875; y = x/d = [5.818, 5.236, 4.655, 4.073, 2.909, 1.745, 1.164, 0.582] →
// e2m1 [6, 6, 4, 4, 3, 1.5, 1, 0.5]. With g = a/2688 instead, d·g = 1/6 and y = 6x.
TEST(EngineOptions, GlobalScaleOfNvfp4) {
  std::vector<float> x{1.0f, 0.9f, 0.8f, 0.7f, 0.5f, 0.3f, 0.2f, 0.1f};
  x.resize(16, 0.0f);
  const float d = 0.171875f;
  std::vector<float> expected;
  for (float c : {6.0f, 6.0f, 4.0f, 4.0f, 3.0f, 1.5f, 1.0f, 0.5f}) expected.push_back(d * c);
  expected.resize(16, 0.0f);
  expectQuantizesTo("nvfp4,gscale=1", x, expected);
  // A block whose max is below 6·2^−10: d = e4m3(0.005/6) rounds to 0 and the block is stored as 0.
  std::vector<float> tiny{0.005f, -0.002f};
  tiny.resize(16, 0.0f);
  expectQuantizesTo("nvfp4,gscale=1", tiny, std::vector<float>(16, 0.0f));
  // The contract's own g keeps the tiny block: x̂ ≠ 0.
  Tensor3 t = row(tiny);
  ASSERT_TRUE(quantizeFormatInPlace(t, parsed("nvfp4")).isOk());
  EXPECT_NE(t.data[0], 0.0f);
}

TEST(EngineOptions, PackedZeroPointParsesAndRefuses) {
  EXPECT_EQ(toString(parsed("int4,scale=fp32,zero=packed")), "int4,zero=packed,scale=fp32");
  EXPECT_NE(errorOf("int4,zero=packed").find("allowed: int4,zero=packed,scale=fp32"), std::string::npos);
  EXPECT_NE(errorOf("int8,zero=packed,scale=fp32").find("allowed: int1 … int4 with zero=packed"), std::string::npos);
  EXPECT_NE(errorOf("int4,sym,zero=packed,scale=fp32").find("does not apply with sym"), std::string::npos);
  EXPECT_NE(errorOf("int4,zero=packed,scale=fp32,round=even").find("round= does not apply with zero=packed"),
            std::string::npos);
  EXPECT_NE(errorOf("fp8_e4m3,zero=packed").find("'zero=' does not apply to fp8_e4m3"), std::string::npos);
}

// zero=packed differs from zero=int where the range does not straddle 0 and where y/s + z ties:
// [1, 2, 3, 4] at 2 bits (n = 3): s = 1, z = clamp(rnd(−1), 0, 3) = 0, q = [1, 2, 3, 3] → x̂ = [1, 2, 3, 3]
// (1.0 keeps its mantissa: no low bits to clear). zero=int widens to [0, 4]: s = 4/3 (fp32),
// z = 0, q = rnd(x/s) = [1, 2, 2, 3] (2.25 → 2) → [1.333, 2.667, 2.667, 4].
TEST(EngineOptions, PackedZeroPointUsesThePlainRange) {
  expectQuantizesTo("int2,zero=packed,scale=fp32", {1.0f, 2.0f, 3.0f, 4.0f}, {1.0f, 2.0f, 3.0f, 3.0f});
  const float s = 4.0f / 3.0f;
  expectQuantizesTo("int2,zero=int,scale=fp32", {1.0f, 2.0f, 3.0f, 4.0f}, {s, 2.0f * s, 2.0f * s, 3.0f * s});
  // One fp32 word per group: 4 + 32/8 bits per element for groups of D = 8.
  const StorageCount c = storageFor(parsed("int4,zero=packed,scale=fp32"), 1, 4, 8);
  EXPECT_EQ(c.metadataBits, 32.0 * 4);
}

// describeGroup (the GUI's histogram) on the engine rules: the same levels as the plain grid for
// round=, (q − z)·s′ for zero=packed, and the codes the reference chose.
TEST(EngineOptions, DescribeGroupFollowsTheEngineRules) {
  // int8 sym, a = 127: s = 1; trunc sends 2.5 → 2 and −3.5 → −3: codes 127, 2, −3 (3 used).
  Tensor3 x = row({127.0f, 2.5f, -3.5f, 2.0f});
  auto t = describeGroup(x, parsed("int8,sym,scale=fp32,round=trunc"), 0, 0, 1);
  ASSERT_TRUE(t.hasValue()) << t.status().message();
  EXPECT_EQ(t->scale, 1.0);
  EXPECT_EQ(t->levels.size(), 255u);
  EXPECT_EQ(t->codesUsed, 3);
  // The vLLM int4 vector: s = 0x3F911111, z = 6, levels (q − 6)·0x3F911110 for q = 0 … 15.
  Tensor3 y = row({0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1f, 2.2f, -0.03f});
  auto p = describeGroup(y, parsed("int4,zero=packed,scale=fp32"), 0, 0, 3);
  ASSERT_TRUE(p.hasValue()) << p.status().message();
  ASSERT_EQ(p->levels.size(), 16u);
  EXPECT_EQ(p->levels.front(), -6.0 * static_cast<double>(std::bit_cast<float>(uint32_t{0x3F911110})));
  EXPECT_EQ(p->codesUsed, 6);  // q = 6, 5, 9, 15, 0, 6, 8, 6
}

TEST(EngineOptions, StorageIsThatOfTheFormat) {
  // minscale and div change the scale, not its storage: fp32 per token-head group of D = 8.
  const StorageCount a = storageFor(parsed("int8,sym,round=trunc,scale=fp32,minscale=1e-06"), 2, 10, 8);
  EXPECT_EQ(a.payloadBits, 8.0 * 160);
  EXPECT_EQ(a.metadataBits, 32.0 * 20);
  const StorageCount b = storageFor(parsed("fp8_e4m3,div=200"), 2, 10, 8);
  EXPECT_EQ(b.metadataBits, 32.0);
}

// codes=meta (docs/formats.md): LMDeploy TurboMind's ConvertKvCache<T, uint8_t> in the model dtype
// T (src/turbomind/kernels/attention/quantization.h). fp16 int4 on [0.5, −1.25, 3, 10, −7, 0.1,
// 2.2, −0.03]: min −7, max 10 (fp16-exact), scale = fp16(17·fp32(1/15)) = 1161/1024, inv_scale =
// fp16(1024/1161 = 0.88200) = 903/1024. x = 3: fp16(3 + 7) = 10, 10·903/1024 = 8.818 → fp16
// 8.8203125 → even 9; read back fp16(fp16(9·1161/1024 = 10.2041) = 10.203125 − 7) = 3.203125.
// x = 0.1: fp16(0.1) = 0.0999756, + 7 = 7.0999756 → fp16 7.1015625 (ulp 2⁻⁸ in [4, 8)),
// ·903/1024 = 6.2624 → fp16 6.26171875 → 6; 6·1161/1024 = 6.802734375 is a tie → fp16 6.8046875,
// − 7 = −0.1953125. Codes [7, 5, 9, 15, 0, 6, 8, 6].
TEST(EngineOptions, CodesInTheMetadataType) {
  EXPECT_EQ(toString(parsed("int8,codes=meta,round=even,scale=bf16")), "int8,round=even,codes=meta,scale=bf16");
  EXPECT_EQ(parsed(toString(parsed("int4,round=even,codes=meta"))), parsed("int4,round=even,codes=meta"));
  expectQuantizesTo("int4,round=even,codes=meta", {0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1f, 2.2f, -0.03f},
                    {0.9375f, -1.33203125f, 3.203125f, 10.0f, -7.0f, -0.1953125f, 2.0703125f, -0.1953125f});
  // A constant group (scale 0) reconstructs to its value.
  expectQuantizesTo("int8,round=even,codes=meta", {2.0f, 2.0f}, {2.0f, 2.0f});
  EXPECT_NE(errorOf("int8,sym,codes=meta").find("does not apply with sym"), std::string::npos);
  EXPECT_NE(errorOf("fp8_e4m3,codes=meta").find("'codes=' does not apply to fp8_e4m3"), std::string::npos);
  EXPECT_NE(errorOf("int4,codes=half").find("codes=fp32, codes=meta or codes=stored"), std::string::npos);
  // The inspection's levels are the read-back values, so every reconstruction is one of them.
  Tensor3 x = row({0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1f, 2.2f, -0.03f});
  auto g = describeGroup(x, parsed("int4,round=even,codes=meta"), 0, 0, 3);
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(g->scale, 1161.0 / 1024.0);
  EXPECT_EQ(g->codesUsed, 7);  // 7, 5, 9, 15, 0, 6, 8, 6
}

}  // namespace
}  // namespace kvscope
