// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/sensitivity/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/metrics/dump_layer.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

constexpr AttentionField kAllFields[] = {AttentionField::ScoreMae,      AttentionField::ScoreMax,
                                         AttentionField::KlMean,        AttentionField::KlMax,
                                         AttentionField::Top1Agreement, AttentionField::OutputRelError};

// Fields that mean something for a side: value_only leaves the score fields at their defaults
// (the scores do not depend on V), so V reports output_rel_error only.
bool fieldApplies(bool isKey, AttentionField f) { return isKey || f == AttentionField::OutputRelError; }

std::vector<SensitivityCandidate> prepareSide(const std::vector<QuantSpec>& specs, bool isKey,
                                              const DumpInfo& info) {
  std::vector<SensitivityCandidate> out;
  const SpecContext context{isKey, info.kvHeads, info.headDim, info.hasKeyPreRope};
  for (const QuantSpec& s : specs) {
    SensitivityCandidate c;
    c.spec = toString(s);
    if (Status st = validateSpec(s, context); !st.isOk()) c.skipped = st.message();
    c.bitsPerElement = storageFor(s, info.kvHeads, info.tokens, info.headDim).bitsPerElement();
    out.push_back(std::move(c));
  }
  return out;
}

nlohmann::ordered_json number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json metricsJson(const AttentionMetrics& m, bool isKey) {
  nlohmann::ordered_json j;
  for (AttentionField f : kAllFields) {
    if (fieldApplies(isKey, f)) j[attentionFieldName(f)] = number(attentionFieldValue(m, f));
  }
  return j;
}

