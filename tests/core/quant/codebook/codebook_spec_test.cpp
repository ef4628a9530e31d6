// SPDX-License-Identifier: GPL-3.0-or-later
// The codebook formats everywhere a format goes: spec strings and their errors (issue 19's
// list), the default rotation, storage (quantization.md §5, §11), the pipeline's rotation around
// step 5, presets and the e2e store's streaming mode.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "core/capacity/capacity.h"
#include "core/model/quantized_kv_store.h"
#include "core/quant/codebook.h"
#include "core/engine/presets.h"
#include "core/quant/quantize.h"
#include "core/quant/rotation.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

QuantSpec mustParse(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << s.status().message();
  return s ? *s : QuantSpec{};
}

std::string parseError(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_FALSE(s.hasValue()) << text << " should not parse";
  return s ? std::string() : s.status().message();
}

TEST(CodebookSpec, ParsesAndPrintsCanonically) {
  const QuantSpec tq = mustParse("tq4");
  EXPECT_EQ(tq.format, FormatId::Tq);
  EXPECT_EQ(tq.bits, 4);
  EXPECT_EQ(tq.rotation, Rotation::None);  // the default for the head dim, chosen at quantization
  EXPECT_TRUE(rotates(tq));
  EXPECT_EQ(toString(tq), "tq4");
  for (const char* text : {"tq1", "tq8", "tqp2", "tqp8", "nuq2", "nuq8", "tq3,rot=rht", "tq3,rot=rht,seed=5",
                           "tqp4,seed=3", "tq4,rot=random,seed=9", "tq4,scale=bf16", "nuq4,axis=channel",
                           "nuq3,axis=channel,group=32,clip=0.99", "nuq4,prerope,sinks=1,outliers=0.01,axis=channel"}) {
    const QuantSpec s = mustParse(text);
    EXPECT_EQ(toString(s), text);
    EXPECT_EQ(mustParse(toString(s)), s) << text;
  }
  EXPECT_EQ(toString(mustParse("tq4,seed=0")), "tq4");
  EXPECT_EQ(mustParse("tqp4,seed=3").seed, 3u);
}

TEST(CodebookSpec, RejectsWhatIssue19Lists) {
  EXPECT_NE(parseError("tq0").find("allowed: tq1 … tq8"), std::string::npos);
  EXPECT_NE(parseError("tq9").find("allowed: tq1 … tq8"), std::string::npos);
  EXPECT_NE(parseError("tqp1").find("allowed: tqp2 … tqp8"), std::string::npos);
  EXPECT_NE(parseError("nuq1").find("allowed: nuq2 … nuq8"), std::string::npos);
  EXPECT_NE(parseError("tq").find("needs a bit width"), std::string::npos);
  EXPECT_NE(parseError("tq4,axis=channel").find("tq formats quantize whole vectors: axis= does not apply"),
            std::string::npos);
  EXPECT_NE(parseError("tqp3,group=32").find("group= does not apply"), std::string::npos);
  EXPECT_NE(parseError("tq4,clip=0.9").find("clip= does not apply"), std::string::npos);
  EXPECT_NE(parseError("nuq4,sym").find("'sym' does not apply to nuq4"), std::string::npos);
  EXPECT_NE(parseError("tq4,sym").find("'sym' does not apply to tq4"), std::string::npos);
  EXPECT_NE(parseError("tq4,rot=none").find("tq formats always rotate"), std::string::npos);
  EXPECT_NE(parseError("tq4,rot=hadamard:64").find("does not apply"), std::string::npos);
  EXPECT_NE(parseError("nuq4,clip=mse").find("clip=mse does not apply"), std::string::npos);
  EXPECT_NE(parseError("tq4,zero=int").find("does not apply"), std::string::npos);
  EXPECT_FALSE(parseSpec("int4,seed=3"));  // seed= still needs rot=rht|random outside tq/tqp
  // With the head dim: the Hadamard kinds need a power of two.
  SpecContext d96;
  d96.headDim = 96;
  const Status hadamard = validateSpec(mustParse("tq4,rot=hadamard"), d96);
  EXPECT_NE(hadamard.message().find("D = 96 is not a power of two; use rot=random"), std::string::npos)
      << hadamard.message();
  EXPECT_FALSE(validateSpec(mustParse("tqp4,rot=rht"), d96).isOk());
  EXPECT_TRUE(validateSpec(mustParse("tq4"), d96).isOk());
  EXPECT_TRUE(validateSpec(mustParse("tq4,rot=random"), d96).isOk());
  SpecContext d1;
  d1.headDim = 1;
  EXPECT_FALSE(validateSpec(mustParse("tq4,rot=random"), d1).isOk());
}

