// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/attention/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "core/quant/quantize.h"
#include "core/synth/synth.h"
#include "tests/core/attention/reference64.h"

namespace kvscope {
namespace {

Tensor3 randomTensor(int64_t h, int64_t t, int64_t d, uint32_t seed, double sigma = 1.0) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, static_cast<float>(sigma));
  for (float& v : x.data) v = n(rng);
  return x;
}

Tensor3 perturbed(const Tensor3& x, uint32_t seed, double sigma) {
  Tensor3 y = x;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, static_cast<float>(sigma));
  for (float& v : y.data) v += n(rng);
  return y;
}

struct Layer {
  Tensor3 q, k, v, kh, vh;
  AttentionInput input() const {
    AttentionInput in;
    in.query = &q;
    in.key = &k;
    in.value = &v;
    in.keyHat = &kh;
    in.valueHat = &vh;
    return in;
  }
};

Layer randomLayer(int64_t h, int64_t kvh, int64_t t, int64_t tq, int64_t d, double noise,
                  uint32_t seed = 1) {
  Layer l;
  l.q = randomTensor(h, tq, d, seed, 2.0);  // sharp enough distributions to make top-1 meaningful
  l.k = randomTensor(kvh, t, d, seed + 1);
  l.v = randomTensor(kvh, t, d, seed + 2);
  l.kh = perturbed(l.k, seed + 3, noise);
  l.vh = perturbed(l.v, seed + 4, noise);
  return l;
}

void expectClose(double got, double want, double rtol, double atol, const char* what) {
  EXPECT_NEAR(got, want, atol + rtol * std::abs(want)) << what;
}

void expectMatches(const AttentionMetrics& got, const AttentionMetrics& want, double rtol,
                   double atol) {
  expectClose(got.scoreMae, want.scoreMae, rtol, atol, "score_mae");
  expectClose(got.scoreMax, want.scoreMax, rtol, atol, "score_max");
  expectClose(got.klMean, want.klMean, rtol, atol * 1e-3, "kl_mean");
  expectClose(got.klMax, want.klMax, rtol, atol * 1e-3, "kl_max");
  EXPECT_DOUBLE_EQ(got.top1Agreement, want.top1Agreement) << "top1_agreement";
  expectClose(got.outputRelError, want.outputRelError, rtol, atol, "output_rel_error");
}

void expectMatchesReference(const Layer& l, int lastQueries, double rtol) {
  AttentionInput in = l.input();
  in.lastQueries = lastQueries;
  auto got = attentionMetrics(in);
  ASSERT_TRUE(got.hasValue()) << got.status().message();
  auto want = test::attentionReference64(in);
  ASSERT_EQ(got->size(), want.size());
  for (size_t g = 0; g < want.size(); ++g) {
    SCOPED_TRACE("kv head " + std::to_string(g));
    expectMatches((*got)[g].keyOnly, want[g].keyOnly, rtol, 1e-9);
    expectMatches((*got)[g].valueOnly, want[g].valueOnly, rtol, 1e-9);
    expectMatches((*got)[g].joint, want[g].joint, rtol, 1e-9);
  }
}

TEST(AttentionMetrics, MatchesFloat64ReferenceWithGroupedQueryHeads) {
  expectMatchesReference(randomLayer(8, 2, 37, 11, 16, 0.05), 0, 2e-4);
}

TEST(AttentionMetrics, MatchesFloat64ReferenceWhenEveryTokenIsAQuery) {
  expectMatchesReference(randomLayer(4, 4, 23, 23, 8, 0.1, 7), 0, 2e-4);
}

TEST(AttentionMetrics, KeepsTinyDivergencesAccurate) {
  // Noise 1e-4 gives KL around 1e-9: float32 softmax differences could not resolve it.
  Layer l = randomLayer(4, 2, 50, 9, 32, 1e-4, 3);
  AttentionInput in = l.input();
  auto got = attentionMetrics(in);
  ASSERT_TRUE(got.hasValue());
  auto want = test::attentionReference64(in);
  for (size_t g = 0; g < want.size(); ++g) {
    ASSERT_GT(want[g].keyOnly.klMean, 0.0);
    ASSERT_LT(want[g].keyOnly.klMean, 1e-6);
    EXPECT_NEAR((*got)[g].keyOnly.klMean, want[g].keyOnly.klMean, 1e-2 * want[g].keyOnly.klMean);
    EXPECT_NEAR((*got)[g].valueOnly.outputRelError, want[g].valueOnly.outputRelError,
                1e-3 * want[g].valueOnly.outputRelError);
  }
}

