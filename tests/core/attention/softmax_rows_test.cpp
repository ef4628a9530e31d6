// SPDX-License-Identifier: GPL-3.0-or-later
// The fused row passes (core/attention/softmax_rows.h) against the Eigen expressions they replace,
// bit for bit: Eigen's exp and sum as this build computes them are the independent expectation
// (the test is compiled like the engine, for the baseline x86-64, where Eigen uses SSE2 packets),
// the passes run in whichever clone the CPU picks.
#include "core/attention/softmax_rows.h"

#include <gtest/gtest.h>

#include <Eigen/Dense>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/attention/attention.h"
#include "core/attention/engine.h"

namespace kvscope::attention_engine {
namespace {

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Scores of a row as a GEMM gives them: a spread like real attention's, so that exp underflows
// for some and the probabilities span many orders of magnitude.
std::vector<float> randomScores(int64_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> s(static_cast<size_t>(n));
  for (float& v : s) v = g(rng);
  return s;
}

TEST(SoftmaxRows, PacketExpEqualsEigensOnTheBaselineBuild) {
  std::vector<double> x;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> wide(-800.0, 5.0), narrow(-1.0, 1.0);
  for (int i = 0; i < 20000; ++i) x.push_back(wide(rng));
  for (int i = 0; i < 20000; ++i) x.push_back(narrow(rng));
  for (double v : {0.0, -0.0, -1e-300, 1e-300, -0.5, -0.34657359027997264, -708.39, -708.4, -709.78, -709.784,
                   -709.79, -745.1, -800.0, 709.7, 709.784, 710.0, -1e-17, std::ldexp(1.0, -1074)}) {
    x.push_back(v);
  }
  if (x.size() % 2) x.push_back(-1.0);  // an even count: Eigen computes every element with packets
  Eigen::ArrayXd in = Eigen::Map<const Eigen::ArrayXd>(x.data(), static_cast<Eigen::Index>(x.size()));
  Eigen::ArrayXd expected = in.exp();
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(bits(eigenPacketExp(x[i])), bits(expected[static_cast<Eigen::Index>(i)])) << "exp(" << x[i] << ")";
  }
}

TEST(SoftmaxRows, OrderSumEqualsEigensSum) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> mag(-30.0, 30.0);
  std::uniform_int_distribution<int> sign(0, 1);
  for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 17, 31, 33, 63, 64, 65, 1000, 8161}) {
    for (int rep = 0; rep < 20; ++rep) {
      // Magnitudes 2^±30 of both signs: the order of the additions shows in the result.
      std::vector<double> v(static_cast<size_t>(n));
      for (double& x : v) x = (sign(rng) ? 1.0 : -1.0) * std::exp2(mag(rng));
      const double expected = Eigen::Map<const Eigen::ArrayXd>(v.data(), n).sum();
      ASSERT_EQ(bits(eigenOrderSum(v.data(), n)), bits(expected)) << "n = " << n;
    }
  }
}

