// SPDX-License-Identifier: GPL-3.0-or-later
// Recording and end-to-end replay on stories260K (dumps in a temporary folder).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/io/dump.h"
#include "core/io/dump_writer.h"
#include "core/model/e2e.h"
#include "core/model/forward.h"
#include "core/model/logits.h"
#include "core/model/model.h"
#include "core/model/quantized_kv_store.h"
#include "core/model/record.h"
#include "core/quant/quantize.h"
#include "core/quant/rope.h"
#include "core/quant/spec.h"
#include "tests/core/model/reference_model.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

#define REQUIRE_STORIES()                                                                   \
  if (test::storiesModel().empty())                                                        \
  GTEST_SKIP() << "../shared/models/stories260K.bin is absent: the real-model tests need it"

constexpr int kSteps = 96;

// One model and one sampled recording shared by the tests of this file.
struct Fixture {
  test::TempDir dir;
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Dump> dump;
  std::string dumpPath;
  std::vector<int> tokens;
  Tensor3 key0, keyPre0, value0;  ///< layer 0 of the dump
};

RecordOptions fixtureOptions() {
  RecordOptions o;
  o.tokens = {1, 403, 407};
  o.steps = kSteps;
  o.seed = 11;
  o.temperature = 0.8;
  o.logits = true;
  return o;
}

void fill(Fixture& x) {
    auto m = Model::load(test::storiesModel().string());
    if (!m) return;
    x.model = *m;
    x.dumpPath = x.dir.file("stories.h5");
    auto rec = recordDump(x.model, fixtureOptions(), x.dumpPath);
    if (!rec) return;
    x.tokens = rec->tokens;
    auto d = Dump::open(x.dumpPath);
    if (!d) return;
    x.dump = *d;
    x.key0 = *x.dump->read(0, TensorKind::Key);
    x.keyPre0 = *x.dump->read(0, TensorKind::KeyPreRope);
    x.value0 = *x.dump->read(0, TensorKind::Value);
}

const Fixture& fixture() {
  static Fixture f;
  static const bool filled = (fill(f), true);
  (void)filled;
  return f;
}

QuantSpec spec(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s) << s.status().message();
  return s ? *s : QuantSpec{};
}

Plan planOf(const std::string& text) {
  auto p = parsePlan(text);
  EXPECT_TRUE(p) << p.status().message();
  return p ? *p : Plan{};
}

E2eSetting setting(const Plan& key, const Plan& value) {
  E2eSetting s;
  s.key = key;
  s.value = value;
  return s;
}

E2eResult run(const std::string& key, const std::string& value) {
  const Fixture& f = fixture();
  auto r = runE2e(f.model, *f.dump, {setting(spec(key), spec(value))});
  EXPECT_TRUE(r) << r.status().message();
  return r ? r->front() : E2eResult{};
}

std::vector<float> dumpLogits() {
  auto l = fixture().dump->logits();
  EXPECT_TRUE(l) << l.status().message();
  return l ? *l : std::vector<float>{};
}

TEST(Record, IsDeterministicForASeedAndFollowsThePrompt) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  ASSERT_TRUE(f.dump) << "the fixture's recording failed";
  ASSERT_EQ(f.tokens.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(f.tokens[0], 1);
  EXPECT_EQ(f.tokens[1], 403);
  EXPECT_EQ(f.tokens[2], 407);
  const std::string again = f.dir.file("again.h5");
  auto rec = recordDump(f.model, fixtureOptions(), again);
  ASSERT_TRUE(rec) << rec.status().message();
  EXPECT_EQ(rec->tokens, f.tokens);
  EXPECT_EQ(rec->sampled, kSteps - 3);
  auto d = Dump::open(again);
  ASSERT_TRUE(d);
  for (int l = 0; l < 5; ++l) {
    for (TensorKind k : {TensorKind::Key, TensorKind::Value, TensorKind::Query, TensorKind::KeyPreRope})
      EXPECT_EQ((*d)->read(l, k)->data, f.dump->read(l, k)->data) << "layer " << l;
  }
  EXPECT_EQ(*(*d)->logits(), dumpLogits());
  RecordOptions o = fixtureOptions();
  o.seed = 12;
  auto other = recordDump(f.model, o, f.dir.file("other.h5"));
  ASSERT_TRUE(other);
  EXPECT_NE(other->tokens, f.tokens) << "another seed should sample another story";
}

TEST(Record, GreedyRecordingPicksTheArgmaxEachStep) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  RecordOptions o;
  o.tokens = {1};
  o.steps = 32;
  o.logits = true;
  const std::string path = f.dir.file("greedy.h5");
  auto rec = recordDump(f.model, o, path);
  ASSERT_TRUE(rec) << rec.status().message();
  auto d = Dump::open(path);
  ASSERT_TRUE(d);
  const std::vector<float> logits = *(*d)->logits();
  const int V = 512;
  for (int p = 0; p + 1 < 32; ++p) {
    const float* row = logits.data() + static_cast<size_t>(p) * V;
    EXPECT_EQ(rec->tokens[static_cast<size_t>(p + 1)], std::max_element(row, row + V) - row) << p;
  }
}

