// SPDX-License-Identifier: GPL-3.0-or-later
// Recording and end-to-end replay on stories260K (in memory; the CLI test covers the files).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/model/checkpoint.h"
#include "core/model/e2e.h"
#include "core/model/quantized_kv_store.h"
#include "core/model/record.h"
#include "core/model/transformer.h"
#include "core/quant/quantize.h"
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
  std::shared_ptr<const Checkpoint> model;
  Recording rec;
  E2eBaseline baseline;
};

const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    auto cp = Checkpoint::load(test::storiesModel().string());
    if (!cp) return x;
    x.model = *cp;
    RecordOptions o;
    o.steps = kSteps;
    o.seed = 11;
    o.temperature = 0.8;
    o.promptTokens = {403, 407};
    auto rec = recordSequence(x.model, o);
    if (!rec) return x;
    x.rec = std::move(*rec);
    auto b = e2eBaseline(x.model, x.rec);
    if (b) x.baseline = std::move(*b);
    return x;
  }();
  return f;
}

QuantSpec spec(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s) << s.status().message();
  return s ? *s : QuantSpec{};
}

E2eResult run(const std::string& key, const std::string& value) {
  const Fixture& f = fixture();
  auto r = runE2e(f.model, f.rec, f.baseline, spec(key), spec(value));
  EXPECT_TRUE(r) << r.status().message();
  return r ? *r : E2eResult{};
}

TEST(Record, IsDeterministicForASeedAndFollowsThePrompt) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  ASSERT_EQ(f.rec.tokenCount(), kSteps);
  EXPECT_EQ(f.rec.tokens[0], kBosToken);
  EXPECT_EQ(f.rec.tokens[1], 403);
  EXPECT_EQ(f.rec.tokens[2], 407);
  RecordOptions o;
  o.steps = kSteps;
  o.seed = 11;
  o.temperature = 0.8;
  o.promptTokens = {403, 407};
  auto again = recordSequence(f.model, o);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->tokens, f.rec.tokens);
  EXPECT_EQ(again->logits, f.rec.logits);
  for (size_t l = 0; l < f.rec.layers.size(); ++l) {
    EXPECT_EQ(again->layers[l].key.data, f.rec.layers[l].key.data);
    EXPECT_EQ(again->layers[l].value.data, f.rec.layers[l].value.data);
    EXPECT_EQ(again->layers[l].query.data, f.rec.layers[l].query.data);
  }
  o.seed = 12;
  auto other = recordSequence(f.model, o);
  ASSERT_TRUE(other);
  EXPECT_NE(other->tokens, f.rec.tokens) << "another seed should sample another story";
}

TEST(Record, GreedyRecordingPicksTheArgmaxEachStep) {
  REQUIRE_STORIES();
  RecordOptions o;
  o.steps = 32;
  auto rec = recordSequence(fixture().model, o);
  ASSERT_TRUE(rec);
  const int V = rec->vocabSize;
  for (int p = 0; p + 1 < 32; ++p) {
    const float* row = rec->logits.data() + static_cast<size_t>(p) * V;
    EXPECT_EQ(rec->tokens[static_cast<size_t>(p + 1)], std::max_element(row, row + V) - row);
  }
}

TEST(Record, APromptStartingWithBosDoesNotRepeatIt) {
  REQUIRE_STORIES();
  RecordOptions o;
  o.steps = 8;
  o.promptTokens = {1, 403, 407};
  auto rec = recordSequence(fixture().model, o);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->tokens[0], 1);
  EXPECT_EQ(rec->tokens[1], 403);
  EXPECT_EQ(rec->tokens[2], 407);
}