// One row through the engine's Eigen expressions (attention.cpp, eigenRow) and through the
// passes, every intermediate compared.
TEST(SoftmaxRows, RowPassesEqualTheEigenExpressions) {
  const double scale = 1.0 / std::sqrt(128.0);
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33, 40, 127, 1000, 4097, 8161}) {
    for (float sigma : {1.0f, 40.0f, 400.0f}) {
      const std::vector<float> s = randomScores(n, static_cast<uint32_t>(n) * 7 + 1, sigma);
      std::vector<float> ds = randomScores(n, static_cast<uint32_t>(n) * 7 + 2, sigma * 0.01f);
      using MapAF = Eigen::Map<const Eigen::ArrayXf>;
      // Eigen: as the engine writes it, into arrays from the heap (16-byte aligned).
      Eigen::ArrayXd sd = MapAF(s.data(), n).cast<double>() * scale;
      Eigen::ArrayXd dd = MapAF(ds.data(), n).cast<double>() * scale;
      Eigen::ArrayXd sh = sd + dd;
      const double m1 = sd.maxCoeff(), m2 = sh.maxCoeff();
      Eigen::ArrayXd p = (sd - m1).exp();
      const double z1 = p.sum();
      p /= z1;
      Eigen::ArrayXd ph = (sh - m2).exp();
      const double z2 = ph.sum();
      ph /= z2;
      const double weighted = (p * dd).sum();
      const double absSum = dd.abs().sum(), absMax = dd.abs().maxCoeff();

      const RowScan scan = scanScores(s.data(), ds.data(), n, scale);
      ASSERT_TRUE(scan.finite);
      EXPECT_EQ(bits(scan.maxScore), bits(m1));
      EXPECT_EQ(bits(scan.maxScoreHat), bits(m2));
      EXPECT_EQ(bits(scan.absDeltaSum), bits(absSum)) << "n = " << n;
      EXPECT_EQ(bits(scan.absDeltaMax), bits(absMax));
      std::vector<double> e(static_cast<size_t>(n)), eh(static_cast<size_t>(n));
      const double y1 = expScores(s.data(), nullptr, n, scale, m1, e.data());
      const double y2 = expScores(s.data(), ds.data(), n, scale, m2, eh.data());
      ASSERT_EQ(bits(y1), bits(z1)) << "n = " << n << ", sigma = " << sigma;
      ASSERT_EQ(bits(y2), bits(z2)) << "n = " << n << ", sigma = " << sigma;
      std::vector<float> prob(static_cast<size_t>(n)), delta(static_cast<size_t>(n)), hat(static_cast<size_t>(n));
      const double w = normalizeRow(e.data(), e.data(), true, y1, eh.data(), y2, ds.data(), scale, n,
                                    RowOutputs{prob.data(), delta.data(), hat.data()});
      EXPECT_EQ(bits(w), bits(weighted)) << "n = " << n << ", sigma = " << sigma;
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(bits(e[static_cast<size_t>(j)]), bits(p[j])) << "p, n = " << n << ", j = " << j;
        ASSERT_EQ(bits(eh[static_cast<size_t>(j)]), bits(ph[j])) << "p̂, n = " << n << ", j = " << j;
        ASSERT_EQ(bits(prob[static_cast<size_t>(j)]), bits(gemmFloat(p[j])));
        ASSERT_EQ(bits(delta[static_cast<size_t>(j)]), bits(gemmFloat(ph[j] - p[j])));
        ASSERT_EQ(bits(hat[static_cast<size_t>(j)]), bits(gemmFloat(ph[j])));
      }
      // The argmax candidates: every j within the threshold, ascending.
      const double threshold = m2 - 0.5;
      std::vector<int64_t> got, want;
      candidatesAtLeast(s.data(), ds.data(), n, scale, threshold, got);
      for (int64_t j = 0; j < n; ++j) {
        if (sh[j] >= threshold) want.push_back(j);
      }
      EXPECT_EQ(got, want);
    }
  }
}

TEST(SoftmaxRows, NonFiniteScoresAreFlagged) {
  std::vector<float> s = randomScores(40, 9, 1.0f), ds(40, 0.0f);
  EXPECT_TRUE(scanScores(s.data(), ds.data(), 40, 0.1).finite);
  s[37] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(scanScores(s.data(), ds.data(), 40, 0.1).finite);
  s[37] = 1.0f;
  ds[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(scanScores(s.data(), ds.data(), 40, 0.1).finite);
  EXPECT_TRUE(scanScores(s.data(), nullptr, 40, 0.1).finite);  // only s is looked at
}

TEST(SoftmaxRows, GemmFloatFlushesBelowTheSmallestNormalFloat) {
  EXPECT_EQ(gemmFloat(1e-39), 0.0f);
  EXPECT_EQ(gemmFloat(-1e-39), 0.0f);
  EXPECT_EQ(gemmFloat(static_cast<double>(FLT_MIN)), FLT_MIN);
  EXPECT_EQ(gemmFloat(0.25), 0.25f);
  EXPECT_EQ(gemmFloat(1.0 / 3.0), static_cast<float>(1.0 / 3.0));
}

// The whole engine with and without the passes: every metric of every kv head, bit for bit.
Tensor3 randomTensor(int64_t h, int64_t t, int64_t d, uint32_t seed, float sigma) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sigma);
  for (float& v : x.data) v = g(rng);
  return x;
}

