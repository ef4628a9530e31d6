// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/search/search_format.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/report/report_format.h"
#include "core/util/json_text.h"

namespace kvscope {
namespace {

nlohmann::ordered_json number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json budgetJson(const Budget& b) {
  return {{"metric", attentionFieldName(b.field)},
          {"bound", b.bound},
          {"kind", isMinimumField(b.field) ? "minimum" : "maximum"}};
}

nlohmann::ordered_json choiceJson(const TensorChoice& c, const std::vector<int>& layers,
                                  const char* caseName) {
  nlohmann::ordered_json j;
  j["searched"] = c.searched;
  if (!c.searched) {
    j["spec"] = c.spec;
    return j;
  }
  j["budget"] = budgetJson(c.budget);
  j["judged_on"] = caseName;
  j["found"] = c.found;
  j["spec"] = c.found ? nlohmann::ordered_json(c.spec) : nlohmann::ordered_json(nullptr);
  j["bits_per_element"] = c.found ? number(c.bitsPerElement) : nullptr;
  j["metric"] = c.found ? number(c.worst) : nullptr;
  j["margin"] = c.found ? number(c.margin) : nullptr;
  j["limiting_layers"] = c.limitingLayers;
  auto cands = nlohmann::ordered_json::array();
  for (const CandidateResult& r : c.candidates) {
    nlohmann::ordered_json e;
    e["spec"] = r.spec;
    e["bits_per_element"] = number(r.bitsPerElement);
    if (!r.skipped.empty()) {
      e["skipped"] = r.skipped;
      cands.push_back(e);
      continue;
    }
    e["metric"] = number(r.worst);
    e["meets"] = r.meets;
    e["pareto"] = r.pareto;
    auto per = nlohmann::ordered_json::array();
    for (size_t i = 0; i < r.layerMetrics.size() && i < layers.size(); ++i) {
      per.push_back({{"layer", layers[i]},
                     {"metric", number(attentionFieldValue(r.layerMetrics[i], c.budget.field))},
                     {"attention", attentionMetricsJson(r.layerMetrics[i])}});
    }
    e["layers"] = per;
    cands.push_back(e);
  }
  j["candidates"] = cands;
  if (c.baseline >= 0) {
    const CandidateResult& b = c.candidates[static_cast<size_t>(c.baseline)];
    nlohmann::ordered_json base;
    base["spec"] = b.spec;
    base["bits_per_element"] = number(b.bitsPerElement);
    if (b.skipped.empty()) {
      base["metric"] = number(b.worst);
      base["meets"] = b.meets;
    } else {
      base["skipped"] = b.skipped;
    }
    base["beaten"] = c.beatsBaseline;
    j["baseline"] = base;
  }
  return j;
}

nlohmann::ordered_json layerSpecJson(const LayerSpecChoice& s) {
  return {{"found", s.found},
          {"spec", s.spec},
          {"bits_per_element", number(s.bitsPerElement)},
          {"metric", number(s.metric)}};
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void choiceText(std::ostringstream& out, const char* name, const TensorChoice& c) {
  if (!c.searched) {
    if (c.spec == "none") out << name << ": not searched, kept exact (none)\n";
    else out << name << ": not searched, stored under " << c.spec << " (" << fmt("%.3f", c.bitsPerElement) << " bpe)\n";
    return;
  }
  out << name << " budget " << budgetText(c.budget) << " ("
      << (name[0] == 'K' ? "key_only" : "value_only") << ", worst layer)\n";
  if (c.found) {
    out << "  chosen: " << c.spec << " at " << fmt("%.3f", c.bitsPerElement)
        << " bits/element, worst " << fmt("%.4g", c.worst) << ", margin " << fmt("%.3g", c.margin)
        << "\n";
  } else {
    out << "  NO CANDIDATE MEETS THE BUDGET\n";
  }
  if (c.baseline >= 0) {
    const CandidateResult& b = c.candidates[static_cast<size_t>(c.baseline)];
    out << "  baseline: " << b.spec << " at " << fmt("%.3f", b.bitsPerElement) << " bits/element, ";
    if (!b.skipped.empty()) {
      out << "skipped (" << b.skipped << ")\n";
    } else {
      out << "worst " << fmt("%.4g", b.worst) << (b.meets ? " (meets the budget)" : " (misses the budget)");
      if (c.beatsBaseline) {
        out << "; the choice saves " << fmt("%.3f", b.bitsPerElement - c.bitsPerElement) << " bits/element\n";
      } else {
        out << "; nothing cheaper meets the budget\n";
      }
    }
  }
  out << "  candidates (bits/element, worst metric):\n";
  for (const CandidateResult& r : c.candidates) {
    out << "    " << fmt("%7.3f", r.bitsPerElement) << "  ";
    if (!r.skipped.empty()) {
      out << "skipped   " << r.spec << " (" << r.skipped << ")\n";
      continue;
    }
    out << fmt("%-10.4g", r.worst) << (r.meets ? " ok " : "    ") << (r.pareto ? "* " : "  ")
        << r.spec << "\n";
  }
}

}  // namespace

nlohmann::ordered_json searchJson(const SearchResult& r) {
  nlohmann::ordered_json j;
  j["kvscope_search"] = 1;
  j["dump"] = {{"model", r.dump.model},       {"layers", r.dump.layers},
               {"kv_heads", r.dump.kvHeads},  {"heads", r.dump.heads},
               {"tokens", r.dump.tokens},     {"queries", r.dump.queries},
               {"head_dim", r.dump.headDim}};
  j["layers"] = r.layers;
  if (!r.baselineLabel.empty()) j["baseline"] = r.baselineLabel;
  j["queries"] = r.lastQueries > 0 ? nlohmann::ordered_json("last:" + std::to_string(r.lastQueries))
                                   : nlohmann::ordered_json("all");
  j["key"] = choiceJson(r.key, r.layers, "key_only");
  j["value"] = choiceJson(r.value, r.layers, "value_only");
  j["per_layer_mode"] = r.perLayer;
  auto per = nlohmann::ordered_json::array();
  for (const LayerChoice& c : r.layerChoices) {
    per.push_back({{"layer", c.layer}, {"key", layerSpecJson(c.key)}, {"value", layerSpecJson(c.value)}});
  }
  j["per_layer"] = per;
  j["forced_layers"] = {{"key", r.forcedKeyLayers}, {"value", r.forcedValueLayers}};
  j["bytes_per_token"] = {{"baseline_fp16", r.bytesPerTokenBaseline},
                          {"chosen", r.bytesPerTokenChosen},
                          {"layers_counted", r.layers.size()}};
  nlohmann::ordered_json joint;
  if (r.jointSummary) {
    auto layers = nlohmann::ordered_json::array();
    for (const JointLayer& l : r.joint) {
      layers.push_back({{"layer", l.layer},
                        {"key_spec", l.keySpec},
                        {"value_spec", l.valueSpec},
                        {"attention", attentionCasesJson(l.attention)}});
    }
    joint["layers"] = layers;
    joint["summary"] = attentionCasesJson(r.jointSummary);
  }
  j["joint"] = r.jointSummary ? joint : nlohmann::ordered_json(nullptr);
  j["notes"] = r.notes;
  return j;
}

std::string searchToJson(const SearchResult& result) { return jsonText(searchJson(result)); }

std::string searchToText(const SearchResult& r) {
  std::ostringstream out;
  out << "dump: " << r.dump.path << " (" << r.dump.layers << " layers, " << r.dump.kvHeads
      << " kv heads, " << r.dump.tokens << " tokens); searched " << r.layers.size()
      << " layers, queries " << (r.lastQueries > 0 ? "last " + std::to_string(r.lastQueries) : "all")
      << "\n";
  if (!r.baselineLabel.empty()) out << "baseline to beat: " << r.baselineLabel << "\n";
  out << "\n";
  choiceText(out, "K", r.key);
  out << "\n";
  choiceText(out, "V", r.value);
  if (r.perLayer) {
    out << "\nper layer (K spec, V spec):\n";
    for (const LayerChoice& c : r.layerChoices) {
      out << "  layer " << c.layer << ": " << (c.key.found ? c.key.spec : "(none meets: fp16)") << " ["
          << fmt("%.3f", c.key.bitsPerElement) << "], "
          << (c.value.found ? c.value.spec : "(none meets: fp16)") << " ["
          << fmt("%.3f", c.value.bitsPerElement) << "]\n";
    }
  }
  auto list = [](const std::vector<int>& v) {
    std::string s;
    for (int x : v) {
      if (!s.empty()) s += ',';
      s += std::to_string(x);
    }
    return s.empty() ? std::string("none") : s;
  };
  if (r.key.searched) out << "\nlayers forcing higher key precision: " << list(r.forcedKeyLayers) << "\n";
  if (r.value.searched) out << "layers forcing higher value precision: " << list(r.forcedValueLayers) << "\n";
  out << "bytes per token over the searched layers: fp16 " << fmt("%.1f", r.bytesPerTokenBaseline)
      << ", chosen " << fmt("%.1f", r.bytesPerTokenChosen) << "\n";
  if (r.jointSummary) {
    const AttentionCases& s = *r.jointSummary;
    out << "\njoint result of the chosen pair (mean over layers and kv heads):\n";
    for (auto [name, m] : {std::pair{"key_only", &s.keyOnly}, std::pair{"value_only", &s.valueOnly},
                           std::pair{"joint", &s.joint}}) {
      out << "  " << name << ": kl_mean " << fmt("%.4g", m->klMean) << ", top1 "
          << fmt("%.4f", m->top1Agreement) << ", output_rel_error " << fmt("%.4g", m->outputRelError)
          << "\n";
    }
  }
  for (const std::string& n : r.notes) out << "note: " << n << "\n";
  return out.str();
}

}  // namespace kvscope
