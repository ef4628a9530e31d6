// SPDX-License-Identifier: GPL-3.0-or-later
// Table-driven and property tests of step 5: every row of the format table, fast path against
// the scalar reference, grouping shapes, error ordering.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/fp_types.h"
#include "core/quant/fp_vec.h"
#include "core/quant/kernels_grouped.h"
#include "core/quant/reference.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

Tensor3 randomTensor(int64_t h, int64_t t, int64_t d, uint32_t seed, float scale = 1.0f) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  for (float& v : x.data) v = normal(rng);
  // A few outliers so clipping and block scales see heavy tails.
  for (size_t i = 0; i < x.data.size(); i += 97) x.data[i] *= 6.0f;
  return x;
}

QuantSpec specFor(const FormatInfo& info, int bits = 4) {
  QuantSpec s;
  s.format = info.id;
  // int keeps the bits asked for (tests pass invalid ones); other families take their nearest width.
  s.bits = !info.hasBits ? static_cast<int>(info.payloadBits)
           : info.id == FormatId::Int ? bits
                                      : std::clamp(bits, info.minBits, info.maxBits);
  s.axis = info.kind == FormatKind::Float8 ? Axis::Tensor : Axis::Token;
  s.group = info.id == FormatId::Nf4 ? 64 : info.kind == FormatKind::Optimized ? 16 : 0;  // hqq: groups of 16
  s.scale = info.kind == FormatKind::Float8 ? MetaType::Fp32 : MetaType::Fp16;
  return s;
}

double rmsError(const Tensor3& a, const Tensor3& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.data[i]) - b.data[i];
    e += d * d;
  }
  return std::sqrt(e / static_cast<double>(a.size()));
}