TEST(Record, RejectsBadOptions) {
  REQUIRE_STORIES();
  RecordOptions o;
  o.steps = 513;
  EXPECT_EQ(recordSequence(fixture().model, o).status().code(), StatusCode::InvalidArgument);
  o.steps = 3;
  o.promptTokens = {5, 6, 7};
  EXPECT_NE(recordSequence(fixture().model, o).status().message().find("leaves room for 2"), std::string::npos);
  o.promptTokens = {512};
  EXPECT_FALSE(recordSequence(fixture().model, o));
  o.promptTokens = {};
  o.temperature = -1;
  EXPECT_FALSE(recordSequence(fixture().model, o));
}

TEST(Record, KeyIsRopeOfKeyPreRope) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  for (const LayerRecording& lr : f.rec.layers) {
    for (int64_t h = 0; h < lr.key.heads; ++h) {
      for (int64_t t = 0; t < lr.key.tokens; ++t) {
        std::vector<double> x(lr.keyPreRope.row(h, t), lr.keyPreRope.row(h, t) + lr.key.dim);
        test::ReferenceModel::rope(x, static_cast<int>(t), static_cast<int>(lr.key.dim));
        for (int64_t d = 0; d < lr.key.dim; ++d) ASSERT_NEAR(lr.key.at(h, t, d), x[static_cast<size_t>(d)], 1e-5);
      }
    }
  }
}

TEST(Record, LogitsKeysAndQueriesMatchFloat64Reference) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  test::ReferenceModel ref;
  ASSERT_TRUE(ref.load(test::storiesModel().string()));
  const int V = f.rec.vocabSize, D = f.model->config().headDim(), kvd = f.model->config().kvDim();
  for (int p = 0; p < 24; ++p) {  // the float64 reference is slow; a prefix suffices
    std::vector<double> logits = ref.step(f.rec.tokens[static_cast<size_t>(p)]);
    for (int i = 0; i < V; ++i)
      ASSERT_NEAR(f.rec.logits[static_cast<size_t>(p) * V + i], logits[static_cast<size_t>(i)], 1e-4) << p;
    for (size_t l = 0; l < f.rec.layers.size(); ++l) {
      const LayerRecording& lr = f.rec.layers[l];
      for (int i = 0; i < kvd; ++i) {
        ASSERT_NEAR(lr.key.at(i / D, p, i % D), ref.kCache[l][static_cast<size_t>(p * kvd + i)], 1e-4);
        ASSERT_NEAR(lr.value.at(i / D, p, i % D), ref.vCache[l][static_cast<size_t>(p * kvd + i)], 1e-4);
      }
      for (int i = 0; i < f.model->config().dim; ++i)
        ASSERT_NEAR(lr.query.at(i / D, p, i % D), ref.lastQuery[l][static_cast<size_t>(i)], 1e-4);
    }
  }
}

TEST(E2e, ExactReplayReproducesTheRecordedLogits) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  ASSERT_TRUE(f.baseline.dumpLogitsMaxAbsDiff.has_value());
  EXPECT_EQ(*f.baseline.dumpLogitsMaxAbsDiff, 0.0) << "same model, same tokens, same arithmetic";
  EXPECT_TRUE(f.baseline.warnings.empty());
}