TEST(AttentionMetrics, LastQueriesMatchesReferenceAndTruncatedQueries) {
  Layer l = randomLayer(6, 3, 40, 12, 16, 0.05, 11);
  expectMatchesReference(l, 5, 2e-4);
  // The last 5 of 12 queries sit at the same positions as a 5-query dump's queries.
  Layer cut = l;
  cut.q = Tensor3(6, 5, 16);
  for (int64_t h = 0; h < 6; ++h)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t c = 0; c < 16; ++c) cut.q.at(h, i, c) = l.q.at(h, 7 + i, c);
  AttentionInput a = l.input();
  a.lastQueries = 5;
  auto ra = attentionMetrics(a);
  auto rb = attentionMetrics(cut.input());
  ASSERT_TRUE(ra.hasValue() && rb.hasValue());
  for (size_t g = 0; g < 3; ++g) {
    EXPECT_NEAR((*ra)[g].joint.klMean, (*rb)[g].joint.klMean, 1e-12);
    EXPECT_NEAR((*ra)[g].joint.outputRelError, (*rb)[g].joint.outputRelError, 1e-12);
    EXPECT_EQ((*ra)[g].joint.top1Agreement, (*rb)[g].joint.top1Agreement);
  }
  // More than Tq means all queries.
  a.lastQueries = 100;
  auto rc = attentionMetrics(a);
  auto rd = attentionMetrics(l.input());
  ASSERT_TRUE(rc.hasValue() && rd.hasValue());
  EXPECT_DOUBLE_EQ((*rc)[1].keyOnly.klMean, (*rd)[1].keyOnly.klMean);
}

TEST(AttentionMetrics, MatchesFloat64ReferenceOnAQuantizedSyntheticLayer) {
  // A synthetic Llama-like layer (outlier channels, a sink, RoPE) quantized with int4 per
  // token: realistic score and probability shapes rather than Gaussian noise.
  SynthOptions o;
  o.layers = 1;
  o.kvHeads = 2;
  o.heads = 8;
  o.tokens = 96;
  o.queries = 16;
  o.headDim = 32;
  SynthLayer s = synthLayer(o, 0);
  QuantInput kin;
  kin.tensor = &s.key;
  QuantInput vin;
  vin.tensor = &s.value;
  auto kq = quantizeTensor(kin, *parseSpec("int4"));
  auto vq = quantizeTensor(vin, *parseSpec("int4"));
  ASSERT_TRUE(kq.hasValue() && vq.hasValue());
  Layer l{s.query, s.key, s.value, kq->reconstruction, vq->reconstruction};
  auto ref = test::attentionReference64(l.input());
  ASSERT_GT(ref[0].keyOnly.klMean, 0.0);
  expectMatchesReference(l, 0, 2e-4);
  expectMatchesReference(l, 3, 2e-4);
}

TEST(AttentionMetrics, ExactReconstructionGivesZeroDriftAndFullAgreement) {
  Layer l = randomLayer(8, 2, 30, 30, 16, 0.0, 5);
  auto r = attentionMetrics(l.input());
  ASSERT_TRUE(r.hasValue());
  for (const auto& c : *r) {
    for (const AttentionMetrics* m : {&c.keyOnly, &c.valueOnly, &c.joint}) {
      EXPECT_EQ(m->scoreMae, 0.0);
      EXPECT_EQ(m->scoreMax, 0.0);
      EXPECT_EQ(m->klMean, 0.0);
      EXPECT_EQ(m->klMax, 0.0);
      EXPECT_EQ(m->top1Agreement, 1.0);
      EXPECT_EQ(m->outputRelError, 0.0);
    }
  }
}

