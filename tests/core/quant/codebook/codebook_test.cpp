// SPDX-License-Identifier: GPL-3.0-or-later
// The codebooks of quantization.md §11 against independent facts: closed forms (D = 3 is the
// uniform density, b = 1 has centroid E|t|), exact polynomial integration (odd D), the Gaussian
// Lloyd–Max quantizer in the large-D limit (Max 1960, Table I), the distortions the TurboQuant
// paper quotes, tqp's unbiased inner products, and nuq's k-means worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "core/quant/codebook.h"
#include "core/quant/fp_types.h"
#include "core/quant/rng.h"

namespace kvscope::codebook {
namespace {

// E[t | t > 0] for f(t) ∝ (1 − t²)^((D−3)/2): ∫₀¹ t (1 − t²)^((D−3)/2) dt = 1/(D − 1), and the
// normalizer of f is Γ(D/2) / (√π Γ((D−1)/2)), so E|t| = 2 Γ(D/2) / (√π Γ((D−1)/2) (D − 1)).
double halfMean(int dim) {
  const double logC = std::lgamma(dim / 2.0) - std::lgamma((dim - 1) / 2.0) - 0.5 * std::log(std::numbers::pi);
  return 2.0 * std::exp(logC) / (dim - 1);
}

TEST(SphereCodebook, DimThreeIsTheUniformQuantizer) {
  // D = 3: f is constant on [−1, 1] (Archimedes), whose Lloyd–Max quantizer is uniform.
  for (int bits = 1; bits <= 5; ++bits) {
    const SphereCodebook book = solveSphereCodebook(3, bits);
    const int k = 1 << bits;
    ASSERT_EQ(static_cast<int>(book.centroids.size()), k);
    for (int i = 0; i < k; ++i) EXPECT_NEAR(book.centroids[i], (2.0 * i + 1.0) / k - 1.0, 1e-12) << bits << " " << i;
    EXPECT_NEAR(book.distortion, (4.0 / (k * k)) / 12.0, 1e-13);  // step²/12
  }
}

TEST(SphereCodebook, OneBitCentroidIsTheHalfMean) {
  for (int dim : {2, 5, 8, 64, 128, 1000}) {
    const SphereCodebook book = solveSphereCodebook(dim, 1);
    EXPECT_NEAR(book.centroids[1], halfMean(dim), 1e-13) << dim;
    EXPECT_NEAR(book.centroids[0], -halfMean(dim), 1e-13) << dim;
  }
  EXPECT_NEAR(solveSphereCodebook(2, 1).centroids[1], 2.0 / std::numbers::pi, 1e-14);  // arcsine law
}

TEST(SphereCodebook, IsSymmetricAndAscending) {
  for (int dim : {2, 8, 96, 128, 256}) {
    for (int bits = 1; bits <= 8; ++bits) {
      const SphereCodebook& book = sphereCodebook(dim, bits);
      const size_t k = book.centroids.size();
      for (size_t i = 0; i < k; ++i) {
        EXPECT_EQ(book.centroids[i], -book.centroids[k - 1 - i]) << dim << " " << bits;
        if (i + 1 < k) {
          EXPECT_LT(book.centroids[i], book.centroids[i + 1]);
        }
      }
      EXPECT_LE(book.lastMove, 1e-12) << dim << " " << bits;
      EXPECT_LE(book.asymmetry, 1e-12) << dim << " " << bits;  // the solve itself was symmetric
      EXPECT_GT(book.centroids.front(), -1.0);
      EXPECT_LT(book.centroids.back(), 1.0);
    }
  }
}

// For odd D, f = (1 − t²)^m with m = (D − 3)/2 an integer: a polynomial whose moments have
// exact antiderivatives, an integration independent of the θ-space quadrature.
struct Poly {
  std::vector<double> a;  // a[k] t^k
};
Poly densityPoly(int m) {
  Poly p{{1.0}};
  for (int r = 0; r < m; ++r) {
    std::vector<double> next(p.a.size() + 2, 0.0);
    for (size_t k = 0; k < p.a.size(); ++k) {
      next[k] += p.a[k];
      next[k + 2] -= p.a[k];
    }
    p.a = next;
  }
  return p;
}
double integratePoly(const Poly& p, int shift, double lo, double hi) {
  double s = 0.0;
  for (size_t k = 0; k < p.a.size(); ++k) {
    const int e = static_cast<int>(k) + shift + 1;
    s += p.a[k] * (std::pow(hi, e) - std::pow(lo, e)) / e;
  }
  return s;
}

TEST(SphereCodebook, IsAFixedPointOfLloydUnderExactIntegration) {
  for (int dim : {5, 9, 15}) {
    const Poly f = densityPoly((dim - 3) / 2);
    for (int bits = 1; bits <= 5; ++bits) {
      const SphereCodebook book = solveSphereCodebook(dim, bits);
      const size_t k = book.centroids.size();
      for (size_t i = 0; i < k; ++i) {
        const double lo = i == 0 ? -1.0 : book.boundaries[i - 1];
        const double hi = i + 1 == k ? 1.0 : book.boundaries[i];
        const double centroid = integratePoly(f, 1, lo, hi) / integratePoly(f, 0, lo, hi);
        EXPECT_NEAR(book.centroids[i], centroid, 1e-12) << dim << " " << bits << " " << i;
      }
    }
  }
}

TEST(SphereCodebook, QuadratureIntegratesTheDensityExactly) {
  // ∫ f over [−1, 1] is the Beta function B(½, (D−1)/2).
  for (int dim : {2, 3, 4, 7, 128, 4096}) {
    const double beta = std::exp(std::lgamma(0.5) + std::lgamma((dim - 1) / 2.0) - std::lgamma(dim / 2.0));
    // lgamma(2047.5) ≈ 13560 carries an absolute error near 1e-12, which exp turns relative.
    const double tolerance = dim > 1000 ? 1e-11 : 1e-13;
    EXPECT_NEAR(sphereCell(dim, -1.0, 1.0).mass / beta, 1.0, tolerance) << dim;
  }
}

TEST(SphereCodebook, LargeDimensionApproachesTheGaussianLloydMaxQuantizer) {
  // Max (1960), Table I: unit-variance Gaussian, 2 levels ±0.7979, 4 levels ±0.4528, ±1.510.
  const int dim = 100000;
  const double root = std::sqrt(static_cast<double>(dim));
  const SphereCodebook one = solveSphereCodebook(dim, 1);
  EXPECT_NEAR(one.centroids[1] * root, std::sqrt(2.0 / std::numbers::pi), 2e-5);
  const SphereCodebook two = solveSphereCodebook(dim, 2);
  EXPECT_NEAR(two.centroids[2] * root, 0.4528, 1e-4);
  EXPECT_NEAR(two.centroids[3] * root, 1.5104, 1e-4);
  EXPECT_NEAR(two.centroids[0] * root, -1.5104, 1e-4);
}

TEST(SphereCodebook, DistortionAtDim128MatchesTheTurboQuantFigures) {
  // The paper (Zandieh et al. 2025, Theorem 1) quotes D_mse = E‖u − û‖² ≈ 0.36, 0.117, 0.03,
  // 0.009 for b = 1…4: the Gaussian Lloyd–Max distortions 0.3634, 0.1175, 0.03454, 0.009497
  // (Max 1960), rounded. E‖u − û‖² = D·E[(t − q(t))²].
  const double gaussian[] = {0.3634, 0.1175, 0.03454, 0.009497};
  for (int bits = 1; bits <= 4; ++bits) {
    const double dmse = 128 * sphereCodebook(128, bits).distortion;
    EXPECT_NEAR(dmse / gaussian[bits - 1], 1.0, 0.03) << bits;
  }
}

std::vector<float> randomUnitVectors(int count, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<float> v(static_cast<size_t>(count) * dim);
  for (int r = 0; r < count; ++r) {
    double n = 0;
    std::vector<double> g(dim);
    for (double& x : g) {
      x = normal(rng);
      n += x * x;
    }
    for (int j = 0; j < dim; ++j) v[static_cast<size_t>(r) * dim + j] = static_cast<float>(g[j] / std::sqrt(n));
  }
  return v;
}

double meanSquaredDistance(const std::vector<float>& a, const std::vector<float>& b, int dim) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return e / (static_cast<double>(a.size()) / dim);
}

TEST(TqKernel, RandomUnitVectorsShowTheComputedDistortion) {
  const int dim = 128, count = 4000;
  const std::vector<float> u = randomUnitVectors(count, dim, 7);
  for (int bits = 1; bits <= 4; ++bits) {
    std::vector<float> q = u;
    tqRows(q.data(), count, dim, bits, MetaType::Fp32);
    const double expected = dim * sphereCodebook(dim, bits).distortion;
    EXPECT_NEAR(meanSquaredDistance(u, q, dim) / expected, 1.0, 0.02) << bits;
  }
}

TEST(TqKernel, ScalesByTheStoredNormAndTiesGoLow) {
  // A vector along one axis: u = e_0, its other coordinates 0 sit exactly between the two middle
  // centroids of the symmetric codebook, so they take the lower (negative) one.
  const int dim = 16;
  std::vector<float> v(dim, 0.0f);
  v[0] = 3.0f;
  std::vector<float> q = v;
  tqRows(q.data(), 1, dim, 2, MetaType::Fp16);
  const SphereCodebook& book = sphereCodebook(dim, 2);
  EXPECT_EQ(q[0], 3.0f * book.levels[3]);
  for (int j = 1; j < dim; ++j) EXPECT_EQ(q[j], 3.0f * book.levels[1]) << j;
  // The norm is stored in fp16: 1 + 2^-12 rounds to 1.
  std::vector<float> w(dim, 0.0f);
  w[0] = 1.0f + 0x1p-12f;
  tqRows(w.data(), 1, dim, 2, MetaType::Fp16);
  EXPECT_EQ(w[0], book.levels[3]);
  std::vector<float> zero(dim, 0.0f);
  tqRows(zero.data(), 1, dim, 3, MetaType::Fp16);
  for (float z : zero) EXPECT_EQ(z, 0.0f);
}

TEST(TqKernel, FastMatchesReferenceBitForBit) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int dim : {8, 64, 96, 128}) {
    for (int bits : {1, 3, 4, 5, 8}) {
      std::vector<float> x(static_cast<size_t>(37) * dim);
      for (float& v : x) v = normal(rng);
      std::vector<float> fast = x, ref = x;
      tqRows(fast.data(), 37, dim, bits, MetaType::Fp16);
      tqRowsReference(ref.data(), 37, dim, bits, MetaType::Fp16);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(fast[i], ref[i]) << dim << " " << bits << " " << i;
      if (bits >= 2) {
        fast = x;
        ref = x;
        tqpRows(fast.data(), 37, dim, bits, MetaType::Bf16, 11);
        tqpRowsReference(ref.data(), 37, dim, bits, MetaType::Bf16, 11);
        for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(fast[i], ref[i]) << "tqp " << dim << " " << bits << " " << i;
      }
    }
  }
}

