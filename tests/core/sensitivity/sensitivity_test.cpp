// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/sensitivity/sensitivity.h"

#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/report/eval.h"
#include "core/search/search.h"
#include "core/synth/synth.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

class Sensitivity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    SynthOptions o;
    o.layers = 3;
    o.kvHeads = 2;
    o.heads = 4;
    o.tokens = 96;
    o.queries = 12;
    o.headDim = 32;
    o.seed = 11;
    path_ = dir_->file("sens.h5");
    ASSERT_TRUE(writeSynthDump(path_, o).isOk());
    o.queries = 0;
    noQuery_ = dir_->file("noquery.h5");
    ASSERT_TRUE(writeSynthDump(noQuery_, o).isOk());
    o.queries = 8;
    o.headDim = 48;  // not a power of two: rot=hadamard does not apply
    d48_ = dir_->file("d48.h5");
    ASSERT_TRUE(writeSynthDump(d48_, o).isOk());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::shared_ptr<const Dump> open(const std::string& path) {
    auto d = Dump::open(path);
    EXPECT_TRUE(d) << d.status().message();
    return *d;
  }
  static inline test::TempDir* dir_ = nullptr;
  static inline std::string path_, noQuery_, d48_;
};

// The map's cells against eval (an independent path: no baseline, all three cases, eval's own
// quantization of both tensors): key_only of K̂ and value_only of V̂ for each (layer, kv head).
TEST_F(Sensitivity, CellsEqualEvalPerHeadMetricsForTheSameSpec) {
  auto dump = open(path_);
  SensitivityOptions so;
  so.candidates = {"int4,axis=channel,group=32", "q4_0", "int2,group=16", "fp8_e4m3"};
  so.lastQueries = 10;
  auto map = sensitivityMap(*dump, so);
  ASSERT_TRUE(map) << map.status().message();
  ASSERT_EQ(map->layers, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(map->key.candidates.size(), 4u);
  for (size_t c = 0; c < so.candidates.size(); ++c) {
    EvalOptions eo;
    eo.key = *parseSpec(so.candidates[c]);
    eo.value = eo.key;
    eo.lastQueries = 10;
    auto rep = evaluate(*dump, eo);
    ASSERT_TRUE(rep) << rep.status().message();
    EXPECT_EQ(map->key.candidates[c].spec, toString(eo.key));
    EXPECT_DOUBLE_EQ(map->key.candidates[c].bitsPerElement, rep->keyBitsPerElement());
    for (size_t li = 0; li < rep->layers.size(); ++li) {
      for (const HeadResult& h : rep->layers[li].heads) {
        ASSERT_TRUE(h.attention);
        const AttentionMetrics& k = map->key.at(li, h.kvHead, c);
        const AttentionMetrics& ek = h.attention->keyOnly;
        const double tol = 1e-9;
        EXPECT_NEAR(k.klMean, ek.klMean, tol * (1 + ek.klMean)) << so.candidates[c];
        EXPECT_NEAR(k.klMax, ek.klMax, tol * (1 + ek.klMax));
        EXPECT_NEAR(k.scoreMae, ek.scoreMae, tol * (1 + ek.scoreMae));
        EXPECT_NEAR(k.scoreMax, ek.scoreMax, tol * (1 + ek.scoreMax));
        EXPECT_DOUBLE_EQ(k.top1Agreement, ek.top1Agreement);
        EXPECT_NEAR(k.outputRelError, ek.outputRelError, tol * (1 + ek.outputRelError));
        const AttentionMetrics& v = map->value.at(li, h.kvHead, c);
        EXPECT_NEAR(v.outputRelError, h.attention->valueOnly.outputRelError,
                    tol * (1 + h.attention->valueOnly.outputRelError));
        EXPECT_GT(k.klMean + v.outputRelError, 0.0) << "a lossy spec must show damage";
      }
    }
  }
}

// Layer summaries are §8's rule over kv heads, as the budget search computes them per layer.
TEST_F(Sensitivity, LayerSummaryEqualsTheSearchsPerLayerMetrics) {
  auto dump = open(path_);
  const std::vector<std::string> cands = {"int3", "int4,axis=channel,group=32"};
  SensitivityOptions so;
  so.candidates = cands;
  auto map = sensitivityMap(*dump, so);
  ASSERT_TRUE(map) << map.status().message();
  SearchOptions s;
  s.candidates = cands;
  s.keyBudget = Budget{AttentionField::KlMean, 1e9};
  s.valueBudget = Budget{AttentionField::OutputRelError, 1e9};
  auto result = searchBudgets(*dump, s);
  ASSERT_TRUE(result) << result.status().message();
  for (int pass = 0; pass < 2; ++pass) {
    const TensorChoice& choice = pass == 0 ? result->key : result->value;
    const SensitivitySide& side = pass == 0 ? map->key : map->value;
    for (const CandidateResult& r : choice.candidates) {
      size_t c = 0;
      while (c < side.candidates.size() && side.candidates[c].spec != r.spec) ++c;
      ASSERT_LT(c, side.candidates.size()) << r.spec;
      ASSERT_EQ(r.layerMetrics.size(), map->layers.size());
      for (size_t li = 0; li < map->layers.size(); ++li) {
        const AttentionMetrics a = side.layerSummary(li, c), b = r.layerMetrics[li];
        EXPECT_NEAR(a.outputRelError, b.outputRelError, 1e-12 * (1 + b.outputRelError));
        if (pass == 0) {
          EXPECT_NEAR(a.klMean, b.klMean, 1e-12 * (1 + b.klMean));
          EXPECT_DOUBLE_EQ(a.klMax, b.klMax);
          EXPECT_NEAR(a.top1Agreement, b.top1Agreement, 1e-12);
        }
      }
    }
  }
}

TEST_F(Sensitivity, ExactSpecShowsNoDamageAndCoarserSpecsMore) {
  // fp16 of an fp16 dump reconstructs exactly; int2 per token damages more than int8.
  auto dump = open(path_);
  SensitivityOptions so;
  so.candidates = {"fp16", "int8", "int2"};
  auto map = sensitivityMap(*dump, so);
  ASSERT_TRUE(map) << map.status().message();
  for (size_t li = 0; li < 3; ++li) {
    for (int g = 0; g < 2; ++g) {
      EXPECT_EQ(map->key.at(li, g, 0).klMean, 0.0);
      EXPECT_EQ(map->key.at(li, g, 0).top1Agreement, 1.0);
      EXPECT_EQ(map->value.at(li, g, 0).outputRelError, 0.0);
      EXPECT_LT(map->key.at(li, g, 1).klMean, map->key.at(li, g, 2).klMean);
      EXPECT_LT(map->value.at(li, g, 1).outputRelError, map->value.at(li, g, 2).outputRelError);
    }
  }
}

TEST_F(Sensitivity, SpecsThatDoNotApplyAreSkippedWithTheReason) {
  auto dump = open(d48_);
  SensitivityOptions so;
  so.candidates = {"int4,rot=hadamard", "int4", "int4"};  // the duplicate is dropped
  so.values = false;
  so.layers = {1};
  auto map = sensitivityMap(*dump, so);
  ASSERT_TRUE(map) << map.status().message();
  EXPECT_FALSE(map->value.mapped);
  ASSERT_EQ(map->key.candidates.size(), 2u);
  EXPECT_NE(map->key.candidates[0].skipped.find("power of two"), std::string::npos)
      << map->key.candidates[0].skipped;
  EXPECT_TRUE(map->key.candidates[1].skipped.empty());
  EXPECT_GT(map->key.at(0, 0, 1).klMean, 0.0);
  auto j = nlohmann::json::parse(sensitivityToJson(*map));
  EXPECT_EQ(j["kvscope_sensitivity"], 1);
  EXPECT_TRUE(j["value"].is_null());
  EXPECT_TRUE(j["key"]["candidates"][0]["layers"].is_null());
  EXPECT_EQ(j["key"]["candidates"][1]["layers"][0]["layer"], 1);
  EXPECT_EQ(j["key"]["candidates"][1]["layers"][0]["heads"].size(), 2u);
  // CSV: a header and one row per (layer, kv head) of the one applicable candidate.
  const std::string csv = sensitivityToCsv(*map);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2);
}