// Fast and reference must agree exactly (values compared with ==, so +0 and -0 count as equal).
void expectSameValues(const Tensor3& fast, const Tensor3& ref, const std::string& what) {
  ASSERT_TRUE(fast.sameShape(ref));
  int64_t mismatches = 0;
  for (size_t i = 0; i < fast.size(); ++i) {
    if (!(fast.data[i] == ref.data[i])) {
      if (mismatches < 5) {
        ADD_FAILURE() << what << ": element " << i << " fast " << fast.data[i] << " reference " << ref.data[i];
      }
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
}

void expectFastMatchesReference(const Tensor3& input, const QuantSpec& spec, const std::string& what) {
  Tensor3 fast = input, ref = input;
  ASSERT_TRUE(quantizeFormatInPlace(fast, spec).isOk()) << what;
  ASSERT_TRUE(quantizeFormatReference(ref, spec).isOk()) << what;
  expectSameValues(fast, ref, what);
}

TEST(FormatTable, NamesAreUniqueAndFindable) {
  const auto table = formatTable();
  // One row per FormatId, with no count to edit when a row is added: the ids are distinct and
  // run 0 … N−1, so formatInfo(id) is the id's own row.
  std::vector<bool> seen(table.size(), false);
  for (const FormatInfo& info : table) {
    const auto i = static_cast<size_t>(info.id);
    ASSERT_LT(i, table.size()) << info.name;
    EXPECT_FALSE(seen[i]) << info.name;
    seen[i] = true;
  }
  for (const FormatInfo& info : table) {
    const FormatInfo* found = findFormat(info.name);
    ASSERT_NE(found, nullptr) << info.name;
    EXPECT_EQ(found->id, info.id);
    EXPECT_EQ(&formatInfo(info.id), found);
    EXPECT_FALSE(info.description.empty()) << info.name;
    EXPECT_FALSE(info.metadata.empty()) << info.name;
    EXPECT_FALSE(info.reference.empty()) << info.name;
  }
  EXPECT_EQ(findFormat("int4"), nullptr);  // the family is "int"; bits travel in QuantSpec
  EXPECT_EQ(findFormat("q6_k"), nullptr);
}

TEST(FormatTable, SpecNamesAndBitsAsSpecified) {
  const char* names[] = {"int", "fp8_e4m3", "fp8_e5m2", "nf4", "mxfp4", "nvfp4", "q8_0", "q4_0",
                         "q4_1", "q5_0", "q5_1", "iq4_nl", "tq", "tqp", "nuq", "fp16", "bf16", "none"};
  for (const char* n : names) EXPECT_NE(findFormat(n), nullptr) << n;
  // Bits per element including block metadata (quantization.md §2).
  auto bpe = [](const char* n) {
    const FormatInfo* f = findFormat(n);
    return f->payloadBits + static_cast<double>(f->blockMetaBits) / f->blockSize;
  };
  EXPECT_DOUBLE_EQ(bpe("q8_0"), 8.5);
  EXPECT_DOUBLE_EQ(bpe("q4_0"), 4.5);
  EXPECT_DOUBLE_EQ(bpe("q4_1"), 5.0);
  EXPECT_DOUBLE_EQ(bpe("q5_0"), 5.5);
  EXPECT_DOUBLE_EQ(bpe("q5_1"), 6.0);
  EXPECT_DOUBLE_EQ(bpe("iq4_nl"), 4.5);
  EXPECT_DOUBLE_EQ(bpe("mxfp4"), 4.25);
  EXPECT_DOUBLE_EQ(bpe("nvfp4"), 4.5);
  EXPECT_EQ(findFormat("nvfp4")->tensorMetaBits, 32);
}

// Every row quantizes a random tensor to finite values with a sane relative error, and the
// fast path equals the reference.
TEST(EveryFormat, QuantizesRandomTensorSanelyAndMatchesReference) {
  const Tensor3 x = randomTensor(2, 24, 64, 7);
  for (const FormatInfo& info : formatTable()) {
    const QuantSpec spec = specFor(info);
    Tensor3 q = x;
    ASSERT_TRUE(quantizeFormatInPlace(q, spec).isOk()) << info.name;
    for (float v : q.data) ASSERT_TRUE(std::isfinite(v)) << info.name;
    const double rel = rmsError(q, x) / rmsError(Tensor3(x.heads, x.tokens, x.dim), x);
    // int4 token-wise with 6x outliers is the loosest grid; tqp (unrotated here, so the outliers
    // stay where its sphere codebook does not expect them) trades MSE for unbiased inner products;
    // LMDeploy's lmtq/lmqjl, unrotated here too, meet the outliers with a Gaussian codebook, and
    // lmqjl's residual sign moves every coordinate by the residual's RMS, which the outliers inflate.
    const bool unrotatedCodebook =
        info.id == FormatId::Tqp || info.id == FormatId::Lmtq || info.id == FormatId::Lmqjl;
    EXPECT_LT(rel, unrotatedCodebook ? 0.6 : 0.35) << info.name;
    if (info.id == FormatId::None || info.id == FormatId::Fp32) {
      EXPECT_EQ(rel, 0.0);
    } else if (info.id != FormatId::Fp16 && info.id != FormatId::Bf16) {
      EXPECT_GT(rel, 0.0) << info.name;
    }
    expectFastMatchesReference(x, spec, std::string(info.name));
  }
}

TEST(EveryFormat, LargeTensorFastPathMatchesReference) {
  // Above the OpenMP threshold, so the threaded loops run too.
  const Tensor3 x = randomTensor(4, 160, 128, 11, 0.3f);
  for (const FormatInfo& info : formatTable()) {
    expectFastMatchesReference(x, specFor(info), std::string(info.name) + " large");
  }
}

TEST(EveryFormat, BlockRowsStraddlingHeadsMatchReference) {
  // D = 48: blocks of 32 and 16 cross head boundaries of the [head, channel] token row.
  const Tensor3 x = randomTensor(2, 9, 48, 5);
  for (const FormatInfo& info : formatTable()) {
    if (info.kind != FormatKind::Block) continue;
    expectFastMatchesReference(x, specFor(info), std::string(info.name) + " straddling");
  }
}

TEST(EveryFormat, BatchedBlockKernelsMatchReferenceOnEdgeBlocks) {
  // The block kernels work on eight blocks at a time, with per-block branches (a tie between
  // the largest and the most negative value, zero blocks) done lane by lane; a token row of 9
  // blocks of 32 (18 of 16) per token also leaves a remainder for the one-block path. Each
  // block gets one of the cases below, so every case lands in every lane position.
  const int64_t tokens = 13, dim = 9 * 32;
  Tensor3 x(1, tokens, dim);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> unit(-0.9f, 0.9f);
  for (int64_t b = 0; b < tokens * dim / 16; ++b) {
    float* p = x.data.data() + b * 16;
    switch (b % 11) {
      case 0: for (int i = 0; i < 16; ++i) p[i] = normal(rng); break;
      case 1: for (int i = 0; i < 16; ++i) p[i] = unit(rng); p[3] = -1.5f; p[11] = 1.5f; break;  // tie, minus first
      case 2: for (int i = 0; i < 16; ++i) p[i] = unit(rng); p[2] = 1.5f; p[9] = -1.5f; break;   // tie, plus first
      case 3: break;                                                                              // +0
      case 4: for (int i = 0; i < 16; ++i) p[i] = i % 3 == 0 ? -0.0f : 0.0f; break;
      case 5: for (int i = 0; i < 16; ++i) p[i] = 1e-41f * static_cast<float>(i - 7); break;  // subnormal
      case 6: for (int i = 0; i < 16; ++i) p[i] = 3.0e4f * unit(rng); break;
      case 7: p[7] = -2.5f; break;  // one value
      case 8: for (int i = 0; i < 16; ++i) p[i] = 1e-5f * normal(rng); break;  // nvfp4: d underflows
      case 9: for (int i = 0; i < 16; ++i) p[i] = 0.3f; break;               // constant
      case 10: for (int i = 0; i < 16; ++i) p[i] = 2e-2f * normal(rng); break;  // nvfp4: subnormal e4m3 d
    }
  }
  for (const FormatInfo& info : formatTable()) {
    if (info.kind != FormatKind::Block) continue;
    expectFastMatchesReference(x, specFor(info), std::string(info.name) + " edge blocks");
  }
}

TEST(EveryFormat, Mxfp4ScalesAtTheEndsOfE8m0MatchReference) {
  // mxfp4's shared exponent floor(log2 a) - 2 clamps to E8M0's -127 (a scale of 2^-127, a
  // subnormal float) for the smallest normal maxima, and reaches +125 for the largest floats;
  // blocks of every such size, eight and more per row so that the batched kernel sees them.
  Tensor3 x(1, 4, 16 * 32);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const float tops[] = {0x1.8p-126f, 0x1p-126f, 0x1.fp-125f, 0x1p-124f, 0x1p-120f, 1.0f, 0x1.8p120f, 3.0e38f};
  for (int64_t b = 0; b < 4 * 16; ++b) {
    float* p = x.data.data() + b * 32;
    const float top = tops[b % 8];
    for (int i = 0; i < 32; ++i) p[i] = top * unit(rng);
    p[b % 32] = (b % 3 == 0 ? -top : top);
  }
  QuantSpec spec;
  spec.format = FormatId::Mxfp4;
  expectFastMatchesReference(x, spec, "mxfp4 E8M0 ends");
}

// The test holds eight-lane values in locals of this file only (no calls across the ABI).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

TEST(SmallFloats, EightLaneRoundingMatchesScalarBitForBit) {
  // fp_vec.h's lane-wise versions against fp_types.h's, across the exponent range and on
  // every decision point of e2m1 and its neighbours.
  std::vector<float> values;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 8191) {
    const float v = fp::fromBits(static_cast<uint32_t>(u));
    if (!std::isnan(v)) values.push_back(v);
  }
  for (float point : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 7.0f, 12.0f}) {
    for (float v = point, w = point; v > point * 0.999f; v = std::nextafter(v, 0.0f), w = std::nextafter(w, 100.0f)) {
      values.insert(values.end(), {v, -v, w, -w});
    }
  }
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(-std::numeric_limits<float>::infinity());
  while (values.size() % 8 != 0) values.push_back(0.0f);
  for (size_t i = 0; i < values.size(); i += 8) {
    const simd::F8 v = simd::load(values.data() + i);
    const simd::F8 fp16 = fp::roundFp16(v), e4m3 = fp::roundE4m3(v), e2m1NotNan = fp::roundE2m1NotNan(v);
    for (int k = 0; k < 8; ++k) {
      const float x = values[i + static_cast<size_t>(k)];
      ASSERT_EQ(fp::bitsOf(fp16[k]), fp::bitsOf(fp::roundFp16(x))) << x;
      ASSERT_EQ(fp::bitsOf(e4m3[k]), fp::bitsOf(fp::roundE4m3(x))) << x;
      ASSERT_EQ(fp::bitsOf(e2m1NotNan[k]), fp::bitsOf(fp::roundE2m1(x))) << x;
    }
  }
  EXPECT_GT(values.size(), 500000u);
}