TEST(AttentionMetrics, GroupedQueryHeadsReadTheirOwnKvHead) {
  // H=8, KVH=2: query heads 0-3 read kv head 0, 4-7 kv head 1. Perturb kv head 1 only.
  Layer l = randomLayer(8, 2, 20, 6, 8, 0.0, 9);
  for (int64_t t = 0; t < 20; ++t)
    for (int64_t c = 0; c < 8; ++c) {
      l.kh.at(1, t, c) += 0.3f * static_cast<float>((t * 7 + c * 3) % 5 - 2);
      l.vh.at(1, t, c) += 0.2f;
    }
  auto r = attentionMetrics(l.input());
  ASSERT_TRUE(r.hasValue());
  EXPECT_EQ((*r)[0].joint.klMean, 0.0);
  EXPECT_EQ((*r)[0].joint.outputRelError, 0.0);
  EXPECT_GT((*r)[1].joint.klMean, 0.0);
  EXPECT_GT((*r)[1].valueOnly.outputRelError, 0.0);
  expectMatchesReference(l, 0, 2e-4);
}

TEST(AttentionMetrics, OnlyTheLastQuerySeesTheLastKey) {
  // Tq = T: query i sees keys 0 … i. A change to key T-1 reaches only the last query.
  const int64_t t = 12;
  Layer l = randomLayer(2, 1, t, t, 8, 0.0, 13);
  for (int64_t c = 0; c < 8; ++c) l.kh.at(0, t - 1, c) += 1.5f;
  auto r = attentionMetrics(l.input());
  ASSERT_TRUE(r.hasValue());
  const AttentionMetrics& m = (*r)[0].keyOnly;
  ASSERT_GT(m.klMax, 0.0);
  // Two query heads each have exactly one affected row: the mean is 2·max/(2·T) at most.
  EXPECT_LE(m.klMean * 2 * t, 2 * m.klMax * (1 + 1e-12));
  EXPECT_GT(m.klMean * 2 * t, m.klMax);
  expectMatchesReference(l, 0, 2e-4);
}

TEST(AttentionMetrics, FirstQueryAttendsOnlyToItself) {
  // T = Tq = 1: P = P̂ = [1] whatever K̂ is, so only the scores move.
  Layer l = randomLayer(1, 1, 1, 1, 4, 0.0, 17);
  for (float& x : l.kh.data) x += 0.5f;
  auto r = attentionMetrics(l.input());
  ASSERT_TRUE(r.hasValue());
  const AttentionMetrics& m = (*r)[0].keyOnly;
  EXPECT_GT(m.scoreMae, 0.0);
  EXPECT_EQ(m.klMean, 0.0);
  EXPECT_EQ(m.top1Agreement, 1.0);
  EXPECT_EQ(m.outputRelError, 0.0);
}

TEST(AttentionMetrics, KeyErrorsLeaveValueOnlyUntouched) {
  Layer a = randomLayer(4, 2, 25, 7, 16, 0.1, 19);
  Layer b = a;
  b.kh = b.k;  // exact keys
  auto ra = attentionMetrics(a.input());
  auto rb = attentionMetrics(b.input());
  ASSERT_TRUE(ra.hasValue() && rb.hasValue());
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_EQ((*ra)[g].valueOnly.outputRelError, (*rb)[g].valueOnly.outputRelError);
    EXPECT_EQ((*ra)[g].valueOnly.klMean, 0.0);
    EXPECT_EQ((*ra)[g].valueOnly.scoreMae, 0.0);
    EXPECT_EQ((*ra)[g].valueOnly.top1Agreement, 1.0);
    EXPECT_GT((*ra)[g].keyOnly.klMean, 0.0);
    // With exact keys, joint is value_only.
    EXPECT_NEAR((*rb)[g].joint.outputRelError, (*rb)[g].valueOnly.outputRelError, 1e-12);
  }
}

TEST(AttentionMetrics, KlIsPositiveForChangedAndZeroForShiftedScores) {
  Layer l = randomLayer(2, 1, 16, 8, 8, 0.2, 23);
  auto changed = attentionMetrics(l.input());
  ASSERT_TRUE(changed.hasValue());
  EXPECT_GT((*changed)[0].keyOnly.klMean, 0.0);
  // Adding one vector u to every key adds q·u to every score of a row: same distribution.
  l.kh = l.k;
  for (int64_t t = 0; t < 16; ++t)
    for (int64_t c = 0; c < 8; ++c) l.kh.at(0, t, c) += 0.25f * static_cast<float>(c % 3);
  auto shifted = attentionMetrics(l.input());
  ASSERT_TRUE(shifted.hasValue());
  const AttentionMetrics& m = (*shifted)[0].keyOnly;
  EXPECT_GT(m.scoreMae, 0.01);
  EXPECT_GE(m.klMean, 0.0);
  EXPECT_LT(m.klMax, 1e-12);
  EXPECT_EQ(m.top1Agreement, 1.0);
}

