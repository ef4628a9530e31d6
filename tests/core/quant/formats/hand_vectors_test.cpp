// SPDX-License-Identifier: GPL-3.0-or-later
// Hand-computed vectors for every format. Each expectation is worked out in the comment beside
// it from the formulas of quantization.md §2-4 (or ggml's reference code for the ggml types).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/fp_types.h"
#include "core/quant/reference.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

// A [1, 1, n] tensor (one token row) holding `values`.
Tensor3 row(const std::vector<float>& values) {
  Tensor3 x(1, 1, static_cast<int64_t>(values.size()));
  x.data = values;
  return x;
}

QuantSpec intSpec(int bits, bool sym, MetaType meta = MetaType::Fp16) {
  QuantSpec s;
  s.format = FormatId::Int;
  s.bits = bits;
  s.symmetric = sym;
  s.axis = Axis::Token;
  s.scale = meta;
  return s;
}

QuantSpec plainSpec(FormatId id) {
  QuantSpec s;
  s.format = id;
  s.bits = static_cast<int>(formatInfo(id).payloadBits);
  s.axis = Axis::Tensor;
  s.scale = MetaType::Fp32;
  return s;
}

// Runs both the fast path and the reference and checks each against `expected`.
void expectQuantizesTo(const QuantSpec& spec, const std::vector<float>& in, const std::vector<float>& expected) {
  Tensor3 fast = row(in), ref = row(in);
  ASSERT_TRUE(quantizeFormatInPlace(fast, spec).isOk());
  ASSERT_TRUE(quantizeFormatReference(ref, spec).isOk());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(fast.data[i], expected[i]) << "fast, value " << i << " (" << in[i] << ")";
    EXPECT_EQ(ref.data[i], expected[i]) << "reference, value " << i << " (" << in[i] << ")";
  }
}

// Pads a block format's test values with zeros up to `n` (zeros never change the block's max).
std::vector<float> padded(std::vector<float> v, size_t n) {
  v.resize(n, 0.0f);
  return v;
}

// ---- Small float types ------------------------------------------------------------------------

