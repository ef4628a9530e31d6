// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/metrics/outliers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/synth/synth.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

Tensor3 randomHead(int64_t t, int64_t d, uint32_t seed) {
  Tensor3 x(1, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& v : x.data) v = n(rng);
  return x;
}

QuantSpec spec(const char* text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text;
  return *s;
}

TEST(OutlierProfile, FindsAPlantedOutlierChannel) {
  Tensor3 x = randomHead(200, 64, 1);
  for (int64_t t = 0; t < 200; ++t) x.at(0, t, 17) *= 20.0f;
  TensorOutliers p = profileHead(x, 0, OutlierOptions{});
  ASSERT_EQ(p.outlierChannels.size(), 1u);
  EXPECT_EQ(p.outlierChannels[0].channel, 17);
  EXPECT_GT(p.outlierChannels[0].ratio, 10.0);
  // One channel is a token's top 1% at D=64, and channel 17 is it in nearly every token.
  EXPECT_GT(p.channels[17].persistence, 0.9);
  EXPECT_LT(p.channels[3].persistence, 0.1);
  // ratio = max|x| / median over channels of max|x| (D = 64: the mean of the middle two).
  std::vector<double> maxAbs(64, 0.0);
  for (int64_t t = 0; t < 200; ++t)
    for (int64_t c = 0; c < 64; ++c) maxAbs[c] = std::max(maxAbs[c], double(std::abs(x.at(0, t, c))));
  std::vector<double> sorted = maxAbs;
  std::sort(sorted.begin(), sorted.end());
  const double median = (sorted[31] + sorted[32]) / 2;
  EXPECT_DOUBLE_EQ(p.channels[3].maxAbs, maxAbs[3]);
  EXPECT_DOUBLE_EQ(p.channels[3].ratio, maxAbs[3] / median);
  EXPECT_DOUBLE_EQ(p.outlierChannels[0].ratio, maxAbs[17] / median);
}

TEST(OutlierProfile, FindsASinkTokenWithItsText) {
  Tensor3 x = randomHead(50, 32, 2);
  for (int64_t c = 0; c < 32; ++c) x.at(0, 0, c) *= 30.0f;
  std::vector<std::string> text(50, "w");
  text[0] = "<s>";
  OutlierOptions o;
  o.topTokens = 3;
  TensorOutliers p = profileHead(x, 0, o, text);
  ASSERT_EQ(p.topTokens.size(), 3u);
  EXPECT_EQ(p.topTokens[0].token, 0);
  EXPECT_EQ(p.topTokens[0].text, "<s>");
  EXPECT_GT(p.topTokens[0].ratio, 20.0);
  EXPECT_GE(p.topTokens[0].ratio, p.topTokens[1].ratio);
  EXPECT_NEAR(p.tokenNormRatio[0], p.topTokens[0].ratio, 0);
}

TEST(OutlierProfile, TokensAboveTheThresholdAreAllListed) {
  Tensor3 x = randomHead(40, 16, 3);
  for (int64_t t : {5, 9, 21})
    for (int64_t c = 0; c < 16; ++c) x.at(0, t, c) *= 50.0f;
  OutlierOptions o;
  o.topTokens = 1;
  TensorOutliers p = profileHead(x, 0, o);
  ASSERT_EQ(p.topTokens.size(), 3u);
  std::vector<int64_t> got;
  for (const TokenStat& s : p.topTokens) got.push_back(s.token);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{5, 9, 21}));
}

TEST(OutlierProfile, KurtosisIsPearsonNotExcess) {
  Tensor3 x(1, 1, 5);
  x.data = {-2, -1, 0, 1, 2};  // m2 = 2, m4 = 6.8: 6.8 / 4
  EXPECT_NEAR(profileHead(x, 0, OutlierOptions{}).kurtosis, 1.7, 1e-12);
  Tensor3 big = randomHead(400, 64, 4);  // a normal sample: close to 3
  EXPECT_NEAR(profileHead(big, 0, OutlierOptions{}).kurtosis, 3.0, 0.2);
}

TEST(OutlierProfile, TopOnePercentIsCeilOfOnePercentOfTheChannels) {
  EXPECT_EQ(topChannelCount(64), 1);
  EXPECT_EQ(topChannelCount(100), 1);
  EXPECT_EQ(topChannelCount(101), 2);
  EXPECT_EQ(topChannelCount(128), 2);
  // Equal magnitudes: ties go to the lower channel.
  Tensor3 x(1, 10, 8, 1.0f);
  TensorOutliers p = profileHead(x, 0, OutlierOptions{});
  EXPECT_EQ(p.channels[0].persistence, 1.0);
  EXPECT_EQ(p.channels[1].persistence, 0.0);
  EXPECT_TRUE(p.outlierChannels.empty());
}

TEST(CodeUtilisation, CountsTheCodesEachGroupUses) {
  // int2 asym per token of 4 values: [0,1,2,3] uses all 4 codes, [0,0,0,3] two of them.
  Tensor3 x(1, 2, 4);
  x.data = {0, 1, 2, 3, 0, 0, 0, 3};
  auto u = codeUtilisation(x, spec("int2"));
  ASSERT_TRUE(u.hasValue()) << u.status().message();
  ASSERT_EQ(u->size(), 2u);  // head 0, then all groups
  EXPECT_DOUBLE_EQ((*u)[0], (1.0 + 0.5) / 2);
  EXPECT_DOUBLE_EQ((*u)[1], 0.75);
}