TEST(Record, InputTokensFollowTheModelsBos) {
  REQUIRE_STORIES();
  const Model& m = *fixture().model;
  RecordInput in;
  in.promptTokens = {1, 403, 407};
  EXPECT_EQ(*recordInputTokens(m, in), (std::vector<int>{1, 403, 407})) << "a prompt starting with BOS keeps one";
  in.promptTokens = {403};
  EXPECT_EQ(*recordInputTokens(m, in), (std::vector<int>{1, 403}));
  in.tokens = std::vector<int>{5, 6};
  EXPECT_EQ(*recordInputTokens(m, in), (std::vector<int>{5, 6})) << "--tokens: exactly those, nothing added";
  RecordInput text;
  text.text = "Once upon a time";
  auto refused = recordInputTokens(m, text);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("no tokenizer"), std::string::npos) << refused.status().message();
}

TEST(Record, RejectsBadOptionsAndLeavesNoFile) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  const std::string path = f.dir.file("bad.h5");
  RecordOptions o;
  o.tokens = {1};
  o.steps = 513;
  auto r = recordDump(f.model, o, path);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("context length 512"), std::string::npos) << r.status().message();
  o.steps = 3;
  o.tokens = {1, 512};
  EXPECT_NE(recordDump(f.model, o, path).status().message().find("outside the model's vocabulary"), std::string::npos);
  o.tokens = {1};
  o.temperature = -1;
  EXPECT_FALSE(recordDump(f.model, o, path));
  o.temperature = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(recordDump(f.model, o, path));
  o.tokens = {};
  EXPECT_FALSE(recordDump(f.model, o, path));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Record, KeyIsRopeOfKeyPreRopeBitForBit) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  // The dump's rope_inv_freq and style re-apply this model's RoPE exactly (core/quant/rope.h):
  // a prerope spec rotates pre-RoPE keys back to the cached keys with the same bits.
  const DumpInfo& info = f.dump->info();
  ASSERT_EQ(info.ropeInvFreq.size(), 4u);
  EXPECT_EQ(info.ropeStyle, RopeStyle::Interleaved);
  for (int l = 0; l < 5; ++l) {
    Tensor3 pre = *f.dump->read(l, TensorKind::KeyPreRope);
    applyRope(pre, info.rope());
    EXPECT_EQ(pre.data, f.dump->read(l, TensorKind::Key)->data) << "layer " << l;
  }
  // And both agree with the float64 reference's rotation.
  for (int64_t h = 0; h < f.key0.heads; ++h) {
    for (int64_t t = 0; t < f.key0.tokens; ++t) {
      std::vector<double> x(f.keyPre0.row(h, t), f.keyPre0.row(h, t) + f.key0.dim);
      test::ReferenceModel::rope(x, static_cast<int>(t), static_cast<int>(f.key0.dim));
      for (int64_t d = 0; d < f.key0.dim; ++d) ASSERT_NEAR(f.key0.at(h, t, d), x[static_cast<size_t>(d)], 1e-5);
    }
  }
}

TEST(Record, LogitsKeysAndQueriesMatchFloat64Reference) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  test::ReferenceModel ref;
  ASSERT_TRUE(ref.load(test::storiesModel().string()));
  const std::vector<float> logits = dumpLogits();
  const int V = 512, D = 8, kvd = 32;
  std::vector<Tensor3> keys, values, queries;
  for (int l = 0; l < 5; ++l) {
    keys.push_back(*f.dump->read(l, TensorKind::Key));
    values.push_back(*f.dump->read(l, TensorKind::Value));
    queries.push_back(*f.dump->read(l, TensorKind::Query));
  }
  for (int p = 0; p < 24; ++p) {  // the float64 reference is slow; a prefix suffices
    std::vector<double> expected = ref.step(f.tokens[static_cast<size_t>(p)]);
    for (int i = 0; i < V; ++i)
      ASSERT_NEAR(logits[static_cast<size_t>(p) * V + i], expected[static_cast<size_t>(i)], 1e-4) << p;
    for (size_t l = 0; l < 5; ++l) {
      for (int i = 0; i < kvd; ++i) {
        ASSERT_NEAR(keys[l].at(i / D, p, i % D), ref.kCache[l][static_cast<size_t>(p * kvd + i)], 1e-4);
        ASSERT_NEAR(values[l].at(i / D, p, i % D), ref.vCache[l][static_cast<size_t>(p * kvd + i)], 1e-4);
      }
      for (int i = 0; i < 64; ++i)
        ASSERT_NEAR(queries[l].at(i / D, p, i % D), ref.lastQuery[l][static_cast<size_t>(i)], 1e-4);
    }
  }
}

TEST(E2e, ExactReplayReproducesTheRecordedTensorsAndLogits) {
  REQUIRE_STORIES();
  E2eResult r = run("none", "none");
  ASSERT_TRUE(r.dumpLogitsMaxAbsDiff.has_value());
  EXPECT_EQ(*r.dumpLogitsMaxAbsDiff, 0.0) << "same model, same tokens, same arithmetic";
  ASSERT_TRUE(r.dumpKvMaxAbsDiff.has_value());
  EXPECT_EQ(*r.dumpKvMaxAbsDiff, 0.0);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
}