TEST(EveryFormat, BlockFormatRejectsRowThatDoesNotDivide) {
  Tensor3 x = randomTensor(1, 3, 24, 1);  // row of 24 values
  for (const FormatInfo& info : formatTable()) {
    if (info.kind != FormatKind::Block) continue;
    const Status s = quantizeFormatInPlace(x, specFor(info));
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << info.name;
    EXPECT_NE(s.message().find("block size"), std::string::npos) << s.message();
  }
}

TEST(EveryGroupedFormat, FastMatchesReferenceForAllAxesGroupsAndClips) {
  const Tensor3 x = randomTensor(3, 37, 40, 3);
  const Axis axes[] = {Axis::Tensor, Axis::Head, Axis::Token, Axis::Channel};
  const int groups[] = {0, 16, 7, 1000};
  std::vector<Clip> clips(3);
  clips[1].kind = Clip::Kind::Percentile;
  clips[1].p = 0.9;
  clips[2].kind = Clip::Kind::Mse;
  for (const FormatInfo& info : formatTable()) {
    if (!info.grouped) continue;
    for (int variant = 0; variant < (info.hasBits ? 4 : 1); ++variant) {
      if (variant % 2 == 1 && info.id != FormatId::Int) continue;  // sym is int's alone
      QuantSpec spec = specFor(info, variant < 2 ? 3 : 8);
      spec.symmetric = variant % 2 == 1;
      for (Axis axis : axes) {
        for (int group : groups) {
          if ((axis == Axis::Tensor || axis == Axis::Head) && group != 0) continue;
          for (const Clip& clip : clips) {
            // nuq refuses clip=mse: a group's best clip would depend on the tensor's codebook.
            if (info.kind == FormatKind::NonUniform && clip.kind == Clip::Kind::Mse) continue;
            spec.axis = axis;
            spec.group = group;
            spec.clip = clip;
            expectFastMatchesReference(x, spec,
                                       std::string(info.name) + " bits " + std::to_string(spec.bits) +
                                           (spec.symmetric ? " sym" : "") + " axis " + axisName(axis) +
                                           " group " + std::to_string(group) + " clip " +
                                           std::to_string(static_cast<int>(clip.kind)));
          }
        }
      }
    }
  }
}