TEST(CodeUtilisation, PerChannelScalesUseMoreCodesAroundAnOutlierChannel) {
  Tensor3 x = randomHead(256, 64, 5);
  for (int64_t t = 0; t < 256; ++t) x.at(0, t, 7) = 40.0f + x.at(0, t, 7);
  auto channel = codeUtilisation(x, spec("int4,axis=channel"));
  auto token = codeUtilisation(x, spec("int4,axis=token"));
  auto tensor = codeUtilisation(x, spec("int4,axis=tensor"));
  ASSERT_TRUE(channel.hasValue() && token.hasValue() && tensor.hasValue());
  EXPECT_GT(channel->back(), 0.8);
  EXPECT_LT(token->back(), 0.5);
  EXPECT_LT(tensor->back(), 0.5);
  // Setting the outliers aside lets per-token scales use their codes again.
  auto sparse = codeUtilisation(x, spec("int4,axis=token,outliers=0.02"));
  ASSERT_TRUE(sparse.hasValue());
  EXPECT_GT(sparse->back(), token->back() + 0.2);
}

TEST(CodeUtilisation, CentralNinetyNinePercentIgnoresTheExtremes) {
  // One group of 200 values: 198 at 0 or 1 and two extremes that stretch the int2 range.
  Tensor3 x(1, 200, 1);
  for (int64_t t = 0; t < 200; ++t) x.at(0, t, 0) = static_cast<float>(t % 2);
  x.at(0, 0, 0) = -3.0f;
  x.at(0, 1, 0) = 3.0f;
  // Range [-3, 3] in 3 steps of 2: 0 and 1 both round to the code of 1; ±3 are dropped.
  auto u = codeUtilisation(x, spec("int2,axis=channel"));
  ASSERT_TRUE(u.hasValue());
  EXPECT_DOUBLE_EQ(u->back(), 0.25);
}

TEST(CodeUtilisation, RejectsFormatsWithoutCodes) {
  Tensor3 x = randomHead(4, 8, 6);
  EXPECT_FALSE(codeUtilisation(x, spec("fp16")).hasValue());
  EXPECT_FALSE(codeUtilisation(x, spec("int4,prerope")).hasValue());  // no pre-RoPE tensor
}

TEST(OutlierProfile, FindsTheSyntheticDumpsOutlierChannelsAndMassiveToken) {
  test::TempDir dir;
  SynthOptions o;
  o.layers = 2;
  o.tokens = 96;
  o.queries = 4;
  o.headDim = 32;
  const std::string path = dir.file("s.h5");
  ASSERT_TRUE(writeSynthDump(path, o).isOk());
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump.hasValue());
  OutlierOptions options;
  options.spec = spec("int4,axis=channel");
  auto p = outlierProfile(**dump, options);
  ASSERT_TRUE(p.hasValue()) << p.status().message();
  ASSERT_EQ(p->layers.size(), 2u);
  for (const LayerOutliers& l : p->layers) {
    ASSERT_TRUE(l.keyUtilisation.has_value());
    for (const HeadOutliers& h : l.heads) {
      std::vector<int> found;
      for (const ChannelStat& c : h.keyPreRope->outlierChannels) found.push_back(c.channel);
      for (int c : synthOutlierChannels(o, l.layer, h.kvHead)) {
        EXPECT_NE(std::find(found.begin(), found.end(), c), found.end())
            << "layer " << l.layer << " head " << h.kvHead << " channel " << c;
      }
      ASSERT_FALSE(h.value.topTokens.empty());
      EXPECT_EQ(h.value.topTokens[0].token, synthMassiveToken(o));
      EXPECT_TRUE(h.key.codeUtilisation.has_value());
    }
  }
}

TEST(OutlierProfile, APlanMeasuresEachLayerUnderItsOwnSpec) {
  test::TempDir dir;
  SynthOptions o;
  o.layers = 2;
  o.tokens = 64;
  o.queries = 4;
  o.headDim = 32;
  const std::string path = dir.file("s.h5");
  ASSERT_TRUE(writeSynthDump(path, o).isOk());
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump.hasValue());
  auto profile = [&](const char* text) {
    OutlierOptions options;
    auto plan = parsePlan(text);
    EXPECT_TRUE(plan.hasValue()) << plan.status().message();
    options.spec = *plan;
    auto p = outlierProfile(**dump, options);
    EXPECT_TRUE(p.hasValue()) << p.status().message();
    return *p;
  };
  const OutlierProfile plan = profile("int2;1:int8");
  const OutlierProfile int2 = profile("int2");
  const OutlierProfile int8 = profile("int8");
  EXPECT_EQ(plan.spec, "int2;1:int8");
  ASSERT_EQ(plan.layers.size(), 2u);
  // Layer 0 under int2, layer 1 under int8: each equals the uniform profile's same layer.
  EXPECT_EQ(plan.layers[0].keyUtilisation, int2.layers[0].keyUtilisation);
  EXPECT_EQ(plan.layers[0].valueUtilisation, int2.layers[0].valueUtilisation);
  EXPECT_EQ(plan.layers[1].keyUtilisation, int8.layers[1].keyUtilisation);
  EXPECT_EQ(plan.layers[1].valueUtilisation, int8.layers[1].valueUtilisation);
  EXPECT_NE(int2.layers[1].keyUtilisation, int8.layers[1].keyUtilisation) << "the specs must differ here";
  // A range beyond the dump is refused, naming the option.
  OutlierOptions bad;
  bad.spec = *parsePlan("int2;2:int8");
  auto p = outlierProfile(**dump, bad);
  ASSERT_FALSE(p.hasValue());
  EXPECT_NE(p.status().message().find("--spec: plan 'int2;2:int8'"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace kvscope
