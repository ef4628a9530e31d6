// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/attention/detail.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kvscope {
namespace {

Tensor3 randomTensor(int64_t h, int64_t t, int64_t d, uint32_t seed, float sigma = 1.0f) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, sigma);
  for (float& v : x.data) v = n(rng);
  return x;
}

struct Layer {
  Tensor3 q, k, v, kh, vh;
  AttentionInput input() const { return AttentionInput{&q, &k, &v, &kh, &vh, 0, 0}; }
};

Layer randomLayer(int64_t h, int64_t kvh, int64_t t, int64_t tq, int64_t d, float noise,
                  uint32_t seed) {
  Layer l{randomTensor(h, tq, d, seed, 2.0f), randomTensor(kvh, t, d, seed + 1),
          randomTensor(kvh, t, d, seed + 2), {}, {}};
  l.kh = l.k;
  l.vh = l.v;
  Tensor3 nk = randomTensor(kvh, t, d, seed + 3, noise), nv = randomTensor(kvh, t, d, seed + 4, noise);
  for (size_t i = 0; i < l.k.data.size(); ++i) {
    l.kh.data[i] += nk.data[i];
    l.vh.data[i] += nv.data[i];
  }
  return l;
}

TEST(AttentionRowDetail, FirstQueryOfAFullPrefixSeesOnlyItself) {
  Layer l = randomLayer(4, 2, 9, 9, 8, 0.3f, 1);
  auto d = attentionRowDetail(l.input(), 3, 0);
  ASSERT_TRUE(d.hasValue()) << d.status().message();
  EXPECT_EQ(d->kvHead, 1);
  EXPECT_EQ(d->position, 0);
  ASSERT_EQ(d->original.probabilities.size(), 1u);
  EXPECT_EQ(d->original.probabilities[0], 1.0);
  EXPECT_EQ(d->keyOnly.probabilities[0], 1.0);
  EXPECT_EQ(d->keyOnly.kl, 0.0);
  EXPECT_EQ(d->keyOnly.outputRelError, 0.0);
  EXPECT_GT(d->valueOnly.outputRelError, 0.0);

  auto last = attentionRowDetail(l.input(), 3, 8);
  ASSERT_TRUE(last.hasValue());
  EXPECT_EQ(last->original.scores.size(), 9u);  // the last query sees every key
  double sum = 0;
  for (double p : last->keyOnly.probabilities) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_EQ(last->valueOnly.scores, last->original.scores);
  EXPECT_EQ(last->joint.probabilities, last->keyOnly.probabilities);
}

TEST(AttentionRowDetail, RowsAverageToTheLayerMetrics) {
  Layer l = randomLayer(4, 2, 21, 6, 16, 0.1f, 3);
  auto m = attentionMetrics(l.input());
  ASSERT_TRUE(m.hasValue());
  for (int g = 0; g < 2; ++g) {
    double kl = 0, rk = 0, rv = 0, rj = 0, top1 = 0;
    for (int h = 2 * g; h < 2 * g + 2; ++h)
      for (int i = 0; i < 6; ++i) {
        auto d = attentionRowDetail(l.input(), h, i);
        ASSERT_TRUE(d.hasValue());
        kl += d->keyOnly.kl / 12;
        rk += d->keyOnly.outputRelError / 12;
        rv += d->valueOnly.outputRelError / 12;
        rj += d->joint.outputRelError / 12;
        top1 += (d->keyOnly.top1 == d->original.top1) / 12.0;
      }
    const AttentionCases& c = (*m)[static_cast<size_t>(g)];
    EXPECT_NEAR(c.keyOnly.klMean, kl, 1e-4 * kl);
    EXPECT_NEAR(c.keyOnly.outputRelError, rk, 1e-4 * rk);
    EXPECT_NEAR(c.valueOnly.outputRelError, rv, 1e-4 * rv);
    EXPECT_NEAR(c.joint.outputRelError, rj, 1e-4 * rj);
    EXPECT_DOUBLE_EQ(c.keyOnly.top1Agreement, top1);
  }
}

TEST(AttentionRowDetail, RejectsRowsThatDoNotExist) {
  Layer l = randomLayer(2, 1, 5, 3, 4, 0.1f, 5);
  EXPECT_FALSE(attentionRowDetail(l.input(), 2, 0).hasValue());
  EXPECT_FALSE(attentionRowDetail(l.input(), 0, 3).hasValue());
  EXPECT_FALSE(attentionRowDetail(l.input(), -1, 0).hasValue());
}

TEST(AttentionPositionSeries, KvHeadLinesAverageQueryHeadLinesAndMatchMetrics) {
  Layer l = randomLayer(6, 2, 30, 10, 8, 0.1f, 7);
  AttentionInput in = l.input();
  in.lastQueries = 7;
  auto byKv = attentionPositionSeries(in, SeriesGrouping::KvHead);
  auto byQ = attentionPositionSeries(in, SeriesGrouping::QueryHead);
  auto m = attentionMetrics(in);
  ASSERT_TRUE(byKv.hasValue() && byQ.hasValue() && m.hasValue());
  ASSERT_EQ(byKv->kl.size(), 2u);
  ASSERT_EQ(byQ->kl.size(), 6u);
  ASSERT_EQ(byKv->positions.size(), 7u);
  EXPECT_EQ(byKv->positions.front(), 23);
  EXPECT_EQ(byKv->positions.back(), 29);
  for (size_t g = 0; g < 2; ++g) {
    double kl = 0, rv = 0;
    for (size_t i = 0; i < 7; ++i) {
      const double fromQ = (byQ->kl[3 * g][i] + byQ->kl[3 * g + 1][i] + byQ->kl[3 * g + 2][i]) / 3;
      EXPECT_NEAR(byKv->kl[g][i], fromQ, 1e-15);
      kl += byKv->kl[g][i] / 7;
      rv += byKv->relValueOnly[g][i] / 7;
    }
    EXPECT_NEAR((*m)[g].keyOnly.klMean, kl, 1e-12 * kl);
    EXPECT_NEAR((*m)[g].valueOnly.outputRelError, rv, 1e-12 * rv);
  }
}

TEST(AttentionPositionSeries, AChangedLastKeyShowsOnlyAtTheLastPosition) {
  Layer l = randomLayer(2, 1, 8, 8, 4, 0.0f, 9);
  for (int64_t c = 0; c < 4; ++c) l.kh.at(0, 7, c) += 1.0f;
  auto s = attentionPositionSeries(l.input(), SeriesGrouping::QueryHead);
  ASSERT_TRUE(s.hasValue());
  for (size_t h = 0; h < 2; ++h) {
    for (size_t i = 0; i < 7; ++i) {
      EXPECT_EQ(s->kl[h][i], 0.0);
      EXPECT_EQ(s->relKeyOnly[h][i], 0.0);
    }
    EXPECT_GT(s->kl[h][7], 0.0);
  }
}

}  // namespace
}  // namespace kvscope
