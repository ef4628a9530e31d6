// SPDX-License-Identifier: GPL-3.0-or-later
// The evaluation driver: per-layer evaluation against independent recomputation, non-finite
// policies, option checks, and a whole synthetic dump.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/io/dump_writer.h"
#include "core/report/eval.h"
#include "core/report/report_format.h"
#include "core/synth/synth.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

Tensor3 randomTensor(int64_t h, int64_t t, int64_t d, uint32_t seed) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& v : x.data) v = n(rng);
  return x;
}

LayerData smallLayer(bool withQuery) {
  LayerData d;
  d.key = randomTensor(2, 16, 8, 1);
  d.value = randomTensor(2, 16, 8, 2);
  if (withQuery) d.query = randomTensor(4, 4, 8, 3);
  return d;
}

EvalOptions options(const char* key, const char* value) {
  EvalOptions o;
  o.key = *parseSpec(key);
  o.value = *parseSpec(value);
  return o;
}

TEST(EvaluateLayer, NoneGivesZeroErrorAndUnchangedAttention) {
  auto ev = evaluateLayer(smallLayer(true), LayerContext{}, options("none", "none"));
  ASSERT_TRUE(ev.hasValue()) << ev.status().message();
  ASSERT_EQ(ev->result.heads.size(), 2u);
  for (const HeadResult& h : ev->result.heads) {
    EXPECT_EQ(h.key.mse, 0.0);
    EXPECT_EQ(h.value.maxAbsError, 0.0);
    EXPECT_FALSE(h.key.sqnrDb.has_value());
    ASSERT_TRUE(h.attention.has_value());
    EXPECT_EQ(h.attention->joint.scoreMax, 0.0);
    EXPECT_EQ(h.attention->joint.top1Agreement, 1.0);
    EXPECT_NEAR(h.attention->joint.klMax, 0.0, 1e-12);
  }
}

TEST(EvaluateLayer, MetricsMatchTheReconstructions) {
  LayerData data = smallLayer(true);
  const Tensor3 key = data.key, value = data.value;
  auto ev = evaluateLayer(std::move(data), LayerContext{}, options("int2,axis=channel", "int3"));
  ASSERT_TRUE(ev.hasValue()) << ev.status().message();
  // Recompute independently: pipeline, then metrics in double by hand.
  QuantInput in{&key, nullptr, {}};
  auto kq = quantizeTensor(in, *parseSpec("int2,axis=channel"));
  ASSERT_TRUE(kq.hasValue());
  EXPECT_EQ(kq->reconstruction.data, ev->keyHat.data);
  for (int64_t g = 0; g < 2; ++g) {
    double err = 0, sig = 0;
    for (int64_t t = 0; t < 16; ++t) {
      for (int64_t c = 0; c < 8; ++c) {
        const double e = double(ev->keyHat.at(g, t, c)) - key.at(g, t, c);
        err += e * e;
        sig += double(key.at(g, t, c)) * key.at(g, t, c);
      }
    }
    const HeadResult& h = ev->result.heads[size_t(g)];
    EXPECT_NEAR(h.key.mse, err / 128, 1e-12);
    EXPECT_NEAR(*h.key.sqnrDb, 10 * std::log10(sig / err), 1e-9);
    EXPECT_GT(h.value.mse, 0.0);
    ASSERT_TRUE(h.attention.has_value());
    EXPECT_GT(h.attention->keyOnly.scoreMae, 0.0);
    EXPECT_EQ(h.attention->valueOnly.scoreMae, 0.0);
  }
  EXPECT_DOUBLE_EQ(ev->keyStorage.bitsPerElement(), 2.0 + 32.0 / 16);
}

TEST(EvaluateLayer, WithoutQueryAttentionIsEmpty) {
  auto ev = evaluateLayer(smallLayer(false), LayerContext{}, options("int4", "int4"));
  ASSERT_TRUE(ev.hasValue());
  for (const HeadResult& h : ev->result.heads) EXPECT_FALSE(h.attention.has_value());
}