TEST(E2e, NoneIsExactlyLossless) {
  REQUIRE_STORIES();
  E2eResult r = run("none", "none");
  EXPECT_EQ(r.summary.klMean, 0.0);
  EXPECT_EQ(r.summary.klMax, 0.0);
  EXPECT_EQ(r.summary.top1Agreement, 1.0);
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
  const Fixture& f = fixture();
  E2eResult r = run("fp16", "fp16");
  EXPECT_LT(r.summary.klMean, 1e-4);
  EXPECT_LT(std::abs(r.summary.pplRatio - 1.0), 1e-3);
  const int V = f.rec.vocabSize;
  for (const E2ePosition& p : r.positions) {
    if (p.top1Agrees) continue;
    std::vector<float> row(f.rec.logits.begin() + static_cast<ptrdiff_t>(p.position) * V,
                           f.rec.logits.begin() + static_cast<ptrdiff_t>(p.position + 1) * V);
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

TEST(E2e, SummaryIsTheMeanOfPositions) {
  REQUIRE_STORIES();
  E2eResult r = run("int4", "int4");
  double kl = 0, nllFp = 0, nllQ = 0, agree = 0;
  for (const E2ePosition& p : r.positions) {
    kl += p.kl;
    agree += p.top1Agrees;
    if (p.nllFp) {
      nllFp += *p.nllFp;
      nllQ += *p.nllQuant;
    }
  }
  EXPECT_NEAR(r.summary.klMean, kl / kSteps, 1e-12);
  EXPECT_NEAR(r.summary.top1Agreement, agree / kSteps, 1e-12);
  EXPECT_NEAR(r.summary.pplRatio, std::exp((nllQ - nllFp) / (kSteps - 1)), 1e-9);
  EXPECT_GT(r.summary.pplRatio, 1.0) << "int4 on a 260K model costs perplexity";
  // The first layer's hidden drift comes only from its own attention.
  EXPECT_GT(r.layers[0].attentionKlMean, 0.0);
  EXPECT_LE(r.layers[0].hiddenRelError, r.layers.back().hiddenRelError);
}

// Runs the replay with a quantized store and returns the final cache of `layer`.
LayerCache replayCache(const std::string& key, const std::string& value, int layer) {
  const Fixture& f = fixture();
  std::vector<CalibrationLayer> cal;
  for (const LayerRecording& lr : f.rec.layers) cal.push_back({&lr.key, &lr.keyPreRope, &lr.value});
  QuantizedKvStore store(f.model->config(), spec(key), spec(value), RopeParams{10000.0, RopeStyle::Interleaved}, cal);
  Transformer tf(f.model, &store);
  for (int p = 0; p < f.rec.tokenCount(); ++p) EXPECT_TRUE(tf.step(f.rec.tokens[static_cast<size_t>(p)], p).isOk());
  return tf.cache(layer);
}

// The offline pipeline on layer 0's recorded tensor (layer 0's K/V do not depend on earlier layers).
Tensor3 offline(const std::string& text, bool isKey) {
  const LayerRecording& lr = fixture().rec.layers[0];
  QuantInput in;
  in.tensor = isKey ? &lr.key : &lr.value;
  in.preRope = &lr.keyPreRope;
  in.rope = RopeParams{10000.0, RopeStyle::Interleaved};
  auto q = quantizeTensor(in, spec(text));
  EXPECT_TRUE(q) << q.status().message();
  return q ? q->reconstruction : Tensor3{};
}

void expectRowsEqual(const LayerCache& lc, const std::vector<float>& rows, const Tensor3& x, int from, int to,
                     const std::string& what) {
  const int D = static_cast<int>(x.dim);
  for (int t = from; t < to; ++t)
    for (int i = 0; i < lc.kvDim; ++i)
      ASSERT_NEAR(lc.row(rows, t)[i], x.at(i / D, t, i % D), 1e-6) << what << " token " << t << " element " << i;
}

TEST(QuantizedKvStore, TokenLocalStreamingEqualsTheOfflinePipeline) {
  REQUIRE_STORIES();
  for (const std::string s : {"int4", "q8_0", "int3,sym,axis=token,group=4", "int4,rot=hadamard", "int4,prerope",
                              "nf4,group=8"}) {
    LayerCache lc = replayCache(s, s == "int4,prerope" ? "none" : s, 0);
    expectRowsEqual(lc, lc.key, offline(s, true), 0, kSteps, s + " key");
    if (s != "int4,prerope") expectRowsEqual(lc, lc.value, offline(s, false), 0, kSteps, s + " value");
  }
}

TEST(QuantizedKvStore, StreamingOutliersAreChosenPerTokenAndKeptExact) {
  REQUIRE_STORIES();
  // outliers=0.25 of a token's D = 8 values per kv head: its 2 largest |x| stay exact.
  LayerCache lc = replayCache("int2,outliers=0.25", "none", 0);
  const Tensor3& k = fixture().rec.layers[0].key;
  int changed = 0;
  for (int t = 0; t < kSteps; ++t) {
    for (int64_t h = 0; h < k.heads; ++h) {
      std::vector<int> order(static_cast<size_t>(k.dim));
      for (int i = 0; i < k.dim; ++i) order[static_cast<size_t>(i)] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return std::abs(k.at(h, t, a)) > std::abs(k.at(h, t, b)); });
      for (int r = 0; r < 2; ++r) {
        const int c = order[static_cast<size_t>(r)];
        EXPECT_EQ(lc.row(lc.key, t)[h * k.dim + c], k.at(h, t, c)) << "token " << t << " head " << h;
      }
      for (int r = 2; r < k.dim; ++r) {
        const int c = order[static_cast<size_t>(r)];
        changed += lc.row(lc.key, t)[h * k.dim + c] != k.at(h, t, c);
      }
    }
  }
  EXPECT_GT(changed, 0) << "the dense part must be quantized";
}