TEST(E2e, NoneIsExactlyLossless) {
  REQUIRE_STORIES();
  E2eResult r = run("none", "none");
  EXPECT_EQ(r.summary.klMean, 0.0);
  EXPECT_EQ(r.summary.klMax, 0.0);
  EXPECT_EQ(r.summary.top1Agreement, 1.0);
  EXPECT_EQ(r.summary.rmsDeltaP, 0.0);
  EXPECT_DOUBLE_EQ(r.summary.pplRatio, 1.0);
  ASSERT_EQ(r.positions.size(), static_cast<size_t>(kSteps));
  EXPECT_FALSE(r.positions.back().nllFp.has_value()) << "the last position has no recorded next token";
  for (const E2eLayer& l : r.layers) {
    EXPECT_EQ(l.attentionKlMean, 0.0);
    EXPECT_EQ(l.hiddenRelError, 0.0);
  }
}

TEST(E2e, Fp16IsNearlyLosslessAndFlipsOnlyNearTies) {
  REQUIRE_STORIES();
  E2eResult r = run("fp16", "fp16");
  EXPECT_LT(r.summary.klMean, 1e-4);
  EXPECT_LT(std::abs(r.summary.pplRatio - 1.0), 1e-3);
  const std::vector<float> logits = dumpLogits();
  const int V = 512;
  for (const E2ePosition& p : r.positions) {
    if (p.top1Agrees) continue;
    std::vector<float> row(logits.begin() + static_cast<ptrdiff_t>(p.position) * V,
                           logits.begin() + static_cast<ptrdiff_t>(p.position + 1) * V);
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
    EXPECT_LT(row[0] - row[1], 0.05f) << "fp16 changed a clear top-1 at position " << p.position;
  }
}

TEST(E2e, KlGrowsAsKeyBitsShrink) {
  REQUIRE_STORIES();
  const double k8 = run("int8", "none").summary.klMean, k4 = run("int4", "none").summary.klMean,
               k2 = run("int2", "none").summary.klMean;
  EXPECT_GT(k8, 0.0);
  EXPECT_LT(k8, k4);
  EXPECT_LT(k4, k2);
}

TEST(E2e, KlGrowsAsValueBitsShrink) {
  REQUIRE_STORIES();
  const double v8 = run("none", "int8").summary.klMean, v4 = run("none", "int4").summary.klMean,
               v2 = run("none", "int2").summary.klMean;
  EXPECT_GT(v8, 0.0);
  EXPECT_LT(v8, v4);
  EXPECT_LT(v4, v2);
}

TEST(E2e, Q8_0IsSmall) {
  REQUIRE_STORIES();
  E2eResult r = run("q8_0", "q8_0");
  EXPECT_GT(r.summary.klMean, 0.0);
  EXPECT_LT(r.summary.klMean, 1e-2);
  EXPECT_GT(r.summary.top1Agreement, 0.9);
  EXPECT_NEAR(r.key.bitsPerElement, 8.5, 1e-12);
}

TEST(E2e, SummaryIsLlamaPerplexitysStatisticsOfTheScoredPositions) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  for (int from : {0, kSteps / 2}) {
    E2eOptions options;
    options.scoreFrom = from;
    auto all = runE2e(f.model, *f.dump, {setting(spec("int4"), spec("int4"))}, options);
    ASSERT_TRUE(all) << all.status().message();
    const E2eResult& r = all->front();
    // Independently from the positions: positions from..T−2 (those with a next token).
    std::vector<double> kl;
    double nllFp = 0, nllQ = 0, agree = 0, dp = 0, dp2 = 0;
    for (const E2ePosition& p : r.positions) {
      if (p.position < from || !p.nllFp) continue;
      kl.push_back(p.kl);
      agree += p.top1Agrees;
      nllFp += *p.nllFp;
      nllQ += *p.nllQuant;
      // Δp = P_quant(next) − P_fp(next), from the two NLLs.
      const double d = std::exp(-*p.nllQuant) - std::exp(-*p.nllFp);
      EXPECT_NEAR(*p.deltaP, d, 1e-12);
      dp += d;
      dp2 += d * d;
    }
    const double n = static_cast<double>(kl.size());
    ASSERT_EQ(r.summary.scored, static_cast<int>(n));
    EXPECT_EQ(n, kSteps - 1 - from);
    double sum = 0;
    for (double k : kl) sum += k;
    std::sort(kl.begin(), kl.end());
    EXPECT_NEAR(r.summary.klMean, sum / n, 1e-12);
    EXPECT_EQ(r.summary.klMax, kl.back());
    // n even: the median is the mean of the two middle values.
    const size_t m = kl.size();
    EXPECT_NEAR(r.summary.klMedian, m % 2 ? kl[m / 2] : 0.5 * (kl[m / 2] + kl[m / 2 - 1]), 1e-15);
    // llama-perplexity's percentile: linear interpolation at 0.99·(n − 1).
    const double at = 0.99 * (n - 1);
    const auto i = static_cast<size_t>(at);
    EXPECT_NEAR(r.summary.klP99, kl[i] + (at - i) * (kl[std::min(i + 1, m - 1)] - kl[i]), 1e-12);
    EXPECT_LE(r.summary.klP90, r.summary.klP95);
    EXPECT_LE(r.summary.klP95, r.summary.klP99);
    EXPECT_NEAR(r.summary.top1Agreement, agree / n, 1e-12);
    EXPECT_NEAR(r.summary.meanDeltaP, dp / n, 1e-12);
    EXPECT_NEAR(r.summary.rmsDeltaP, std::sqrt(dp2 / n), 1e-12);
    EXPECT_NEAR(r.summary.pplFp, std::exp(nllFp / n), 1e-9);
    EXPECT_NEAR(r.summary.pplRatio, std::exp((nllQ - nllFp) / n), 1e-9);
    EXPECT_GT(r.summary.pplRatio, 1.0) << "int4 on a 260K model costs perplexity";
    // The first layer's hidden drift comes only from its own attention.
    EXPECT_GT(r.layers[0].attentionKlMean, 0.0);
    EXPECT_LE(r.layers[0].hiddenRelError, r.layers.back().hiddenRelError);
  }
}