TEST(CodebookSpec, DefaultRotationFollowsTheHeadDim) {
  const QuantSpec tq = mustParse("tq4");
  EXPECT_EQ(effectiveRotation(tq, 128), Rotation::Hadamard);
  EXPECT_EQ(effectiveRotation(tq, 96), Rotation::Random);
  EXPECT_EQ(effectiveRotation(mustParse("tq4,rot=rht"), 128), Rotation::Rht);
  EXPECT_EQ(effectiveRotation(mustParse("nuq4"), 96), Rotation::None);
  EXPECT_FALSE(rotates(mustParse("nuq4")));
  // Its cost: D·log2 D for the Hadamard default, D² for the random one.
  EXPECT_DOUBLE_EQ(rotationCost(tq, 128), 128.0 * 7.0);
  EXPECT_DOUBLE_EQ(rotationCost(tq, 96), 96.0 * 96.0);
}

TEST(CodebookSpec, StorageCountsSection11Bits) {
  auto bpe = [](const std::string& text, int64_t kvh, int64_t t, int64_t d) {
    return storageFor(mustParse(text), kvh, t, d).bitsPerElement();
  };
  // b per element + 16 bits per vector of D = 128 (tqp: two values per vector).
  EXPECT_DOUBLE_EQ(bpe("tq4", 2, 10, 128), 4.0 + 16.0 / 128);
  EXPECT_DOUBLE_EQ(bpe("tq3,scale=fp32", 2, 10, 128), 3.0 + 32.0 / 128);
  EXPECT_DOUBLE_EQ(bpe("tqp4", 2, 10, 128), 4.0 + 32.0 / 128);
  // nuq: b + one fp16 scale per group + 2^b·16 bits per layer tensor.
  EXPECT_DOUBLE_EQ(bpe("nuq4", 2, 10, 128), 4.0 + 16.0 / 128 + 256.0 / (2 * 10 * 128));
  EXPECT_DOUBLE_EQ(bpe("nuq2,axis=channel", 2, 10, 128), 2.0 + 16.0 / 10 + 64.0 / (2 * 10 * 128));
  // Kept tokens and outliers as for every format.
  EXPECT_DOUBLE_EQ(bpe("tq2,sinks=10", 2, 10, 128), 16.0);
}

Tensor3 normalTensor(int64_t h, int64_t t, int64_t d, uint32_t seed) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x.data) v = normal(rng);
  for (int64_t r = 0; r < h * t; ++r) x.data[static_cast<size_t>(r * d)] *= 8.0f;  // an outlier channel
  return x;
}

TEST(CodebookPipeline, RotatesEachVectorQuantizesAndRotatesBack) {
  // The pipeline on tq is x·R → tq → ·Rᵀ, with R the default rotation for D.
  for (int64_t d : {int64_t{64}, int64_t{48}}) {
    for (const char* text : {"tq3", "tqp3,seed=4", "tq2,rot=rht,seed=2", "tq4,rot=random"}) {
      QuantSpec spec = mustParse(text);
      if (d == 48 && spec.rotation == Rotation::Rht) continue;
      const Tensor3 x = normalTensor(2, 9, d, 5);
      QuantInput input;
      input.tensor = &x;
      auto out = quantizeTensor(input, spec);
      ASSERT_TRUE(out.hasValue()) << text << " " << d << ": " << out.status().message();
      Tensor3 manual = x;
      rotateRows(spec, manual.data.data(), x.heads * x.tokens, d);
      if (spec.format == FormatId::Tqp) {
        codebook::tqpRows(manual.data.data(), x.heads * x.tokens, static_cast<int>(d), spec.bits, spec.scale, spec.seed);
      } else {
        codebook::tqRows(manual.data.data(), x.heads * x.tokens, static_cast<int>(d), spec.bits, spec.scale);
      }
      unrotateRows(spec, manual.data.data(), x.heads * x.tokens, d);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out->reconstruction.data[i], manual.data[i]) << text << " " << i;
    }
  }
}

