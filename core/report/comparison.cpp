// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/report/comparison.h"

#include "core/report/report_format.h"
#include "core/util/json_text.h"

namespace kvscope {

using Json = nlohmann::ordered_json;

Status checkComparable(const EvalReport& a, const EvalReport& b, DumpMatch match) {
  if (match == DumpMatch::Same && a.dump.path != b.dump.path) {
    return Status::invalidArgument("comparison: A evaluated " + a.dump.path + ", B " + b.dump.path +
                                   "; both must evaluate the same dump");
  }
  if (match == DumpMatch::Same && a.sequence != b.sequence) {
    return Status::invalidArgument("comparison: A evaluated sequence " + std::to_string(a.sequence) + ", B sequence " +
                                   std::to_string(b.sequence));
  }
  if (a.layers.size() != b.layers.size()) {
    return Status::invalidArgument("comparison: A has " + std::to_string(a.layers.size()) + " layers, B " +
                                   std::to_string(b.layers.size()) + "; the comparison is per (layer, kv head)");
  }
  for (size_t i = 0; i < a.layers.size(); ++i) {
    if (a.layers[i].layer != b.layers[i].layer || a.layers[i].heads.size() != b.layers[i].heads.size()) {
      return Status::invalidArgument("comparison: entry " + std::to_string(i) + " is layer " +
                                     std::to_string(a.layers[i].layer) + " in A and layer " +
                                     std::to_string(b.layers[i].layer) + " in B (or their kv heads differ)");
    }
  }
  return Status::ok();
}

Json jsonDifference(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return b.get<double>() - a.get<double>();
  if (a.is_object() && b.is_object()) {
    Json out = Json::object();
    for (const auto& [name, value] : a.items()) {
      out[name] = b.contains(name) ? jsonDifference(value, b[name]) : Json(nullptr);
    }
    return out;
  }
  return nullptr;
}

Json comparisonJson(const EvalReport& a, const EvalReport& b) {
  const Json ja = reportJson(a), jb = reportJson(b);
  Json j;
  j["kvscope_comparison"] = 1;
  j["definition"] = "differences are b - a; a is the pinned setting, b the current one";
  j["a"] = ja;
  j["b"] = jb;
  Json d;
  d["bits_per_element"] = {{"key", b.keyBitsPerElement() - a.keyBitsPerElement()},
                           {"value", b.valueBitsPerElement() - a.valueBitsPerElement()}};
  d["bytes_per_token"] = b.bytesPerTokenQuantized - a.bytesPerTokenQuantized;
  d["summary"] = {{"key", jsonDifference(ja["summary"]["key"], jb["summary"]["key"])},
                  {"value", jsonDifference(ja["summary"]["value"], jb["summary"]["value"])},
                  {"attention", jsonDifference(ja["summary"]["attention"], jb["summary"]["attention"])}};
  Json heads = Json::array();
  for (size_t l = 0; l < a.layers.size() && l < b.layers.size(); ++l) {
    const LayerResult& la = a.layers[l];
    const LayerResult& lb = b.layers[l];
    for (size_t h = 0; h < la.heads.size() && h < lb.heads.size(); ++h) {
      const HeadResult& ha = la.heads[h];
      const HeadResult& hb = lb.heads[h];
      Json e;
      e["layer"] = la.layer;
      e["kv_head"] = ha.kvHead;
      if (ha.skipped || hb.skipped) {
        e["key"] = nullptr;
        e["value"] = nullptr;
        e["attention"] = nullptr;
      } else {
        e["key"] = jsonDifference(tensorMetricsJson(ha.key), tensorMetricsJson(hb.key));
        e["value"] = jsonDifference(tensorMetricsJson(ha.value), tensorMetricsJson(hb.value));
        e["attention"] = jsonDifference(attentionCasesJson(ha.attention), attentionCasesJson(hb.attention));
      }
      e["key_spec"] = {{"a", toString(la.keySpec)}, {"b", toString(lb.keySpec)}};
      e["value_spec"] = {{"a", toString(la.valueSpec)}, {"b", toString(lb.valueSpec)}};
      heads.push_back(std::move(e));
    }
  }
  d["heads"] = std::move(heads);
  j["differences"] = std::move(d);
  return j;
}

std::string toComparisonJson(const EvalReport& a, const EvalReport& b) {
  return jsonText(comparisonJson(a, b));
}

}  // namespace kvscope