TEST(E2e, PerPositionKlAndNllAreTheFullSoftmaxOfBothRuns) {
  REQUIRE_STORIES();
  // The streaming statistics over vocabulary blocks (core/model/logits.h) against a plain
  // computation from whole logit rows: the recorded logits are the exact run's.
  const std::vector<float> logits = dumpLogits();
  const Fixture& f = fixture();
  E2eResult r = run("none", "none");
  const int V = 512;
  for (int p = 0; p + 1 < kSteps; p += 7) {
    const float* row = logits.data() + static_cast<size_t>(p) * V;
    double mx = -1e300, sum = 0;
    for (int i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(row[i]));
    for (int i = 0; i < V; ++i) sum += std::exp(row[i] - mx);
    const double nll = mx + std::log(sum) - row[f.tokens[static_cast<size_t>(p + 1)]];
    EXPECT_NEAR(*r.positions[static_cast<size_t>(p)].nllFp, nll, 1e-9);
  }
  // KL of two known distributions through NextTokenComparison, with a block boundary inside.
  NextTokenComparison cmp({1, -1}, 1);
  const float a[2][3] = {{0.f, 1.f, 2.f}, {3.f, 0.f, 0.f}}, b[2][3] = {{0.5f, 1.f, 1.f}, {3.f, 0.f, 1.f}};
  for (int v0 = 0; v0 < 3; v0 += 2) {
    const int count = std::min(2, 3 - v0);
    std::vector<float> fa, fb;
    for (int p = 0; p < 2; ++p)
      for (int j = 0; j < count; ++j) {
        fa.push_back(a[p][v0 + j]);
        fb.push_back(b[p][v0 + j]);
      }
    cmp.addBlock(v0, count, fa.data(), {fb.data()});
  }
  const auto figs = cmp.figures(0);
  for (int p = 0; p < 2; ++p) {
    double za = 0, zb = 0, kl = 0;
    for (int j = 0; j < 3; ++j) {
      za += std::exp(static_cast<double>(a[p][j]));
      zb += std::exp(static_cast<double>(b[p][j]));
    }
    for (int j = 0; j < 3; ++j) {
      const double pa = std::exp(static_cast<double>(a[p][j])) / za, pb = std::exp(static_cast<double>(b[p][j])) / zb;
      kl += pa * std::log(pa / pb);
    }
    EXPECT_NEAR(figs[static_cast<size_t>(p)].kl, kl, 1e-12) << p;
  }
  EXPECT_FALSE(figs[0].top1Agrees) << "a's argmax is 2; b ties 1 and 2 and the lower index wins";
  EXPECT_TRUE(figs[1].top1Agrees);
  EXPECT_NEAR(figs[0].nllFp, std::log(std::exp(0.0) + std::exp(1.0) + std::exp(2.0)) - 1.0, 1e-12);
}

// The final cache of `layer` 0 under (key, value): each row as stored once the sequence ends.
struct FinalCache {
  std::vector<float> key, value;  ///< [T, kvDim]
};

FinalCache finalCache(const std::string& key, const std::string& value) {
  const Fixture& f = fixture();
  const int T = kSteps, kvh = 4, d = 8, kvDim = 32;
  auto rows = [&](const Tensor3& x) {
    std::vector<float> out(static_cast<size_t>(T) * kvDim);
    for (int h = 0; h < kvh; ++h)
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < d; ++i) out[static_cast<size_t>(t) * kvDim + h * d + i] = x.at(h, t, i);
    return out;
  };
  const std::vector<float> k = rows(f.key0), kp = rows(f.keyPre0), v = rows(f.value0);
  CalibrationSource source = [&](int) -> Expected<CalibrationLayer> {
    return CalibrationLayer{f.key0, f.keyPre0, f.value0};
  };
  QuantizedCacheStore store(kvh, d, {spec(key)}, {spec(value)}, f.dump->info().rope(), source);
  StoredRows sk, sv;
  EXPECT_TRUE(store.store(0, T, k.data(), kp.data(), v.data(), sk, sv).isOk());
  FinalCache out{k, v};
  for (int t = 0; t < T; ++t) {
    if (sk.since[static_cast<size_t>(t)] <= T - 1)
      std::copy_n(sk.rows.data() + static_cast<size_t>(t) * kvDim, kvDim, out.key.data() + static_cast<size_t>(t) * kvDim);
    if (sv.since[static_cast<size_t>(t)] <= T - 1)
      std::copy_n(sv.rows.data() + static_cast<size_t>(t) * kvDim, kvDim,
                  out.value.data() + static_cast<size_t>(t) * kvDim);
  }
  return out;
}