TEST(EvaluateLayer, RefusesNonFiniteNamingCountsAndLocation) {
  LayerData d = smallLayer(true);
  d.value.at(1, 5, 3) = std::numeric_limits<float>::infinity();
  d.value.at(1, 6, 0) = std::nanf("");
  LayerContext ctx;
  ctx.origin = "x.h5: layer 2";
  auto ev = evaluateLayer(std::move(d), ctx, options("int4", "int4"));
  ASSERT_FALSE(ev.hasValue());
  const std::string m = ev.status().message();
  EXPECT_EQ(ev.status().code(), StatusCode::InvalidData);
  EXPECT_NE(m.find("x.h5: layer 2"), std::string::npos) << m;
  EXPECT_NE(m.find("value"), std::string::npos) << m;
  EXPECT_NE(m.find("1 NaN and 1 Inf"), std::string::npos) << m;
  EXPECT_NE(m.find("head 1, token 5, channel 3"), std::string::npos) << m;
}

TEST(EvaluateLayer, SkipHeadsEvaluatesTheOtherHeads) {
  LayerData d = smallLayer(true);
  const Tensor3 key = d.key;
  d.key.at(1, 2, 2) = std::nanf("");
  EvalOptions o = options("int4", "none");
  o.nonFinite = NonFinitePolicy::SkipHeads;
  auto ev = evaluateLayer(std::move(d), LayerContext{}, o);
  ASSERT_TRUE(ev.hasValue()) << ev.status().message();
  EXPECT_FALSE(ev->result.heads[0].skipped);
  EXPECT_TRUE(ev->result.heads[1].skipped);
  EXPECT_NE(ev->result.heads[1].skipReason.find("token 2, channel 2"), std::string::npos);
  EXPECT_GT(ev->result.heads[0].key.mse, 0.0);
  EXPECT_TRUE(std::isfinite(ev->result.heads[0].key.mse));
  ASSERT_TRUE(ev->result.heads[0].attention.has_value());
  EXPECT_TRUE(std::isfinite(ev->result.heads[0].attention->joint.klMean));
  EXPECT_FALSE(ev->result.heads[1].attention.has_value());
  // A NaN query head marks the kv head it reads (4 query heads over 2 kv heads: 3 → 1).
  LayerData q = smallLayer(true);
  q.query->at(3, 0, 0) = std::nanf("");
  auto evq = evaluateLayer(std::move(q), LayerContext{}, o);
  ASSERT_TRUE(evq.hasValue());
  EXPECT_FALSE(evq->result.heads[0].skipped);
  EXPECT_TRUE(evq->result.heads[1].skipped);
}

TEST(EvaluateLayer, CancelsWhenProgressSaysSo) {
  auto ev = evaluateLayer(smallLayer(true), LayerContext{}, options("int4", "int4"),
                          [](double, std::string_view) { return false; });
  ASSERT_FALSE(ev.hasValue());
  EXPECT_EQ(ev.status().code(), StatusCode::Cancelled);
}

class EvaluateDump : public ::testing::Test {
 protected:
  void SetUp() override {
    SynthOptions s;
    s.layers = 3;
    s.kvHeads = 2;
    s.heads = 4;
    s.tokens = 64;
    s.queries = 8;
    s.headDim = 32;
    path_ = dir_.file("s.h5");
    ASSERT_TRUE(writeSynthDump(path_, s).isOk());
    auto d = Dump::open(path_);
    ASSERT_TRUE(d.hasValue()) << d.status().message();
    dump_ = *d;
  }
  test::TempDir dir_;
  std::string path_;
  std::shared_ptr<const Dump> dump_;
};