TEST(CodebookPipeline, RotationSpreadsTheOutlierChannelForTheCodebook) {
  // Without the rotation the outlier channel would sit far outside the codebook fitted to a
  // random direction; rotated, tq3's error is close to its computed distortion.
  const int64_t d = 128;
  const Tensor3 x = normalTensor(1, 200, d, 8);
  QuantInput input;
  input.tensor = &x;
  auto out = quantizeTensor(input, mustParse("tq3,rot=random,seed=1"));
  ASSERT_TRUE(out.hasValue());
  double err = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += std::pow(static_cast<double>(out->reconstruction.data[i]) - x.data[i], 2);
    norm += static_cast<double>(x.data[i]) * x.data[i];
  }
  const double expected = d * codebook::sphereCodebook(static_cast<int>(d), 3).distortion;
  EXPECT_NEAR(err / norm, expected, 0.2 * expected);
  Tensor3 unrotated = x;
  codebook::tqRows(unrotated.data.data(), 200, static_cast<int>(d), 3, MetaType::Fp16);
  double errUnrotated = 0;
  for (size_t i = 0; i < x.size(); ++i) errUnrotated += std::pow(static_cast<double>(unrotated.data[i]) - x.data[i], 2);
  EXPECT_GT(errUnrotated / norm, 1.5 * expected);
}

TEST(CodebookPresets, TurboQuantAndKvquantResolve) {
  for (const char* name : {"turboquant-3", "turboquant-4", "kvquant-4-1pct", "kvquant-3-1pct"}) {
    auto specs = presetSpecs(name, KvShape{128, 4, 2});
    ASSERT_TRUE(specs.hasValue()) << name << ": " << specs.status().message();
    const Preset* p = findPreset(name);
    EXPECT_EQ(std::string(p->description).find("approximated by uniform"), std::string::npos) << name;
  }
  const PresetSpecs tq = *presetSpecs("turboquant-3", KvShape{128, 4, 2});
  EXPECT_EQ(tq.key.format, FormatId::Tq);
  EXPECT_EQ(tq.key.bits, 3);
  EXPECT_EQ(tq.key.rotation, Rotation::Rht);
  const PresetSpecs kv = *presetSpecs("kvquant-4-1pct", KvShape{128, 4, 2});
  EXPECT_EQ(toString(kv.key), "nuq4,prerope,sinks=1,outliers=0.01,axis=channel");
  EXPECT_EQ(toString(kv.value), "nuq4,outliers=0.01");
}

TEST(CodebookStreaming, TqIsTokenLocalAndNuqCalibratesOnTheWholeCache) {
  EXPECT_EQ(streamingModeFor(mustParse("tq4")), StreamingMode::TokenLocal);
  EXPECT_EQ(streamingModeFor(mustParse("tqp3")), StreamingMode::TokenLocal);
  EXPECT_EQ(streamingModeFor(mustParse("nuq4")), StreamingMode::Calibrated);
  EXPECT_NE(streamingDescription(mustParse("nuq4")).find("codebook"), std::string::npos);
}

TEST(CodebookCapacity, TqpCountsItsQjlProductInTheDecodeCost) {
  const DequantOps tq = dequantOps(mustParse("tq4"));
  const DequantOps tqp = dequantOps(mustParse("tqp4"));
  EXPECT_GT(tq.perElement, 0.0);
  EXPECT_GT(tqp.perElement, tq.perElement);
  EXPECT_EQ(tqp.perGroup, 2.0);
}

}  // namespace
}  // namespace kvscope