TEST(QjlMatrix, IsTheSeedPlusOneNormalStreamRowMajor) {
  const auto m = qjlMatrix(4, 41);
  NormalStream normal(42);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      const auto expected = static_cast<float>(normal.next());
      EXPECT_EQ(m->s[static_cast<size_t>(i) * 4 + j], expected);
      EXPECT_EQ(m->st[static_cast<size_t>(j) * 4 + i], expected);
    }
  }
}

TEST(TqpKernel, InnerProductsAreUnbiasedOverSeeds) {
  // For a fixed v and y, E_S⟨y, v̂⟩ = ⟨y, v⟩ (TurboQuant Theorem 2), while tq's own ⟨y, û⟩ is
  // off by a fixed amount: for y = v/‖v‖ about −‖v‖·‖r‖², since the MSE centroids leave r
  // orthogonal to û on average. Over 2000 seeds the mean lands within 4 standard errors of the
  // truth, while tq<b−1>'s error alone is many standard errors away (so the test can fail).
  const int dim = 64, seeds = 2000, bits = 3;
  const std::vector<float> both = randomUnitVectors(2, dim, 5);
  std::vector<float> v(both.begin(), both.begin() + dim);
  const std::vector<float> random(both.begin() + dim, both.end());
  const std::vector<float> along = v;
  for (float& x : v) x *= 2.5f;
  for (const std::vector<float>* y : {&along, &random}) {
    auto dot = [&](const std::vector<float>& a) {
      double s = 0;
      for (int j = 0; j < dim; ++j) s += static_cast<double>(a[j]) * (*y)[j];
      return s;
    };
    const double truth = dot(v);
    double sum = 0, sumSq = 0;
    for (int seed = 0; seed < seeds; ++seed) {
      std::vector<float> q = v;
      tqpRows(q.data(), 1, dim, bits, MetaType::Fp32, static_cast<uint64_t>(seed) * 7919);
      const double e = dot(q) - truth;
      sum += e;
      sumSq += e * e;
    }
    const double mean = sum / seeds;
    const double stderr = std::sqrt((sumSq / seeds - mean * mean) / seeds);
    EXPECT_LT(std::fabs(mean), 4 * stderr);
    if (y == &along) {
      std::vector<float> mse = v;
      tqRows(mse.data(), 1, dim, bits - 1, MetaType::Fp32);
      EXPECT_GT(std::fabs(dot(mse) - truth), 10 * stderr);
    }
  }
}

