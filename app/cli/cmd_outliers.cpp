// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli outliers`: outlier channels, sink tokens, kurtosis and code utilisation of a
// dump's K, pre-RoPE K and V (docs/attention.md).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/command.h"
#include "core/metrics/outliers.h"
#include "core/util/json_text.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string dump, mapping;
  std::string layers = "all";
  double threshold = 6.0;
  int topTokens = 5;
  std::string spec;
  int sequence = 0;
  std::string json;
};

nlohmann::ordered_json number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json tensorJson(const TensorOutliers& t) {
  nlohmann::ordered_json j;
  auto channel = [](const ChannelStat& c) {
    return nlohmann::ordered_json{{"channel", c.channel},
                                  {"max_abs", number(c.maxAbs)},
                                  {"ratio", number(c.ratio)},
                                  {"persistence", number(c.persistence)}};
  };
  auto outliers = nlohmann::ordered_json::array();
  for (const ChannelStat& c : t.outlierChannels) outliers.push_back(channel(c));
  j["outlier_channels"] = outliers;
  auto maxAbs = nlohmann::ordered_json::array(), ratio = nlohmann::ordered_json::array(),
       persistence = nlohmann::ordered_json::array();
  for (const ChannelStat& c : t.channels) {
    maxAbs.push_back(number(c.maxAbs));
    ratio.push_back(number(c.ratio));
    persistence.push_back(number(c.persistence));
  }
  j["channel_max_abs"] = maxAbs;
  j["channel_ratio"] = ratio;
  j["channel_persistence"] = persistence;
  auto tokens = nlohmann::ordered_json::array();
  for (const TokenStat& s : t.topTokens) {
    nlohmann::ordered_json e{{"token", s.token}, {"norm", number(s.norm)}, {"ratio", number(s.ratio)}};
    if (!s.text.empty()) e["text"] = s.text;
    tokens.push_back(e);
  }
  j["top_tokens"] = tokens;
  j["kurtosis"] = number(t.kurtosis);
  j["code_utilisation"] = t.codeUtilisation ? number(*t.codeUtilisation) : nullptr;
  return j;
}

std::string toJsonText(const OutlierProfile& p) {
  nlohmann::ordered_json j;
  j["kvscope_outliers"] = 1;
  j["dump"] = {{"model", p.dump.model},     {"layers", p.dump.layers},   {"kv_heads", p.dump.kvHeads},
               {"tokens", p.dump.tokens},   {"head_dim", p.dump.headDim}};
  j["threshold"] = p.threshold;
  j["top_channel_count"] = topChannelCount(p.dump.headDim);
  j["spec"] = p.spec.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.spec);
  auto layers = nlohmann::ordered_json::array();
  for (const LayerOutliers& l : p.layers) {
    nlohmann::ordered_json lj;
    lj["layer"] = l.layer;
    lj["key_code_utilisation"] = l.keyUtilisation ? number(*l.keyUtilisation) : nullptr;
    lj["value_code_utilisation"] = l.valueUtilisation ? number(*l.valueUtilisation) : nullptr;
    auto heads = nlohmann::ordered_json::array();
    for (const HeadOutliers& h : l.heads) {
      nlohmann::ordered_json hj;
      hj["kv_head"] = h.kvHead;
      hj["key"] = tensorJson(h.key);
      hj["key_pre_rope"] = h.keyPreRope ? tensorJson(*h.keyPreRope) : nullptr;
      hj["value"] = tensorJson(h.value);
      heads.push_back(hj);
    }
    lj["heads"] = heads;
    layers.push_back(lj);
  }
  j["layers"] = layers;
  j["notes"] = p.notes;
  return jsonText(j);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void tensorText(std::ostringstream& out, const char* name, const TensorOutliers& t) {
  out << "    " << name << ": kurtosis " << fmt("%.2f", t.kurtosis);
  if (t.codeUtilisation) out << ", code utilisation " << fmt("%.3f", *t.codeUtilisation);
  out << "\n      outlier channels:";
  if (t.outlierChannels.empty()) out << " none";
  for (const ChannelStat& c : t.outlierChannels) {
    out << " " << c.channel << " (×" << fmt("%.1f", c.ratio) << ", persistence "
        << fmt("%.2f", c.persistence) << ")";
  }
  out << "\n      top tokens:";
  for (const TokenStat& s : t.topTokens) {
    out << " " << s.token;
    if (!s.text.empty()) out << " '" << s.text << "'";
    out << " (×" << fmt("%.2f", s.ratio) << ")";
  }
  out << "\n";
}