// The offline pipeline on layer 0's recorded tensor (layer 0's K/V do not depend on earlier layers).
Tensor3 offline(const std::string& text, bool isKey) {
  const Fixture& f = fixture();
  QuantInput in;
  in.tensor = isKey ? &f.key0 : &f.value0;
  in.preRope = &f.keyPre0;
  in.rope = f.dump->info().rope();
  auto q = quantizeTensor(in, spec(text));
  EXPECT_TRUE(q) << q.status().message();
  return q ? q->reconstruction : Tensor3{};
}

void expectRowsEqual(const std::vector<float>& rows, const Tensor3& x, int from, int to, const std::string& what) {
  const int D = static_cast<int>(x.dim), kvDim = static_cast<int>(x.heads * x.dim);
  for (int t = from; t < to; ++t)
    for (int i = 0; i < kvDim; ++i)
      ASSERT_NEAR(rows[static_cast<size_t>(t) * kvDim + i], x.at(i / D, t, i % D), 1e-6)
          << what << " token " << t << " element " << i;
}

TEST(QuantizedCacheStore, TokenLocalStreamingEqualsTheOfflinePipeline) {
  REQUIRE_STORIES();
  for (const std::string s : {"int4", "q8_0", "int3,sym,axis=token,group=4", "int4,rot=hadamard", "int4,prerope",
                              "nf4,group=8"}) {
    FinalCache c = finalCache(s, s == "int4,prerope" ? "none" : s);
    expectRowsEqual(c.key, offline(s, true), 0, kSteps, s + " key");
    if (s != "int4,prerope") expectRowsEqual(c.value, offline(s, false), 0, kSteps, s + " value");
  }
}

TEST(QuantizedCacheStore, StreamingOutliersAreChosenPerTokenAndKeptExact) {
  REQUIRE_STORIES();
  // outliers=0.25 of a token's D = 8 values per kv head: its 2 largest |x| stay exact.
  FinalCache c = finalCache("int2,outliers=0.25", "none");
  const Tensor3& k = fixture().key0;
  int changed = 0;
  for (int t = 0; t < kSteps; ++t) {
    for (int64_t h = 0; h < k.heads; ++h) {
      std::vector<int> order(static_cast<size_t>(k.dim));
      for (int i = 0; i < k.dim; ++i) order[static_cast<size_t>(i)] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return std::abs(k.at(h, t, a)) > std::abs(k.at(h, t, b)); });
      const float* row = c.key.data() + static_cast<size_t>(t) * 32 + h * k.dim;
      for (int r = 0; r < 2; ++r) {
        const int ch = order[static_cast<size_t>(r)];
        EXPECT_EQ(row[ch], k.at(h, t, ch)) << "token " << t << " head " << h;
      }
      for (int r = 2; r < k.dim; ++r) {
        const int ch = order[static_cast<size_t>(r)];
        changed += row[ch] != k.at(h, t, ch);
      }
    }
  }
  EXPECT_GT(changed, 0) << "the dense part must be quantized";
}

TEST(QuantizedCacheStore, CalibratedScalesComeFromTheWholeDump) {
  REQUIRE_STORIES();
  for (const std::string s : {"int4,axis=tensor", "int4,axis=channel", "nvfp4", "fp8_e4m3", "int4,prerope,axis=channel"}) {
    FinalCache c = finalCache(s, "none");
    expectRowsEqual(c.key, offline(s, true), 0, kSteps, s);
  }
}

TEST(QuantizedCacheStore, ChannelGroupsQuantizeCompleteGroupsAndKeepTheTail) {
  REQUIRE_STORIES();
  const int G = 20;  // 96 tokens: groups [0,20) … [60,80) complete, [80,96) incomplete
  const std::string s = "int2,axis=channel,group=20";
  FinalCache c = finalCache(s, "none");
  expectRowsEqual(c.key, offline(s, true), 0, 4 * G, "complete groups");
  expectRowsEqual(c.key, fixture().key0, 4 * G, kSteps, "incomplete tail");
  expectRowsEqual(c.value, fixture().value0, 0, kSteps, "values stored exactly");
}

TEST(QuantizedCacheStore, SinksAndResidualWindowStayExact) {
  REQUIRE_STORIES();
  const std::string s = "int2,sinks=3,residual=10";
  FinalCache c = finalCache(s, s);
  expectRowsEqual(c.key, fixture().key0, 0, 3, "sinks");
  expectRowsEqual(c.key, fixture().key0, kSteps - 10, kSteps, "residual window");
  // Tokens that left the window were quantized alone, like the offline pipeline without kept tokens.
  expectRowsEqual(c.key, offline("int2", true), 3, kSteps - 10, "quantized middle");
  expectRowsEqual(c.value, offline("int2", false), 3, kSteps - 10, "quantized middle");
}