TEST(TqpKernel, MeanSquaredErrorExceedsTqOfTheSameBits) {
  // r̂ = (√(π/2)/D)·γ·Sᵀ sign(S r) has E⟨r̂, r⟩ = γ² and E‖r̂‖² = γ²(π/2 + (D − 1)/D) (the
  // cross terms of Sᵀz pair |g_i||g_k| along r, mean 2/π each), so E‖r − r̂‖² = (π/2 − 1/D)·γ²:
  // tqp<b> trades MSE for unbiased inner products, above even tq<b−1>'s error.
  const int dim = 128, count = 2000;
  const std::vector<float> u = randomUnitVectors(count, dim, 9);
  for (int bits = 2; bits <= 4; ++bits) {
    std::vector<float> prod = u, mse = u, lower = u;
    tqpRows(prod.data(), count, dim, bits, MetaType::Fp32, 0);
    tqRows(mse.data(), count, dim, bits, MetaType::Fp32);
    tqRows(lower.data(), count, dim, bits - 1, MetaType::Fp32);
    const double ep = meanSquaredDistance(u, prod, dim), em = meanSquaredDistance(u, mse, dim);
    EXPECT_GT(ep, 2.0 * em) << bits;
    EXPECT_NEAR(ep / meanSquaredDistance(u, lower, dim), std::numbers::pi / 2 - 1.0 / dim, 0.03) << bits;
  }
}