TEST_F(Sensitivity, BadRequestsAreErrorsNamingWhatIsWrong) {
  auto dump = open(noQuery_);
  auto r = sensitivityMap(*dump, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(r.status().message().find("no queries"), std::string::npos);
  auto full = open(path_);
  SensitivityOptions so;
  so.layers = {7};
  r = sensitivityMap(*full, so);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("layer 7"), std::string::npos);
  so = {};
  so.candidates = {"int9"};
  r = sensitivityMap(*full, so);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("candidate 'int9'"), std::string::npos);
}

TEST_F(Sensitivity, ProgressCancels) {
  auto dump = open(path_);
  int calls = 0;
  double last = -1;
  bool monotone = true;
  auto r = sensitivityMap(*dump, {}, [&](double f, std::string_view) {
    monotone = monotone && f >= last - 1e-12;
    last = f;
    return ++calls < 20;
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), StatusCode::Cancelled);
  EXPECT_TRUE(monotone);
}

TEST(SensitivityCandidates, DefaultLadderParsesAndSpansEightToTwoBits) {
  double lo = 99, hi = 0;
  for (const std::string& s : sensitivityCandidates()) {
    auto spec = parseSpec(s);
    ASSERT_TRUE(spec) << s;
    const double bits = storageFor(*spec, 8, 8192, 128).bitsPerElement();
    lo = std::min(lo, bits);
    hi = std::max(hi, bits);
  }
  EXPECT_GE(hi, 8.0);
  EXPECT_LE(lo, 3.0);
}

}  // namespace
}  // namespace kvscope