TEST(AttentionMetrics, HandComputedTwoKeyExample) {
  // D=1, T=2, one query at position 1, scale 1: q=1, k=[0,1] → k̂=[0,2], v=[1,3] → v̂=[1,2].
  Layer l;
  l.q = Tensor3(1, 1, 1, 1.0f);
  l.k = Tensor3(1, 2, 1);
  l.k.data = {0.0f, 1.0f};
  l.kh = l.k;
  l.kh.data = {0.0f, 2.0f};
  l.v = Tensor3(1, 2, 1);
  l.v.data = {1.0f, 3.0f};
  l.vh = l.v;
  l.vh.data = {1.0f, 2.0f};
  AttentionInput in = l.input();
  in.softmaxScale = 1.0;
  auto r = attentionMetrics(in);
  ASSERT_TRUE(r.hasValue());
  const double e = std::exp(1.0), e2 = std::exp(2.0);
  const double p0 = 1 / (1 + e), p1 = e / (1 + e), q0 = 1 / (1 + e2), q1 = e2 / (1 + e2);
  const double kl = p0 * std::log(p0 / q0) + p1 * std::log(p1 / q1);
  const double o = p0 * 1 + p1 * 3;
  const AttentionCases& c = (*r)[0];
  EXPECT_NEAR(c.keyOnly.scoreMae, 0.5, 1e-7);
  EXPECT_NEAR(c.keyOnly.scoreMax, 1.0, 1e-7);
  EXPECT_NEAR(c.keyOnly.klMean, kl, 1e-7);
  EXPECT_NEAR(c.keyOnly.klMax, kl, 1e-7);
  EXPECT_EQ(c.keyOnly.top1Agreement, 1.0);
  EXPECT_NEAR(c.keyOnly.outputRelError, std::abs(q0 + 3 * q1 - o) / o, 1e-6);
  EXPECT_NEAR(c.valueOnly.outputRelError, std::abs(p0 + 2 * p1 - o) / o, 1e-6);
  EXPECT_NEAR(c.joint.outputRelError, std::abs(q0 + 2 * q1 - o) / o, 1e-6);
  EXPECT_NEAR(c.joint.klMean, kl, 1e-7);
}

TEST(AttentionMetrics, TiesGoToTheFirstKey) {
  // s = [1, 1]: argmax P is key 0. ŝ = [1, 1.5] moves it to key 1; ŝ = [1.5, 1] keeps it.
  Layer l;
  l.q = Tensor3(1, 1, 1, 1.0f);
  l.k = Tensor3(1, 2, 1, 1.0f);
  l.v = Tensor3(1, 2, 1, 1.0f);
  l.vh = l.v;
  l.kh = l.k;
  l.kh.data = {1.0f, 1.5f};
  AttentionInput in = l.input();
  in.softmaxScale = 1.0;
  auto later = attentionMetrics(in);
  ASSERT_TRUE(later.hasValue());
  EXPECT_EQ((*later)[0].keyOnly.top1Agreement, 0.0);
  l.kh.data = {1.5f, 1.0f};
  auto earlier = attentionMetrics(in);
  ASSERT_TRUE(earlier.hasValue());
  EXPECT_EQ((*earlier)[0].keyOnly.top1Agreement, 1.0);
}

// #18: ŝ is computed from k̂ itself, so keys that reconstruct to the same row tie. Here
// k = [1, 1 + 2⁻²³] and both reconstruct to 0.5: argmax s is key 1, and the tie in ŝ goes to key
// 0. Reading ŝ as s + q·(k̂ − k) in float gives ŝ_1 = 0.0500000045 > ŝ_0 = 0.0500000007 (rounding
// noise), which would count the row as agreeing.
TEST(AttentionMetrics, EqualReconstructedKeysTieAndGoToTheLowerIndex) {
  Layer l;
  l.q = Tensor3(1, 1, 1, 0.1f);
  l.k = Tensor3(1, 2, 1);
  l.k.data = {1.0f, std::nextafter(1.0f, 2.0f)};
  l.v = Tensor3(1, 2, 1, 1.0f);
  l.vh = l.v;
  l.kh = Tensor3(1, 2, 1, 0.5f);
  AttentionInput in = l.input();
  in.softmaxScale = 1.0;
  auto m = attentionMetrics(in);
  ASSERT_TRUE(m.hasValue());
  EXPECT_EQ((*m)[0].keyOnly.top1Agreement, 0.0);
  EXPECT_EQ((*m)[0].joint.top1Agreement, 0.0);
}

