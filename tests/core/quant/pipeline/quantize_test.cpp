// SPDX-License-Identifier: GPL-3.0-or-later
// The pipeline of quantization.md §1 around the formats: RoPE, Hadamard, kept tokens, outliers,
// pre-RoPE keys, and cancellation.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <limits>
#include <string>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/quantize.h"
#include "core/quant/rotation.h"

namespace kvscope {
namespace {

Tensor3 randomTensor(int64_t h, int64_t t, int64_t d, uint32_t seed, float scale = 1.0f) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  for (float& v : x.data) v = n(rng);
  return x;
}

QuantSpec spec(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << s.status().message();
  return s.hasValue() ? *s : QuantSpec{};
}

double maxAbsDiff(const Tensor3& a, const Tensor3& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a.data[i]) - double(b.data[i])));
  return m;
}

TEST(Hadamard, RowsOfIdentityGiveSylvesterMatrixAndSquareToIdentity) {
  for (int64_t d : {1, 2, 8, 128}) {
    Tensor3 x(1, d, d);
    for (int64_t i = 0; i < d; ++i) x.at(0, i, i) = 1.0f;
    hadamardInPlace(x);  // row i is now e_i·H = row i of H
    const double norm = 1.0 / std::sqrt(double(d));
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        // Sylvester: H[i][j] = (-1)^popcount(i & j) / sqrt(D).
        const double want = (std::popcount(uint64_t(i & j)) % 2 ? -norm : norm);
        ASSERT_NEAR(x.at(0, i, j), want, 1e-7) << "D=" << d << " i=" << i << " j=" << j;
      }
    }
    hadamardInPlace(x);  // H·H = I
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = 0; j < d; ++j) ASSERT_NEAR(x.at(0, i, j), i == j ? 1.0 : 0.0, 1e-6) << "D=" << d;
    }
  }
}

TEST(Hadamard, RoundTripIsIdentityAndPreservesNorm) {
  Tensor3 x = randomTensor(3, 17, 64, 7);
  Tensor3 y = x;
  hadamardInPlace(y);
  double nx = 0, ny = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    nx += double(x.data[i]) * x.data[i];
    ny += double(y.data[i]) * y.data[i];
  }
  EXPECT_NEAR(ny / nx, 1.0, 1e-6);
  hadamardInPlace(y);
  EXPECT_LT(maxAbsDiff(x, y), 1e-6);
}

TEST(Hadamard, EveryHeadDimEqualsThePlainFloatTransformBitForBit) {
  // The transform has vector versions for D = 32…256 (AVX2 and AVX-512) and a general one; each
  // must give exactly the bits of the textbook loop in float32: × the float nearest 1/√D, then
  // stages of stride 1, 2, 4, … with (a + b, a - b). Large values of a few sizes with either sign
  // cancel in some sums and not in others, so the small ones (2^-40…1) lose different bits in a
  // different stage order; signed zeros check the zero signs.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exponent(-40, 0), pick(0, 15);
  const float big[] = {0x1.8p27f, 0x1.4p26f, 0x1.1p25f, 0x1p24f};
  for (int64_t d = 1; d <= 512; d *= 2) {
    Tensor3 x(2, 37, d);
    for (float& v : x.data) {
      const int kind = pick(rng);
      v = kind == 0   ? 0.0f
          : kind == 1 ? -0.0f
          : kind < 8  ? big[kind % 4] * (kind < 6 ? 1.0f : -1.0f)
                      : std::ldexp(normal(rng), exponent(rng));
    }
    Tensor3 want = x;
    const auto norm = static_cast<float>(1.0 / std::sqrt(double(d)));
    for (int64_t r = 0; r < 2 * 37; ++r) {
      float* w = want.data.data() + r * d;
      for (int64_t i = 0; i < d; ++i) w[i] *= norm;
      for (int64_t len = 1; len < d; len *= 2) {
        for (int64_t i = 0; i < d; i += 2 * len) {
          for (int64_t j = i; j < i + len; ++j) {
            const float a = w[j], b = w[j + len];
            w[j] = a + b;
            w[j + len] = a - b;
          }
        }
      }
    }
    hadamardInPlace(x);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(x.data[i]), std::bit_cast<uint32_t>(want.data[i]))
          << "D=" << d << " at " << i << ": " << x.data[i] << " vs " << want.data[i];
    }
  }
}