TEST_F(EvaluateDump, ReportMatchesPerLayerRecomputation) {
  EvalOptions o = options("int4,prerope,axis=channel,sinks=2", "int4,group=16,residual=8");
  o.layers = {2, 0};
  o.lastQueries = 4;
  auto rep = evaluate(*dump_, o);
  ASSERT_TRUE(rep.hasValue()) << rep.status().message();
  ASSERT_EQ(rep->layers.size(), 2u);
  EXPECT_EQ(rep->layers[0].layer, 0);
  EXPECT_EQ(rep->layers[1].layer, 2);
  for (const LayerResult& l : rep->layers) {
    auto key = dump_->read(l.layer, TensorKind::Key);
    auto pre = dump_->read(l.layer, TensorKind::KeyPreRope);
    ASSERT_TRUE(key.hasValue() && pre.hasValue());
    QuantInput in{&*key, &*pre, {dump_->info().ropeTheta, dump_->info().ropeStyle}};
    auto kq = quantizeTensor(in, o.key.base);
    ASSERT_TRUE(kq.hasValue());
    for (const HeadResult& h : l.heads) {
      const TensorMetrics m = headMetrics(*key, kq->reconstruction, h.kvHead);
      EXPECT_EQ(h.key.mse, m.mse);
      EXPECT_EQ(h.key.maxAbsError, m.maxAbsError);
      ASSERT_TRUE(h.attention.has_value()) << "the dump has queries";
    }
  }
  // Bytes per token count all 3 layers: K and V bits of one layer × 3 / 8 / T.
  const double bits =
      storageFor(o.key.base, 2, 64, 32).totalBits() + storageFor(o.value.base, 2, 64, 32).totalBits();
  EXPECT_DOUBLE_EQ(rep->bytesPerTokenQuantized, 3 * bits / 8 / 64);
  EXPECT_DOUBLE_EQ(rep->bytesPerTokenBaseline, 2.0 * 3 * 2 * 32 * 2);
  EXPECT_EQ(rep->summary.entries, 4);
}

// The GUI's summary streams rows through onLayer, selected layer first (keepLayerOrder): each
// row must be what the ascending run reports for that layer, delivered in the order asked.
TEST_F(EvaluateDump, StreamsLayersInTheGivenOrderWithTheSameResults) {
  EvalOptions ascending = options("int4", "int4,group=16");
  auto reference = evaluate(*dump_, ascending);
  ASSERT_TRUE(reference.hasValue()) << reference.status().message();

  EvalOptions streamed = ascending;
  streamed.layers = {1, 0, 2};
  streamed.keepLayerOrder = true;
  std::vector<int> seen;
  std::vector<double> keyMse;
  streamed.onLayer = [&](const LayerResult& r) {
    seen.push_back(r.layer);
    keyMse.push_back(r.heads[1].key.mse);
  };
  auto rep = evaluate(*dump_, streamed);
  ASSERT_TRUE(rep.hasValue()) << rep.status().message();
  EXPECT_EQ(seen, (std::vector<int>{1, 0, 2}));
  ASSERT_EQ(rep->layers.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const LayerResult& got = rep->layers[i];
    const LayerResult& want = reference->layers[static_cast<size_t>(got.layer)];
    EXPECT_EQ(got.layer, seen[i]);
    EXPECT_EQ(keyMse[i], want.heads[1].key.mse);
    ASSERT_TRUE(got.heads[0].attention && want.heads[0].attention);
    EXPECT_EQ(got.heads[0].attention->joint.klMean, want.heads[0].attention->joint.klMean);
  }
  // Summaries are means over the same layers: order does not change them.
  ASSERT_TRUE(rep->summary.attention && reference->summary.attention);
  EXPECT_DOUBLE_EQ(rep->summary.attention->joint.klMean, reference->summary.attention->joint.klMean);
}