// #18: a degenerate head where one outlier channel owns every q4_0 block, so most keys reconstruct
// to a few distinct rows; top-1 must equal the float64 definition's, ties included.
TEST(AttentionMetrics, Top1OfADegenerateHeadMatchesTheDefinition) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Layer l;
  const int64_t t = 256, d = 32;
  l.k = Tensor3(1, t, d);
  for (int64_t j = 0; j < t; ++j) {
    for (int64_t c = 0; c < d; ++c) l.k.at(0, j, c) = 0.05f * n(rng);
    l.k.at(0, j, 0) = 100.0f + static_cast<float>(j % 3);  // the outlier that sets each block's scale
  }
  l.v = Tensor3(1, t, d);
  for (float& x : l.v.data) x = n(rng);
  l.q = Tensor3(2, 16, d);
  for (float& x : l.q.data) x = n(rng);
  auto kh = quantizeTensor(QuantInput{&l.k, nullptr, {}}, *parseSpec("q4_0"));
  ASSERT_TRUE(kh.hasValue());
  l.kh = kh->reconstruction;
  l.vh = l.v;
  AttentionInput in = l.input();
  auto got = attentionMetrics(in);
  ASSERT_TRUE(got.hasValue());
  const auto want = test::attentionReference64(in);
  EXPECT_DOUBLE_EQ((*got)[0].keyOnly.top1Agreement, want[0].keyOnly.top1Agreement);
  EXPECT_DOUBLE_EQ((*got)[0].joint.top1Agreement, want[0].joint.top1Agreement);
  // The head is degenerate: at most a handful of distinct reconstructed rows.
  std::set<std::vector<float>> rows;
  for (int64_t j = 0; j < t; ++j) rows.insert(std::vector<float>(l.kh.row(0, j), l.kh.row(0, j) + d));
  EXPECT_LE(rows.size(), 8u);
}

TEST(AttentionMetrics, ExtremeScoresGiveFiniteDivergence) {
  // s = [0, 1000], ŝ = [1000, 0]: P̂ of P's mass underflows in linear space; KL is 1000.
  Layer l;
  l.q = Tensor3(1, 1, 1, 1.0f);
  l.k = Tensor3(1, 2, 1);
  l.k.data = {0.0f, 1000.0f};
  l.kh = l.k;
  l.kh.data = {1000.0f, 0.0f};
  l.v = Tensor3(1, 2, 1, 1.0f);
  l.vh = l.v;
  AttentionInput in = l.input();
  in.softmaxScale = 1.0;
  auto r = attentionMetrics(in);
  ASSERT_TRUE(r.hasValue());
  EXPECT_NEAR((*r)[0].keyOnly.klMean, 1000.0, 1e-9);
  EXPECT_EQ((*r)[0].keyOnly.top1Agreement, 0.0);
}

TEST(AttentionMetrics, SelectedCasesEqualTheFullComputation) {
  Layer l = randomLayer(4, 2, 33, 9, 16, 0.07, 29);
  auto all = attentionMetrics(l.input());
  AttentionInput keysOnly = l.input();
  keysOnly.valueHat = nullptr;
  auto k = attentionMetrics(keysOnly, AttentionCaseSelection{true, false, false});
  AttentionInput valuesOnly = l.input();
  valuesOnly.keyHat = nullptr;
  auto v = attentionMetrics(valuesOnly, AttentionCaseSelection{false, true, false});
  ASSERT_TRUE(all.hasValue() && k.hasValue() && v.hasValue());
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_DOUBLE_EQ((*k)[g].keyOnly.klMean, (*all)[g].keyOnly.klMean);
    EXPECT_DOUBLE_EQ((*k)[g].keyOnly.outputRelError, (*all)[g].keyOnly.outputRelError);
    EXPECT_DOUBLE_EQ((*v)[g].valueOnly.outputRelError, (*all)[g].valueOnly.outputRelError);
    EXPECT_EQ((*v)[g].keyOnly.klMean, 0.0);  // not computed: defaults
  }
}