std::string formatValue(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

std::vector<std::string> sensitivityCandidates() {
  return {"q8_0",
          "fp8_e4m3",
          "int8,axis=token",
          "q4_0",
          "int4,axis=token",
          "int4,axis=token,group=32",
          "int4,axis=channel,group=32",
          "int3,axis=token,group=32",
          "int2,axis=token,group=32",
          "int2,axis=channel,group=32"};
}

AttentionMetrics SensitivitySide::layerSummary(size_t li, size_t c) const {
  AttentionMetrics s{0, 0, 0, 0, 0, 0};
  if (kvHeads <= 0) return AttentionMetrics{};
  const double n = kvHeads;
  for (int g = 0; g < kvHeads; ++g) {
    const AttentionMetrics& m = at(li, g, c);
    s.scoreMae += m.scoreMae / n;
    s.scoreMax = std::max(s.scoreMax, m.scoreMax);
    s.klMean += m.klMean / n;
    s.klMax = std::max(s.klMax, m.klMax);
    s.top1Agreement += m.top1Agreement / n;
    s.outputRelError += m.outputRelError / n;
  }
  return s;
}

Expected<SensitivityMap> sensitivityMap(const Dump& dump, const SensitivityOptions& options,
                                        const Progress& progress) {
  const DumpInfo& info = dump.info();
  const std::string& origin = info.path;
  if (!options.keys && !options.values) {
    return Status::invalidArgument("sensitivity: map keys, values or both");
  }
  if (!info.hasQuery) {
    return Status::invalidArgument(origin + ": the dump has no queries; the sensitivity map "
                                            "measures attention damage and needs them");
  }
  if (options.sequence < 0 || options.sequence >= info.sequences) {
    return Status::invalidArgument(origin + ": sequence " + std::to_string(options.sequence) +
                                   " does not exist (allowed: 0.." + std::to_string(info.sequences - 1) + ")");
  }
  if (options.lastQueries < 0) return Status::invalidArgument("sensitivity: lastQueries must be ≥ 0");
  SensitivityMap map;
  map.dump = info;
  map.sequence = options.sequence;
  map.lastQueries = options.lastQueries;
  if (options.layers.empty()) {
    for (int l = 0; l < info.layers; ++l) map.layers.push_back(l);
  } else {
    for (int l : options.layers) {
      if (l < 0 || l >= info.layers) {
        return Status::invalidArgument(origin + ": layer " + std::to_string(l) +
                                       " does not exist (allowed: 0.." + std::to_string(info.layers - 1) + ")");
      }
    }
    map.layers = options.layers;
    std::sort(map.layers.begin(), map.layers.end());
    map.layers.erase(std::unique(map.layers.begin(), map.layers.end()), map.layers.end());
  }

  std::vector<QuantSpec> specs;
  {
    const std::vector<std::string> texts =
        options.candidates.empty() ? sensitivityCandidates() : options.candidates;
    std::set<std::string> seen;
    for (const std::string& t : texts) {
      auto s = parseSpec(t);
      if (!s) return s.status().withContext("candidate '" + t + "'");
      if (seen.insert(toString(*s)).second) specs.push_back(*s);
    }
  }
  const size_t nc = specs.size();
  const size_t nl = map.layers.size();
  for (int pass = 0; pass < 2; ++pass) {
    const bool isKey = pass == 0;
    SensitivitySide& side = isKey ? map.key : map.value;
    if (!(isKey ? options.keys : options.values)) continue;
    side.mapped = true;
    side.kvHeads = info.kvHeads;
    side.candidates = prepareSide(specs, isKey, info);
    side.damage.assign(nl * static_cast<size_t>(info.kvHeads) * nc, AttentionMetrics{});
  }
  const bool needPreRope =
      map.key.mapped && info.hasKeyPreRope &&
      std::any_of(specs.begin(), specs.end(), [](const QuantSpec& s) { return s.prerope; });
  const RopeParams rope = info.rope();

  const double total = static_cast<double>(nl) *
                       static_cast<double>((map.key.mapped ? nc : 0) + (map.value.mapped ? nc : 0) + 1);
  double step = 0;
  // Maps a sub-task's [0, 1] onto steps [from, to] of the whole run.
  auto sub = [&](double from, double to) {
    return Progress([&progress, from, to, total](double f, std::string_view) {
      return report(progress, (from + (to - from) * f) / total, "sensitivity map");
    });
  };

  constexpr size_t kBaselineBytes = size_t{1} << 30;
  bool baselineNoted = false;
  QuantOutput q;  // reused: its reconstruction keeps its buffer across candidates and layers
  for (size_t li = 0; li < nl; ++li) {
    const int layer = map.layers[li];
    const std::string where = origin + ": layer " + std::to_string(layer);
    if (!report(progress, step / total, "sensitivity map: reading layer " + std::to_string(layer))) {
      return Status::cancelled();
    }
    auto read = readLayerForAttention(dump, {layer, options.sequence, true, needPreRope, "the sensitivity map"});
    if (!read) return read.status();
    const AttentionLayer& tensors = *read;
    const Tensor3* key = &tensors.key;
    const Tensor3* value = &tensors.value;
    const Tensor3* preRope = tensors.preRope ? &*tensors.preRope : nullptr;

    // The original attention is the same for every candidate: computed once per layer.
    const AttentionInput baseInput = tensors.input(info.softmaxScale, options.lastQueries);
    std::shared_ptr<const AttentionBaseline> baseline;
    if (auto b = prepareAttentionBaseline(baseInput, kBaselineBytes, sub(step, step + 1)); b) {
      baseline = *b;
    } else if (b.status().code() != StatusCode::ResourceLimit) {
      return b.status().withContext(where);
    } else if (!baselineNoted) {
      baselineNoted = true;  // too large to keep: each candidate recomputes it (slower, same result)
      map.notes.push_back("the original attention of a layer exceeds " +
                          std::to_string(kBaselineBytes >> 20) +
                          " MiB and is recomputed for every candidate");
    }
    step += 1;

    for (int pass = 0; pass < 2; ++pass) {
      const bool isKey = pass == 0;
      SensitivitySide& side = isKey ? map.key : map.value;
      if (!side.mapped) continue;
      for (size_t c = 0; c < nc; ++c) {
        SensitivityCandidate& cand = side.candidates[c];
        if (!report(progress, step / total, "sensitivity map")) return Status::cancelled();
        step += 1;
        if (!cand.skipped.empty()) continue;
        QuantInput qin;
        qin.tensor = isKey ? key : value;
        qin.preRope = isKey ? preRope : nullptr;
        qin.rope = rope;
        if (Status st = quantizeTensorInto(qin, specs[c], q, sub(step - 1, step - 0.7)); !st.isOk()) {
          if (st.code() == StatusCode::Cancelled) return st;
          cand.skipped = where + ": " + st.message();  // e.g. a spec this layer's data refuses
          continue;
        }
        AttentionInput ain = baseInput;
        (isKey ? ain.keyHat : ain.valueHat) = &q.reconstruction;
        const AttentionCaseSelection which{isKey, !isKey, false};
        auto m = baseline ? attentionMetrics(ain, which, *baseline, sub(step - 0.7, step))
                          : attentionMetrics(ain, which, sub(step - 0.7, step));
        if (!m) return m.status().withContext(where + ": " + cand.spec);
        for (int g = 0; g < info.kvHeads; ++g) {
          const AttentionCases& h = (*m)[static_cast<size_t>(g)];
          side.damage[(li * static_cast<size_t>(info.kvHeads) + static_cast<size_t>(g)) * nc + c] =
              isKey ? h.keyOnly : h.valueOnly;
        }
      }
    }
  }
  // A candidate that failed on some layer has no complete map: its cells are cleared.
  for (SensitivitySide* side : {&map.key, &map.value}) {
    for (size_t c = 0; c < side->candidates.size(); ++c) {
      if (side->candidates[c].skipped.empty()) continue;
      for (size_t cell = c; cell < side->damage.size(); cell += nc) side->damage[cell] = AttentionMetrics{};
    }
  }
  report(progress, 1.0, "sensitivity map");
  return map;
}

std::string sensitivityToJson(const SensitivityMap& map) {
  nlohmann::ordered_json j;
  j["kvscope_sensitivity"] = 1;
  j["dump"] = map.dump.path;
  j["model"] = map.dump.model;
  j["layers"] = map.layers;
  j["kv_heads"] = map.dump.kvHeads;
  j["head_dim"] = map.dump.headDim;
  j["tokens"] = map.dump.tokens;
  j["sequence"] = map.sequence;
  j["queries"] = map.lastQueries > 0 ? "last:" + std::to_string(map.lastQueries) : "all";
  for (int pass = 0; pass < 2; ++pass) {
    const bool isKey = pass == 0;
    const SensitivitySide& side = isKey ? map.key : map.value;
    const char* name = isKey ? "key" : "value";
    if (!side.mapped) {
      j[name] = nullptr;
      continue;
    }
    nlohmann::ordered_json s;
    s["case"] = isKey ? "key_only" : "value_only";
    auto cands = nlohmann::ordered_json::array();
    for (size_t c = 0; c < side.candidates.size(); ++c) {
      const SensitivityCandidate& cand = side.candidates[c];
      nlohmann::ordered_json e;
      e["spec"] = cand.spec;
      e["bits_per_element"] = number(cand.bitsPerElement);
      if (!cand.skipped.empty()) {
        e["skipped"] = cand.skipped;
        e["layers"] = nullptr;
        cands.push_back(e);
        continue;
      }
      // layers[i] = {layer, summary, heads[g]}
      auto layers = nlohmann::ordered_json::array();
      for (size_t li = 0; li < map.layers.size(); ++li) {
        nlohmann::ordered_json l;
        l["layer"] = map.layers[li];
        l["summary"] = metricsJson(side.layerSummary(li, c), isKey);
        auto heads = nlohmann::ordered_json::array();
        for (int g = 0; g < side.kvHeads; ++g) heads.push_back(metricsJson(side.at(li, g, c), isKey));
        l["heads"] = heads;
        layers.push_back(l);
      }
      e["layers"] = layers;
      cands.push_back(e);
    }
    s["candidates"] = cands;
    j[name] = s;
  }
  j["notes"] = map.notes;
  return j.dump(2) + "\n";
}

std::string sensitivityToCsv(const SensitivityMap& map) {
  std::ostringstream out;
  out << "side,layer,kv_head,spec,bits_per_element";
  for (AttentionField f : kAllFields) out << "," << attentionFieldName(f);
  out << "\n";
  char buf[32];
  auto num = [&](double v) {
    if (!std::isfinite(v)) return std::string();
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return std::string(buf);
  };
  for (int pass = 0; pass < 2; ++pass) {
    const bool isKey = pass == 0;
    const SensitivitySide& side = isKey ? map.key : map.value;
    if (!side.mapped) continue;
    for (size_t li = 0; li < map.layers.size(); ++li) {
      for (int g = 0; g < side.kvHeads; ++g) {
        for (size_t c = 0; c < side.candidates.size(); ++c) {
          const SensitivityCandidate& cand = side.candidates[c];
          if (!cand.skipped.empty()) continue;
          // Spec strings hold commas: quoted.
          out << (isKey ? "key" : "value") << "," << map.layers[li] << "," << g << ",\"" << cand.spec
              << "\"," << num(cand.bitsPerElement);
          for (AttentionField f : kAllFields) {
            out << "," << (fieldApplies(isKey, f) ? num(attentionFieldValue(side.at(li, g, c), f)) : "");
          }
          out << "\n";
        }
      }
    }
  }
  return out.str();
}

std::string sensitivityToText(const SensitivityMap& map, AttentionField field) {
  std::ostringstream out;
  out << map.dump.path << ": sensitivity map, " << map.layers.size() << " layers × " << map.dump.kvHeads
      << " kv heads\n";
  for (int pass = 0; pass < 2; ++pass) {
    const bool isKey = pass == 0;
    const SensitivitySide& side = isKey ? map.key : map.value;
    if (!side.mapped) continue;
    const AttentionField f = fieldApplies(isKey, field) ? field : AttentionField::OutputRelError;
    out << "\n" << (isKey ? "K" : "V") << " (" << (isKey ? "key_only" : "value_only") << ", "
        << attentionFieldName(f) << ")\n";
    for (size_t c = 0; c < side.candidates.size(); ++c) {
      const SensitivityCandidate& cand = side.candidates[c];
      out << "  [" << c << "] " << cand.spec << " (" << formatValue(cand.bitsPerElement) << " bits)";
      if (!cand.skipped.empty()) out << ": skipped: " << cand.skipped;
      out << "\n";
    }
    out << "  layer head";
    for (size_t c = 0; c < side.candidates.size(); ++c) {
      if (side.candidates[c].skipped.empty()) {
        char label[24], h[32];
        std::snprintf(label, sizeof label, "[%zu]", c);
        std::snprintf(h, sizeof h, " %9s", label);
        out << h;
      }
    }
    out << "\n";
    for (size_t li = 0; li < map.layers.size(); ++li) {
      for (int g = 0; g < side.kvHeads; ++g) {
        char h[32];
        std::snprintf(h, sizeof h, "  %5d %4d", map.layers[li], g);
        out << h;
        for (size_t c = 0; c < side.candidates.size(); ++c) {
          if (!side.candidates[c].skipped.empty()) continue;
          char v[32];
          std::snprintf(v, sizeof v, " %9.3g", attentionFieldValue(side.at(li, g, c), f));
          out << v;
        }
        out << "\n";
      }
    }
  }
  for (const std::string& n : map.notes) out << "note: " << n << "\n";
  return out.str();
}

}  // namespace kvscope
