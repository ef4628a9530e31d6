// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/search/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/engine/presets.h"
#include "core/quant/quantize.h"
#include "core/search/search_format.h"
#include "core/synth/synth.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

class BudgetSearch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    SynthOptions o;
    o.layers = 3;
    o.kvHeads = 2;
    o.heads = 4;
    o.tokens = 64;
    o.queries = 8;
    o.headDim = 32;
    o.seed = 5;
    path_ = dir_->file("search.h5");
    ASSERT_TRUE(writeSynthDump(path_, o).isOk());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  std::shared_ptr<const Dump> open() {
    auto d = Dump::open(path_);
    EXPECT_TRUE(d.hasValue()) << d.status().message();
    return d.hasValue() ? *d : nullptr;
  }

  // key_only kl_mean of `spec` per layer (mean over kv heads), computed here step by step.
  std::vector<double> keyKl(const Dump& dump, const char* specText) {
    auto spec = parseSpec(specText);
    std::vector<double> out;
    for (int l = 0; l < dump.info().layers; ++l) {
      auto k = dump.read(l, TensorKind::Key), v = dump.read(l, TensorKind::Value),
           q = dump.read(l, TensorKind::Query);
      QuantInput in;
      in.tensor = &*k;
      auto kq = quantizeTensor(in, *spec);
      AttentionInput a{&*q, &*k, &*v, &kq->reconstruction, nullptr, 0, 0};
      auto m = attentionMetrics(a, AttentionCaseSelection{true, false, false});
      double mean = 0;
      for (const AttentionCases& c : *m) mean += c.keyOnly.klMean / static_cast<double>(m->size());
      out.push_back(mean);
    }
    return out;
  }

  static inline test::TempDir* dir_ = nullptr;
  static inline std::string path_;
};

