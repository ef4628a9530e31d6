// SPDX-License-Identifier: GPL-3.0-or-later
// comparison.json (core/report/comparison.h): both §8 reports and B − A per (layer, kv head), on
// hand-built results whose differences are worked out here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/report/comparison.h"
#include "core/report/report_format.h"

namespace kvscope {
namespace {

using Json = nlohmann::ordered_json;

HeadResult head(int g, double rel, std::optional<double> sqnr, double output) {
  HeadResult h;
  h.kvHead = g;
  h.key = TensorMetrics{rel * rel, rel, sqnr, 2 * rel};
  h.value = TensorMetrics{rel, 2 * rel, sqnr, 3 * rel};
  AttentionMetrics m{0.1, 0.2, output / 10, output / 5, 1.0 - output, output};
  h.attention = AttentionCases{m, m, m};
  return h;
}

EvalReport report(const char* key, double scale) {
  EvalReport r;
  r.dump.path = "sample.h5";
  r.dump.layers = 1;
  r.dump.kvHeads = 2;
  r.dump.tokens = 16;
  r.dump.headDim = 8;
  r.key = *parsePlan(key);
  r.value = *parsePlan("int4");
  r.keyStorage = storageFor(r.key.base, 2, 16, 8);
  r.valueStorage = storageFor(r.value.base, 2, 16, 8);
  r.bytesPerTokenQuantized = 10 * scale;
  r.layers = {LayerResult{0, {head(0, 0.1 * scale, 20.0 / scale, 0.05 * scale), head(1, 0.2 * scale, std::nullopt, 0.1 * scale)},
                          r.key.base, r.value.base}};
  r.summary = summarize(r.layers);
  return r;
}

TEST(Comparison, HoldsBothReportsAndTheirDifferencesPerHead) {
  const EvalReport a = report("int8", 1.0), b = report("int4", 2.0);
  ASSERT_TRUE(checkComparable(a, b).isOk());
  const Json j = comparisonJson(a, b);
  EXPECT_EQ(j["kvscope_comparison"], 1);
  // The reports are reportJson's, unchanged.
  EXPECT_EQ(j["a"], reportJson(a));
  EXPECT_EQ(j["b"], reportJson(b));
  const Json& d = j["differences"];
  EXPECT_DOUBLE_EQ(d["bits_per_element"]["key"].get<double>(), b.keyBitsPerElement() - a.keyBitsPerElement());
  EXPECT_LT(d["bits_per_element"]["key"].get<double>(), 0);  // int4 stores less than int8
  EXPECT_DOUBLE_EQ(d["bits_per_element"]["value"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(d["bytes_per_token"].get<double>(), 10.0);
  ASSERT_EQ(d["heads"].size(), 2u);
  const Json& h0 = d["heads"][0];
  EXPECT_EQ(h0["layer"], 0);
  EXPECT_EQ(h0["kv_head"], 0);
  // rel 0.1 → 0.2; sqnr 20 → 10; output 0.05 → 0.1; top1 0.95 → 0.9.
  EXPECT_NEAR(h0["key"]["rel_error"].get<double>(), 0.1, 1e-12);
  EXPECT_NEAR(h0["key"]["mse"].get<double>(), 0.04 - 0.01, 1e-12);
  EXPECT_NEAR(h0["key"]["sqnr_db"].get<double>(), -10.0, 1e-12);
  EXPECT_NEAR(h0["value"]["max_abs_error"].get<double>(), 0.3, 1e-12);
  EXPECT_NEAR(h0["attention"]["joint"]["output_rel_error"].get<double>(), 0.05, 1e-12);
  EXPECT_NEAR(h0["attention"]["key_only"]["top1_agreement"].get<double>(), -0.05, 1e-12);
  EXPECT_NEAR(h0["attention"]["value_only"]["score_mae"].get<double>(), 0.0, 1e-12);
  EXPECT_EQ(h0["key_spec"]["a"], "int8");
  EXPECT_EQ(h0["key_spec"]["b"], "int4");
  // Head 1 has no sqnr on either side: its difference is null, the rest are numbers.
  EXPECT_TRUE(d["heads"][1]["key"]["sqnr_db"].is_null());
  EXPECT_NEAR(d["heads"][1]["key"]["rel_error"].get<double>(), 0.2, 1e-12);
  // The summary's differences are those of the two summaries.
  EXPECT_NEAR(d["summary"]["key"]["rel_error"].get<double>(), b.summary.key.relError - a.summary.key.relError, 1e-12);
  EXPECT_NEAR(d["summary"]["attention"]["joint"]["kl_mean"].get<double>(),
              b.summary.attention->joint.klMean - a.summary.attention->joint.klMean, 1e-12);
  // Text form parses back to the same object.
  EXPECT_EQ(Json::parse(toComparisonJson(a, b)), j);
}

TEST(Comparison, RefusesReportsOfDifferentDumpsOrLayers) {
  EvalReport a = report("int8", 1.0), b = report("int4", 2.0);
  b.dump.path = "other.h5";
  const Status s = checkComparable(a, b);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("other.h5"), std::string::npos) << s.message();
  b = report("int4", 2.0);
  b.layers[0].layer = 3;
  EXPECT_FALSE(checkComparable(a, b).isOk());
  b.layers.clear();
  EXPECT_NE(checkComparable(a, b).message().find("layers"), std::string::npos);
}

// Two dumps side by side (the GUI's --compare-dump): their own paths and sequences, but still
// the same (layer, kv head) entries.
TEST(Comparison, TwoDumpsNeedOnlyTheSameLayersAndHeads) {
  EvalReport a = report("int8", 1.0), b = report("int4", 2.0);
  b.dump.path = "other.h5";
  b.sequence = 1;
  EXPECT_FALSE(checkComparable(a, b).isOk());
  EXPECT_TRUE(checkComparable(a, b, DumpMatch::Any).isOk());
  b.layers[0].heads.pop_back();
  EXPECT_FALSE(checkComparable(a, b, DumpMatch::Any).isOk());
  b = report("int4", 2.0);
  b.layers.pop_back();
  const Status s = checkComparable(a, b, DumpMatch::Any);
  EXPECT_NE(s.message().find("per (layer, kv head)"), std::string::npos) << s.message();
}

TEST(JsonDifference, NumbersSubtractObjectsRecurseTheRestIsNull) {
  const Json a = Json::parse(R"({"x": 1, "y": {"z": 2.5, "s": "t"}, "n": null, "only_a": 4})");
  const Json b = Json::parse(R"({"x": 4, "y": {"z": 1.0, "s": "u"}, "n": 3})");
  const Json d = jsonDifference(a, b);
  EXPECT_DOUBLE_EQ(d["x"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(d["y"]["z"].get<double>(), -1.5);
  EXPECT_TRUE(d["y"]["s"].is_null());
  EXPECT_TRUE(d["n"].is_null());
  EXPECT_TRUE(d["only_a"].is_null());
}

}  // namespace
}  // namespace kvscope
