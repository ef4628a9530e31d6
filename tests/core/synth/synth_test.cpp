// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/io/dump.h"
#include "core/synth/synth.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

SynthOptions small() {
  SynthOptions o;
  o.layers = 3;
  o.kvHeads = 2;
  o.heads = 4;
  o.tokens = 128;
  o.queries = 16;
  o.headDim = 32;
  o.seed = 7;
  return o;
}

std::string bytesOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Independent RoPE in double: pair i has frequency theta^(-2i/D); token j is at position j.
std::vector<double> ropeReference(const float* x, int dim, int64_t pos, double theta,
                                  RopeStyle style) {
  std::vector<double> out(x, x + dim);
  for (int i = 0; i < dim / 2; ++i) {
    const int a = style == RopeStyle::Interleaved ? 2 * i : i;
    const int b = style == RopeStyle::Interleaved ? 2 * i + 1 : i + dim / 2;
    const double angle = double(pos) / std::pow(theta, 2.0 * i / dim);
    out[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
    out[b] = x[a] * std::sin(angle) + x[b] * std::cos(angle);
  }
  return out;
}

TEST(Synth, SameSeedGivesIdenticalBytesAndOtherSeedsDiffer) {
  test::TempDir dir;
  SynthOptions o = small();
  ASSERT_TRUE(writeSynthDump(dir.file("a.h5"), o));
  ASSERT_TRUE(writeSynthDump(dir.file("b.h5"), o));
  EXPECT_EQ(bytesOf(dir.file("a.h5")), bytesOf(dir.file("b.h5")));
  o.seed = 8;
  ASSERT_TRUE(writeSynthDump(dir.file("c.h5"), o));
  auto a = Dump::open(dir.file("a.h5"));
  auto c = Dump::open(dir.file("c.h5"));
  ASSERT_TRUE(a && c);
  for (TensorKind kind : {TensorKind::Key, TensorKind::Value, TensorKind::Query})
    EXPECT_NE((*a)->read(1, kind)->data, (*c)->read(1, kind)->data) << tensorKindName(kind);
}

TEST(Synth, FileHoldsExactlyWhatSynthLayerGenerates) {
  test::TempDir dir;
  SynthOptions o = small();
  o.dtype = DiskType::Float32;
  o.sequences = 2;
  ASSERT_TRUE(writeSynthDump(dir.file("s.h5"), o));
  auto dump = Dump::open(dir.file("s.h5"));
  ASSERT_TRUE(dump) << dump.status().message();
  const DumpInfo& info = (*dump)->info();
  EXPECT_EQ(info.layers, 3);
  EXPECT_EQ(info.sequences, 2);
  EXPECT_EQ(info.heads, 4);
  EXPECT_EQ(info.queries, 16);
  EXPECT_EQ(info.headDim, 32);
  EXPECT_EQ(info.dtype, "float32");
  EXPECT_EQ(info.model, "synthetic-llama");
  EXPECT_TRUE(info.hasKeyPreRope && info.hasTokens && info.hasTokenText);
  EXPECT_DOUBLE_EQ(info.softmaxScale, 1.0 / std::sqrt(32.0));
  SynthLayer expected = synthLayer(o, 2, 1);
  EXPECT_EQ((*dump)->read(2, TensorKind::Key, 1)->data, expected.key.data);
  EXPECT_EQ((*dump)->read(2, TensorKind::KeyPreRope, 1)->data, expected.keyPreRope.data);
  EXPECT_EQ((*dump)->read(2, TensorKind::Value, 1)->data, expected.value.data);
  EXPECT_EQ((*dump)->read(2, TensorKind::Query, 1)->data, expected.query.data);
  EXPECT_NE((*dump)->read(2, TensorKind::Key, 0)->data, expected.key.data);  // sequences differ
  auto text = (*dump)->tokenText(0);
  ASSERT_TRUE(text);
  EXPECT_EQ((*text)[0], "<s>");
  EXPECT_EQ((*text)[static_cast<size_t>(synthMassiveToken(o))], ".");
}

class SynthRope : public ::testing::TestWithParam<RopeStyle> {};

TEST_P(SynthRope, KeyIsRopeOfKeyPreRopeWithinFp16Rounding) {
  test::TempDir dir;
  SynthOptions o = small();
  o.ropeStyle = GetParam();
  o.ropeTheta = 500000.0;
  ASSERT_TRUE(writeSynthDump(dir.file("r.h5"), o));
  auto dump = Dump::open(dir.file("r.h5"));
  ASSERT_TRUE(dump);
  EXPECT_EQ((*dump)->info().ropeStyle, GetParam());
  EXPECT_DOUBLE_EQ((*dump)->info().ropeTheta, 500000.0);
  for (int l = 0; l < o.layers; ++l) {
    auto key = (*dump)->read(l, TensorKind::Key);
    auto pre = (*dump)->read(l, TensorKind::KeyPreRope);
    ASSERT_TRUE(key && pre);
    double worst = 0;
    for (int g = 0; g < o.kvHeads; ++g)
      for (int j = 0; j < o.tokens; ++j) {
        auto ref = ropeReference(pre->row(g, j), o.headDim, j, o.ropeTheta, o.ropeStyle);
        for (int c = 0; c < o.headDim; ++c) {
          // One fp16 rounding of the stored key: half an ulp, relative 2^-11.
          const double tol = std::max(std::abs(ref[c]), 1e-3) * std::ldexp(1.0, -11) * 1.01 + 1e-7;
          const double err = std::abs(double(key->at(g, j, c)) - ref[c]);
          worst = std::max(worst, err / tol);
          ASSERT_LE(err, tol) << "layer " << l << " head " << g << " token " << j << " channel "
                              << c;
        }
      }
    EXPECT_LE(worst, 1.0);
  }
  // RoPE is not the identity here: position 100 moves the fastest pair.
  EXPECT_NE((*dump)->read(0, TensorKind::Key)->at(0, 100, 0),
            (*dump)->read(0, TensorKind::KeyPreRope)->at(0, 100, 0));
}

INSTANTIATE_TEST_SUITE_P(BothStyles, SynthRope,
                         ::testing::Values(RopeStyle::Half, RopeStyle::Interleaved),
                         [](const auto& test) { return std::string(ropeStyleName(test.param)); });

/// Per channel max |x| over all tokens of one kv head.
std::vector<double> channelMax(const Tensor3& t, int g) {
  std::vector<double> m(static_cast<size_t>(t.dim), 0.0);
  for (int64_t j = 0; j < t.tokens; ++j)
    for (int64_t c = 0; c < t.dim; ++c)
      m[size_t(c)] = std::max(m[size_t(c)], double(std::abs(t.at(g, j, c))));
  return m;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

TEST(Synth, OutlierChannelsAreWhereSynthOutlierChannelsSays) {
  for (const char* profile : {"llama", "bias-outlier"}) {
    SynthOptions o = small();
    o.profile = profile;
    o.headDim = 64;
    std::vector<int> previous;
    bool variesByLayer = false;
    for (int l = 0; l < o.layers; ++l) {
      SynthLayer layer = synthLayer(o, l);
      for (int g = 0; g < o.kvHeads; ++g) {
        const std::vector<int> outliers = synthOutlierChannels(o, l, g);
        ASSERT_FALSE(outliers.empty());
        if (g == 0 && !previous.empty() && previous != outliers) variesByLayer = true;
        if (g == 0) previous = outliers;
        for (const Tensor3* t : {&layer.keyPreRope, &layer.key}) {
          const std::vector<double> m = channelMax(*t, g);
          const double med = median(m);
          for (int c : outliers)
            EXPECT_GE(m[size_t(c)], 10.0 * med) << profile << " layer " << l << " channel " << c;
          // No other channel is that large, except a RoPE partner of an outlier after rotation.
          if (t == &layer.keyPreRope) {
            for (int c = 0; c < o.headDim; ++c) {
              if (std::find(outliers.begin(), outliers.end(), c) == outliers.end()) {
                EXPECT_LT(m[size_t(c)], 6.0 * med) << profile << " layer " << l << " channel " << c;
              }
            }
          }
        }
      }
    }
    EXPECT_TRUE(variesByLayer) << profile;
  }
}

TEST(Synth, OutlierChannelsAreStableAcrossTokens) {
  SynthOptions o = small();
  SynthLayer layer = synthLayer(o, 1);
  for (int c : synthOutlierChannels(o, 1, 0)) {
    const float first = layer.keyPreRope.at(0, 1, c);
    for (int j = 1; j < o.tokens; ++j) {
      EXPECT_EQ(std::signbit(layer.keyPreRope.at(0, j, c)), std::signbit(first));
      EXPECT_LT(std::abs(layer.keyPreRope.at(0, j, c) - first), 0.5 * std::abs(first));
    }
  }
}

TEST(Synth, BiasOutlierProfileBiasesOneChannelInTheFirstAndLastLayer) {
  SynthOptions o = small();
  o.layers = 4;
  o.profile = "bias-outlier";
  EXPECT_GE(synthBiasChannel(o, 0), 0);
  EXPECT_GE(synthBiasChannel(o, 3), 0);
  EXPECT_EQ(synthBiasChannel(o, 1), -1);
  EXPECT_EQ(synthBiasChannel(o, 2), -1);
  const int c = synthBiasChannel(o, 3);
  auto channels = synthOutlierChannels(o, 3, 1);
  EXPECT_NE(std::find(channels.begin(), channels.end(), c), channels.end());
  SynthLayer layer = synthLayer(o, 3);
  for (int j = 0; j < o.tokens; ++j) EXPECT_NEAR(layer.keyPreRope.at(1, j, c), 400.0, 4.0);
  o.profile = "llama";
  EXPECT_EQ(synthBiasChannel(o, 0), -1);
}

/// Mean attention probability on token `target` and on the `recent` last keys, over all query
/// heads and queries of a layer (causal, float64).
std::pair<double, double> attentionShares(const SynthLayer& layer, const SynthOptions& o,
                                          int target, int recent) {
  const double scale = 1.0 / std::sqrt(double(o.headDim));
  const int group = o.heads / o.kvHeads;
  double onTarget = 0, onRecent = 0;
  int n = 0;
  for (int h = 0; h < o.heads; ++h)
    for (int i = 0; i < o.queries; ++i) {
      const int p = o.tokens - o.queries + i;
      std::vector<double> s(size_t(p) + 1);
      for (int j = 0; j <= p; ++j) {
        double dot = 0;
        for (int c = 0; c < o.headDim; ++c)
          dot += double(layer.query.at(h, i, c)) * layer.key.at(h / group, j, c);
        s[size_t(j)] = dot * scale;
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double z = 0;
      for (double& x : s) z += (x = std::exp(x - mx));
      onTarget += s[size_t(target)] / z;
      for (int j = std::max(1, p - recent + 1); j <= p; ++j) onRecent += s[size_t(j)] / z;
      ++n;
    }
  return {onTarget / n, onRecent / n};
}

TEST(Synth, SinkTokenDrawsALargeShareOfAttentionAndRecentTokensTheRest) {
  SynthOptions o = small();
  for (int l = 0; l < o.layers; ++l) {
    SynthLayer layer = synthLayer(o, l);
    auto [sink, recent] = attentionShares(layer, o, kSynthSinkToken, 8);
    EXPECT_GT(sink, 0.3) << "layer " << l;
    // 8 of ~120 visible tokens would get ~7% under uniform attention.
    EXPECT_GT(recent / (1.0 - sink), 3.0 * 8.0 / 120.0) << "layer " << l;
    // The token with the second-highest mean share is far below the sink.
    auto [massive, ignored] = attentionShares(layer, o, synthMassiveToken(o), 1);
    (void)ignored;
    EXPECT_LT(massive, sink / 5) << "layer " << l;
  }
}

TEST(Synth, MassiveActivationTokenHasTheLargestValues) {
  SynthOptions o = small();
  const int m = synthMassiveToken(o);
  ASSERT_GE(m, 1);
  SynthLayer layer = synthLayer(o, 0);
  for (int g = 0; g < o.kvHeads; ++g) {
    double atMassive = 0, elsewhere = 0;
    for (int j = 0; j < o.tokens; ++j)
      for (int c = 0; c < o.headDim; ++c) {
        const double v = std::abs(layer.value.at(g, j, c));
        if (j == m)
          atMassive = std::max(atMassive, v);
        else
          elsewhere = std::max(elsewhere, v);
      }
    EXPECT_GE(atMassive, 40.0);
    EXPECT_GT(atMassive, 1.5 * elsewhere);
  }
}

// issue 21: the pathology profiles, checked against the figures they are calibrated to.
TEST(SynthProfiles, Qwen2BiasPutsTheReportedBiasNormIntoTheBoundaryLayers) {
  SynthOptions o = small();
  o.layers = 4;
  o.kvHeads = 4;  // Qwen2.5-7B's KVH
  o.profile = "qwen2-bias";
  EXPECT_DOUBLE_EQ(synthKeyBiasNorm(o, 0), 605.0);
  EXPECT_DOUBLE_EQ(synthKeyBiasNorm(o, 3), 921.0);
  EXPECT_DOUBLE_EQ(synthKeyBiasNorm(o, 1), 22.0);
  EXPECT_TRUE(synthBiasChannels(o, 1).empty());
  for (int l : {0, 3}) {
    const std::vector<int> chans = synthBiasChannels(o, l);
    ASSERT_EQ(chans.size(), 2u);
    SynthLayer layer = synthLayer(o, l);
    // ‖mean over tokens of the bias channels‖ over all kv heads ≈ ‖b_k‖ (the per-token noise
    // averages out; a normal channel's mean is 0.3·N(0,1), below 1 % of the bias).
    double n2 = 0;
    for (int g = 0; g < o.kvHeads; ++g)
      for (int c : chans) {
        double mean = 0;
        for (int j = 0; j < o.tokens; ++j) mean += layer.keyPreRope.at(g, j, c);
        mean /= o.tokens;
        n2 += mean * mean;
      }
    EXPECT_NEAR(std::sqrt(n2), synthKeyBiasNorm(o, l), 0.01 * synthKeyBiasNorm(o, l)) << l;
  }
  // No regular outlier channels: the bias is the profile's one feature.
  EXPECT_TRUE(synthOutlierChannels(o, 1, 0).empty());
  EXPECT_EQ(synthOutlierChannels(o, 0, 0), synthBiasChannels(o, 0));
}

TEST(SynthProfiles, MassiveSinksGiveTheFirstTokens100To1000TimesTheMedianNorm) {
  SynthOptions o = small();
  o.profile = "massive-sinks";
  const int s = synthMassiveSinkCount(o);
  ASSERT_EQ(s, 4);
  SynthLayer layer = synthLayer(o, 1);
  for (const Tensor3* t : {&layer.key, &layer.value}) {
    for (int g = 0; g < o.kvHeads; ++g) {
      std::vector<double> norms;
      for (int j = 0; j < o.tokens; ++j) {
        double n2 = 0;
        for (int c = 0; c < o.headDim; ++c) n2 += double(t->at(g, j, c)) * t->at(g, j, c);
        norms.push_back(std::sqrt(n2));
      }
      const double med = median(norms);
      EXPECT_NEAR(norms[0] / med, 1000.0, 100.0);
      EXPECT_NEAR(norms[size_t(s - 1)] / med, 100.0, 15.0);
      for (int j = 1; j < s; ++j) EXPECT_LT(norms[size_t(j)], norms[size_t(j - 1)]);
      for (int j = s; j < o.tokens; ++j) EXPECT_LT(norms[size_t(j)] / med, 20.0) << j;
    }
  }
  // The massive entries sit where queries are zero: attention still goes where llama's does.
  SynthOptions llama = small();
  auto [sinkM, recentM] = attentionShares(layer, o, kSynthSinkToken, 8);
  auto [sinkL, recentL] = attentionShares(synthLayer(llama, 1), llama, kSynthSinkToken, 8);
  EXPECT_NEAR(sinkM, sinkL, 0.25);
  EXPECT_GT(recentM, 0.0);
  (void)recentL;
}

TEST(SynthProfiles, LowEntropyHeadsPutNearlyAllAttentionOnThePreviousToken) {
  SynthOptions o = small();
  o.headDim = 64;  // the one-hot margin grows with sqrt(D) (synth.cpp, oneHotQuery)
  o.profile = "low-entropy";
  const std::vector<int> heads = synthOneHotHeads(o, 0);
  ASSERT_EQ(heads, (std::vector<int>{0, 2}));
  SynthLayer layer = synthLayer(o, 0);
  const double scale = 1.0 / std::sqrt(double(o.headDim));
  const int group = o.heads / o.kvHeads;
  for (int h = 0; h < o.heads; ++h) {
    double onPrevious = 0;
    for (int i = 0; i < o.queries; ++i) {
      const int p = o.tokens - o.queries + i;
      std::vector<double> s(size_t(p) + 1);
      for (int j = 0; j <= p; ++j) {
        double dot = 0;
        for (int c = 0; c < o.headDim; ++c) dot += double(layer.query.at(h, i, c)) * layer.key.at(h / group, j, c);
        s[size_t(j)] = dot * scale;
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double z = 0;
      for (double& x : s) z += (x = std::exp(x - mx));
      onPrevious += s[size_t(p - 1)] / z / o.queries;
    }
    const bool oneHot = std::find(heads.begin(), heads.end(), h) != heads.end();
    if (oneHot) EXPECT_GT(onPrevious, 0.99) << "head " << h;
    else EXPECT_LT(onPrevious, 0.5) << "head " << h;
  }
}

TEST(Synth, RefusesBadOptions) {
  SynthOptions o = small();
  o.profile = "mistral";
  EXPECT_EQ(validateSynthOptions(o).code(), StatusCode::InvalidArgument);
  EXPECT_NE(validateSynthOptions(o).message().find("mistral"), std::string::npos);
  o = small();
  o.heads = 3;
  EXPECT_FALSE(validateSynthOptions(o));
  o = small();
  o.queries = o.tokens + 1;
  EXPECT_FALSE(validateSynthOptions(o));
  o = small();
  o.headDim = 30 + 1;
  EXPECT_FALSE(validateSynthOptions(o));
  test::TempDir dir;
  EXPECT_FALSE(writeSynthDump(dir.file("x.h5"), o));
  EXPECT_FALSE(fs::exists(dir.file("x.h5")));
}

TEST(Synth, CancellingLeavesNoFile) {
  test::TempDir dir;
  int calls = 0;
  Status st = writeSynthDump(dir.file("c.h5"), small(),
                             [&](double, std::string_view) { return ++calls < 2; });
  EXPECT_EQ(st.code(), StatusCode::Cancelled);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(Synth, SampleIsSmallAndWrittenOnce) {
  const SynthOptions s = sampleOptions();
  EXPECT_EQ(s.layers, 4);
  EXPECT_EQ(s.kvHeads, 2);
  EXPECT_EQ(s.heads, 8);
  EXPECT_EQ(s.tokens, 256);
  EXPECT_EQ(s.queries, 32);
  EXPECT_EQ(s.headDim, 64);
  test::TempDir dir;
  const std::string cache = dir.file("cache/sub");
  auto path = ensureSampleDump(cache);
  ASSERT_TRUE(path) << path.status().message();
  const auto written = fs::last_write_time(*path);
  auto again = ensureSampleDump(cache);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *path);
  EXPECT_EQ(fs::last_write_time(*again), written);
  auto dump = Dump::open(*path);
  ASSERT_TRUE(dump);
  EXPECT_EQ((*dump)->info().layers, 4);
  // A damaged cache file is replaced.
  std::ofstream(*path, std::ios::trunc) << "garbage";
  auto repaired = ensureSampleDump(cache);
  ASSERT_TRUE(repaired);
  EXPECT_TRUE(Dump::open(*repaired));
}

TEST(Synth, ResultDoesNotDependOnThreadCount) {
  SynthOptions o = small();
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  SynthLayer one = synthLayer(o, 1);
  omp_set_num_threads(4);
  SynthLayer four = synthLayer(o, 1);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.key.data, four.key.data);
  EXPECT_EQ(one.keyPreRope.data, four.keyPreRope.data);
  EXPECT_EQ(one.value.data, four.value.data);
  EXPECT_EQ(one.query.data, four.query.data);
}

}  // namespace
}  // namespace kvscope