void expectSameBits(const std::vector<AttentionCases>& a, const std::vector<AttentionCases>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t g = 0; g < a.size(); ++g) {
    const AttentionMetrics* x[] = {&a[g].keyOnly, &a[g].valueOnly, &a[g].joint};
    const AttentionMetrics* y[] = {&b[g].keyOnly, &b[g].valueOnly, &b[g].joint};
    for (int c = 0; c < 3; ++c) {
      const double fx[] = {x[c]->scoreMae, x[c]->scoreMax, x[c]->klMean, x[c]->klMax, x[c]->top1Agreement,
                           x[c]->outputRelError};
      const double fy[] = {y[c]->scoreMae, y[c]->scoreMax, y[c]->klMean, y[c]->klMax, y[c]->top1Agreement,
                           y[c]->outputRelError};
      for (int f = 0; f < 6; ++f) EXPECT_EQ(bits(fx[f]), bits(fy[f])) << "kv head " << g << " case " << c << " field " << f;
    }
  }
}

struct FusedRowsOff {
  FusedRowsOff() { fusedRows() = false; }
  ~FusedRowsOff() { fusedRows() = true; }
};

TEST(SoftmaxRows, EngineResultsDoNotDependOnThePasses) {
  struct Shape {
    int64_t heads, kvHeads, tokens, queries, dim;
    int last;
    float sigma;
  };
  for (const Shape& sh : {Shape{4, 2, 384, 16, 128, 0, 1.0f}, Shape{8, 2, 301, 12, 64, 0, 3.0f},
                          Shape{3, 3, 97, 9, 32, 4, 1.0f}, Shape{6, 2, 1030, 33, 16, 0, 6.0f},
                          Shape{2, 1, 5, 5, 4, 0, 1.0f}}) {
    const Tensor3 q = randomTensor(sh.heads, sh.queries, sh.dim, 1, sh.sigma);
    const Tensor3 k = randomTensor(sh.kvHeads, sh.tokens, sh.dim, 2, sh.sigma);
    const Tensor3 v = randomTensor(sh.kvHeads, sh.tokens, sh.dim, 3, 1.0f);
    Tensor3 kh = k, vh = v;
    std::mt19937 rng(4);
    std::normal_distribution<float> noise(0.0f, 0.05f);
    for (float& x : kh.data) x += noise(rng);
    for (float& x : vh.data) x += noise(rng);
    AttentionInput in;
    in.query = &q;
    in.key = &k;
    in.value = &v;
    in.keyHat = &kh;
    in.valueHat = &vh;
    in.lastQueries = sh.last;
    auto fused = attentionMetrics(in);
    ASSERT_TRUE(fused.hasValue()) << fused.status().message();
    auto baseline = prepareAttentionBaseline(in);
    ASSERT_TRUE(baseline.hasValue());
    auto fusedKeys = attentionMetrics(in, AttentionCaseSelection{true, false, false}, **baseline);
    auto fusedValues = attentionMetrics(in, AttentionCaseSelection{false, true, false}, **baseline);
    ASSERT_TRUE(fusedKeys.hasValue() && fusedValues.hasValue());
    FusedRowsOff off;
    auto eigen = attentionMetrics(in);
    ASSERT_TRUE(eigen.hasValue());
    expectSameBits(*fused, *eigen);
    auto eigenBaseline = prepareAttentionBaseline(in);
    ASSERT_TRUE(eigenBaseline.hasValue());
    auto eigenKeys = attentionMetrics(in, AttentionCaseSelection{true, false, false}, **eigenBaseline);
    auto eigenValues = attentionMetrics(in, AttentionCaseSelection{false, true, false}, **eigenBaseline);
    ASSERT_TRUE(eigenKeys.hasValue() && eigenValues.hasValue());
    expectSameBits(*fusedKeys, *eigenKeys);
    expectSameBits(*fusedValues, *eigenValues);
  }
}

}  // namespace
}  // namespace kvscope::attention_engine