TEST(QuantizedCacheStore, ARowIsReadQuantizedFromTheStepItLeavesTheWindow) {
  REQUIRE_STORIES();
  // What a token-by-token engine holds at step p: residual=10 quantizes token t at step t + 10;
  // chunk=16 quantizes tokens [16k, 16k+16) at step 16k + 15; sinks never.
  const Fixture& f = fixture();
  std::vector<float> k(static_cast<size_t>(kSteps) * 32, 0.5f);
  StoredRows sk, sv;
  QuantizedCacheStore window(4, 8, {spec("int2,sinks=3,residual=10")}, {spec("int4,axis=channel,group=8,chunk=16")},
                             f.dump->info().rope());
  ASSERT_TRUE(window.store(0, kSteps, k.data(), k.data(), k.data(), sk, sv).isOk());
  for (int t = 0; t < kSteps; ++t) {
    const int expectedKey = t < 3 || t + 10 >= kSteps ? StoredRows::kNever : t + 10;
    EXPECT_EQ(sk.since[static_cast<size_t>(t)], expectedKey) << t;
    const int expectedValue = (t / 16) * 16 + 15 < kSteps ? (t / 16) * 16 + 15 : StoredRows::kNever;
    EXPECT_EQ(sv.since[static_cast<size_t>(t)], expectedValue) << t;
  }
  EXPECT_FALSE(sk.everyVisibleRowStored());
  QuantizedCacheStore plain(4, 8, {spec("q8_0")}, {spec("none")}, f.dump->info().rope());
  ASSERT_TRUE(plain.store(0, kSteps, k.data(), k.data(), k.data(), sk, sv).isOk());
  EXPECT_TRUE(sk.everyVisibleRowStored()) << "token-local without windows: stored on arrival";
  EXPECT_EQ(sv.since[0], StoredRows::kNever) << "none is never quantized";
}

TEST(QuantizedCacheStore, ChunksAreQuantizedWhenTheyFillAsKivisDecodeLoop) {
  REQUIRE_STORIES();
  // #18: kivi-2's keys. 96 tokens, sinks 1, chunk 40: chunks [1, 41) and [41, 81) fill and are
  // quantized (channel groups of 8 counted from token 1); [81, 96) never fills and stays exact.
  // The offline pipeline on all 96 tokens stores the same: §1 step 2 with chunk=R.
  const std::string s = "int2,axis=channel,group=8,sinks=1,chunk=40";
  FinalCache c = finalCache(s, "none");
  expectRowsEqual(c.key, fixture().key0, 0, 1, "sink");
  expectRowsEqual(c.key, fixture().key0, 81, kSteps, "unfilled chunk");
  expectRowsEqual(c.key, offline(s, true), 0, kSteps, "offline chunk=40");
  // A token-local format quantizes a chunk's tokens alone, all at once when the chunk fills.
  FinalCache tl = finalCache("int4,chunk=32", "int4,chunk=32");
  expectRowsEqual(tl.key, offline("int4", true), 0, kSteps, "three full chunks of 32");
}

TEST(QuantizedCacheStore, ChannelGroupsCountFromTheFirstTokenOutsideTheWindow) {
  REQUIRE_STORIES();
  // KIVI-like: sinks 1, residual 16, groups of 8 → eligible tokens [1, 80) hold 9 full groups
  // [1, 73); tokens [73, 96) stay exact.
  const std::string s = "int2,axis=channel,group=8,sinks=1,residual=16";
  FinalCache c = finalCache(s, "none");
  const Tensor3& key = fixture().key0;
  expectRowsEqual(c.key, key, 0, 1, "sink");
  expectRowsEqual(c.key, key, 73, kSteps, "tail and window");
  // Offline equivalent: the same spec on the first 73 tokens with no residual.
  Tensor3 prefix(key.heads, 73, key.dim);
  for (int64_t h = 0; h < key.heads; ++h) std::copy_n(key.row(h, 0), 73 * key.dim, prefix.row(h, 0));
  QuantInput in;
  in.tensor = &prefix;
  auto q = quantizeTensor(in, spec("int2,axis=channel,group=8,sinks=1"));
  ASSERT_TRUE(q);
  expectRowsEqual(c.key, q->reconstruction, 0, 73, "groups");
}