// ---- nuq ------------------------------------------------------------------------------------

TEST(NuqKmeans, TwoClustersByHand) {
  // Sorted values 0..3, 10..13, 20, 21 (in 32nds); start at indices ⌊0.5·10/2⌋ = 2 and
  // ⌊1.5·10/2⌋ = 7: 2/32 and 12/32. Round 1, midpoint 7/32: means 1.5/32 and 87/6/32 = 14.5/32.
  // Round 2, midpoint 8/32: the same cells, nothing moves.
  std::vector<float> y;
  for (float v : {13.0f, 0.0f, 21.0f, 2.0f, 11.0f, 1.0f, 20.0f, 3.0f, 12.0f, 10.0f}) y.push_back(v / 32.0f);
  const NuqCodebook book = nuqKmeans(y, 1);
  ASSERT_EQ(book.levels.size(), 2u);
  EXPECT_EQ(book.levels[0], 1.5f / 32.0f);
  EXPECT_EQ(book.levels[1], 14.5f / 32.0f);
  EXPECT_EQ(book.rounds, 2);
}

TEST(NuqKmeans, AMidpointValueGoesToTheLowerCentroid) {
  // {0, 0.25, 0.5}: start 0 and 0.5; 0.25 is equidistant and joins the lower: 0.125 and 0.5.
  const NuqCodebook book = nuqKmeans({0.5f, 0.0f, 0.25f}, 1);
  EXPECT_EQ(book.levels[0], 0.125f);
  EXPECT_EQ(book.levels[1], 0.5f);
}

