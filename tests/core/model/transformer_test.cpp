// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/model/checkpoint.h"
#include "core/model/record.h"
#include "core/model/transformer.h"
#include "tests/core/model/reference_model.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

std::shared_ptr<const Checkpoint> loadStories() {
  auto cp = Checkpoint::load(test::storiesModel().string());
  EXPECT_TRUE(cp.hasValue()) << cp.status().message();
  return cp ? *cp : nullptr;
}

#define REQUIRE_STORIES()                                                                   \
  if (test::storiesModel().empty())                                                        \
  GTEST_SKIP() << "../shared/models/stories260K.bin is absent: the real-model tests need it"

TEST(Checkpoint, LoadsStoriesHeader) {
  REQUIRE_STORIES();
  auto cp = loadStories();
  ASSERT_TRUE(cp);
  const ModelConfig& c = cp->config();
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hiddenDim, 172);
  EXPECT_EQ(c.layers, 5);
  EXPECT_EQ(c.heads, 8);
  EXPECT_EQ(c.kvHeads, 4);
  EXPECT_EQ(c.vocabSize, 512);
  EXPECT_EQ(c.seqLen, 512);
  EXPECT_TRUE(c.sharedClassifier);
  EXPECT_EQ(c.headDim(), 8);
  EXPECT_EQ(cp->classifier(), cp->tokenEmbedding());
}

TEST(Transformer, MatchesFloat64ReferenceForEveryStep) {
  REQUIRE_STORIES();
  auto cp = loadStories();
  ASSERT_TRUE(cp);
  test::ReferenceModel ref;
  ASSERT_TRUE(ref.load(test::storiesModel().string()));
  Transformer tf(cp);
  const int tokens[] = {1, 403, 407, 261, 378, 266, 9, 34, 100, 300, 511, 0};
  const int D = cp->config().headDim(), kvd = cp->config().kvDim();
  int pos = 0;
  for (int token : tokens) {
    ASSERT_TRUE(tf.step(token, pos).isOk());
    std::vector<double> expected = ref.step(token);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      worst = std::max(worst, std::abs(expected[i] - tf.logits()[i]));
      scale = std::max(scale, std::abs(expected[i]));
    }
    EXPECT_LT(worst, 1e-4 * std::max(1.0, scale)) << "position " << pos;
    EXPECT_GT(scale, 1.0) << "logits should not be trivially small";
    for (int l = 0; l < cp->config().layers; ++l) {
      const LayerCache& lc = tf.cache(l);
      for (int i = 0; i < kvd; ++i) {
        EXPECT_NEAR(lc.row(lc.exactKey, pos)[i], ref.kCache[static_cast<size_t>(l)][static_cast<size_t>(pos * kvd + i)], 1e-4);
        EXPECT_NEAR(lc.row(lc.exactValue, pos)[i], ref.vCache[static_cast<size_t>(l)][static_cast<size_t>(pos * kvd + i)], 1e-4);
        EXPECT_NEAR(lc.row(lc.exactKeyPreRope, pos)[i], ref.lastKeyPreRope[static_cast<size_t>(l)][static_cast<size_t>(i)], 1e-4);
      }
      for (int i = 0; i < cp->config().heads * D; ++i)
        EXPECT_NEAR(tf.query(l)[static_cast<size_t>(i)], ref.lastQuery[static_cast<size_t>(l)][static_cast<size_t>(i)], 1e-4);
    }
    ++pos;
  }
}

TEST(Transformer, RejectsPositionsOutOfOrderAndBadTokens) {
  REQUIRE_STORIES();
  auto cp = loadStories();
  ASSERT_TRUE(cp);
  Transformer tf(cp);
  EXPECT_EQ(tf.step(512, 0).code(), StatusCode::InvalidArgument);
  EXPECT_EQ(tf.step(-1, 0).code(), StatusCode::InvalidArgument);
  EXPECT_FALSE(tf.step(1, 1).isOk());
  EXPECT_TRUE(tf.step(1, 0).isOk());
}

TEST(Rope, InterleavedRotatesPairsByPositionTimesFrequency) {
  // Head size 4: pair 0 turns by pos, pair 1 by pos / 100 (10000^(-2/4)).
  float row[8] = {1, 0, 0, 1, 2, 0, 1, 1};
  ropeInterleaved(row, 2, 4, 3);
  EXPECT_NEAR(row[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(row[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(row[2], -std::sin(0.03), 1e-6);
  EXPECT_NEAR(row[3], std::cos(0.03), 1e-6);
  EXPECT_NEAR(row[4], 2 * std::cos(3.0), 1e-6);
  EXPECT_NEAR(row[6], std::cos(0.03) - std::sin(0.03), 1e-6);
  EXPECT_NEAR(row[7], std::sin(0.03) + std::cos(0.03), 1e-6);
}

TEST(Sampler, GreedyTakesTheFirstMaximum) {
  SplitMix64 rng(1);
  EXPECT_EQ(sampleToken({0.f, 3.f, 1.f, 3.f}, 0.0, rng), 1);
}

TEST(Sampler, SplitMixMatchesItsPublishedFirstOutput) {
  // splitmix64 seeded with 0 starts 0xe220a8397b1dcdaf (Vigna's reference implementation).
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafULL);
}

TEST(Sampler, DrawsFollowTheSoftmaxDistribution) {
  SplitMix64 rng(42);
  std::vector<float> logits = {0.f, std::log(3.0f)};  // p = 1/4, 3/4
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += sampleToken(logits, 1.0, rng);
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.75, 0.015);
}

TEST(TokenList, ParsesAndRejects) {
  auto ok = parseTokenList("1,403,29");
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, (std::vector<int>{1, 403, 29}));
  EXPECT_FALSE(parseTokenList("1,,2"));
  EXPECT_FALSE(parseTokenList("1,x"));
  EXPECT_FALSE(parseTokenList("-3"));
  EXPECT_TRUE(parseTokenList("")->empty());
}

}  // namespace
}  // namespace kvscope