TEST(Hadamard, FloatTransformStaysWithinFloatNoiseOfTheExactOne) {
  // float32 arithmetic is our reading of "x·H" (docs/spec-strings.md): the scaling and each of
  // the log2(D) stages round once, on values no larger than the row's norm |x| (scaled first,
  // a partial sum of k values is at most √k·|x|/√D). Against a long-double product with the
  // matrix, within (log2 D + 1)·√D roundings of |x|:
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (int64_t d : {8, 128, 256}) {
    Tensor3 x(1, 16, d);
    for (float& v : x.data) v = normal(rng);
    Tensor3 y = x;
    hadamardInPlace(y);
    for (int64_t t = 0; t < 16; ++t) {
      long double norm2 = 0;
      for (int64_t i = 0; i < d; ++i) norm2 += static_cast<long double>(x.at(0, t, i)) * x.at(0, t, i);
      for (int64_t j = 0; j < d; ++j) {
        long double exact = 0;
        for (int64_t i = 0; i < d; ++i) {
          const long double h = (std::popcount(uint64_t(i & j)) % 2 ? -1.0L : 1.0L) / std::sqrt(static_cast<long double>(d));
          exact += static_cast<long double>(x.at(0, t, i)) * h;
        }
        const double bound = (std::log2(double(d)) + 1) * 0x1p-24 * std::sqrt(double(d) * double(norm2));
        ASSERT_LE(std::fabs(double(y.at(0, t, j) - exact)), bound) << "D=" << d << " t=" << t << " j=" << j;
      }
    }
  }
}

TEST(Hadamard, LargeInputsDoNotOverflowBeforeTheResultWould) {
  // Scaling by 1/√D before the sums: a row of 1e37 sums to 128e37 unscaled (past FLT_MAX), but
  // its transform is 128e37/√128 ≈ 1.13e38, which a float holds.
  for (int64_t d : {8, 128, 256}) {
    Tensor3 x(1, 2, d);
    for (int64_t i = 0; i < d; ++i) {
      x.at(0, 0, i) = 1e37f;
      x.at(0, 1, i) = i % 3 == 0 ? -2e37f : 1e37f;
    }
    Tensor3 y = x;
    hadamardInPlace(y);
    EXPECT_NEAR(y.at(0, 0, 0) / (1e37 * std::sqrt(double(d))), 1.0, 1e-6) << "D=" << d;
    for (int64_t j = 1; j < d; ++j) ASSERT_EQ(y.at(0, 0, j), 0.0f) << "D=" << d << " j=" << j;
    for (int64_t j = 0; j < d; ++j) ASSERT_TRUE(std::isfinite(y.at(0, 1, j))) << "D=" << d << " j=" << j;
  }
}

TEST(Rope, MatchesHandComputationForHeadDim4BothStyles) {
  // Token 0 does not move; token 1 turns pair 0 by 1 rad and pair 1 by 10000^(-2/4) = 0.01 rad.
  const double a0 = 1.0, a1 = 0.01;
  for (RopeStyle style : {RopeStyle::Half, RopeStyle::Interleaved}) {
    Tensor3 x(1, 2, 4);
    for (int t = 0; t < 2; ++t) {
      for (int c = 0; c < 4; ++c) x.at(0, t, c) = float(c + 1);
    }
    applyRope(x, {10000.0, style});
    for (int c = 0; c < 4; ++c) EXPECT_EQ(x.at(0, 0, c), float(c + 1));
    std::vector<double> want(4);
    if (style == RopeStyle::Half) {  // pairs (0,2), (1,3)
      want = {1 * std::cos(a0) - 3 * std::sin(a0), 2 * std::cos(a1) - 4 * std::sin(a1),
              1 * std::sin(a0) + 3 * std::cos(a0), 2 * std::sin(a1) + 4 * std::cos(a1)};
    } else {  // pairs (0,1), (2,3)
      want = {1 * std::cos(a0) - 2 * std::sin(a0), 1 * std::sin(a0) + 2 * std::cos(a0),
              3 * std::cos(a1) - 4 * std::sin(a1), 3 * std::sin(a1) + 4 * std::cos(a1)};
    }
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(x.at(0, 1, c), want[size_t(c)], 1e-6) << ropeStyleName(style) << " c=" << c;
  }
}

TEST(Rope, PositionOffsetShiftsTokens) {
  Tensor3 x = randomTensor(2, 5, 8, 3);
  Tensor3 whole = x;
  applyRope(whole, {500.0, RopeStyle::Half});
  Tensor3 tail(2, 2, 8);
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < 2; ++t) {
      for (int c = 0; c < 8; ++c) tail.at(h, t, c) = x.at(h, t + 3, c);
    }
  }
  applyRope(tail, {500.0, RopeStyle::Half}, 3);
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < 2; ++t) {
      for (int c = 0; c < 8; ++c) EXPECT_FLOAT_EQ(tail.at(h, t, c), whole.at(h, t + 3, c));
    }
  }
}