double maxOf(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

TEST_F(BudgetSearch, ChoosesTheCheapestCandidateMeetingTheBudget) {
  auto dump = open();
  ASSERT_TRUE(dump);
  const double int4 = maxOf(keyKl(*dump, "int4,axis=channel"));
  const double int8 = maxOf(keyKl(*dump, "int8,axis=channel"));
  ASSERT_LT(int8, int4);
  SearchOptions o;
  o.keyBudget = Budget{AttentionField::KlMean, std::sqrt(int4 * int8)};  // between the two
  o.candidates = {"fp16", "int8,axis=channel", "int4,axis=channel", "int2,axis=channel"};
  auto r = searchBudgets(*dump, o);
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  ASSERT_TRUE(r->key.found);
  EXPECT_EQ(r->key.spec, "int8,axis=channel");
  EXPECT_NEAR(r->key.worst, int8, 1e-12 * int8);
  EXPECT_NEAR(r->key.margin, o.keyBudget->bound - int8, 1e-15);
  ASSERT_EQ(r->key.candidates.size(), 4u);
  // Ascending bits: int2, int4, int8, fp16; int4 fails, fp16 meets but costs more.
  EXPECT_EQ(r->key.candidates[0].spec, "int2,axis=channel");
  EXPECT_FALSE(r->key.candidates[1].meets);
  EXPECT_TRUE(r->key.candidates[3].meets);
  EXPECT_EQ(r->key.candidates[3].worst, 0.0);  // fp16 of an fp16 dump is exact
  // Values were not searched: kept exact, and the joint result is the key_only one.
  EXPECT_FALSE(r->value.searched);
  ASSERT_TRUE(r->jointSummary.has_value());
  EXPECT_EQ(r->jointSummary->valueOnly.outputRelError, 0.0);
  EXPECT_NEAR(r->jointSummary->joint.klMean, r->jointSummary->keyOnly.klMean, 1e-15);
}

TEST_F(BudgetSearch, MarksTheParetoFront) {
  auto dump = open();
  ASSERT_TRUE(dump);
  SearchOptions o;
  o.keyBudget = Budget{AttentionField::KlMean, 1.0};
  // bf16 costs as much as fp16 and is worse (fp16 is exact on an fp16 dump): dominated.
  o.candidates = {"bf16", "fp16", "int8,axis=channel", "int4,axis=channel"};
  auto r = searchBudgets(*dump, o);
  ASSERT_TRUE(r.hasValue());
  std::map<std::string, const CandidateResult*> by;
  for (const CandidateResult& c : r->key.candidates) by[c.spec] = &c;
  ASSERT_GT(by["bf16"]->worst, 0.0);
  EXPECT_FALSE(by["bf16"]->pareto);
  EXPECT_TRUE(by["fp16"]->pareto);
  EXPECT_TRUE(by["int8,axis=channel"]->pareto);
  EXPECT_TRUE(by["int4,axis=channel"]->pareto);
}

TEST_F(BudgetSearch, JudgesValuesOnValueOnlyMetrics) {
  auto dump = open();
  ASSERT_TRUE(dump);
  SearchOptions o;
  o.keyBudget = Budget{AttentionField::KlMean, 1e9};  // anything goes: the cheapest key spec
  o.valueBudget = Budget{AttentionField::OutputRelError, 0.05};
  o.candidates = {"int2", "int4", "int8", "fp16"};
  auto r = searchBudgets(*dump, o);
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ(r->key.spec, "int2");
  ASSERT_TRUE(r->value.found);
  for (const CandidateResult& c : r->value.candidates) {
    for (const AttentionMetrics& m : c.layerMetrics) {
      EXPECT_EQ(m.klMean, 0.0);  // value_only by definition
      EXPECT_EQ(m.top1Agreement, 1.0);
    }
    // The chosen one is the cheapest that meets; everything cheaper fails.
    if (c.bitsPerElement < r->value.bitsPerElement) {
      EXPECT_FALSE(c.meets) << c.spec;
    }
  }
  ASSERT_EQ(r->joint.size(), 3u);
  EXPECT_EQ(r->joint[0].keySpec, "int2");
  EXPECT_EQ(r->joint[0].valueSpec, r->value.spec);
  EXPECT_GT(r->jointSummary->joint.outputRelError, 0.0);
  // Bytes per token over 3 layers: fp16 = 3 · 2 · 2 heads · 32 dims · 2 bytes.
  EXPECT_DOUBLE_EQ(r->bytesPerTokenBaseline, 768.0);
  EXPECT_DOUBLE_EQ(r->bytesPerTokenChosen,
                   3 * (r->key.bitsPerElement + r->value.bitsPerElement) * 64 / 8);
}

TEST_F(BudgetSearch, SaysSoWhenNoCandidateMeetsTheBudget) {
  auto dump = open();
  ASSERT_TRUE(dump);
  SearchOptions o;
  o.keyBudget = Budget{AttentionField::KlMean, 0.0};
  o.candidates = {"int2", "int3"};
  auto r = searchBudgets(*dump, o);
  ASSERT_TRUE(r.hasValue());
  EXPECT_FALSE(r->key.found);
  EXPECT_EQ(r->key.chosen, -1);
  EXPECT_TRUE(r->joint.empty());
  EXPECT_FALSE(r->jointSummary.has_value());
  bool said = false;
  for (const std::string& n : r->notes) said |= n.find("no key candidate meets") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_NE(searchToText(*r).find("NO CANDIDATE MEETS THE BUDGET"), std::string::npos);
  EXPECT_EQ(searchJson(*r)["key"]["found"], false);
}

TEST_F(BudgetSearch, TopOneAgreementIsAMinimum) {
  auto dump = open();
  ASSERT_TRUE(dump);
  SearchOptions o;
  o.keyBudget = Budget{AttentionField::Top1Agreement, 1.0};
  o.candidates = {"int2,axis=channel", "fp16"};
  auto r = searchBudgets(*dump, o);
  ASSERT_TRUE(r.hasValue());
  ASSERT_TRUE(r->key.found);
  const CandidateResult& int2 = r->key.candidates[0];
  ASSERT_EQ(int2.spec, "int2,axis=channel");
  // int2 keys flip some argmax (top-1 below 1), so only fp16 qualifies.
  ASSERT_LT(int2.worst, 1.0);
  EXPECT_EQ(r->key.spec, "fp16");
  EXPECT_EQ(r->key.margin, 0.0);
}

TEST_F(BudgetSearch, PerLayerChoosesEachLayersCheapestAndNamesForcedLayers) {
  auto dump = open();
  ASSERT_TRUE(dump);
  const std::vector<double> int4 = keyKl(*dump, "int4,axis=channel");
  // A budget that int4 meets on its best layer only: that layer takes int4, the others more.
  const double best = *std::min_element(int4.begin(), int4.end());
  const double bound = best * 1.0000001;
  ASSERT_GT(maxOf(int4), bound);
  SearchOptions o;
  o.keyBudget = Budget{AttentionField::KlMean, bound};
  o.candidates = {"int4,axis=channel", "int8,axis=channel", "fp16"};
  o.perLayer = true;
  auto r = searchBudgets(*dump, o);
  ASSERT_TRUE(r.hasValue());
  ASSERT_EQ(r->layerChoices.size(), 3u);
  std::vector<int> forced;
  double bytes = 0;
  for (size_t l = 0; l < 3; ++l) {
    const LayerChoice& c = r->layerChoices[l];
    ASSERT_TRUE(c.key.found);
    if (int4[l] <= bound) {
      EXPECT_EQ(c.key.spec, "int4,axis=channel");
    } else {
      EXPECT_NE(c.key.spec, "int4,axis=channel");
      forced.push_back(static_cast<int>(l));
    }
    bytes += (c.key.bitsPerElement + 16) * 64 / 8;
  }
  EXPECT_EQ(r->forcedKeyLayers, forced);
  EXPECT_DOUBLE_EQ(r->bytesPerTokenChosen, bytes);
  ASSERT_EQ(r->joint.size(), 3u);
  EXPECT_EQ(r->joint[0].keySpec, r->layerChoices[0].key.spec);
}

TEST_F(BudgetSearch, LayersAndQueriesRestrictTheSearch) {
  auto dump = open();
  ASSERT_TRUE(dump);
  SearchOptions o;
  o.keyBudget = Budget{AttentionField::KlMean, 1e9};
  o.candidates = {"int4"};
  o.layers = {1};
  o.lastQueries = 2;
  auto r = searchBudgets(*dump, o);
  ASSERT_TRUE(r.hasValue());
  EXPECT_EQ(r->layers, std::vector<int>{1});
  ASSERT_EQ(r->key.candidates[0].layerMetrics.size(), 1u);
  auto k = dump->read(1, TensorKind::Key), v = dump->read(1, TensorKind::Value),
       q = dump->read(1, TensorKind::Query);
  QuantInput in;
  in.tensor = &*k;
  auto kq = quantizeTensor(in, *parseSpec("int4"));
  AttentionInput a{&*q, &*k, &*v, &kq->reconstruction, nullptr, 0, 2};
  auto m = attentionMetrics(a, AttentionCaseSelection{true, false, false});
  const double want = ((*m)[0].keyOnly.klMean + (*m)[1].keyOnly.klMean) / 2;
  EXPECT_NEAR(r->key.candidates[0].layerMetrics[0].klMean, want, 1e-15);
}

TEST_F(BudgetSearch, InapplicableCandidatesAreSkippedWithAReason) {
  auto dump = open();
  ASSERT_TRUE(dump);
  SearchOptions o;
  o.valueBudget = Budget{AttentionField::OutputRelError, 1.0};
  o.candidates = {"int4,prerope", "int4"};
  auto r = searchBudgets(*dump, o);
  ASSERT_TRUE(r.hasValue());
  ASSERT_EQ(r->value.candidates.size(), 2u);
  EXPECT_EQ(r->value.candidates[0].spec, "int4");
  EXPECT_NE(r->value.candidates[1].skipped.find("prerope"), std::string::npos);
  EXPECT_EQ(r->value.spec, "int4");
}

TEST_F(BudgetSearch, CancelsWhenProgressSaysSo) {
  auto dump = open();
  ASSERT_TRUE(dump);
  SearchOptions o;
  o.keyBudget = Budget{AttentionField::KlMean, 1e-3};
  o.candidates = {"int4", "int8"};
  int calls = 0;
  auto r = searchBudgets(*dump, o, [&](double, std::string_view) { return ++calls < 3; });
  ASSERT_FALSE(r.hasValue());
  EXPECT_EQ(r.status().code(), StatusCode::Cancelled);
}

TEST(Budget, ParsesMetricsAndBounds) {
  auto b = parseBudget("kl_mean=1e-3", "--key-budget");
  ASSERT_TRUE(b.hasValue());
  EXPECT_EQ(b->field, AttentionField::KlMean);
  EXPECT_DOUBLE_EQ(b->bound, 1e-3);
  EXPECT_TRUE(b->meets(1e-3));
  EXPECT_FALSE(b->meets(1.1e-3));
  auto t = parseBudget("top1_agreement=0.95", "--key-budget");
  ASSERT_TRUE(t.hasValue());
  EXPECT_TRUE(t->meets(0.96));
  EXPECT_FALSE(t->meets(0.94));
  EXPECT_NEAR(t->margin(0.97), 0.02, 1e-15);
  for (const char* bad : {"kl_mean", "kl=1", "kl_mean=abc", "kl_mean=-1", "top1_agreement=2", "=1"}) {
    auto r = parseBudget(bad, "--key-budget");
    ASSERT_FALSE(r.hasValue()) << bad;
    EXPECT_NE(r.status().message().find("--key-budget"), std::string::npos);
  }
  EXPECT_NE(parseBudget("kl=1", "--x").status().message().find("output_rel_error"), std::string::npos);
}

TEST(Candidates, DefaultsParseAndCoverFormatsAxesAndPresets) {
  const KvShape shape{128, 4, 8};
  const auto list = defaultCandidates(shape);
  std::set<std::string> canonical;
  for (const std::string& s : list) {
    auto spec = parseSpec(s);
    ASSERT_TRUE(spec.hasValue()) << s;
    EXPECT_TRUE(canonical.insert(toString(*spec)).second) << "duplicate " << s;
  }
  // Every preset as it resolves for this shape (llama.cpp's rotated specs at D = 128).
  for (const Preset& p : presetTable()) {
    auto specs = presetSpecs(p.name, shape);
    ASSERT_TRUE(specs.hasValue()) << p.name << ": " << specs.status().message();
    EXPECT_TRUE(canonical.count(toString(specs->key))) << p.name;
    EXPECT_TRUE(canonical.count(toString(specs->value))) << p.name;
  }
  EXPECT_TRUE(canonical.count(toString(*parseSpec("q4_0,rot=hadamard:128"))));
  EXPECT_TRUE(canonical.count("int2,axis=channel,group=32"));
  EXPECT_TRUE(canonical.count("nvfp4"));
}

TEST(Candidates, FileListsSkipCommentsAndNameBadLines) {
  auto ok = parseCandidateList("# keys\nint4\n\n  q8_0   # ggml\n", "c.txt");
  ASSERT_TRUE(ok.hasValue());
  EXPECT_EQ(*ok, (std::vector<std::string>{"int4", "q8_0"}));
  auto bad = parseCandidateList("int4\nint99\n", "c.txt");
  ASSERT_FALSE(bad.hasValue());
  EXPECT_NE(bad.status().message().find("c.txt:2"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(parseCandidateList("# nothing\n", "c.txt").hasValue());
}

}  // namespace
}  // namespace kvscope
