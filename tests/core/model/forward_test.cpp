// SPDX-License-Identifier: GPL-3.0-or-later
// The one forward pass (core/model/forward.h) against the float64 reference on stories260K, its
// chunked (decoding) form, RoPE, the sampler and token lists.
#include <gtest/gtest.h>

#include <cmath>

#include "core/model/forward.h"
#include "core/model/logits.h"
#include "core/model/model.h"
#include "core/model/record.h"
#include "core/quant/rope.h"
#include "tests/core/model/reference_model.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

#define REQUIRE_STORIES()                                                                   \
  if (test::storiesModel().empty())                                                        \
  GTEST_SKIP() << "../shared/models/stories260K.bin is absent: the real-model tests need it"

std::shared_ptr<const Model> loadStories() {
  auto m = Model::load(test::storiesModel().string());
  EXPECT_TRUE(m.hasValue()) << m.status().message();
  return m ? *m : nullptr;
}

TEST(Model, ReadsAllama2cCheckpointAsTheLlamaArchitecture) {
  REQUIRE_STORIES();
  auto m = loadStories();
  ASSERT_TRUE(m);
  const ModelHparams& hp = m->hparams();
  EXPECT_EQ(hp.dim, 64);
  EXPECT_EQ(hp.ffn, 172);
  EXPECT_EQ(hp.layers, 5);
  EXPECT_EQ(hp.heads, 8);
  EXPECT_EQ(hp.kvHeads, 4);
  EXPECT_EQ(hp.headDim, 8);
  EXPECT_EQ(hp.vocab, 512);
  EXPECT_EQ(hp.contextLength, 512);
  EXPECT_TRUE(hp.tiedEmbeddings);
  EXPECT_FALSE(hp.qkvBias);
  EXPECT_FALSE(hp.qkNorm);
  EXPECT_EQ(m->architecture().name, "llama");
  EXPECT_EQ(hp.rope.style, RopeStyle::Interleaved) << "llama2.c rotates adjacent pairs";
  // θ_i = 10000^(−2i/8): 1, 0.1, 0.01, 0.001.
  ASSERT_EQ(hp.rope.invFreq.size(), 4u);
  EXPECT_DOUBLE_EQ(hp.rope.invFreq[0], 1.0);
  EXPECT_NEAR(hp.rope.invFreq[1], 0.1, 1e-15);
  EXPECT_NEAR(hp.rope.invFreq[3], 0.001, 1e-15);
  EXPECT_EQ(m->bos(), 1);
  EXPECT_FALSE(m->has(TensorRole::Output)) << "the embedding is the classifier";
  EXPECT_EQ(m->info(TensorRole::AttnK, 2).shape, (std::vector<int64_t>{32, 64}));
}

TEST(Forward, OnePassOverTheSequenceMatchesTheFloat64Reference) {
  REQUIRE_STORIES();
  auto m = loadStories();
  ASSERT_TRUE(m);
  test::ReferenceModel ref;
  ASSERT_TRUE(ref.load(test::storiesModel().string()));
  const std::vector<int> tokens = {1, 403, 407, 261, 378, 266, 9, 34, 100, 300, 511, 0};
  const int T = static_cast<int>(tokens.size()), kvd = 32, qd = 64;
  std::vector<std::vector<float>> q(5), kPre(5), k(5), v(5);
  Forward forward(m);
  Stream stream;
  ASSERT_TRUE(forward
                  .run(stream, tokens,
                       [&](const LayerTensors& t) {
                         const auto l = static_cast<size_t>(t.layer);
                         q[l].assign(t.query, t.query + static_cast<size_t>(T) * qd);
                         kPre[l].assign(t.keyPreRope, t.keyPreRope + static_cast<size_t>(T) * kvd);
                         k[l].assign(t.key, t.key + static_cast<size_t>(T) * kvd);
                         v[l].assign(t.value, t.value + static_cast<size_t>(T) * kvd);
                         return Status::ok();
                       })
                  .isOk());
  std::vector<float> logits;
  ASSERT_TRUE(allLogits(forward, stream, logits).isOk());
  for (int p = 0; p < T; ++p) {
    std::vector<double> expected = ref.step(tokens[static_cast<size_t>(p)]);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      worst = std::max(worst, std::abs(expected[i] - logits[static_cast<size_t>(p) * 512 + i]));
      scale = std::max(scale, std::abs(expected[i]));
    }
    EXPECT_LT(worst, 1e-4 * std::max(1.0, scale)) << "position " << p;
    for (size_t l = 0; l < 5; ++l) {
      for (int i = 0; i < kvd; ++i) {
        EXPECT_NEAR(k[l][static_cast<size_t>(p * kvd + i)], ref.kCache[l][static_cast<size_t>(p * kvd + i)], 1e-4);
        EXPECT_NEAR(v[l][static_cast<size_t>(p * kvd + i)], ref.vCache[l][static_cast<size_t>(p * kvd + i)], 1e-4);
        EXPECT_NEAR(kPre[l][static_cast<size_t>(p * kvd + i)], ref.lastKeyPreRope[l][static_cast<size_t>(i)], 1e-4);
      }
      for (int i = 0; i < qd; ++i)
        EXPECT_NEAR(q[l][static_cast<size_t>(p * qd + i)], ref.lastQuery[l][static_cast<size_t>(i)], 1e-4);
    }
  }
}