TEST(EveryGroupedFormat, MetadataTypesMatchReference) {
  const Tensor3 x = randomTensor(2, 10, 32, 9, 1e-3f);  // small values: fp16 scales lose bits
  for (const FormatInfo& info : formatTable()) {
    if (!info.grouped) continue;
    for (MetaType t : {MetaType::Fp16, MetaType::Bf16, MetaType::Fp32}) {
      QuantSpec spec = specFor(info);
      spec.scale = t;
      expectFastMatchesReference(x, spec, std::string(info.name) + " scale " + metaTypeName(t));
    }
  }
}

TEST(EveryGroupedFormat, GroupParametersMatchReferenceAtExtremeRanges) {
  // Group ranges from subnormal to beyond fp16 and bf16, so the parameters (computed four
  // groups at a time for int asym and sym) meet every branch of the metadata rounding: zero,
  // subnormal, normal, rounding up to the largest finite, overflow to infinity.
  // (The largest stays far enough below float's range that no input value is infinite.)
  const float scales[] = {1e-41f, 1e-30f, 3e-8f, 1e-5f, 1.0f, 1e3f, 6.4e4f, 1e6f, 1e37f};
  Tensor3 x = randomTensor(1, 24, 7 * 32, 13);
  for (int64_t g = 0; g < static_cast<int64_t>(x.size()) / 32; ++g) {
    for (int64_t i = 0; i < 32; ++i) x.data[static_cast<size_t>(g * 32 + i)] *= scales[g % 9];
  }
  for (const char* text : {"int4,group=32", "int4,sym,group=32", "int2,group=32", "int8,group=32",
                           "int3,axis=channel,group=8", "int4,sym,axis=channel,group=8"}) {
    for (MetaType t : {MetaType::Fp16, MetaType::Bf16, MetaType::Fp32}) {
      QuantSpec spec = *parseSpec(text);
      spec.scale = t;
      Tensor3 fast = x, ref = x;
      const std::string what = std::string(text) + " scale " + metaTypeName(t);
      ASSERT_TRUE(quantizeFormatInPlace(fast, spec).isOk()) << what;
      ASSERT_TRUE(quantizeFormatReference(ref, spec).isOk()) << what;
      int64_t mismatches = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const float a = fast.data[i], b = ref.data[i];
        if (!(a == b || (std::isnan(a) && std::isnan(b)))) ++mismatches;
      }
      EXPECT_EQ(mismatches, 0) << what;
    }
  }
}

