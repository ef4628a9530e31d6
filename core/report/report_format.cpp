// SPDX-License-Identifier: GPL-3.0-or-later
// The §8 JSON report, the CSV table and the terminal summary of an EvalReport.
#include "core/report/report_format.h"
#include "core/util/json_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kvscope {

namespace {

using Json = nlohmann::ordered_json;

/// A JSON number, or null for NaN/Inf (JSON has neither).
Json number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }
Json number(const std::optional<double>& v) { return v ? number(*v) : Json(nullptr); }

/// Shortest round-trip text of a double; empty for null, NaN or Inf (a CSV "null").
std::string cell(double v) {
  if (!std::isfinite(v)) return {};
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string();
}
std::string cell(const std::optional<double>& v) { return v ? cell(*v) : std::string(); }

Json specJson(const Plan& plan, const StorageCount& storage) {
  Json j;
  j["spec"] = toString(plan);
  j["bits_per_element"] = number(storage.bitsPerElement());
  j["storage_bits"] = {{"payload", storage.payloadBits},
                       {"metadata", storage.metadataBits},
                       {"outliers", storage.outlierBits},
                       {"kept_tokens", storage.keptBits},
                       {"elements", storage.elements}};
  return j;
}

std::string queriesText(int lastQueries) {
  return lastQueries > 0 ? "last:" + std::to_string(lastQueries) : std::string("all");
}

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
std::string fixed(const std::optional<double>& v, int decimals) { return v ? fixed(*v, decimals) : "-"; }
std::string general(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string pad(const std::string& s, size_t width) {
  // Width counts bytes; the table holds ASCII only.
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

}  // namespace

Json tensorMetricsJson(const TensorMetrics& m) {
  Json j;
  j["mse"] = number(m.mse);
  j["rel_error"] = number(m.relError);
  j["sqnr_db"] = number(m.sqnrDb);
  j["max_abs_error"] = number(m.maxAbsError);
  return j;
}

Json attentionMetricsJson(const AttentionMetrics& m) {
  Json j;
  j["score_mae"] = number(m.scoreMae);
  j["score_max"] = number(m.scoreMax);
  j["kl_mean"] = number(m.klMean);
  j["kl_max"] = number(m.klMax);
  j["top1_agreement"] = number(m.top1Agreement);
  j["output_rel_error"] = number(m.outputRelError);
  return j;
}

Json attentionCasesJson(const std::optional<AttentionCases>& cases) {
  if (!cases) return nullptr;
  Json j;
  j["key_only"] = attentionMetricsJson(cases->keyOnly);
  j["value_only"] = attentionMetricsJson(cases->valueOnly);
  j["joint"] = attentionMetricsJson(cases->joint);
  return j;
}

Json reportJson(const EvalReport& r) {
  Json j;
  j["kvscope_report"] = 1;
  const DumpInfo& d = r.dump;
  j["dump"] = {{"model", d.model},   {"layers", d.layers},   {"kv_heads", d.kvHeads},
               {"heads", d.heads},   {"tokens", d.tokens},   {"queries", d.queries},
               {"head_dim", d.headDim}, {"path", d.path},    {"sequence", r.sequence},
               {"sequences", d.sequences}};
  j["key"] = specJson(r.key, r.keyStorage);
  j["value"] = specJson(r.value, r.valueStorage);
  j["bytes_per_token"] = {{"baseline_fp16", number(r.bytesPerTokenBaseline)},
                          {"quantized", number(r.bytesPerTokenQuantized)},
                          {"layers_counted", d.layers}};
  Json layers = Json::array();
  Json skipped = Json::array();
  for (const LayerResult& layer : r.layers) {
    Json heads = Json::array();
    for (const HeadResult& h : layer.heads) {
      if (h.skipped) {
        skipped.push_back({{"layer", layer.layer}, {"kv_head", h.kvHead}, {"reason", h.skipReason}});
        continue;
      }
      Json hj;
      hj["kv_head"] = h.kvHead;
      hj["key"] = tensorMetricsJson(h.key);
      hj["value"] = tensorMetricsJson(h.value);
      hj["attention"] = attentionCasesJson(h.attention);
      heads.push_back(std::move(hj));
    }
    layers.push_back({{"layer", layer.layer},
                      {"heads", std::move(heads)},
                      {"key_spec", toString(layer.keySpec)},
                      {"value_spec", toString(layer.valueSpec)}});
  }
  j["layers"] = std::move(layers);
  Json summary;
  summary["key"] = tensorMetricsJson(r.summary.key);
  summary["value"] = tensorMetricsJson(r.summary.value);
  summary["attention"] = attentionCasesJson(r.summary.attention);
  summary["entries"] = r.summary.entries;
  j["summary"] = std::move(summary);
  // Extras (§8 allows them): how the report was made, and what was left out.
  if (!r.preset.empty()) j["preset"] = r.preset;
  if (!r.engine.empty()) j["engine"] = r.engine;
  Json evaluated = Json::array();
  for (const LayerResult& layer : r.layers) evaluated.push_back(layer.layer);
  j["options"] = {{"layers", std::move(evaluated)},
                  {"queries", queriesText(r.lastQueries)},
                  {"nonfinite", nonFinitePolicyName(r.nonFinite)}};
  j["skipped_heads"] = std::move(skipped);
  j["notes"] = r.notes;
  j["kvscope_version"] = KVSCOPE_VERSION;
  return j;
}

std::string toJson(const EvalReport& report) {
  // Shortest round-trip doubles; invalid UTF-8 in a model name is replaced, never thrown on.
  return jsonText(reportJson(report));
}

std::string toCsv(const EvalReport& r) {
  std::ostringstream out;
  out << "layer,kv_head,skipped";
  for (const char* t : {"key", "value"}) {
    for (const char* f : {"mse", "rel_error", "sqnr_db", "max_abs_error"}) out << ',' << t << '_' << f;
  }
  for (const char* c : {"key_only", "value_only", "joint"}) {
    for (const char* f : {"score_mae", "score_max", "kl_mean", "kl_max", "top1_agreement", "output_rel_error"}) {
      out << ',' << c << '_' << f;
    }
  }
  out << '\n';
  for (const LayerResult& layer : r.layers) {
    for (const HeadResult& h : layer.heads) {
      out << layer.layer << ',' << h.kvHead << ',' << (h.skipped ? 1 : 0);
      for (const TensorMetrics* m : {&h.key, &h.value}) {
        if (h.skipped) {
          out << ",,,,";
          continue;
        }
        out << ',' << cell(m->mse) << ',' << cell(m->relError) << ',' << cell(m->sqnrDb) << ','
            << cell(m->maxAbsError);
      }
      for (int c = 0; c < 3; ++c) {
        if (!h.attention) {
          out << ",,,,,,";
          continue;
        }
        const AttentionMetrics& a = c == 0 ? h.attention->keyOnly : c == 1 ? h.attention->valueOnly : h.attention->joint;
        out << ',' << cell(a.scoreMae) << ',' << cell(a.scoreMax) << ',' << cell(a.klMean) << ','
            << cell(a.klMax) << ',' << cell(a.top1Agreement) << ',' << cell(a.outputRelError);
      }
      out << '\n';
    }
  }
  return out.str();
}

std::string toText(const EvalReport& r) {
  std::ostringstream out;
  const DumpInfo& d = r.dump;
  out << "dump:   " << d.path << (d.model.empty() ? "" : " (" + d.model + ")") << "\n        " << d.layers
      << " layers, " << d.kvHeads << " kv heads, " << d.heads << " heads, " << d.tokens << " tokens, "
      << d.queries << " queries, head dim " << d.headDim << "\n";
  if (!r.preset.empty()) out << "preset: " << r.preset << "\n";
  if (!r.engine.empty()) out << "engine: " << r.engine << "\n";
  out << "key:    " << toString(r.key) << "  (" << fixed(r.keyBitsPerElement(), 4) << " bits/element)\n";
  out << "value:  " << toString(r.value) << "  (" << fixed(r.valueBitsPerElement(), 4) << " bits/element)\n";
  if (!isUniform(r.key) || !isUniform(r.value)) {
    for (const LayerResult& layer : r.layers) {
      out << "  layer " << layer.layer << ": K " << toString(layer.keySpec) << ", V " << toString(layer.valueSpec)
          << "\n";
    }
  }
  out << "bytes per token (all " << d.layers << " layers): " << fixed(r.bytesPerTokenQuantized, 1) << " vs "
      << fixed(r.bytesPerTokenBaseline, 1) << " fp16";
  if (r.bytesPerTokenQuantized > 0) {
    out << " (" << fixed(r.bytesPerTokenBaseline / r.bytesPerTokenQuantized, 2) << "x smaller)";
  }
  out << "\n\n";

  const bool attention = r.summary.attention.has_value();
  std::vector<std::pair<std::string, size_t>> cols = {
      {"layer", 8}, {"K rel_err", 11}, {"K sqnr_dB", 11}, {"K max_abs", 11},
      {"V rel_err", 11}, {"V sqnr_dB", 11}, {"V max_abs", 11}};
  if (attention) {
    cols.insert(cols.end(), {{"KL joint", 11}, {"KL max", 11}, {"top1", 8}, {"out_rel", 11}});
  }
  for (const auto& [name, w] : cols) out << pad(name, w);
  out << "\n";
  auto row = [&](const std::string& label, const EvalSummary& s) {
    out << pad(label, 8) << pad(general(s.key.relError), 11) << pad(fixed(s.key.sqnrDb, 2), 11)
        << pad(general(s.key.maxAbsError), 11) << pad(general(s.value.relError), 11)
        << pad(fixed(s.value.sqnrDb, 2), 11) << pad(general(s.value.maxAbsError), 11);
    if (attention) {
      if (s.attention) {
        out << pad(general(s.attention->joint.klMean), 11) << pad(general(s.attention->joint.klMax), 11)
            << pad(fixed(s.attention->joint.top1Agreement, 4), 8)
            << pad(general(s.attention->joint.outputRelError), 11);
      } else {
        out << pad("-", 11) << pad("-", 11) << pad("-", 8) << pad("-", 11);
      }
    }
    out << "\n";
  };
  for (const LayerResult& layer : r.layers) row(std::to_string(layer.layer), summarize({layer}));
  row("all", r.summary);
  out << "\n(layer rows: mean over kv heads; max columns take the max)\n";
  for (const std::string& note : r.notes) out << "note: " << note << "\n";
  return out.str();
}

}  // namespace kvscope