TEST(E2e, APlanReportsEachLayersSpecsAndItsOwnBits) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  // Layer 0 exact, layers 1-4 in int2: layer 0's attention sees its exact cache.
  auto all = runE2e(f.model, *f.dump, {setting(planOf("int2;0:none"), planOf("int2;first1:none"))});
  ASSERT_TRUE(all) << all.status().message();
  const E2eResult& r = all->front();
  EXPECT_EQ(r.key.specText, "int2;0:none");
  EXPECT_EQ(r.layers[0].keySpec, "none");
  EXPECT_EQ(r.layers[1].keySpec, "int2");
  EXPECT_EQ(r.layers[4].valueSpec, "int2");
  EXPECT_EQ(r.layers[0].attentionKlMean, 0.0);
  EXPECT_EQ(r.layers[0].hiddenRelError, 0.0);
  EXPECT_GT(r.layers[1].attentionKlMean, 0.0);
  // int2 on token groups of D = 8 with an fp16 scale and min: 2 + 32/8 = 6 bits; none: 16.
  EXPECT_DOUBLE_EQ(r.key.bitsPerElement, (16.0 + 4 * 6.0) / 5);
  const E2eResult uniform = run("int2", "int2");
  EXPECT_GT(uniform.layers[0].attentionKlMean, 0.0);
  EXPECT_EQ(uniform.layers[1].keySpec, "int2");
  // A layer beyond the model is refused.
  auto bad = runE2e(f.model, *f.dump, {setting(planOf("int2;5:none"), spec("int2"))});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("layer 5 does not exist"), std::string::npos) << bad.status().message();
}

TEST(E2e, ASweepRunsSideBySideWithTheSameFiguresAsAloneRuns) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  auto both = runE2e(f.model, *f.dump, {setting(spec("int4"), spec("q8_0")), setting(spec("q4_0"), spec("int2"))});
  ASSERT_TRUE(both) << both.status().message();
  const E2eResult a = run("int4", "q8_0"), b = run("q4_0", "int2");
  EXPECT_EQ((*both)[0].summary.klMean, a.summary.klMean);
  EXPECT_EQ((*both)[1].summary.klMean, b.summary.klMean);
  EXPECT_EQ((*both)[1].layers[3].attentionKlMean, b.layers[3].attentionKlMean);
}

TEST(E2e, ValueOnlyQuantizationLeavesAttentionWeightsExact) {
  REQUIRE_STORIES();
  E2eResult r = run("none", "int4");
  for (const E2eLayer& l : r.layers) {
    EXPECT_EQ(l.attentionKlMean, 0.0) << "keys are exact, so the weights are too";
    EXPECT_EQ(l.attentionTop1, 1.0);
    EXPECT_GT(l.outputRelError, 0.0) << "but the output mixes quantized values";
  }
  E2eResult k = run("int4", "none");
  for (const E2eLayer& l : k.layers) {
    EXPECT_GT(l.attentionKlMean, 0.0);
    EXPECT_GE(l.attentionKlMax, l.attentionKlMean);
    EXPECT_GT(l.outputRelError, 0.0);
  }
}

TEST(E2e, AQueryConversionChangesOnlyTheStoredSidesScores) {
  REQUIRE_STORIES();
  // An engine that converts Q (llama.cpp: to q8_0 for quantized K) changes the scores of the
  // quantized replay, and so its figures, but not the exact replay.
  const Fixture& f = fixture();
  E2eSetting converted = setting(spec("int8"), spec("none"));
  converted.querySpec = "int8";
  auto r = runE2e(f.model, *f.dump, {converted, setting(spec("int8"), spec("none"))});
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)[0].querySpec, "int8");
  EXPECT_NE((*r)[0].summary.klMean, (*r)[1].summary.klMean);
  EXPECT_GT((*r)[0].layers[0].attentionKlMean, 0.0);
  converted.querySpec = "int99";
  EXPECT_FALSE(runE2e(f.model, *f.dump, {converted}));
}

TEST(E2e, ProgressCanCancelRecordingAndReplay) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  int calls = 0;
  Progress stopAtThird = [&calls](double, std::string_view) { return ++calls < 3; };
  RecordOptions o;
  o.tokens = {1};
  o.steps = 16;
  const std::string path = f.dir.file("cancelled.h5");
  EXPECT_EQ(recordDump(f.model, o, path, stopAtThird).status().code(), StatusCode::Cancelled);
  EXPECT_FALSE(std::filesystem::exists(path)) << "a cancelled record leaves no file";
  calls = 0;
  EXPECT_EQ(runE2e(f.model, *f.dump, {setting(spec("int4"), spec("int4"))}, {}, stopAtThird).status().code(),
            StatusCode::Cancelled);
}

TEST(E2e, NotesAnIncompleteChannelGroup) {
  REQUIRE_STORIES();
  E2eResult r = run("int2,axis=channel,group=20", "int2,axis=channel,group=48");
  ASSERT_EQ(r.notes.size(), 1u) << "96 tokens: 16 left over for keys, none for values";
  EXPECT_NE(r.notes[0].find("key: the last 16 tokens"), std::string::npos) << r.notes[0];
  EXPECT_EQ(r.key.mode, "channel-groups");
}