TEST(IntAsym, ErrorShrinksAsBitsGrow) {
  const Tensor3 x = randomTensor(2, 64, 64, 21);
  double previous = 1e9;
  for (int bits : {1, 2, 4, 8}) {
    QuantSpec spec = specFor(formatInfo(FormatId::Int), bits);
    Tensor3 q = x;
    ASSERT_TRUE(quantizeFormatInPlace(q, spec).isOk());
    const double e = rmsError(q, x);
    EXPECT_LT(e, previous) << "int" << bits;
    previous = e;
  }
}

TEST(IntAsym, ConstantGroupsReconstructExactly) {
  // Constant rows (token groups), a 1-token channel group and an all-zero tensor: s = 0, x̂ = m.
  // 1.5 is exact in fp16, so m = meta(1.5) = 1.5.
  for (Axis axis : {Axis::Token, Axis::Channel, Axis::Tensor, Axis::Head}) {
    for (float value : {0.0f, 1.5f, -0.25f}) {
      Tensor3 x(2, 5, 8, value);
      QuantSpec spec = specFor(formatInfo(FormatId::Int), 4);
      spec.axis = axis;
      spec.group = axis == Axis::Channel ? 1 : 0;
      ASSERT_TRUE(quantizeFormatInPlace(x, spec).isOk());
      for (float v : x.data) EXPECT_EQ(v, value) << axisName(axis);
    }
  }
}

TEST(EveryGroupedFormat, AllZeroGroupStaysZero) {
  for (const FormatInfo& info : formatTable()) {
    if (info.kind == FormatKind::Elementwise) continue;
    Tensor3 x(2, 3, 64, 0.0f);
    ASSERT_TRUE(quantizeFormatInPlace(x, specFor(info)).isOk());
    // LMDeploy's norm √(Σx² + 1e-8) is 1e-4 for a zero vector and its codes those of u = 0, so
    // lmtq/lmqjl give C[k]·1e-4 (fill_kv_cache.py does the same), a few 1e-6 at D = 64.
    const bool lmdeploy = info.id == FormatId::Lmtq || info.id == FormatId::Lmqjl;
    for (float v : x.data) {
      if (lmdeploy) {
        EXPECT_LT(std::fabs(v), 1e-5f) << info.name;
      } else {
        EXPECT_EQ(v, 0.0f) << info.name;
      }
    }
  }
}

TEST(None, IsAnExactCopy) {
  const Tensor3 x = randomTensor(2, 7, 16, 2);
  Tensor3 q = x;
  ASSERT_TRUE(quantizeFormatInPlace(q, specFor(formatInfo(FormatId::None))).isOk());
  EXPECT_EQ(std::memcmp(q.data.data(), x.data.data(), x.size() * sizeof(float)), 0);
}

TEST(GroupCount, CountsGroupsAndBlocksPerAxis) {
  QuantSpec spec = specFor(formatInfo(FormatId::Int));
  spec.axis = Axis::Token;
  spec.group = 0;
  EXPECT_EQ(groupCount(spec, 8, 100, 128), 800);
  spec.group = 48;  // 128 = 48 + 48 + 32: three runs per token
  EXPECT_EQ(groupCount(spec, 8, 100, 128), 2400);
  spec.axis = Axis::Channel;
  spec.group = 32;  // 100 tokens = 3 runs of 32 and one of 4
  EXPECT_EQ(groupCount(spec, 8, 100, 128), 8 * 128 * 4);
  spec.group = 0;
  EXPECT_EQ(groupCount(spec, 8, 100, 128), 8 * 128);
  spec.axis = Axis::Head;
  EXPECT_EQ(groupCount(spec, 8, 100, 128), 8);
  spec.axis = Axis::Tensor;
  EXPECT_EQ(groupCount(spec, 8, 100, 128), 1);
  EXPECT_EQ(groupCount(spec, 8, 0, 128), 0);
  QuantSpec q4 = specFor(formatInfo(FormatId::Q4_0));
  EXPECT_EQ(groupCount(q4, 8, 100, 128), 8 * 100 * 4);
  QuantSpec nv = specFor(formatInfo(FormatId::Nvfp4));
  EXPECT_EQ(groupCount(nv, 2, 10, 24), 2 * 10 * 24 / 16);
  EXPECT_EQ(groupCount(specFor(formatInfo(FormatId::Fp16)), 8, 100, 128), 0);
}