TEST_F(EvaluateDump, RejectsBadOptionsBeforeReading) {
  EvalOptions o = options("int4", "int4,prerope");
  auto rep = evaluate(*dump_, o);
  ASSERT_FALSE(rep.hasValue());
  EXPECT_NE(rep.status().message().find("keys only"), std::string::npos);
  o = options("int4", "int4");
  o.lastQueries = 9;
  EXPECT_FALSE(evaluate(*dump_, o).hasValue()) << "only 8 queries";
  o.lastQueries = 0;
  o.layers = {3};
  EXPECT_FALSE(evaluate(*dump_, o).hasValue()) << "layer 3 does not exist";
  o.layers = {};
  o.sequence = 1;
  EXPECT_FALSE(evaluate(*dump_, o).hasValue()) << "one sequence only";
  o = options("int4,rot=hadamard", "q4_0");
  EXPECT_TRUE(evaluate(*dump_, o).hasValue()) << "D=32 and KVH·D=64 are fine";
}

EvalOptions planOptions(const char* key, const char* value) {
  EvalOptions o;
  auto k = parsePlan(key);
  auto v = parsePlan(value);
  EXPECT_TRUE(k.hasValue() && v.hasValue()) << key << " / " << value;
  if (k && v) {
    o.key = *k;
    o.value = *v;
  }
  return o;
}

void expectSameLayer(const LayerResult& a, const LayerResult& b) {
  ASSERT_EQ(a.heads.size(), b.heads.size());
  for (size_t g = 0; g < a.heads.size(); ++g) {
    const HeadResult& x = a.heads[g];
    const HeadResult& y = b.heads[g];
    EXPECT_EQ(x.key.mse, y.key.mse) << "layer " << a.layer << " head " << g;
    EXPECT_EQ(x.key.maxAbsError, y.key.maxAbsError);
    EXPECT_EQ(x.value.mse, y.value.mse);
    EXPECT_EQ(x.value.relError, y.value.relError);
    ASSERT_TRUE(x.attention.has_value() && y.attention.has_value());
    EXPECT_EQ(x.attention->joint.klMean, y.attention->joint.klMean);
    EXPECT_EQ(x.attention->keyOnly.scoreMax, y.attention->keyOnly.scoreMax);
    EXPECT_EQ(x.attention->valueOnly.outputRelError, y.attention->valueOnly.outputRelError);
  }
}

TEST_F(EvaluateDump, APlanQuantizesEachLayerWithItsOwnSpec) {
  // Layer 1 of `int4;1:int8` is layer 1 of a uniform int8 run; layers 0 and 2 are int4's.
  auto plan = evaluate(*dump_, planOptions("int4;1:int8", "int8;1:int4"));
  auto int4 = evaluate(*dump_, options("int4", "int8"));
  auto int8 = evaluate(*dump_, options("int8", "int4"));
  ASSERT_TRUE(plan.hasValue()) << plan.status().message();
  ASSERT_TRUE(int4.hasValue() && int8.hasValue());
  ASSERT_EQ(plan->layers.size(), 3u);
  expectSameLayer(plan->layers[0], int4->layers[0]);
  expectSameLayer(plan->layers[1], int8->layers[1]);
  expectSameLayer(plan->layers[2], int4->layers[2]);
  // The layers really differ: int4 keys lose more than int8 keys on the same data.
  EXPECT_GT(int4->layers[1].heads[0].key.mse, plan->layers[1].heads[0].key.mse);
  EXPECT_EQ(toString(plan->layers[0].keySpec), "int4");
  EXPECT_EQ(toString(plan->layers[1].keySpec), "int8");
  EXPECT_EQ(toString(plan->layers[1].valueSpec), "int4");
  EXPECT_EQ(toString(plan->key), "int4;1:int8");
  // Storage by hand (2 kv heads × 64 tokens × D 32 = 4096 elements a layer tensor; token groups
  // of 32 with an fp16 scale and min): int4 = 5 bits per element, int8 = 9. K: (5 + 9 + 5) / 3.
  EXPECT_DOUBLE_EQ(plan->keyBitsPerElement(), 19.0 / 3.0);
  EXPECT_DOUBLE_EQ(plan->valueBitsPerElement(), 23.0 / 3.0);  // (9 + 5 + 9) / 3
  EXPECT_EQ(plan->keyStorage.elements, 3 * 4096);
  // Bytes per token: per layer KVH·D = 64 elements per token of K and of V.
  EXPECT_DOUBLE_EQ(plan->bytesPerTokenQuantized, 64.0 * (19 + 23) / 8.0);
  // A uniform report keeps one layer tensor's storage.
  EXPECT_EQ(int4->keyStorage.elements, 4096);
  EXPECT_DOUBLE_EQ(int4->keyBitsPerElement(), 5.0);

  // The JSON report: §8's shape, the canonical plan, and each layer's specs.
  const auto j = reportJson(*plan);
  EXPECT_EQ(j["key"]["spec"], "int4;1:int8");
  EXPECT_EQ(j["value"]["spec"], "int8;1:int4");
  EXPECT_DOUBLE_EQ(j["key"]["bits_per_element"].get<double>(), 19.0 / 3.0);
  EXPECT_EQ(j["key"]["storage_bits"]["elements"], 3 * 4096);
  ASSERT_EQ(j["layers"].size(), 3u);
  EXPECT_EQ(j["layers"][0]["key_spec"], "int4");
  EXPECT_EQ(j["layers"][1]["key_spec"], "int8");
  EXPECT_EQ(j["layers"][1]["value_spec"], "int4");
  EXPECT_EQ(j["layers"][2]["value_spec"], "int8");
  EXPECT_EQ(reportJson(*int4)["layers"][1]["key_spec"], "int4") << "a plain spec lists itself per layer";
  const std::string text = toText(*plan);
  EXPECT_NE(text.find("layer 1: K int8, V int4"), std::string::npos) << text;
}