TEST(QuantizedKvStore, CalibratedScalesComeFromTheWholeDump) {
  REQUIRE_STORIES();
  for (const std::string s : {"int4,axis=tensor", "int4,axis=channel", "nvfp4", "fp8_e4m3", "int4,prerope,axis=channel"}) {
    LayerCache lc = replayCache(s, "none", 0);
    expectRowsEqual(lc, lc.key, offline(s, true), 0, kSteps, s);
  }
}

TEST(QuantizedKvStore, ChannelGroupsQuantizeCompleteGroupsAndKeepTheTail) {
  REQUIRE_STORIES();
  const int G = 20;  // 96 tokens: groups [0,20) … [60,80) complete, [80,96) incomplete
  const std::string s = "int2,axis=channel,group=20";
  LayerCache lc = replayCache(s, "none", 0);
  expectRowsEqual(lc, lc.key, offline(s, true), 0, 4 * G, "complete groups");
  const Tensor3& exact = fixture().rec.layers[0].key;
  expectRowsEqual(lc, lc.key, exact, 4 * G, kSteps, "incomplete tail");
  expectRowsEqual(lc, lc.value, fixture().rec.layers[0].value, 0, kSteps, "values stored exactly");
}

TEST(QuantizedKvStore, SinksAndResidualWindowStayExact) {
  REQUIRE_STORIES();
  const std::string s = "int2,sinks=3,residual=10";
  LayerCache lc = replayCache(s, s, 0);
  const LayerRecording& lr = fixture().rec.layers[0];
  expectRowsEqual(lc, lc.key, lr.key, 0, 3, "sinks");
  expectRowsEqual(lc, lc.key, lr.key, kSteps - 10, kSteps, "residual window");
  // Tokens that left the window were quantized alone, like the offline pipeline without kept tokens.
  expectRowsEqual(lc, lc.key, offline("int2", true), 3, kSteps - 10, "quantized middle");
  expectRowsEqual(lc, lc.value, offline("int2", false), 3, kSteps - 10, "quantized middle");
}

TEST(QuantizedKvStore, ChunksAreQuantizedWhenTheyFillAsKivisDecodeLoop) {
  REQUIRE_STORIES();
  // #18: kivi-2's keys. 96 tokens, sinks 1, chunk 40: chunks [1, 41) and [41, 81) fill and are
  // quantized (channel groups of 8 counted from token 1); [81, 96) never fills and stays exact.
  // The offline pipeline on all 96 tokens stores the same: §1 step 2 with chunk=R.
  const std::string s = "int2,axis=channel,group=8,sinks=1,chunk=40";
  LayerCache lc = replayCache(s, "none", 0);
  const LayerRecording& lr = fixture().rec.layers[0];
  expectRowsEqual(lc, lc.key, lr.key, 0, 1, "sink");
  expectRowsEqual(lc, lc.key, lr.key, 81, kSteps, "unfilled chunk");
  expectRowsEqual(lc, lc.key, offline(s, true), 0, kSteps, "offline chunk=40");
  // A token-local format quantizes a chunk's tokens alone, all at once when the chunk fills.
  LayerCache tl = replayCache("int4,chunk=32", "int4,chunk=32", 0);
  expectRowsEqual(tl, tl.key, offline("int4", true), 0, kSteps, "three full chunks of 32");
}