/// A copy of the fixture's dump with `edit` applied to its tokens, layer count or layer 0 key.
std::string editedDump(const std::string& name, const std::function<void(std::vector<int64_t>&, int&, Tensor3&)>& edit) {
  const Fixture& f = fixture();
  const DumpInfo& info = f.dump->info();
  std::vector<int64_t> tokens = *f.dump->tokens();
  int layers = info.layers;
  Tensor3 key0 = f.key0;
  edit(tokens, layers, key0);
  DumpWriterOptions o;
  o.layers = layers;
  o.kvHeads = info.kvHeads;
  o.tokens = info.tokens;
  o.headDim = info.headDim;
  o.withTokens = true;
  o.dtype = DiskType::Float32;
  o.ropeStyle = info.ropeStyle;
  const std::string path = f.dir.file(name);
  auto w = DumpWriter::create(path, o);
  EXPECT_TRUE(w);
  for (int l = 0; l < layers; ++l) {
    EXPECT_TRUE((*w)->write(l, TensorKind::Key, l == 0 ? key0 : *f.dump->read(l, TensorKind::Key)).isOk());
    EXPECT_TRUE((*w)->write(l, TensorKind::Value, *f.dump->read(l, TensorKind::Value)).isOk());
  }
  EXPECT_TRUE((*w)->writeTokens(tokens).isOk());
  EXPECT_TRUE((*w)->finish().isOk());
  return path;
}

TEST(E2e, DumpFromAnotherModelIsRefusedOrWarned) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  auto runOn = [&](const std::string& path) -> Expected<std::vector<E2eResult>> {
    auto d = Dump::open(path);
    if (!d) return d.status();
    return runE2e(f.model, **d, {setting(spec("none"), spec("none"))});
  };
  auto changed = runOn(editedDump("changed.h5", [](auto&, int&, Tensor3& k) { k.at(1, 5, 3) += 0.01f; }));
  ASSERT_TRUE(changed) << changed.status().message();
  ASSERT_FALSE(changed->front().warnings.empty());
  EXPECT_NE(changed->front().warnings[0].find("another model"), std::string::npos) << changed->front().warnings[0];
  EXPECT_NEAR(*changed->front().dumpKvMaxAbsDiff, 0.01, 1e-5);
  auto badToken = runOn(editedDump("token.h5", [](std::vector<int64_t>& t, int&, Tensor3&) { t[4] = 600; }));
  EXPECT_EQ(badToken.status().code(), StatusCode::InvalidData);
  auto badShape = runOn(editedDump("layers.h5", [](auto&, int& layers, Tensor3&) { layers = 4; }));
  ASSERT_FALSE(badShape);
  EXPECT_NE(badShape.status().message().find("4 layers"), std::string::npos) << badShape.status().message();
}

TEST(E2e, JsonHasTheSummaryPositionsAndLayers) {
  REQUIRE_STORIES();
  auto j = nlohmann::json::parse(e2eToJson(run("int4,axis=tensor", "q4_0")));
  for (const char* k : {"kl_mean", "kl_median", "kl_p90", "kl_p95", "kl_p99", "kl_max", "top1_agreement",
                        "mean_delta_p", "rms_delta_p", "nll_fp", "nll_quant", "ppl_fp", "ppl_quant", "ppl_ratio",
                        "positions_scored", "score_from"})
    EXPECT_TRUE(j["summary"].contains(k)) << k;
  EXPECT_EQ(j["positions"].size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(j["layers"].size(), 5u);
  EXPECT_EQ(j["key"]["mode"], "calibrated");
  EXPECT_EQ(j["value"]["mode"], "token-local");
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_TRUE(j["positions"].back()["nll_fp"].is_null());
  EXPECT_TRUE(j["positions"].back()["delta_p"].is_null());
}

TEST(Sweep, ParsesPairsPresetsAndSingleSpecs) {
  const KvShape shape{8, 5, 4};  // stories260K: D = 8, 5 layers, 4 kv heads
  auto s = parseSweep("int4,axis=channel,group=32 : int4 ; kivi-2;q8_0;llamacpp-q4_0", KvShape{96, 5, 4});
  ASSERT_TRUE(s) << s.status().message();
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0].key.base.axis, Axis::Channel);
  EXPECT_EQ((*s)[0].value.base.axis, Axis::Token);
  EXPECT_EQ((*s)[1].value.base.residual, 128);
  EXPECT_EQ((*s)[1].preset, "kivi-2");
  EXPECT_EQ((*s)[2].key.base.format, FormatId::Q8_0);
  EXPECT_EQ((*s)[2].value.base.format, FormatId::Q8_0);
  // Presets resolve for the shape: D = 96 is not a multiple of 64, so llama.cpp does not rotate;
  // at stories260K's D = 8 llama.cpp refuses q4_0 (block size 32 does not divide D).
  EXPECT_EQ(toString((*s)[3].key), "q4_0");
  EXPECT_FALSE(parseSweep("llamacpp-q4_0", shape));
  EXPECT_TRUE(parseSweep("kivi-2;q8_0", shape));
  EXPECT_FALSE(parseSweep("int4:int99", shape));
  EXPECT_FALSE(parseSweep(" ; ", shape));
}

TEST(Sweep, ReadsAFile) {
  test::TempDir dir;
  const std::string path = dir.file("sweep.txt");
  std::ofstream(path) << "# K : V\nint8:int8\n\nint4:int4  # four bits\n";
  auto s = parseSweep(path, KvShape{8, 5, 4});
  ASSERT_TRUE(s) << s.status().message();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[1].key.base.bits, 4);
}

}  // namespace
}  // namespace kvscope
