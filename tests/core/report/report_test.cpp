// SPDX-License-Identifier: GPL-3.0-or-later
// The §8 report: summary rules, every JSON field, the CSV table, on hand-built results.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/report/eval.h"
#include "core/report/report_format.h"

namespace kvscope {
namespace {

using Json = nlohmann::json;

AttentionMetrics att(double base) {
  // Distinct values per field so a swapped field shows.
  return AttentionMetrics{base + 0.1, base + 0.2, base + 0.3, base + 0.4, 1.0 - base, base + 0.6};
}

HeadResult head(int g, double mse, double rel, std::optional<double> sqnr, double maxAbs, double attBase) {
  HeadResult h;
  h.kvHead = g;
  h.key = TensorMetrics{mse, rel, sqnr, maxAbs};
  h.value = TensorMetrics{2 * mse, 2 * rel, sqnr ? std::optional<double>(*sqnr - 3) : std::nullopt, 2 * maxAbs};
  h.attention = AttentionCases{att(attBase), att(attBase / 2), att(attBase * 2)};
  return h;
}

/// Two layers × two kv heads; layer 1 head 1 has zero error (no sqnr).
std::vector<LayerResult> sampleLayers() {
  LayerResult a{0, {head(0, 1.0, 0.1, 20.0, 3.0, 0.1), head(1, 2.0, 0.2, 10.0, 5.0, 0.2)}, {}, {}};
  LayerResult b{1, {head(0, 3.0, 0.3, 30.0, 1.0, 0.3), head(1, 0.0, 0.0, std::nullopt, 0.0, 0.0)}, {}, {}};
  return {a, b};
}

EvalReport sampleReport() {
  EvalReport r;
  r.dump.path = "sample.h5";
  r.dump.model = "tiny";
  r.dump.layers = 2;
  r.dump.kvHeads = 2;
  r.dump.heads = 4;
  r.dump.tokens = 16;
  r.dump.queries = 4;
  r.dump.headDim = 8;
  r.dump.hasQuery = true;
  r.key = *parseSpec("int4,axis=channel");
  r.value = *parseSpec("q4_0");
  r.keyStorage = storageFor(r.key.base, 2, 16, 8);
  r.valueStorage = storageFor(r.value.base, 2, 16, 8);
  r.bytesPerTokenBaseline = 2.0 * 2 * 2 * 8 * 2;
  r.bytesPerTokenQuantized = 2 * (r.keyStorage.totalBits() + r.valueStorage.totalBits()) / 8 / 16;
  r.layers = sampleLayers();
  r.summary = summarize(r.layers);
  r.notes = {"a note"};
  return r;
}

TEST(Summary, MeansExceptMaxFieldsWhichTakeTheMax) {
  EvalSummary s = summarize(sampleLayers());
  EXPECT_EQ(s.entries, 4);
  EXPECT_DOUBLE_EQ(s.key.mse, (1.0 + 2 + 3 + 0) / 4);
  EXPECT_DOUBLE_EQ(s.key.relError, (0.1 + 0.2 + 0.3 + 0) / 4);
  EXPECT_DOUBLE_EQ(*s.key.sqnrDb, (20.0 + 10 + 30) / 3) << "sqnr averages the entries that have one";
  EXPECT_DOUBLE_EQ(s.key.maxAbsError, 5.0);
  EXPECT_DOUBLE_EQ(s.value.mse, 2 * 6.0 / 4);
  EXPECT_DOUBLE_EQ(*s.value.sqnrDb, (17.0 + 7 + 27) / 3);
  EXPECT_DOUBLE_EQ(s.value.maxAbsError, 10.0);
  ASSERT_TRUE(s.attention.has_value());
  // joint uses base·2 for bases 0.1, 0.2, 0.3, 0: bases 0.2, 0.4, 0.6, 0.
  const AttentionMetrics& j = s.attention->joint;
  EXPECT_DOUBLE_EQ(j.scoreMae, (0.2 + 0.4 + 0.6 + 0.0) / 4 + 0.1);
  EXPECT_DOUBLE_EQ(j.scoreMax, 0.6 + 0.2);
  EXPECT_DOUBLE_EQ(j.klMean, (0.2 + 0.4 + 0.6 + 0.0) / 4 + 0.3);
  EXPECT_DOUBLE_EQ(j.klMax, 0.6 + 0.4);
  EXPECT_DOUBLE_EQ(j.top1Agreement, 1.0 - (0.2 + 0.4 + 0.6 + 0.0) / 4);
  EXPECT_DOUBLE_EQ(j.outputRelError, (0.2 + 0.4 + 0.6 + 0.0) / 4 + 0.6);
  EXPECT_DOUBLE_EQ(s.attention->keyOnly.scoreMax, 0.3 + 0.2);
  EXPECT_DOUBLE_EQ(s.attention->valueOnly.klMax, 0.15 + 0.4);
}

TEST(Summary, SkippedHeadsAreLeftOutAndNoAttentionGivesNone) {
  auto layers = sampleLayers();
  layers[0].heads[1].skipped = true;  // mse 2, max abs 5
  for (auto& l : layers) {
    for (auto& h : l.heads) h.attention.reset();
  }
  EvalSummary s = summarize(layers);
  EXPECT_EQ(s.entries, 3);
  EXPECT_DOUBLE_EQ(s.key.mse, (1.0 + 3 + 0) / 3);
  EXPECT_DOUBLE_EQ(s.key.maxAbsError, 3.0);
  EXPECT_FALSE(s.attention.has_value());
}

void expectTensorObject(const Json& j, const std::string& where) {
  ASSERT_TRUE(j.is_object()) << where;
  for (const char* f : {"mse", "rel_error", "sqnr_db", "max_abs_error"}) EXPECT_TRUE(j.contains(f)) << where << "." << f;
}

void expectAttentionObject(const Json& j, const std::string& where) {
  ASSERT_TRUE(j.is_object()) << where;
  for (const char* c : {"key_only", "value_only", "joint"}) {
    ASSERT_TRUE(j.contains(c)) << where << "." << c;
    for (const char* f : {"score_mae", "score_max", "kl_mean", "kl_max", "top1_agreement", "output_rel_error"}) {
      ASSERT_TRUE(j[c].contains(f)) << where << "." << c << "." << f;
      EXPECT_TRUE(j[c][f].is_number()) << where << "." << c << "." << f;
    }
  }
}

TEST(ReportJson, HasEverySection8Field) {
  const EvalReport r = sampleReport();
  const Json j = Json::parse(toJson(r));
  EXPECT_EQ(j["kvscope_report"], 1);
  const Json& d = j["dump"];
  EXPECT_EQ(d["model"], "tiny");
  EXPECT_EQ(d["layers"], 2);
  EXPECT_EQ(d["kv_heads"], 2);
  EXPECT_EQ(d["heads"], 4);
  EXPECT_EQ(d["tokens"], 16);
  EXPECT_EQ(d["queries"], 4);
  EXPECT_EQ(d["head_dim"], 8);
  EXPECT_EQ(j["key"]["spec"], "int4,axis=channel");
  EXPECT_DOUBLE_EQ(j["key"]["bits_per_element"].get<double>(), r.keyBitsPerElement());
  EXPECT_EQ(j["value"]["spec"], "q4_0");
  EXPECT_DOUBLE_EQ(j["value"]["bits_per_element"].get<double>(), 4.5);
  EXPECT_DOUBLE_EQ(j["bytes_per_token"]["baseline_fp16"].get<double>(), 128.0);
  EXPECT_DOUBLE_EQ(j["bytes_per_token"]["quantized"].get<double>(), r.bytesPerTokenQuantized);
  ASSERT_EQ(j["layers"].size(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_EQ(j["layers"][l]["layer"], l);
    ASSERT_EQ(j["layers"][l]["heads"].size(), 2u);
    for (size_t g = 0; g < 2; ++g) {
      const Json& h = j["layers"][l]["heads"][g];
      const std::string where = "layers[" + std::to_string(l) + "].heads[" + std::to_string(g) + "]";
      EXPECT_EQ(h["kv_head"], g);
      expectTensorObject(h["key"], where + ".key");
      expectTensorObject(h["value"], where + ".value");
      expectAttentionObject(h["attention"], where + ".attention");
    }
  }
  // Values survive at full precision.
  EXPECT_EQ(j["layers"][0]["heads"][1]["key"]["rel_error"].get<double>(), 0.2);
  EXPECT_EQ(j["layers"][0]["heads"][0]["attention"]["joint"]["kl_max"].get<double>(), 0.2 + 0.4);
  // Zero error: sqnr is null.
  EXPECT_TRUE(j["layers"][1]["heads"][1]["key"]["sqnr_db"].is_null());
  expectTensorObject(j["summary"]["key"], "summary.key");
  expectTensorObject(j["summary"]["value"], "summary.value");
  expectAttentionObject(j["summary"]["attention"], "summary.attention");
  EXPECT_DOUBLE_EQ(j["summary"]["key"]["max_abs_error"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(j["summary"]["key"]["mse"].get<double>(), 1.5);
  EXPECT_EQ(j["notes"][0], "a note");
}

TEST(ReportJson, AttentionIsNullWithoutQueriesAndSkippedHeadsAreListed) {
  EvalReport r = sampleReport();
  for (auto& l : r.layers) {
    for (auto& h : l.heads) h.attention.reset();
  }
  r.layers[1].heads[0].skipped = true;
  r.layers[1].heads[0].skipReason = "key: 1 NaN";
  r.summary = summarize(r.layers);
  const Json j = Json::parse(toJson(r));
  EXPECT_TRUE(j["layers"][0]["heads"][0]["attention"].is_null());
  EXPECT_TRUE(j["summary"]["attention"].is_null());
  ASSERT_EQ(j["layers"][1]["heads"].size(), 1u) << "skipped heads are not in layers[].heads";
  EXPECT_EQ(j["layers"][1]["heads"][0]["kv_head"], 1);
  ASSERT_EQ(j["skipped_heads"].size(), 1u);
  EXPECT_EQ(j["skipped_heads"][0]["layer"], 1);
  EXPECT_EQ(j["skipped_heads"][0]["kv_head"], 0);
  EXPECT_EQ(j["skipped_heads"][0]["reason"], "key: 1 NaN");
  EXPECT_EQ(j["summary"]["entries"], 3);
}

std::vector<std::vector<std::string>> parseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

TEST(ReportCsv, OneRowPerLayerAndKvHeadWithEveryMetric) {
  EvalReport r = sampleReport();
  r.layers[1].heads[0].skipped = true;
  const auto rows = parseCsv(toCsv(r));
  ASSERT_EQ(rows.size(), 1u + 4u);
  const auto& header = rows[0];
  ASSERT_EQ(header.size(), 3u + 8u + 18u);
  EXPECT_EQ(header[0], "layer");
  EXPECT_EQ(header[3], "key_mse");
  EXPECT_EQ(header[6], "key_max_abs_error");
  EXPECT_EQ(header[11], "key_only_score_mae");
  EXPECT_EQ(header[28], "joint_output_rel_error");
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i].size(), header.size()) << "row " << i;
  // layer 0, head 1: key mse 2, rel 0.2, value mse 4.
  EXPECT_EQ(rows[2][0], "0");
  EXPECT_EQ(rows[2][1], "1");
  EXPECT_EQ(rows[2][2], "0");
  EXPECT_EQ(rows[2][3], "2");
  EXPECT_EQ(rows[2][4], "0.2");
  EXPECT_EQ(rows[2][7], "4");
  // layer 1, head 0 skipped: empty metrics. layer 1, head 1: no sqnr.
  EXPECT_EQ(rows[3][2], "1");
  EXPECT_EQ(rows[3][3], "");
  EXPECT_EQ(rows[4][5], "");
  EXPECT_EQ(rows[4][3], "0");
}

TEST(ReportText, NamesSpecsAndSummary) {
  const std::string t = toText(sampleReport());
  EXPECT_NE(t.find("int4,axis=channel"), std::string::npos);
  EXPECT_NE(t.find("q4_0"), std::string::npos);
  EXPECT_NE(t.find("all"), std::string::npos);
  EXPECT_NE(t.find("note: a note"), std::string::npos);
}

TEST(EvalOptionsText, QueriesAndNonFinitePolicy) {
  EXPECT_EQ(*parseQueryCount("all"), 0);
  EXPECT_EQ(*parseQueryCount("last:16"), 16);
  for (const char* bad : {"last:0", "last:", "last:-2", "first:3", "last:2x", ""}) {
    auto q = parseQueryCount(bad);
    ASSERT_FALSE(q.hasValue()) << bad;
    EXPECT_NE(q.status().message().find("allowed"), std::string::npos) << bad;
  }
  EXPECT_EQ(*parseNonFinitePolicy("refuse"), NonFinitePolicy::Refuse);
  EXPECT_EQ(*parseNonFinitePolicy("skip-heads"), NonFinitePolicy::SkipHeads);
  EXPECT_FALSE(parseNonFinitePolicy("ignore").hasValue());
  EXPECT_STREQ(nonFinitePolicyName(NonFinitePolicy::SkipHeads), "skip-heads");
}

}  // namespace
}  // namespace kvscope