TEST_F(EvaluateDump, APlanEvaluatesASubsetOfLayersWithTheirOwnSpecs) {
  EvalOptions o = planOptions("int4;last1:int8", "int4");
  o.layers = {2};
  auto rep = evaluate(*dump_, o);
  ASSERT_TRUE(rep.hasValue()) << rep.status().message();
  ASSERT_EQ(rep->layers.size(), 1u);
  EXPECT_EQ(toString(rep->layers[0].keySpec), "int8");
  // Bytes per token still count all 3 layers, each under its own spec: K (5 + 5 + 9), V 3 × 5.
  EXPECT_DOUBLE_EQ(rep->bytesPerTokenQuantized, 64.0 * (19 + 15) / 8.0);
}

TEST_F(EvaluateDump, APlanBeyondTheDumpsLayersIsRefused) {
  auto rep = evaluate(*dump_, planOptions("int4;3:int8", "int4"));
  ASSERT_FALSE(rep.hasValue());
  EXPECT_NE(rep.status().message().find("key: plan 'int4;3:int8': part 2 '3:int8': layer 3 does not exist"),
            std::string::npos)
      << rep.status().message();
  // A spec check failing on one layer's spec names that layer.
  rep = evaluate(*dump_, planOptions("int4", "int4;2:int4,prerope"));
  ASSERT_FALSE(rep.hasValue());
  EXPECT_NE(rep.status().message().find("value: layer 2: "), std::string::npos) << rep.status().message();
}

TEST(EvaluateLayerPlan, ANonUniformPlanNeedsTheLayerCount) {
  EvalOptions o;
  o.key = *parsePlan("int4;1:int8");
  o.value = *parseSpec("int4");
  LayerContext context;
  context.layer = 1;
  auto ev = evaluateLayer(smallLayer(false), context, o);
  ASSERT_FALSE(ev.hasValue());
  EXPECT_NE(ev.status().message().find("layer count"), std::string::npos) << ev.status().message();
  context.layers = 2;
  ev = evaluateLayer(smallLayer(false), context, o);
  ASSERT_TRUE(ev.hasValue()) << ev.status().message();
  EXPECT_EQ(toString(ev->result.keySpec), "int8");
  // A uniform plan needs no layer count, as a plain spec never did.
  context.layers = 0;
  o.key = *parsePlan("int4;1:int4");
  EXPECT_TRUE(evaluateLayer(smallLayer(false), context, o).hasValue());
}