TEST(AttentionMetrics, RejectsInconsistentInput) {
  Layer l = randomLayer(3, 2, 10, 4, 8, 0.0);
  auto r = attentionMetrics(l.input());
  ASSERT_FALSE(r.hasValue());
  EXPECT_EQ(r.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(r.status().message().find("multiple"), std::string::npos);

  Layer m = randomLayer(2, 2, 4, 6, 8, 0.0);  // Tq > T
  EXPECT_FALSE(attentionMetrics(m.input()).hasValue());

  Layer n = randomLayer(2, 2, 10, 4, 8, 0.0);
  AttentionInput in = n.input();
  in.query = nullptr;
  EXPECT_FALSE(attentionMetrics(in).hasValue());
  in = n.input();
  in.valueHat = nullptr;
  EXPECT_FALSE(attentionMetrics(in).hasValue());
  Tensor3 wrong(2, 9, 8);
  in = n.input();
  in.keyHat = &wrong;
  EXPECT_FALSE(attentionMetrics(in).hasValue());
}

TEST(AttentionMetrics, ProgressReturningFalseCancels) {
  Layer l = randomLayer(4, 4, 20, 5, 8, 0.1);
  auto r = attentionMetrics(l.input(), [](double, std::string_view) { return false; });
  ASSERT_FALSE(r.hasValue());
  EXPECT_EQ(r.status().code(), StatusCode::Cancelled);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

void expectIdentical(const AttentionMetrics& a, const AttentionMetrics& b) {
  EXPECT_EQ(a.scoreMae, b.scoreMae);
  EXPECT_EQ(a.scoreMax, b.scoreMax);
  EXPECT_EQ(a.klMean, b.klMean);
  EXPECT_EQ(a.klMax, b.klMax);
  EXPECT_EQ(a.top1Agreement, b.top1Agreement);
  EXPECT_EQ(a.outputRelError, b.outputRelError);
}

TEST(AttentionBaseline, ReusedBaselineGivesIdenticalResults) {
  Layer l = randomLayer(8, 2, 300, 40, 16, 0.05, 31);
  AttentionInput in = l.input();
  in.lastQueries = 25;
  auto base = prepareAttentionBaseline(in);
  ASSERT_TRUE(base.hasValue()) << base.status().message();
  for (AttentionCaseSelection which : {AttentionCaseSelection{true, true, true},
                                       AttentionCaseSelection{true, false, false},
                                       AttentionCaseSelection{false, true, false}}) {
    auto fresh = attentionMetrics(in, which);
    auto reused = attentionMetrics(in, which, **base);
    ASSERT_TRUE(fresh.hasValue() && reused.hasValue());
    for (size_t g = 0; g < 2; ++g) {
      expectIdentical((*fresh)[g].keyOnly, (*reused)[g].keyOnly);
      expectIdentical((*fresh)[g].valueOnly, (*reused)[g].valueOnly);
      expectIdentical((*fresh)[g].joint, (*reused)[g].joint);
    }
  }
  // Another reconstruction on the same baseline.
  Layer other = l;
  other.kh = perturbed(l.k, 99, 0.2);
  AttentionInput in2 = in;
  in2.keyHat = &other.kh;
  auto fresh = attentionMetrics(in2);
  auto reused = attentionMetrics(in2, AttentionCaseSelection{}, **base);
  ASSERT_TRUE(fresh.hasValue() && reused.hasValue());
  expectIdentical((*fresh)[1].joint, (*reused)[1].joint);
}

TEST(AttentionBaseline, RefusesOtherTensorsAndExcessMemory) {
  Layer l = randomLayer(4, 2, 50, 10, 8, 0.05, 37);
  auto base = prepareAttentionBaseline(l.input());
  ASSERT_TRUE(base.hasValue());
  AttentionInput in = l.input();
  in.lastQueries = 3;
  auto r = attentionMetrics(in, AttentionCaseSelection{}, **base);
  ASSERT_FALSE(r.hasValue());
  EXPECT_EQ(r.status().code(), StatusCode::InvalidArgument);
  auto big = prepareAttentionBaseline(l.input(), 1000);
  ASSERT_FALSE(big.hasValue());
  EXPECT_EQ(big.status().code(), StatusCode::ResourceLimit);
}

}  // namespace
}  // namespace kvscope