std::string toText(const OutlierProfile& p) {
  std::ostringstream out;
  out << "outlier profile of " << p.dump.path << ": channel threshold ×" << p.threshold
      << " the median channel's max |x|; top 1% = " << topChannelCount(p.dump.headDim)
      << " of " << p.dump.headDim << " channels per token";
  if (!p.spec.empty()) out << "; code utilisation under " << p.spec;
  out << "\n";
  for (const LayerOutliers& l : p.layers) {
    out << "layer " << l.layer;
    if (l.keyUtilisation) out << "  (K utilisation " << fmt("%.3f", *l.keyUtilisation) << ")";
    if (l.valueUtilisation) out << "  (V utilisation " << fmt("%.3f", *l.valueUtilisation) << ")";
    out << "\n";
    for (const HeadOutliers& h : l.heads) {
      out << "  kv head " << h.kvHead << "\n";
      tensorText(out, "key", h.key);
      if (h.keyPreRope) tensorText(out, "key_pre_rope", *h.keyPreRope);
      tensorText(out, "value", h.value);
    }
  }
  for (const std::string& n : p.notes) out << "note: " << n << "\n";
  return out.str();
}

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  addInputOption(sub, "dump", o->dump, "the KV dump (HDF5)")->required();
  addInputOption(sub, "--mapping", o->mapping, "mapping file for a non-canonical dump");
  sub.add_option("--layers", o->layers, "layers: all (default) or a list like 0,2,5-7");
  sub.add_option("--threshold", o->threshold,
                 "outlier channel: max|x| above this multiple of the median channel's (default 6)")
      ->check(numberCheck("a finite number > 0", [](double v) { return v > 0; }));
  sub.add_option("--top-tokens", o->topTokens, "tokens listed by norm ratio (default 5)")
      ->check(wholeNumberCheck(0, std::numeric_limits<int>::max()));
  sub.add_option("--spec", o->spec, "also measure code utilisation under this spec or plan (K and V), e.g. int4 or int4;last1:int8");
  sub.add_option("--sequence", o->sequence, "sequence (batch index), default 0");
  addOutputOption(sub, "--json", o->json, "write JSON to FILE ('-' = standard output)");
  return [o]() -> int {
    auto dump = openDump(o->dump, o->mapping);
    if (!dump) return fail(dump.status());
    OutlierOptions options;
    options.threshold = o->threshold;
    options.topTokens = o->topTokens;
    options.sequence = o->sequence;
    auto layers = parseLayerList(o->layers, (*dump)->info().layers);
    if (!layers) return fail(layers.status());
    options.layers = *layers;
    if (!o->spec.empty()) {
      auto spec = parsePlan(o->spec);
      if (!spec) return fail(spec.status().withContext("--spec"));
      options.spec = *spec;
    }
    auto profile = outlierProfile(**dump, options, cancellationProgress());
    if (!profile) return fail(profile.status());
    if (!o->json.empty()) {
      if (Status s = writeOutput(o->json, toJsonText(*profile)); !s.isOk()) return fail(s);
      return kExitOk;  // like eval: text only when no JSON was asked for
    }
    std::cout << toText(*profile);
    return kExitOk;
  };
};

const Registrar registrar{"outliers", "outlier channels, sink tokens, kurtosis and code utilisation",
                          setup};

}  // namespace
}  // namespace kvscope::cli