TEST_F(EvaluateDump, CancelStopsBetweenLayers) {
  int calls = 0;
  auto rep = evaluate(*dump_, options("int4", "int4"), [&](double f, std::string_view) {
    ++calls;
    return f < 0.5;
  });
  ASSERT_FALSE(rep.hasValue());
  EXPECT_EQ(rep.status().code(), StatusCode::Cancelled);
}

TEST(EvaluateBatch, EvaluatesTheRequestedSequence) {
  test::TempDir dir;
  const std::string path = dir.file("b.h5");
  SynthOptions s;
  s.layers = 1;
  s.kvHeads = 2;
  s.heads = 2;
  s.tokens = 32;
  s.queries = 0;
  s.headDim = 16;
  s.sequences = 2;
  ASSERT_TRUE(writeSynthDump(path, s).isOk());
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump.hasValue()) << dump.status().message();
  EvalOptions o = options("int3", "int3");
  o.sequence = 1;
  auto rep = evaluate(**dump, o);
  ASSERT_TRUE(rep.hasValue()) << rep.status().message();
  EXPECT_EQ(rep->sequence, 1);
  auto key = (*dump)->read(0, TensorKind::Key, 1);
  ASSERT_TRUE(key.hasValue());
  QuantInput in{&*key, nullptr, {}};
  auto kq = quantizeTensor(in, o.key.base);
  ASSERT_TRUE(kq.hasValue());
  EXPECT_EQ(rep->layers[0].heads[1].key.mse, headMetrics(*key, kq->reconstruction, 1).mse);
  EXPECT_FALSE(rep->layers[0].heads[0].attention.has_value()) << "no queries in this dump";
  bool noted = false;
  for (const auto& n : rep->notes) noted = noted || n.find("no query") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(EvaluateNonFiniteDump, SkipHeadsMarksTheHeadInTheReport) {
  test::TempDir dir;
  const std::string path = dir.file("nan.h5");
  DumpWriterOptions w;
  w.layers = 2;
  w.kvHeads = 2;
  w.tokens = 8;
  w.headDim = 4;
  w.dtype = DiskType::Float32;
  auto writer = DumpWriter::create(path, w);
  ASSERT_TRUE(writer.hasValue()) << writer.status().message();
  for (int l = 0; l < 2; ++l) {
    Tensor3 k = randomTensor(2, 8, 4, 10 + l), v = randomTensor(2, 8, 4, 20 + l);
    if (l == 1) k.at(0, 3, 1) = std::nanf("");
    ASSERT_TRUE((*writer)->write(l, TensorKind::Key, k).isOk());
    ASSERT_TRUE((*writer)->write(l, TensorKind::Value, v).isOk());
  }
  ASSERT_TRUE((*writer)->finish().isOk());
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump.hasValue()) << dump.status().message();
  EvalOptions o = options("int4", "int4");
  auto refused = evaluate(**dump, o);
  ASSERT_FALSE(refused.hasValue());
  EXPECT_NE(refused.status().message().find("layer 1"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("head 0, token 3, channel 1"), std::string::npos);
  o.nonFinite = NonFinitePolicy::SkipHeads;
  auto rep = evaluate(**dump, o);
  ASSERT_TRUE(rep.hasValue()) << rep.status().message();
  EXPECT_TRUE(rep->layers[1].heads[0].skipped);
  EXPECT_FALSE(rep->layers[1].heads[1].skipped);
  EXPECT_EQ(rep->summary.entries, 3);
  bool noted = false;
  for (const auto& n : rep->notes) noted = noted || n.find("layer 1, kv head 0 skipped") != std::string::npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace kvscope