TEST(NuqKmeans, EqualStartsSeparateThroughTheEmptyCentroid) {
  // {0, 0, 0, 0, 1}: both starts are 0 (indices 1 and 3). Round 1: every value is as near to
  // centroid 0 as to centroid 1, so centroid 0 takes all (mean 0.2) and centroid 1 stays at 0.
  // Round 2: the zeros go to centroid 1 (0), the 1 to centroid 0 (1). Round 3: nothing moves.
  const NuqCodebook book = nuqKmeans({0.0f, 0.0f, 1.0f, 0.0f, 0.0f}, 1);
  EXPECT_EQ(book.levels[0], 0.0f);
  EXPECT_EQ(book.levels[1], 1.0f);
  EXPECT_EQ(book.rounds, 3);
}

TEST(NuqKmeans, FewerValuesThanCentroidsAndFp16Rounding) {
  const NuqCodebook single = nuqKmeans({0.5f}, 2);
  ASSERT_EQ(single.levels.size(), 4u);
  for (float l : single.levels) EXPECT_EQ(l, 0.5f);
  EXPECT_EQ(nuqIndex(single, 0.5f), 0);  // equal levels: the lowest index
  // 0.1 and 0.2 are their own centroids; stored in fp16 (0x2E66, 0x3266).
  const NuqCodebook two = nuqKmeans({0.2f, 0.1f}, 1);
  EXPECT_EQ(two.levels[0], 0.0999755859375f);
  EXPECT_EQ(two.levels[1], 0.199951171875f);
  EXPECT_EQ(nuqIndex(two, 0.149963378f), 0);  // below the stored midpoint 0.14996337890625
  EXPECT_EQ(nuqIndex(two, 0.14996337890625f), 0);
  EXPECT_EQ(nuqIndex(two, 0.15f), 1);
  const NuqCodebook empty = nuqKmeans({}, 2);
  for (float l : empty.levels) EXPECT_EQ(l, 0.0f);
}

// Lloyd's algorithm the slow way: every value against every centroid.
std::vector<double> bruteKmeans(std::vector<float> y, int bits) {
  std::sort(y.begin(), y.end());
  const size_t k = size_t{1} << bits, n = y.size();
  std::vector<double> c(k);
  for (size_t i = 0; i < k; ++i) c[i] = y[static_cast<size_t>(std::floor((i + 0.5) * n / k))];
  for (int round = 0; round < 100; ++round) {
    std::vector<double> sum(k, 0.0);
    std::vector<size_t> count(k, 0);
    for (float v : y) {
      size_t best = 0;
      for (size_t j = 1; j < k; ++j) {
        if (std::fabs(v - c[j]) < std::fabs(v - c[best])) best = j;
      }
      sum[best] += v;
      ++count[best];
    }
    double moved = 0;
    for (size_t j = 0; j < k; ++j) {
      if (count[j] == 0) continue;
      const double m = sum[j] / static_cast<double>(count[j]);
      moved = std::max(moved, std::fabs(m - c[j]));
      c[j] = m;
    }
    if (moved <= 1e-7) break;
  }
  std::sort(c.begin(), c.end());
  return c;
}

TEST(NuqKmeans, MatchesBruteForceLloydOnRandomValues) {
  std::mt19937 rng(17);
  std::student_t_distribution<float> heavy(3.0f);
  for (int bits : {2, 3, 4}) {
    std::vector<float> y(5000);
    for (float& v : y) v = std::clamp(heavy(rng) / 8.0f, -1.0f, 1.0f);
    const NuqCodebook book = nuqKmeans(y, bits);
    const std::vector<double> expected = bruteKmeans(y, bits);
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(book.centroids[i], expected[i], 1e-9) << bits << " " << i;
  }
}