TEST(QuantizedKvStore, ChannelGroupsCountFromTheFirstTokenOutsideTheWindow) {
  REQUIRE_STORIES();
  // KIVI-like: sinks 1, residual 16, groups of 8 → eligible tokens [1, 80) hold 9 full groups
  // [1, 73); tokens [73, 96) stay exact.
  const std::string s = "int2,axis=channel,group=8,sinks=1,residual=16";
  LayerCache lc = replayCache(s, "none", 0);
  const LayerRecording& lr = fixture().rec.layers[0];
  expectRowsEqual(lc, lc.key, lr.key, 0, 1, "sink");
  expectRowsEqual(lc, lc.key, lr.key, 73, kSteps, "tail and window");
  // Offline equivalent: the same spec on the first 73 tokens with no residual.
  Tensor3 prefix(lr.key.heads, 73, lr.key.dim);
  for (int64_t h = 0; h < lr.key.heads; ++h) std::copy_n(lr.key.row(h, 0), 73 * lr.key.dim, prefix.row(h, 0));
  QuantInput in;
  in.tensor = &prefix;
  auto q = quantizeTensor(in, spec("int2,axis=channel,group=8,sinks=1"));
  ASSERT_TRUE(q);
  expectRowsEqual(lc, lc.key, q->reconstruction, 0, 73, "groups");
}

Plan planOf(const std::string& text) {
  auto p = parsePlan(text);
  EXPECT_TRUE(p) << p.status().message();
  return p ? *p : Plan{};
}

TEST(QuantizedKvStore, APlanStoresEachLayerUnderItsOwnSpec) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  QuantizedKvStore store(f.model->config(), planOf("none;0:int4"), planOf("q8_0;0:none"),
                         RopeParams{10000.0, RopeStyle::Interleaved});
  Transformer tf(f.model, &store);
  for (int p = 0; p < f.rec.tokenCount(); ++p) ASSERT_TRUE(tf.step(f.rec.tokens[static_cast<size_t>(p)], p).isOk());
  // Layer 0: int4 keys exactly as the offline pipeline stores them, values exact.
  const LayerCache& l0 = tf.cache(0);
  expectRowsEqual(l0, l0.key, offline("int4", true), 0, kSteps, "layer 0 key");
  EXPECT_EQ(l0.value, l0.exactValue);
  // Layer 1: keys exact (the base `none`), values q8_0 (not exact).
  const LayerCache& l1 = tf.cache(1);
  EXPECT_EQ(l1.key, l1.exactKey);
  EXPECT_NE(l1.value, l1.exactValue);
}

TEST(E2e, APlanReportsEachLayersSpecsAndItsOwnBits) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  const int L = f.model->config().layers;
  ASSERT_EQ(L, 5);
  // Layer 0 exact, layers 1-4 in int2: layer 0's attention sees its exact cache.
  auto r = runE2e(f.model, f.rec, f.baseline, planOf("int2;0:none"), planOf("int2;first1:none"));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->key.specText, "int2;0:none");
  EXPECT_EQ(r->layers[0].keySpec, "none");
  EXPECT_EQ(r->layers[1].keySpec, "int2");
  EXPECT_EQ(r->layers[4].valueSpec, "int2");
  EXPECT_EQ(r->layers[0].attentionKlMean, 0.0);
  EXPECT_EQ(r->layers[0].hiddenRelError, 0.0);
  EXPECT_GT(r->layers[1].attentionKlMean, 0.0);
  // int2 on token groups of D = 8 with an fp16 scale and min: 2 + 32/8 = 6 bits; none: 16.
  EXPECT_DOUBLE_EQ(r->key.bitsPerElement, (16.0 + 4 * 6.0) / 5);
  const E2eResult uniform = run("int2", "int2");
  EXPECT_GT(uniform.layers[0].attentionKlMean, 0.0);
  EXPECT_EQ(uniform.layers[1].keySpec, "int2");
  // A layer beyond the model is refused.
  auto bad = runE2e(f.model, f.rec, f.baseline, planOf("int2;5:none"), spec("int2"));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("layer 5 does not exist"), std::string::npos) << bad.status().message();
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