TEST(Forward, DecodingOneTokenAtATimeGivesTheSameCacheAndLogits) {
  REQUIRE_STORIES();
  auto m = loadStories();
  ASSERT_TRUE(m);
  const std::vector<int> tokens = {1, 403, 407, 261, 378, 266, 9, 34};
  Forward whole(m), decode(m);
  decode.setWeightCacheBytes(1 << 26);
  Stream a, b;
  ASSERT_TRUE(whole.run(a, tokens).isOk());
  ASSERT_TRUE(decode.run(b, std::span<const int>(tokens).first(3)).isOk());
  std::vector<float> last;
  for (size_t i = 3; i < tokens.size(); ++i) {
    ASSERT_TRUE(decode.run(b, std::span<const int>(tokens).subspan(i, 1)).isOk());
  }
  ASSERT_TRUE(lastLogits(decode, b, last).isOk());
  std::vector<float> all;
  ASSERT_TRUE(allLogits(whole, a, all).isOk());
  for (int i = 0; i < 512; ++i) EXPECT_NEAR(last[static_cast<size_t>(i)], all[7 * 512 + static_cast<size_t>(i)], 1e-4);
  for (int l = 0; l < 5; ++l) {
    ASSERT_EQ(a.keys[static_cast<size_t>(l)].size(), b.keys[static_cast<size_t>(l)].size());
    for (size_t i = 0; i < a.keys[static_cast<size_t>(l)].size(); ++i)
      EXPECT_NEAR(a.keys[static_cast<size_t>(l)][i], b.keys[static_cast<size_t>(l)][i], 1e-5);
  }
}

TEST(Forward, RejectsBadTokensAndPositionsBeyondTheContext) {
  REQUIRE_STORIES();
  auto m = loadStories();
  ASSERT_TRUE(m);
  Forward forward(m);
  Stream s;
  const int bad[2] = {1, 512};
  auto r = forward.run(s, bad);
  EXPECT_EQ(r.code(), StatusCode::InvalidArgument);
  EXPECT_NE(r.message().find("token 512 at position 1"), std::string::npos) << r.message();
  Stream t;
  std::vector<int> long_(513, 1);
  EXPECT_NE(forward.run(t, long_).message().find("context length 512"), std::string::npos);
}

TEST(Rope, RowsRotatePairsByPositionTimesFrequency) {
  // Head size 4, θ = 10000: pair 0 turns by pos, pair 1 by pos / 100 (10000^(−2/4)).
  float row[8] = {1, 0, 0, 1, 2, 0, 1, 1};
  const std::vector<double> freq = ropeInverseFrequencies(RopeParams{10000.0, RopeStyle::Interleaved, {}}, 4);
  applyRopeRows(row, 1, 2, 4, 3, RopeStyle::Interleaved, freq);
  EXPECT_NEAR(row[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(row[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(row[2], -std::sin(0.03), 1e-6);
  EXPECT_NEAR(row[3], std::cos(0.03), 1e-6);
  EXPECT_NEAR(row[4], 2 * std::cos(3.0), 1e-6);
  EXPECT_NEAR(row[6], std::cos(0.03) - std::sin(0.03), 1e-6);
  EXPECT_NEAR(row[7], std::sin(0.03) + std::cos(0.03), 1e-6);
  // Half split pairs (i, i + D/2): channel 0 with 2, 1 with 3.
  float half[4] = {1, 0, 0, 1};
  applyRopeRows(half, 1, 1, 4, 3, RopeStyle::Half, freq);
  EXPECT_NEAR(half[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(half[2], std::sin(3.0), 1e-6);
  EXPECT_NEAR(half[1], -std::sin(0.03), 1e-6);
  EXPECT_NEAR(half[3], std::cos(0.03), 1e-6);
  // Given inverse frequencies replace θ^(−2i/D) (a scaled RoPE).
  float scaled[4] = {1, 0, 1, 0};
  applyRopeRows(scaled, 1, 1, 4, 2, RopeStyle::Interleaved, {0.25, 0.5});
  EXPECT_NEAR(scaled[0], std::cos(0.5), 1e-6);
  EXPECT_NEAR(scaled[3], std::sin(1.0), 1e-6);
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
  EXPECT_EQ(*parseTokenList(" 1, 2 "), (std::vector<int>{1, 2}));
  EXPECT_FALSE(parseTokenList("1,,2"));
  EXPECT_FALSE(parseTokenList("1,x"));
  EXPECT_FALSE(parseTokenList("-3"));
  EXPECT_TRUE(parseTokenList("")->empty());
}

}  // namespace
}  // namespace kvscope