TEST(NuqKmeans, RadixSortedLargeInputMatchesSmallPath) {
  // Above 4096 values the sort is a radix sort: negative values, zeros of both signs.
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> y(20000);
  for (float& v : y) v = uni(rng);
  y[5] = -0.0f;
  y[6] = 0.0f;
  const NuqCodebook book = nuqKmeans(y, 3);
  const std::vector<double> expected = bruteKmeans(y, 3);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(book.centroids[i], expected[i], 1e-9) << i;
}

}  // namespace
}  // namespace kvscope::codebook

namespace kvscope::codebook {
namespace {

Tensor3 heavyTensor(int64_t h, int64_t t, int64_t d, uint32_t seed) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::student_t_distribution<float> heavy(4.0f);
  for (float& v : x.data) v = heavy(rng);
  for (size_t i = 0; i < x.data.size(); i += 131) x.data[i] = 0.0f;
  return x;
}

TEST(NuqTensor, FastMatchesReferenceForEveryAxisGroupAndClip) {
  const Tensor3 x = heavyTensor(3, 45, 24, 31);
  for (Axis axis : {Axis::Token, Axis::Channel, Axis::Head, Axis::Tensor}) {
    for (int group : {0, 8, 7}) {
      if (group != 0 && (axis == Axis::Head || axis == Axis::Tensor)) continue;
      for (Clip clip : {Clip{}, Clip{Clip::Kind::Percentile, 0.9}}) {
        for (int bits : {2, 4, 6}) {
          QuantSpec spec;
          spec.format = FormatId::Nuq;
          spec.bits = bits;
          spec.axis = axis;
          spec.group = group;
          spec.clip = clip;
          Tensor3 fast = x, ref = x;
          const NuqCodebook a = quantizeNuqTensor(fast, spec);
          const NuqCodebook b = quantizeNuqTensorReference(ref, spec);
          ASSERT_EQ(a.levels, b.levels);
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_EQ(fast.data[i], ref.data[i]) << axisName(axis) << " " << group << " " << bits << " " << i;
          }
        }
      }
    }
  }
}

TEST(NuqTensor, ReconstructsFromTheStoredLevelsAndScales) {
  // Two tokens of one head, per-token groups: scales meta(4) = 4 and meta(1) = 1, so the y are
  // {−1, −0.5, 0.5, 1} and {1, 0, 0, −1}. Sorted: −1, −1, −0.5, 0, 0, 0.5, 1, 1; 2 bits start at
  // indices ⌊(i + ½)·8/4⌋ = 1, 3, 5, 7: −1, 0, 0.5, 1. Round 1: −0.5 is equidistant from −1 and
  // 0 and joins the lower, so the cells are {−1, −1, −0.5}, {0, 0}, {0.5}, {1, 1}: centroids
  // −5/6, 0, 0.5, 1. Round 2 keeps the cells. fp16(−5/6) = −1707·2^−11 = −0.83349609375.
  Tensor3 x(1, 2, 4);
  x.data = {-4.0f, -2.0f, 2.0f, 4.0f, 1.0f, 0.0f, 0.0f, -1.0f};
  QuantSpec spec;
  spec.format = FormatId::Nuq;
  spec.bits = 2;
  Tensor3 q = x;
  const NuqCodebook book = quantizeNuqTensor(q, spec);
  EXPECT_EQ(book.levels, (std::vector<float>{-0.83349609375f, 0.0f, 0.5f, 1.0f}));
  EXPECT_EQ(book.rounds, 2);
  const float l0 = book.levels[0];
  EXPECT_EQ(q.data, (std::vector<float>{4 * l0, 4 * l0, 2.0f, 4.0f, 1.0f, 0.0f, 0.0f, l0}));
}

}  // namespace
}  // namespace kvscope::codebook