TEST(Fp16, RoundsToNearestEvenAndOverflowsToInfinity) {
  const float one = 1.0f;
  EXPECT_EQ(fp::roundFp16(one + std::ldexp(1.0f, -11)), 1.0f);  // tie 1 | 1+2^-10: even is 1
  EXPECT_EQ(fp::roundFp16(one + 3 * std::ldexp(1.0f, -11)), one + std::ldexp(1.0f, -9));  // tie to even 1+2^-9
  EXPECT_EQ(fp::roundFp16(65519.0f), 65504.0f);  // below the 65520 midpoint
  EXPECT_EQ(fp::roundFp16(65520.0f), std::numeric_limits<float>::infinity());  // tie to "even" = inf
  EXPECT_EQ(fp::roundFp16(std::ldexp(1.0f, -25)), 0.0f);  // half the smallest subnormal: even is 0
  EXPECT_EQ(fp::roundFp16(3 * std::ldexp(1.0f, -25)), std::ldexp(1.0f, -23));  // 1.5 steps -> 2 steps
  EXPECT_EQ(fp::roundFp16(-0.1f), -0.0999755859375f);  // 0.1 = 1638.4 * 2^-14 -> 1638 steps
  EXPECT_EQ(fp::fp16Bits(1.0f), 0x3c00);
  EXPECT_EQ(fp::fp16Bits(-2.0f), 0xc000);
  EXPECT_EQ(fp::fp16Bits(65504.0f), 0x7bff);
  EXPECT_EQ(fp::fp16Bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(fp::fp16Bits(1e6f), 0x7c00);
  EXPECT_EQ(fp::fp16Value(0x3555), 0.333251953125f);  // 1 + 0x155/1024 = 1.3330078125, times 2^-2
  for (float v : {1.0f, 1.00048828125f, 1.0007324f, 3.14159f, -7e-6f, 6e-8f, 70000.0f}) {
    EXPECT_EQ(fp::roundFp16(v), reference::fp16(v)) << v;
    EXPECT_EQ(fp::fp16Value(fp::fp16Bits(v)), fp::roundFp16(v)) << v;
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(fp::roundBf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);  // tie 1 | 1+2^-7 -> 1
  EXPECT_EQ(fp::roundBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));  // -> even
  EXPECT_EQ(fp::roundBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(fp::bf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(fp::bf16Value(0xc0a0), -5.0f);
}

TEST(Fp8E4m3, SaturatesAt448AndRoundsTiesToEven) {
  EXPECT_EQ(fp::roundE4m3(448.0f), 448.0f);
  EXPECT_EQ(fp::roundE4m3(460.0f), 448.0f);  // RNE would reach 480 (a NaN code): saturate
  EXPECT_EQ(fp::roundE4m3(1e9f), 448.0f);
  EXPECT_EQ(fp::roundE4m3(-1e9f), -448.0f);
  EXPECT_EQ(fp::roundE4m3(1.0625f), 1.0f);   // tie 1 | 1.125: mantissa 000 is even
  EXPECT_EQ(fp::roundE4m3(1.1875f), 1.25f);  // tie 1.125 | 1.25: 010 is even
  EXPECT_EQ(fp::roundE4m3(std::ldexp(1.0f, -10)), 0.0f);  // half of the smallest subnormal 2^-9
  EXPECT_EQ(fp::roundE4m3(3 * std::ldexp(1.0f, -10)), std::ldexp(1.0f, -8));  // 1.5 steps -> 2
  EXPECT_EQ(fp::e4m3Bits(448.0f), 0x7e);  // exponent 15, mantissa 110
  EXPECT_EQ(fp::e4m3Bits(1.0f), 0x38);    // exponent 7 (bias), mantissa 0
  EXPECT_EQ(fp::e4m3Bits(-std::ldexp(1.0f, -9)), 0x81);
  EXPECT_EQ(fp::e4m3Value(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(fp::e4m3Value(0x7f)));
}

TEST(Fp8E5m2, SaturatesAt57344AndRoundsTiesToEven) {
  EXPECT_EQ(fp::roundE5m2(57344.0f), 57344.0f);
  EXPECT_EQ(fp::roundE5m2(60000.0f), 57344.0f);
  EXPECT_EQ(fp::roundE5m2(-1e30f), -57344.0f);
  EXPECT_EQ(fp::roundE5m2(1.125f), 1.0f);  // tie 1 | 1.25 -> 1
  EXPECT_EQ(fp::roundE5m2(1.375f), 1.5f);  // tie 1.25 | 1.5 -> 1.5 (mantissa 10)
  EXPECT_EQ(fp::e5m2Bits(1.0f), 0x3c);
  EXPECT_EQ(fp::e5m2Value(0x7b), 57344.0f);
}

TEST(Fp4E2m1, TiesGoToTheEvenCode) {
  // Codes: 0, 0.5, 1, 1.5, 2, 3, 4, 6 = 0..7.
  EXPECT_EQ(fp::roundE2m1(0.25f), 0.0f);  // 0 (code 0) | 0.5 (code 1)
  EXPECT_EQ(fp::roundE2m1(0.75f), 1.0f);  // 0.5 (1) | 1 (2)
  EXPECT_EQ(fp::roundE2m1(1.25f), 1.0f);  // 1 (2) | 1.5 (3)
  EXPECT_EQ(fp::roundE2m1(1.75f), 2.0f);  // 1.5 (3) | 2 (4)
  EXPECT_EQ(fp::roundE2m1(2.5f), 2.0f);   // 2 (4) | 3 (5)
  EXPECT_EQ(fp::roundE2m1(3.5f), 4.0f);   // 3 (5) | 4 (6)
  EXPECT_EQ(fp::roundE2m1(5.0f), 4.0f);   // 4 (6) | 6 (7)
  EXPECT_EQ(fp::roundE2m1(-2.5f), -2.0f);
  EXPECT_EQ(fp::roundE2m1(5.1f), 6.0f);
  EXPECT_EQ(fp::roundE2m1(7.0f), 6.0f);  // saturates
  EXPECT_EQ(fp::roundE2m1(100.0f), 6.0f);
  EXPECT_EQ(fp::e2m1Bits(6.0f), 7);
  EXPECT_EQ(fp::e2m1Bits(-0.5f), 9);
  for (float v = -7.0f; v <= 7.0f; v += 0.125f) EXPECT_EQ(fp::roundE2m1(v), reference::e2m1(v)) << v;
}

// ---- Integer formats ---------------------------------------------------------------------------

TEST(Int2Asym, RoundsHalfAwayFromZero) {
  // lo = 0, hi = 3, n = 3: s = meta(1) = 1, m = 0. 0.5 -> rnd(0.5) = 1 (RNE would give 0),
  // 2.5 -> 3 (RNE: 2).
  expectQuantizesTo(intSpec(2, false), {0.0f, 0.5f, 2.5f, 3.0f}, {0.0f, 1.0f, 3.0f, 3.0f});
}

TEST(Int3Sym, RoundsNegativeTiesAwayFromZero) {
  // a = 3, qmax = 3: s = 1. -1.5 -> -2, 0.5 -> 1, 1 -> 1.
  expectQuantizesTo(intSpec(3, true), {-3.0f, -1.5f, 0.5f, 1.0f}, {-3.0f, -2.0f, 1.0f, 1.0f});
}

TEST(Int4Asym, ScaleIsRoundedToFp16) {
  // lo = 0, hi = 1: s = fp16(1/15) = 1092 * 2^-14 = 0.066650390625; 1/s = 15.0037 -> q = 15,
  // x̂ = 15 s = 0.999755859375. 0.5/s = 7.5018 -> 8 -> 0.533203125.
  expectQuantizesTo(intSpec(4, false), {0.0f, 0.5f, 1.0f}, {0.0f, 0.533203125f, 0.999755859375f});
  // With an fp32 scale 15·fp32(1/15) rounds back to exactly 1.
  expectQuantizesTo(intSpec(4, false, MetaType::Fp32), {0.0f, 1.0f}, {0.0f, 1.0f});
}

TEST(Int8Asym, MinIsRoundedToMetadataType) {
  // lo = -0.1 -> m = fp16(-0.1) = -0.0999755859375; hi = -0.1 too: s = 0, so x̂ = m.
  expectQuantizesTo(intSpec(8, false), {-0.1f, -0.1f}, {-0.0999755859375f, -0.0999755859375f});
}

TEST(IntGrouping, TokenRunsEndShorterAndChannelRunsCountFromTokenZero) {
  // axis=token, group=3 on 5 channels: runs [0,3) and [3,5). int1 asym: n = 1, each run maps to
  // its own min or max (rnd((x-lo)/(hi-lo)) with x at lo or hi).
  QuantSpec spec = intSpec(1, false, MetaType::Fp32);
  spec.group = 3;
  expectQuantizesTo(spec, {1.0f, 2.0f, 1.25f, 10.0f, 20.0f}, {1.0f, 2.0f, 1.0f, 10.0f, 20.0f});
  // axis=channel, group=2 on 3 tokens of 1 channel: runs {t0, t1} and {t2}; the 1-token run is
  // constant and reconstructs exactly.
  Tensor3 x(1, 3, 1);
  x.data = {0.0f, 4.0f, 7.0f};
  spec.axis = Axis::Channel;
  spec.group = 2;
  spec.bits = 2;
  Tensor3 ref = x;
  ASSERT_TRUE(quantizeFormatInPlace(x, spec).isOk());
  ASSERT_TRUE(quantizeFormatReference(ref, spec).isOk());
  EXPECT_EQ(x.data, (std::vector<float>{0.0f, 4.0f, 7.0f}));
  EXPECT_EQ(ref.data, x.data);
}

// ---- Clipping ------------------------------------------------------------------------------

TEST(PercentileClip, SymmetricDropsTheLargestMagnitudes) {
  // |x| = 1..10, p = 0.8: k = floor(0.2·10) = 2, a' = a[10-1-2] = 8. int8 sym fp32: s = 8/127.
  std::vector<float> v;
  for (int i = 1; i <= 10; ++i) v.push_back(i % 2 ? static_cast<float>(i) : -static_cast<float>(i));
  QuantSpec spec = intSpec(8, true, MetaType::Fp32);
  spec.clip.kind = Clip::Kind::Percentile;
  spec.clip.p = 0.8;
  auto d = describeGroup(row(v), spec, 0, 0, 0);
  ASSERT_TRUE(d.hasValue());
  EXPECT_EQ(d->clipHi, 8.0);
  EXPECT_EQ(d->clipLo, -8.0);
  EXPECT_EQ(d->lo, -10.0);
  EXPECT_EQ(d->hi, 9.0);
  EXPECT_EQ(d->scale, static_cast<double>(static_cast<float>(8.0 / 127.0)));
  // p = 0.9: (1-0.9)·10 is 0.99999... in binary; we read it as 1 (docs/formats.md): a' = 9.
  spec.clip.p = 0.9;
  d = describeGroup(row(v), spec, 0, 0, 0);
  EXPECT_EQ(d->clipHi, 9.0);
}

TEST(PercentileClip, AsymmetricDropsFromBothEnds) {
  // Sorted 1..10, p = 0.8: k = floor(0.2·10/2) = 1: lo = v[1] = 2, hi = v[8] = 9.
  std::vector<float> v{5, 3, 10, 1, 7, 2, 9, 4, 8, 6};
  QuantSpec spec = intSpec(4, false, MetaType::Fp32);
  spec.clip.kind = Clip::Kind::Percentile;
  spec.clip.p = 0.8;
  auto d = describeGroup(row(v), spec, 0, 0, 3);
  ASSERT_TRUE(d.hasValue());
  EXPECT_EQ(d->clipLo, 2.0);
  EXPECT_EQ(d->clipHi, 9.0);
  EXPECT_EQ(d->zero, 2.0);
  // The values outside are clamped: 1 -> 2, 10 -> 9 (s = 7/15, q clamps at 0 and 15).
  Tensor3 x = row(v);
  ASSERT_TRUE(quantizeFormatInPlace(x, spec).isOk());
  EXPECT_EQ(x.data[3], 2.0f);
  EXPECT_FLOAT_EQ(x.data[2], 9.0f);
}

TEST(MseClip, PicksTheRatioWithLeastSquaredError) {
  // int2 sym (qmax = 1), fp32 scale, values {1,1,1,1,3}: a = 3, s = a' = 3r.
  //   r = 1.00: s = 3, the ones -> 0: error 4·1 + 0 = 4
  //   r = 0.70: s = 2.1, ones -> 0: 4 + 0.81 = 4.81 (every s > 2 leaves the ones at 0, error > 4)
  //   r = 0.65: s = 1.95, ones -> 1.95: 4·0.9025 + 1.05² = 4.7125
  //   r = 0.60: s = 1.8: 4·0.64 + 1.44 = 4.0;  r = 0.55: s = 1.65: 1.69 + 1.8225 = 3.5125
  //   r = 0.50: s = 1.5: 4·0.25 + 2.25 = 3.25  <- least
  QuantSpec spec = intSpec(2, true, MetaType::Fp32);
  spec.clip.kind = Clip::Kind::Mse;
  expectQuantizesTo(spec, {1, 1, 1, 1, 3}, {1.5f, 1.5f, 1.5f, 1.5f, 1.5f});
  // A group that needs no clipping keeps r = 1: {-1, 1} is exact at s = 1.
  expectQuantizesTo(spec, {-1, 1}, {-1, 1});
}

TEST(MseClip, AsymShrinksAboutTheCentre) {
  // int1 asym (n = 1), fp32, values {0, 0, 0, 10}: r = 1 gives s = 10, m = 0, exact: error 0.
  // Every r < 1 moves the levels off 0 and 10, so r = 1 wins.
  QuantSpec spec = intSpec(1, false, MetaType::Fp32);
  spec.clip.kind = Clip::Kind::Mse;
  expectQuantizesTo(spec, {0, 0, 0, 10}, {0, 0, 0, 10});
}

// ---- fp8 / nf4 -------------------------------------------------------------------------------

TEST(Fp8E4m3Format, ScalesByMaxAbsOver448) {
  // a = 448 -> s = 1 (fp32). 3.3 -> e4m3: 1.65·2^1, step 0.25 -> 3.25; -0.1 -> 1.6·2^-4, step
  // 2^-7: 12.8 steps -> 13 -> -0.1015625.
  expectQuantizesTo(plainSpec(FormatId::Fp8E4M3), {448.0f, 3.3f, -0.1f}, {448.0f, 3.25f, -0.1015625f});
}

TEST(Fp8E4m3Format, UnitScaleSaturatesLargeValues) {
  QuantSpec spec = plainSpec(FormatId::Fp8E4M3);
  spec.unitscale = true;
  // s = 1 regardless of the data: 1000 saturates to 448, 0.3 -> 1.2·2^-2, step 2^-5: 9.6 -> 10 -> 0.3125.
  expectQuantizesTo(spec, {1000.0f, 0.3f, -500.0f}, {448.0f, 0.3125f, -448.0f});
}

TEST(Fp8E5m2Format, ScalesByMaxAbsOver57344) {
  // a = 57344 -> s = 1; 3.3 -> 1.65·2, step 0.5 -> 3.5; 100 -> 1.5625·64, step 16 -> 96.
  expectQuantizesTo(plainSpec(FormatId::Fp8E5M2), {57344.0f, 3.3f, 100.0f}, {57344.0f, 3.5f, 96.0f});
}

TEST(Nf4, PicksNearestCodeAndLowerCodeOnTies) {
  QuantSpec spec = plainSpec(FormatId::Nf4);
  spec.scale = MetaType::Fp16;
  const float c6 = -0.09105003625154495f, c8 = 0.07958029955625534f;
  // a = 1 -> s = 1. 0.5: |0.5-0.4407| = 0.0593 < |0.5-0.5626| = 0.0626 -> 0.4407...
  // -0.3: nearest -0.28444. c8/2 is exactly between 0 (k = 7) and c8 (k = 8): lower k -> 0.
  // c6/2 is exactly between c6 (k = 6) and 0 (k = 7): lower k -> c6.
  expectQuantizesTo(spec, {1.0f, 0.5f, -0.3f, c8 / 2, c6 / 2, std::nextafter(c8 / 2, 1.0f)},
                    {1.0f, 0.44070982933044434f, -0.28444138169288635f, 0.0f, c6, c8});
}

// ---- Block formats ---------------------------------------------------------------------------

TEST(Mxfp4, SharedExponentFromTheBlockMax) {
  // Block 0: a = 5 -> X = 2^(floor(log2 5) - 2) = 1: x̂ = e2m1(x). 5 -> 4 (tie, even code),
  // 0.75 -> 1, -1.75 -> -2, 2.5 -> 2.
  // Block 1: a = 0.1 -> floor(log2 0.1) = -4 -> X = 2^-6: 0.1/X = 6.4 -> 6 -> 0.09375;
  // 0.03/X = 1.92 -> 2 -> 0.03125; 0.007/X = 0.448 -> 0.5 -> 0.0078125.
  std::vector<float> in = padded({5.0f, 0.75f, -1.75f, 2.5f}, 32);
  std::vector<float> out = padded({4.0f, 1.0f, -2.0f, 2.0f}, 32);
  const std::vector<float> b1 = padded({0.1f, 0.03f, 0.007f}, 32), o1 = padded({0.09375f, 0.03125f, 0.0078125f}, 32);
  in.insert(in.end(), b1.begin(), b1.end());
  out.insert(out.end(), o1.begin(), o1.end());
  expectQuantizesTo(plainSpec(FormatId::Mxfp4), in, out);
}

TEST(Nvfp4, TwoLevelScale) {
  // Tensor max 2688 -> g = fp32(2688/2688) = 1.
  // Block 0 (max 2688): d = e4m3(2688/6 = 448) = 448: 2688 -> 448·6.
  // Block 1 (max 3): d = e4m3(0.5) = 0.5: 3 -> 3; 1.3/0.5 = 2.6 -> 3 -> 1.5; 0.2/0.5 = 0.4 -> 0.5 -> 0.25.
  // Block 2 (max 1): d = e4m3(1/6): 1.333·2^-3, step 2^-6: 10.67 -> 11 -> 0.171875;
  //   1/0.171875 = 5.82 -> 6 -> 1.03125; 0.5/0.171875 = 2.91 -> 3 -> 0.515625.
  std::vector<float> in = padded({2688.0f}, 16);
  std::vector<float> out = padded({2688.0f}, 16);
  for (const auto& [i, o] : {std::pair{padded({3.0f, 1.3f, 0.2f}, 16), padded({3.0f, 1.5f, 0.25f}, 16)},
                             std::pair{padded({1.0f, 0.5f}, 16), padded({1.03125f, 0.515625f}, 16)}}) {
    in.insert(in.end(), i.begin(), i.end());
    out.insert(out.end(), o.begin(), o.end());
  }
  expectQuantizesTo(plainSpec(FormatId::Nvfp4), in, out);
}

TEST(Q4_0, MatchesGgmlWorkedBlock) {
  // ggml: max = the value of largest |x| (first on ties) = -4, d = max/-8 = 0.5, id = 2,
  // code = min(15, (int8_t)(x·id + 8.5)), x̂ = (code - 8)·fp16(d).
  //   -4 -> 0.5 -> 0 -> -4;  1 -> 10.5 -> 10 -> 1;  0.3 -> 9.1 -> 9 -> 0.5;
  //   0.25 -> 9.0 -> 9 -> 0.5 (halves round up);  -0.25 -> 8.0 -> 8 -> 0;
  //   3.9 -> 16.3 -> 16 -> min 15 -> 3.5 (the positive side stops at 7·d).
  expectQuantizesTo(plainSpec(FormatId::Q4_0), padded({-4.0f, 1.0f, 0.3f, 0.25f, -0.25f, 3.9f}, 32),
                    padded({-4.0f, 1.0f, 0.5f, 0.5f, 0.0f, 3.5f}, 32));
  // A scale that fp16 rounds: max = 3.3, d = 3.3/-8 = -0.4125 -> fp16 = -1690·2^-12 = -0.41259765625.
  //   3.3 -> -8 + 8.5 -> 0 -> -8·d = 3.30078125;  1 -> id = -2.424: 6.07 -> 6 -> -2·d = 0.8251953125.
  expectQuantizesTo(plainSpec(FormatId::Q4_0), padded({3.3f, 1.0f}, 32), padded({3.30078125f, 0.8251953125f}, 32));
}

TEST(Q4_0, FirstValueOfLargestMagnitudeSetsTheSign) {
  // 4 before -4: max = 4, d = -0.5, id = -2: 4 -> -8 + 8.5 -> 0 -> -8·-0.5 = 4;
  // -4 -> 8 + 8.5 = 16.5 -> 16 -> 15 -> 7·-0.5 = -3.5.
  expectQuantizesTo(plainSpec(FormatId::Q4_0), padded({4.0f, -4.0f}, 32), padded({4.0f, -3.5f}, 32));
  // -4 first: d = 0.5, so the positive end saturates instead.
  expectQuantizesTo(plainSpec(FormatId::Q4_0), padded({-4.0f, 4.0f}, 32), padded({-4.0f, 3.5f}, 32));
}

TEST(Q8_0, RoundsHalfAwayWithFp16Scale) {
  // amax = 127 -> d = 1: x̂ = roundf(x): 2.5 -> 3, -2.5 -> -3, 0.49 -> 0, 126.5 -> 127.
  expectQuantizesTo(plainSpec(FormatId::Q8_0), padded({127.0f, 2.5f, -2.5f, 0.49f, 126.5f}, 32),
                    padded({127.0f, 3.0f, -3.0f, 0.0f, 127.0f}, 32));
}

TEST(Q4_1, UsesUnroundedScaleForCodesAndFp16ForValues) {
  // min = -1, max = 2: d = 3/15 = 0.2 (float), id = 5; fp16(d) = 1638·2^-13 = 0.199951171875,
  // fp16(min) = -1. 2 -> (3·5 + 0.5) = 15.5 -> 15 -> 15·0.199951171875 - 1 = 1.999267578125;
  // 0 (and the zero padding) -> 5.5 -> 5 -> 5·0.199951171875 - 1 = -0.000244140625.
  std::vector<float> expected(32, -0.000244140625f);
  expected[0] = -1.0f;
  expected[1] = 1.999267578125f;
  expectQuantizesTo(plainSpec(FormatId::Q4_1), padded({-1.0f, 2.0f, 0.0f}, 32), expected);
}

TEST(Q5_0, RoundsHalvesUpNotAway) {
  // max = -16 -> d = 1, code = (int8_t)(x + 16.5): 2.5 -> 19 -> 3; -2.5 -> 14.0 -> 14 -> -2
  // (ggml's +16.5 then truncation rounds halves toward +inf, unlike rnd()).
  expectQuantizesTo(plainSpec(FormatId::Q5_0), padded({-16.0f, 2.5f, -2.5f}, 32), padded({-16.0f, 3.0f, -2.0f}, 32));
}

TEST(Q5_1, FiveBitCodesFromMin) {
  // min = 0, max = 31 -> d = 1, m = 0: 2.5 -> (uint8_t)3.0 = 3; 30.4 -> 30.
  std::vector<float> in = padded({31.0f, 2.5f, 30.4f}, 32);
  expectQuantizesTo(plainSpec(FormatId::Q5_1), in, padded({31.0f, 3.0f, 30.0f}, 32));
}

TEST(Iq4Nl, WeightedLeastSquaresScale) {
  // ggml (ntry = -1, no importance): max = 1 -> d0 = 1/-127, id = -127. 1 -> -127 -> code 0
  // (q = -127); 0.5 -> -63.5: between -65 (code 3) and -49 (code 4), nearer -65 -> q = -65.
  // w = x²: Σw·q·x = -127 + 31·(0.25·-65·0.5) = -378.875; Σw·q² = 16129 + 31·0.25·4225 = 48872.75
  // d = -0.0077522751 -> fp16: 1016·2^-17 = -0.00775146484375. x̂ = d·q:
  // 1 -> 0.98443603515625, 0.5 -> 0.50384521484375.
  std::vector<float> in(32, 0.5f), out(32, 0.50384521484375f);
  in[0] = 1.0f;
  out[0] = 0.98443603515625f;
  expectQuantizesTo(plainSpec(FormatId::Iq4Nl), in, out);
  // Values proportional to the table: d ≈ 0.01 -> fp16 1311·2^-17 = 0.01000213623046875.
  std::vector<float> table(32), expected(32);
  const int8_t k[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 32; ++j) {
    table[j] = 0.01f * k[j % 16];
    expected[j] = 0.01000213623046875f * static_cast<float>(k[j % 16]);
  }
  expectQuantizesTo(plainSpec(FormatId::Iq4Nl), table, expected);
}

TEST(Iq4Nl, TiesBetweenTableValuesGoUpLikeGgml) {
  // max = -127 -> d0 = 1, id = 1: x/d0 lands exactly between two table values; ggml's
  // best_index_int8 keeps the upper one ("x - v[lo] < v[hi] - x" fails on a tie). The fast path
  // counts failed comparisons instead of searching; both must agree on every tie.
  std::vector<float> in(32, 0.0f);
  const float ties[] = {-115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f, -4.5f, 7.0f, 19.0f, 31.5f, 45.5f, 61.0f, 79.0f, 101.0f};
  in[0] = -127.0f;
  for (int i = 0; i < 15; ++i) in[static_cast<size_t>(i + 1)] = ties[i];
  Tensor3 fast = row(in), ref = row(in);
  ASSERT_TRUE(quantizeFormatInPlace(fast, plainSpec(FormatId::Iq4Nl)).isOk());
  ASSERT_TRUE(quantizeFormatReference(ref, plainSpec(FormatId::Iq4Nl)).isOk());
  EXPECT_EQ(fast.data, ref.data);
  // The codes are the upper neighbours 1..15: x̂_i / x̂_0 = v[i] / -127 exactly up to rounding.
  const int8_t k[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int i = 1; i < 16; ++i) EXPECT_FLOAT_EQ(fast.data[i] / fast.data[0], k[i] / -127.0f) << i;
}

// ---- describeGroup ---------------------------------------------------------------------------

TEST(DescribeGroup, Int4AsymHasSixteenLevelsAndCountsCodes) {
  // lo = 0, hi = 1.5 -> s = fp16(0.1) = 0.0999755859375, m = 0; levels q·s for q = 0..15.
  QuantSpec spec = intSpec(4, false);
  auto d = describeGroup(row({0.0f, 1.5f, 0.75f, 0.75f}), spec, 0, 0, 2);
  ASSERT_TRUE(d.hasValue());
  EXPECT_EQ(d->size, 4);
  EXPECT_EQ(d->levels.size(), 16u);
  EXPECT_EQ(d->levels.front(), 0.0);
  EXPECT_DOUBLE_EQ(d->levels.back(), 15 * 0.0999755859375);
  EXPECT_EQ(d->scale, 0.0999755859375);
  EXPECT_EQ(d->codesUsed, 3);  // 0, 15 and 8 (0.75/s = 7.5018 -> 8)
  EXPECT_EQ(d->codesTotal, 16);
}

TEST(DescribeGroup, TokenGroupOfTheElementOnly) {
  QuantSpec spec = intSpec(8, true);
  spec.group = 2;
  auto d = describeGroup(row({1.0f, -2.0f, 100.0f, 3.0f, 5.0f}), spec, 0, 0, 4);
  ASSERT_TRUE(d.hasValue());
  EXPECT_EQ(d->size, 1);  // channels [4, 5): the shorter last run
  EXPECT_EQ(d->hi, 5.0);
  EXPECT_EQ(d->levels.size(), 255u);  // -127..127
  EXPECT_EQ(d->codesTotal, 256);
}

TEST(DescribeGroup, BlockGathersAcrossHeads) {
  // Two heads of 16 channels: the q4_0 block of a token row spans both heads.
  Tensor3 x(2, 1, 16, 0.0f);
  x.at(1, 0, 5) = -4.0f;  // the block max: d = 0.5
  x.at(0, 0, 0) = 1.0f;
  auto d = describeGroup(x, plainSpec(FormatId::Q4_0), 0, 0, 0);
  ASSERT_TRUE(d.hasValue());
  EXPECT_EQ(d->size, 32);
  EXPECT_EQ(d->scale, 0.5);
  EXPECT_EQ(d->lo, -4.0);
  ASSERT_EQ(d->levels.size(), 16u);
  EXPECT_EQ(d->levels.front(), -4.0);
  EXPECT_EQ(d->levels.back(), 3.5);
  EXPECT_EQ(d->codesUsed, 3);  // -4, 0, 1
}

TEST(DescribeGroup, RejectsElementOutsideTensor) {
  EXPECT_EQ(describeGroup(row({1.0f}), intSpec(4, false), 0, 1, 0).status().code(), StatusCode::InvalidArgument);
}

}  // namespace
}  // namespace kvscope