TEST(Rope, InverseUndoesRopeAtLongPositions) {
  for (RopeStyle style : {RopeStyle::Half, RopeStyle::Interleaved}) {
    Tensor3 x = randomTensor(2, 300, 64, 11);
    Tensor3 y = x;
    applyRope(y, {500000.0, style}, 30000);
    EXPECT_GT(maxAbsDiff(x, y), 0.1) << "RoPE should move the vectors";
    applyInverseRope(y, {500000.0, style}, 30000);
    EXPECT_LT(maxAbsDiff(x, y), 1e-5) << ropeStyleName(style);
  }
}

TEST(Pipeline, NoneIsBitIdentical) {
  Tensor3 x = randomTensor(4, 33, 16, 1);
  QuantInput in{&x, nullptr, {}};
  for (const char* s : {"none", "none,sinks=3,residual=5", "none,outliers=0.1", "none,rot=hadamard"}) {
    auto out = quantizeTensor(in, spec(s));
    ASSERT_TRUE(out.hasValue()) << out.status().message();
    EXPECT_EQ(out->reconstruction.data, x.data) << s;
  }
}

TEST(Pipeline, PreRopeWithNoneReproducesKeyUpToRopeRounding) {
  Tensor3 pre = randomTensor(2, 64, 32, 5);
  Tensor3 key = pre;
  const RopeParams rope{10000.0, RopeStyle::Interleaved};
  applyRope(key, rope);
  QuantInput in{&key, &pre, rope};
  auto out = quantizeTensor(in, spec("none,prerope"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  EXPECT_LT(maxAbsDiff(out->reconstruction, key), 1e-6);
  // Without key_pre_rope, prerope is an input error, not a crash.
  QuantInput missing{&key, nullptr, rope};
  auto bad = quantizeTensor(missing, spec("int4,prerope"));
  ASSERT_FALSE(bad.hasValue());
  EXPECT_EQ(bad.status().code(), StatusCode::InvalidArgument);
}

TEST(Pipeline, KeptTokensAreBitIdenticalAndOthersChange) {
  Tensor3 x = randomTensor(2, 40, 16, 2);
  QuantInput in{&x, nullptr, {}};
  auto out = quantizeTensor(in, spec("int2,sinks=3,residual=5"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  const Tensor3& r = out->reconstruction;
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t t = 0; t < 40; ++t) {
      bool same = true;
      for (int64_t c = 0; c < 16; ++c) same = same && r.at(h, t, c) == x.at(h, t, c);
      if (t < 3 || t >= 35) {
        EXPECT_TRUE(same) << "kept token " << t << " of head " << h;
      } else {
        EXPECT_FALSE(same) << "2-bit token " << t << " of head " << h << " was not quantized";
      }
    }
  }
}

TEST(Pipeline, KeptTokensDoNotEnterStatistics) {
  // Huge sink and residual values must not widen the range of the quantized tokens: with
  // axis=tensor, one group; the middle tokens hold only 0 and 1, which int1 represents exactly.
  Tensor3 x(1, 10, 4);
  for (int64_t t = 0; t < 10; ++t) {
    for (int64_t c = 0; c < 4; ++c) x.at(0, t, c) = float((t + c) % 2);
  }
  for (int64_t c = 0; c < 4; ++c) {
    x.at(0, 0, c) = 1000.0f;
    x.at(0, 9, c) = -1000.0f;
  }
  QuantInput in{&x, nullptr, {}};
  auto out = quantizeTensor(in, spec("int1,axis=tensor,sinks=1,residual=1"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  EXPECT_EQ(out->reconstruction.data, x.data);
}

TEST(Pipeline, EverythingKeptWhenSinksAndResidualCoverAllTokens) {
  Tensor3 x = randomTensor(2, 8, 16, 4);
  QuantInput in{&x, nullptr, {}};
  auto out = quantizeTensor(in, spec("int2,sinks=5,residual=5"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  EXPECT_EQ(out->reconstruction.data, x.data);
  EXPECT_EQ(out->storage.bitsPerElement(), 16.0);
}

TEST(Outliers, CountIsCeilOfFractionTimesN) {
  EXPECT_EQ(outlierCount(0.0, 100), 0);
  EXPECT_EQ(outlierCount(0.01, 100), 1);
  EXPECT_EQ(outlierCount(0.01, 101), 2);
  EXPECT_EQ(outlierCount(0.5, 3), 2);
  EXPECT_EQ(outlierCount(0.001, 1), 1);
  EXPECT_EQ(outlierCount(0.01, 0), 0);
}

TEST(Outliers, SelectionPicksLargestMagnitudesWithTiesToLowerIndex) {
  //                       0     1    2     3    4    5     6    7
  std::vector<float> v = {0.5f, -3.f, 3.f, 1.f, -3.f, 2.f, -2.f, 0.f};
  EXPECT_EQ(selectOutliers(v.data(), 8, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(selectOutliers(v.data(), 8, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(selectOutliers(v.data(), 8, 3), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(selectOutliers(v.data(), 8, 4), (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(selectOutliers(v.data(), 8, 5), (std::vector<int64_t>{1, 2, 4, 5, 6}));
  EXPECT_EQ(selectOutliers(v.data(), 8, 0), (std::vector<int64_t>{}));
  EXPECT_EQ(selectOutliers(v.data(), 8, 20).size(), 8u);
  // All equal magnitudes: the first indices win.
  std::vector<float> same(1000, 1.0f);
  for (size_t i = 0; i < same.size(); i += 2) same[i] = -1.0f;
  auto picked = selectOutliers(same.data(), 1000, 10);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(picked[size_t(i)], i);
}

TEST(Outliers, SelectionAgreesWithAFullSortOnTiesAndSignedZeros) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t n = 1 + int64_t(rng() % 3000);
    std::vector<float> v(static_cast<size_t>(n));
    // Few distinct magnitudes (many ties), both signs, and ±0.
    for (float& x : v) {
      const int m = int(rng() % 9) - 4;
      x = m == 0 ? (rng() % 2 ? 0.0f : -0.0f) : float(m) * 0.25f;
    }
    if (trial % 5 == 0) v[size_t(rng() % n)] = 1e30f;
    if (trial % 7 == 0) v[size_t(rng() % n)] = 1e-40f;  // subnormal
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return std::fabs(v[size_t(a)]) > std::fabs(v[size_t(b)]); });
    const int64_t k = int64_t(rng() % (n + 1));
    std::vector<int64_t> want(order.begin(), order.begin() + k);
    EXPECT_EQ(selectOutliers(v.data(), n, k), want) << "trial " << trial << " n=" << n << " k=" << k;
  }
}

// §1 composed independently of the pipeline's code paths: slice the quantized tokens, rotate,
// pick each head's outliers by a full stable sort, zero them, run the format's scalar reference,
// restore, rotate back, reinsert kept tokens.
Tensor3 composeSection1(const Tensor3& x, const QuantSpec& qs) {
  const int64_t kvh = x.heads, t = x.tokens, d = x.dim;
  const int64_t first = std::min<int64_t>(qs.sinks, t);
  // §1 step 2: a chunk keeps the (T − S) mod R newest tokens, a residual the R newest.
  const int64_t count = qs.chunk > 0 ? (t - first) - (t - first) % qs.chunk
                                     : t - std::min<int64_t>(int64_t{qs.sinks} + qs.residual, t);
  Tensor3 q(kvh, count, d);
  for (int64_t h = 0; h < kvh; ++h)
    for (int64_t j = 0; j < count; ++j)
      for (int64_t c = 0; c < d; ++c) q.at(h, j, c) = x.at(h, first + j, c);
  rotateRows(qs, q.data.data(), kvh * count, d);
  std::vector<std::pair<size_t, float>> saved;
  const int64_t n = count * d, k = outlierCount(qs.outliers, n);
  for (int64_t h = 0; h < kvh; ++h) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
    const float* base = q.data.data() + q.index(h, 0, 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return std::fabs(base[a]) > std::fabs(base[b]); });
    for (int64_t i = 0; i < k; ++i) {
      const size_t at = q.index(h, 0, 0) + size_t(order[size_t(i)]);
      saved.emplace_back(at, q.data[at]);
      q.data[at] = 0.0f;
    }
  }
  EXPECT_TRUE(quantizeFormatReference(q, qs).isOk());
  for (const auto& [at, value] : saved) q.data[at] = value;
  unrotateRows(qs, q.data.data(), kvh * count, d);
  Tensor3 want = x;
  for (int64_t h = 0; h < kvh; ++h)
    for (int64_t j = 0; j < count; ++j)
      for (int64_t c = 0; c < d; ++c) want.at(h, first + j, c) = q.at(h, j, c);
  return want;
}

int64_t countDifferent(const Tensor3& a, const Tensor3& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a.data[i] == b.data[i] ? 0 : 1;
  return n;
}

TEST(Pipeline, StepsComposeInTheOrderOfSection1) {
  const Tensor3 x = randomTensor(2, 24, 16, 21);
  const QuantSpec qs = spec("int3,sinks=2,residual=3,rot=hadamard,outliers=0.02,axis=channel,group=8");
  QuantInput in{&x, nullptr, {}};
  auto out = quantizeTensor(in, qs);
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  EXPECT_LT(maxAbsDiff(out->reconstruction, composeSection1(x, qs)), 1e-6);
  EXPECT_GT(maxAbsDiff(out->reconstruction, x), 0.01) << "int3 should change the tensor";
}

TEST(Pipeline, RotationAndOutliersInPiecesEqualTheComposition) {
  // Large enough that each head's outlier floor comes from a sample of its rows (1 row in 12),
  // with values on a coarse grid so that many magnitudes tie at the outlier threshold; the
  // ties must go to the lower flat index.
  Tensor3 x = randomTensor(3, 3100, 32, 41, 1.5f);
  for (float& v : x.data) v = std::round(v * 4.0f) / 4.0f;
  for (const char* text : {"int4,outliers=0.01", "int4,rot=hadamard,outliers=0.02,sinks=5,residual=17",
                           "q4_0,rot=hadamard:8,outliers=0.01,sinks=2,chunk=128", "int4,rot=rht,seed=7,outliers=0.01",
                           "q8_0,rot=random,seed=3,chunk=1000", "int4,zero=int,rot=hadamard,group=16,outliers=0.01",
                           "int3,axis=channel,group=64,outliers=0.005,rot=hadamard", "q4_0,outliers=0.01,sinks=1",
                           "int4,rot=hadamard,residual=3", "fp8_e4m3,axis=token,outliers=0.03",
                           "int2,axis=channel,outliers=0.01"}) {
    const QuantSpec qs = spec(text);
    auto out = quantizeTensor(QuantInput{&x, nullptr, {}}, qs);
    ASSERT_TRUE(out.hasValue()) << text << ": " << out.status().message();
    EXPECT_EQ(countDifferent(out->reconstruction, composeSection1(x, qs)), 0) << text;
  }
}

TEST(Pipeline, OutliersStayExactWhenTheSampledRowsMisleadTheFloor) {
  // Every third row holds large values and the others small ones; the sampled rows (1 in 12)
  // are all large ones, so a floor taken from the sample lies above most true outliers: the
  // pipeline must notice it found too few candidates and still pick the exact ones.
  Tensor3 x = randomTensor(2, 3100, 32, 43, 0.1f);
  for (int64_t h = 0; h < x.heads; ++h)
    for (int64_t t = 0; t < x.tokens; t += 3)
      for (int64_t c = 0; c < x.dim; ++c) x.at(h, t, c) *= 50.0f;
  for (const char* text : {"int4,outliers=0.2", "int4,outliers=0.2,rot=hadamard"}) {
    const QuantSpec qs = spec(text);
    auto out = quantizeTensor(QuantInput{&x, nullptr, {}}, qs);
    ASSERT_TRUE(out.hasValue()) << text << ": " << out.status().message();
    EXPECT_EQ(countDifferent(out->reconstruction, composeSection1(x, qs)), 0) << text;
  }
}

// The pipeline quantizes pieces of rows in one pass when it can (no rotation, no outliers, groups
// that stay in a head's rows); whichever path it takes, the result must equal slicing the
// quantized tokens out, running the format's scalar reference and putting the kept tokens back.
TEST(Pipeline, EveryFormatAxisAndKeptSplitEqualsTheScalarReferenceOnTheSlice) {
  struct Shape {
    int64_t kvh, t, d;
  };
  // D=32: blocks stay inside a head; D=8 with 4 heads: 32-value blocks straddle heads; D=88:
  // channel runs read 64 channels at a time, then 16, then one by one.
  const Shape shapes[] = {{2, 70, 32}, {4, 19, 8}, {2, 45, 88}};
  const char* options[] = {"", ",sinks=3", ",residual=5", ",sinks=2,residual=7", ",sinks=90", ",chunk=16",
                           ",sinks=3,chunk=7"};
  std::vector<std::string> specs;
  for (const FormatInfo& info : formatTable()) {
    const std::string name = info.hasBits ? "int3" : std::string(info.name);
    if (!info.grouped) {
      specs.push_back(name);
      continue;
    }
    for (const char* axis : {"axis=token,group=16", "axis=token", "axis=channel,group=8", "axis=channel",
                             "axis=head", "axis=tensor", "axis=channel,group=8,clip=0.9",
                             "axis=token,group=8,clip=mse"}) {
      specs.push_back(name + "," + axis);
    }
  }
  specs.push_back("int4,sym,axis=channel,group=4");
  specs.push_back("int3,zero=int,axis=channel,group=8");
  specs.push_back("int4,zero=int,axis=token,group=8,clip=mse");
  int checked = 0;
  for (const Shape& sh : shapes) {
    Tensor3 x = randomTensor(sh.kvh, sh.t, sh.d, 77, 2.0f);
    for (const std::string& base : specs) {
      for (const char* opt : options) {
        const std::string text = base + opt;
        auto parsed = parseSpec(text);
        ASSERT_TRUE(parsed.hasValue()) << text << ": " << parsed.status().message();
        const QuantSpec qs = *parsed;
        const int64_t first = std::min<int64_t>(qs.sinks, sh.t);
        const int64_t kept = qs.chunk > 0 ? first + (sh.t - first) % qs.chunk
                                           : std::min<int64_t>(int64_t{qs.sinks} + qs.residual, sh.t);
        const int64_t count = sh.t - kept;
        Tensor3 want = x;
        if (count > 0 && qs.format != FormatId::None) {
          Tensor3 q(sh.kvh, count, sh.d);
          for (int64_t h = 0; h < sh.kvh; ++h)
            for (int64_t j = 0; j < count; ++j)
              for (int64_t c = 0; c < sh.d; ++c) q.at(h, j, c) = x.at(h, first + j, c);
          const Status st = quantizeFormatReference(q, qs);
          QuantInput in{&x, nullptr, {}};
          auto got = quantizeTensor(in, qs);
          if (!st.isOk()) {  // e.g. blocks that do not divide the row: both must refuse
            EXPECT_FALSE(got.hasValue()) << text;
            continue;
          }
          for (int64_t h = 0; h < sh.kvh; ++h)
            for (int64_t j = 0; j < count; ++j)
              for (int64_t c = 0; c < sh.d; ++c) want.at(h, first + j, c) = q.at(h, j, c);
          ASSERT_TRUE(got.hasValue()) << text << ": " << got.status().message();
          ASSERT_EQ(got->reconstruction.data.size(), want.data.size()) << text;
          int64_t differ = 0;
          for (size_t i = 0; i < want.data.size(); ++i) {
            differ += got->reconstruction.data[i] != want.data[i];  // values: the sign of a zero may differ
          }
          EXPECT_EQ(differ, 0) << text << " on [" << sh.kvh << "," << sh.t << "," << sh.d << "]";
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(Pipeline, NonFiniteInAKeptOrQuantizedTokenIsRefusedByEveryPath) {
  for (const char* text : {"int4", "int4,group=8", "q4_0", "int4,axis=channel,group=4", "nvfp4", "int4,axis=tensor",
                           "int4,sinks=2", "int4,residual=3", "fp16", "int4,outliers=0.1"}) {
    for (int64_t token : {0, 5, 9}) {
      Tensor3 x = randomTensor(2, 10, 16, 3);
      x.at(1, token, 7) = token == 5 ? std::numeric_limits<float>::infinity() : std::nanf("");
      QuantInput in{&x, nullptr, {}};
      QuantOutput out;
      const Status st = quantizeTensorInto(in, spec(text), out);
      ASSERT_FALSE(st.isOk()) << text << " token " << token;
      EXPECT_NE(st.message().find("head 1, token " + std::to_string(token) + ", channel 7"), std::string::npos)
          << text << ": " << st.message();
      EXPECT_EQ(out.reconstruction.size(), 0u) << "no half-built result";
    }
  }
}

TEST(Pipeline, NonFiniteBeforeARotationOrOutlierPassIsFoundInEveryLane) {
  // The rotation checks its input as it loads it (AVX-512, D = 32…256), and without rotation the
  // quantizing pass checks what it copies: each lane of a vector, and the last one. With 601
  // tokens the outlier floor samples every second row (0, 2, …), so a bad value in an odd row is
  // found by the passes, not by the sample.
  for (int64_t d : {32, 128}) {
    for (const char* text : {"int4,rot=hadamard", "int4,rot=hadamard,outliers=0.05", "int4,outliers=0.05",
                             "q4_0,rot=hadamard,sinks=1"}) {
      for (const auto& [token, channel] :
           {std::pair<int64_t, int64_t>{1, 0}, {5, 5}, {301, d - 1}, {599, 17}, {599, d - 1}}) {
        Tensor3 x = randomTensor(2, 601, d, 9);
        x.at(1, token, channel) = channel % 2 ? std::numeric_limits<float>::infinity() : -std::nanf("");
        QuantOutput out;
        const Status st = quantizeTensorInto(QuantInput{&x, nullptr, {}}, spec(text), out);
        ASSERT_FALSE(st.isOk()) << text << " D=" << d << " token " << token << " channel " << channel;
        EXPECT_NE(st.message().find("head 1, token " + std::to_string(token) + ", channel " + std::to_string(channel)),
                  std::string::npos)
            << text << ": " << st.message();
      }
    }
  }
}

TEST(Pipeline, NonFiniteInAChannelRunIsFoundInEveryLaneAndTheTail) {
  // Channel runs check 64 channels at a time, then sixteen, then the remaining ones one by one
  // (D = 88: channels 0-63, 64-79 and 80-87); a bad value in any part, in any row of a run, is
  // refused.
  for (const char* text : {"int4,axis=channel,group=4", "int3,sym,axis=channel"}) {
    for (int64_t channel : {0, 63, 64, 79, 80, 87}) {
      Tensor3 x = randomTensor(2, 12, 88, 5);
      x.at(0, 6, channel) = std::nanf("");
      QuantOutput out;
      const Status st = quantizeTensorInto(QuantInput{&x, nullptr, {}}, spec(text), out);
      ASSERT_FALSE(st.isOk()) << text << " channel " << channel;
      EXPECT_NE(st.message().find("head 0, token 6, channel " + std::to_string(channel)), std::string::npos)
          << text << ": " << st.message();
    }
  }
}

TEST(Pipeline, NonFiniteInAGgmlBlockIsFoundInBatchesAndTails) {
  // The ggml kernels read the layer themselves, eight blocks at a time with the rest one by one
  // (45 rows of D = 32: slices of 32 and 13 blocks); a bad value in either is refused.
  for (const char* text : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}) {
    for (int64_t token : {3, 37, 44}) {
      Tensor3 x = randomTensor(2, 45, 32, 6);
      x.at(1, token, 30) = token == 37 ? -std::numeric_limits<float>::infinity() : std::nanf("");
      QuantOutput out;
      const Status st = quantizeTensorInto(QuantInput{&x, nullptr, {}}, spec(text), out);
      ASSERT_FALSE(st.isOk()) << text << " token " << token;
      EXPECT_NE(st.message().find("head 1, token " + std::to_string(token) + ", channel 30"), std::string::npos)
          << text << ": " << st.message();
    }
  }
}

TEST(Pipeline, IntoReusesTheOutputAndMatchesQuantizeTensor) {
  QuantOutput reused;
  const char* specs[] = {"int4,sinks=1,residual=2", "q4_0,outliers=0.01", "int2,axis=channel,group=4",
                         "nf4,residual=30", "int4,rot=hadamard,sinks=31"};
  for (int i = 0; i < 5; ++i) {
    Tensor3 x = randomTensor(2, 30 + i, 16, 40 + uint32_t(i));
    QuantInput in{&x, nullptr, {}};
    const QuantSpec qs = spec(specs[i]);
    ASSERT_TRUE(quantizeTensorInto(in, qs, reused).isOk()) << specs[i];
    auto fresh = quantizeTensor(in, qs);
    ASSERT_TRUE(fresh.hasValue());
    EXPECT_TRUE(reused.reconstruction.sameShape(x)) << specs[i];
    EXPECT_EQ(reused.reconstruction.data, fresh->reconstruction.data) << specs[i];
    EXPECT_EQ(reused.storage.totalBits(), fresh->storage.totalBits());
  }
  Tensor3 x = randomTensor(1, 4, 4, 1);
  QuantOutput alias;
  alias.reconstruction = x;
  QuantInput self{&alias.reconstruction, nullptr, {}};
  EXPECT_FALSE(quantizeTensorInto(self, spec("int4"), alias).isOk());
}

TEST(Outliers, ExactlyCeilFractionPerHeadAreRestoredExactly) {
  // Distinct, well-separated magnitudes make the expected outliers unambiguous; int1 per tensor
  // cannot represent them, so exactly the outliers (and no other value) come back exact.
  const int64_t kvh = 2, t = 10, d = 8, n = t * d;
  Tensor3 x(kvh, t, d);
  std::mt19937 rng(9);
  std::vector<std::vector<int>> perms;
  for (int64_t h = 0; h < kvh; ++h) {
    std::vector<int>& perm = perms.emplace_back(size_t(n));
    for (int i = 0; i < n; ++i) perm[size_t(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t i = 0; i < n; ++i) {
      const float mag = 1.0f + 0.37f * float(perm[size_t(i)]);
      x.data[x.index(h, 0, 0) + size_t(i)] = (i % 3 ? mag : -mag);
    }
  }
  QuantInput in{&x, nullptr, {}};
  const double f = 0.07;  // ceil(0.07 * 80) = ceil(5.6000000000000005) = 6
  auto out = quantizeTensor(in, spec("int1,axis=head,outliers=0.07"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  for (int64_t h = 0; h < kvh; ++h) {
    const float* xv = x.data.data() + x.index(h, 0, 0);
    auto expected = selectOutliers(xv, n, outlierCount(f, n));
    ASSERT_EQ(expected.size(), 6u);
    std::set<int64_t> exp(expected.begin(), expected.end());
    // Independent check: the 6 largest magnitudes are those with perm >= n - 6.
    for (int64_t i : expected) EXPECT_GE(perms[size_t(h)][size_t(i)], n - 6);
    int64_t exact = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool same = out->reconstruction.data[x.index(h, 0, 0) + size_t(i)] == xv[i];
      if (exp.count(i)) {
        EXPECT_TRUE(same) << "outlier " << i << " of head " << h << " not exact";
      }
      exact += same;
    }
    EXPECT_EQ(exact, 6) << "head " << h << ": only outliers should be exact under int1";
  }
  EXPECT_EQ(out->storage.outlierBits, 48.0 * 6 * kvh);
}

TEST(Pipeline, HadamardWithOutliersReconstructsOutliersInRotatedSpace) {
  // A rotation plus a lossless format is (up to float rounding) the identity.
  Tensor3 x = randomTensor(2, 12, 32, 12);
  QuantInput in{&x, nullptr, {}};
  auto out = quantizeTensor(in, spec("fp16,rot=hadamard,outliers=0.05"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  EXPECT_LT(maxAbsDiff(out->reconstruction, x), 5e-3);
  auto bad = quantizeTensor(in, spec("int4,rot=hadamard"));
  ASSERT_TRUE(bad.hasValue());
  Tensor3 odd = randomTensor(1, 4, 12, 1);
  QuantInput oddIn{&odd, nullptr, {}};
  auto refused = quantizeTensor(oddIn, spec("int4,rot=hadamard"));
  ASSERT_FALSE(refused.hasValue());
  EXPECT_NE(refused.status().message().find("power of two"), std::string::npos);
}

TEST(Pipeline, RefusesNonFiniteInput) {
  Tensor3 x = randomTensor(1, 4, 4, 1);
  x.at(0, 2, 1) = std::nanf("");
  QuantInput in{&x, nullptr, {}};
  auto out = quantizeTensor(in, spec("int4"));
  ASSERT_FALSE(out.hasValue());
  EXPECT_NE(out.status().message().find("token 2, channel 1"), std::string::npos) << out.status().message();
}

TEST(Pipeline, ProgressCanCancelBetweenHeads) {
  Tensor3 x = randomTensor(4, 16, 16, 1);
  QuantInput in{&x, nullptr, {}};
  int calls = 0;
  auto out = quantizeTensor(in, spec("int4,outliers=0.01"), [&](double, std::string_view) { return ++calls < 2; });
  ASSERT_FALSE(out.hasValue());
  EXPECT_EQ(out.status().code(), StatusCode::Cancelled);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

TEST(Pipeline, OnePassPathCancelsAndLeavesNoResult) {
  // Per-token groups with no rotation or outliers take the one-pass path. The calling thread
  // reports; with one thread it runs every piece, so the number of reports is deterministic.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor3 x = randomTensor(4, 2048, 128, 5);
  QuantInput in{&x, nullptr, {}};
  for (int allowed : {0, 3}) {
    int calls = 0;
    QuantOutput out;
    const Status st = quantizeTensorInto(in, spec("int4,group=32"), out, [&](double, std::string_view) {
      return calls++ < allowed;
    });
    EXPECT_EQ(st.code(), StatusCode::Cancelled) << "allowed " << allowed;
    EXPECT_EQ(out.reconstruction.size(), 0u);
    EXPECT_EQ(calls, allowed + 1) << "reports stop at the first refusal";
  }
  int calls = 0;
  QuantOutput out;
  ASSERT_TRUE(quantizeTensorInto(in, spec("int4,group=32"), out, [&](double, std::string_view) {
    ++calls;
    return true;
  }).isOk());
  EXPECT_GT(calls, 2) << "progress is reported while the pass runs, not only at the end";
  omp_set_num_threads(threads);
}

}  // namespace
}  // namespace kvscope