TEST(E2e, ProgressCanCancelRecordingAndReplay) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  int calls = 0;
  Progress stopAtThird = [&calls](double, std::string_view) { return ++calls < 3; };
  RecordOptions o;
  o.steps = 16;
  EXPECT_EQ(recordSequence(f.model, o, stopAtThird).status().code(), StatusCode::Cancelled);
  calls = 0;
  EXPECT_EQ(runE2e(f.model, f.rec, f.baseline, spec("int4"), spec("int4"), stopAtThird).status().code(),
            StatusCode::Cancelled);
  calls = 0;
  EXPECT_EQ(e2eBaseline(f.model, f.rec, stopAtThird).status().code(), StatusCode::Cancelled);
}

TEST(E2e, NotesAnIncompleteChannelGroup) {
  REQUIRE_STORIES();
  E2eResult r = run("int2,axis=channel,group=20", "int2,axis=channel,group=48");
  ASSERT_EQ(r.notes.size(), 1u) << "96 tokens: 16 left over for keys, none for values";
  EXPECT_NE(r.notes[0].find("key: the last 16 tokens"), std::string::npos) << r.notes[0];
  EXPECT_EQ(r.key.mode, "channel-groups");
}

TEST(E2e, DumpFromAnotherModelIsRefusedOrWarned) {
  REQUIRE_STORIES();
  const Fixture& f = fixture();
  Recording changed = f.rec;
  changed.logits[5] += 0.01f;
  auto b = e2eBaseline(f.model, changed);
  ASSERT_TRUE(b);
  ASSERT_FALSE(b->warnings.empty());
  EXPECT_NE(b->warnings[0].find("another model"), std::string::npos) << b->warnings[0];
  Recording badToken = f.rec;
  badToken.tokens[4] = 600;
  EXPECT_EQ(e2eBaseline(f.model, badToken).status().code(), StatusCode::InvalidData);
  Recording badShape = f.rec;
  badShape.layers.pop_back();
  EXPECT_NE(e2eBaseline(f.model, badShape).status().message().find("4 layers"), std::string::npos);
}

TEST(E2e, JsonHasTheSummaryPositionsAndLayers) {
  REQUIRE_STORIES();
  auto j = nlohmann::json::parse(e2eToJson(run("int4,axis=tensor", "q4_0")));
  for (const char* k : {"kl_mean", "kl_max", "top1_agreement", "nll_fp", "nll_quant", "ppl_ratio"})
    EXPECT_TRUE(j["summary"].contains(k)) << k;
  EXPECT_EQ(j["positions"].size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(j["layers"].size(), 5u);
  EXPECT_EQ(j["key"]["mode"], "calibrated");
  EXPECT_EQ(j["value"]["mode"], "token-local");
  EXPECT_TRUE(j["positions"].back()["nll_fp"].is_null());
}

TEST(Sweep, ParsesPairsPresetsAndSingleSpecs) {
  const KvShape shape{8, 5, 4};  // stories260K: D = 8, 5 layers, 4 kv heads
  auto s = parseSweep("int4,axis=channel,group=32 : int4 ; kivi-2;q8_0;llamacpp-q4_0", KvShape{96, 5, 4});
  ASSERT_TRUE(s) << s.status().message();
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0].key.base.axis, Axis::Channel);
  EXPECT_EQ((*s)[0].value.base.axis, Axis::Token);
  EXPECT_EQ((*s)[1].value.base.residual, 128);
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