TEST(IntSpec, RejectsBadBits) {
  Tensor3 x(1, 2, 4, 1.0f);
  QuantSpec spec = specFor(formatInfo(FormatId::Int), 9);
  EXPECT_EQ(quantizeFormatInPlace(x, spec).code(), StatusCode::InvalidArgument);
  spec.bits = 1;
  spec.symmetric = true;
  EXPECT_EQ(quantizeFormatInPlace(x, spec).code(), StatusCode::InvalidArgument);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// The bit-trick roundings of the fast path against the double-precision nearbyint reference on
// a stride through all 2^32 float bit patterns (every sign, exponent and many mantissas).
TEST(SmallFloats, BitTrickRoundingMatchesReferenceAcrossAllExponents) {
  int64_t checked = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4093) {
    const float v = fp::fromBits(static_cast<uint32_t>(u));
    if (std::isnan(v)) continue;
    ASSERT_EQ(fp::bitsOf(fp::roundFp16(v)), fp::bitsOf(reference::fp16(v))) << v;
    ASSERT_EQ(fp::bitsOf(fp::roundBf16(v)), fp::bitsOf(reference::bf16(v))) << v;
    ASSERT_EQ(fp::bitsOf(fp::roundE4m3(v)), fp::bitsOf(reference::e4m3(v))) << v;
    ASSERT_EQ(fp::bitsOf(fp::roundE5m2(v)), fp::bitsOf(reference::e5m2(v))) << v;
    ASSERT_EQ(fp::bitsOf(fp::roundE2m1(v)), fp::bitsOf(reference::e2m1(v))) << v;
    if (std::fabs(v) < 2.0e9f) {
      ASSERT_EQ(kernels::roundHalfAway(v), std::round(v)) << v;
    }
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
  EXPECT_TRUE(std::isnan(fp::roundE4m3(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fp::roundE4m3(std::numeric_limits<float>::infinity()), 448.0f);
  EXPECT_EQ(fp::roundFp16(-std::numeric_limits<float>::infinity()), -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// describeGroup's level grid must contain every value the group actually reconstructs to, and its
// code count must equal the number of distinct reconstructions, for every non-elementwise row.
TEST(DescribeGroup, LevelsContainEveryReconstructionForEveryFormat) {
  Tensor3 x(2, 5, 64);
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x.data) v = normal(rng);
  for (const FormatInfo& info : formatTable()) {
    if (info.kind == FormatKind::Elementwise) continue;
    QuantSpec spec;
    spec.format = info.id;
    spec.bits = info.hasBits ? 3 : static_cast<int>(info.payloadBits);
    spec.axis = Axis::Token;
    spec.group = 32;
    spec.scale = MetaType::Fp16;
    const int64_t head = 1, token = 2, channel = 40;
    auto detail = describeGroup(x, spec, head, token, channel);
    ASSERT_TRUE(detail.hasValue()) << info.name;
    Tensor3 q = x;
    ASSERT_TRUE(quantizeFormatInPlace(q, spec).isOk());
    // Members: channels [32, 64) of (head, token) for both the token group and the 32-block;
    // nvfp4's 16-block is channels [32, 48); tq and tqp quantize the whole vector, and tqp's
    // levels are those of its tq<b−1> stage (the QJL correction moves values off them).
    const bool vector = info.kind == FormatKind::Vector;
    const int64_t first = vector ? 0 : 32;
    const int64_t size = vector ? 64 : (info.id == FormatId::Nvfp4 || info.id == FormatId::Kvfp4) ? 16 : 32;
    EXPECT_EQ(detail->size, size) << info.name;
    if (info.id == FormatId::Tqp || info.id == FormatId::Lmqjl) {
      QuantSpec stage = spec;
      stage.format = info.id == FormatId::Tqp ? FormatId::Tq : FormatId::Lmtq;
      stage.bits = spec.bits - 1;
      q = x;
      ASSERT_TRUE(quantizeFormatInPlace(q, stage).isOk());
    }
    std::vector<float> members;
    for (int64_t c = first; c < first + size; ++c) members.push_back(q.at(head, token, c));
    for (float v : members) {
      EXPECT_TRUE(std::binary_search(detail->levels.begin(), detail->levels.end(), static_cast<double>(v)))
          << info.name << ": " << v << " is not among the group's levels";
    }
    std::sort(members.begin(), members.end());
    const auto distinct = std::unique(members.begin(), members.end()) - members.begin();
    EXPECT_EQ(detail->codesUsed, distinct) << info.name;
    EXPECT_TRUE(std::is_sorted(detail->levels.begin(), detail->levels.end())) << info.name;
    EXPECT_LE(static_cast<int64_t>(detail->levels.size()), detail->codesTotal) << info.name;
  }
}

}  // namespace
}  // namespace kvscope
