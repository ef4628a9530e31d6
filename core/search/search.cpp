// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/search/search.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "core/engine/presets.h"
#include "core/metrics/dump_layer.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

constexpr AttentionField kFields[] = {AttentionField::ScoreMae, AttentionField::ScoreMax,
                                      AttentionField::KlMean,   AttentionField::KlMax,
                                      AttentionField::Top1Agreement,
                                      AttentionField::OutputRelError};

std::string fieldList() {
  std::string out;
  for (AttentionField f : kFields) out += (out.empty() ? "" : ", ") + std::string(attentionFieldName(f));
  return out;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// §8's summary rule over kv heads: means, except *_max fields, which take the max.
AttentionMetrics summarizeHeads(const std::vector<AttentionMetrics>& heads) {
  AttentionMetrics s;
  if (heads.empty()) return s;
  s.top1Agreement = 0;
  const double n = static_cast<double>(heads.size());
  for (const AttentionMetrics& m : heads) {
    s.scoreMae += m.scoreMae / n;
    s.scoreMax = std::max(s.scoreMax, m.scoreMax);
    s.klMean += m.klMean / n;
    s.klMax = std::max(s.klMax, m.klMax);
    s.top1Agreement += m.top1Agreement / n;
    s.outputRelError += m.outputRelError / n;
  }
  return s;
}

AttentionCases summarizeCases(const std::vector<AttentionCases>& heads) {
  std::vector<AttentionMetrics> k, v, j;
  for (const AttentionCases& c : heads) {
    k.push_back(c.keyOnly);
    v.push_back(c.valueOnly);
    j.push_back(c.joint);
  }
  return {summarizeHeads(k), summarizeHeads(v), summarizeHeads(j)};
}

// A candidate prepared for one tensor.
struct Prepared {
  QuantSpec spec;
  CandidateResult result;
};

std::vector<Prepared> prepare(const std::vector<QuantSpec>& specs, bool isKey,
                              const DumpInfo& info) {
  std::vector<Prepared> out;
  const SpecContext context{isKey, info.kvHeads, info.headDim, info.hasKeyPreRope};
  for (const QuantSpec& s : specs) {
    Prepared p;
    p.spec = s;
    p.result.spec = toString(s);
    if (Status st = validateSpec(s, context); !st.isOk()) p.result.skipped = st.message();
    p.result.bitsPerElement = storageFor(s, info.kvHeads, info.tokens, info.headDim).bitsPerElement();
    out.push_back(std::move(p));
  }
  return out;
}

double worstOf(const std::vector<AttentionMetrics>& layers, const Budget& b) {
  double worst = isMinimumField(b.field) ? std::numeric_limits<double>::infinity() : 0.0;
  for (const AttentionMetrics& m : layers) {
    const double v = attentionFieldValue(m, b.field);
    if (std::isnan(v)) return v;
    worst = isMinimumField(b.field) ? std::min(worst, v) : std::max(worst, v);
  }
  return worst;
}

// Fills worst/meets/pareto, sorts by bits (skipped last) and picks the cheapest passing one.
void decide(TensorChoice& choice, std::vector<Prepared>& prepared) {
  const Budget& b = choice.budget;
  for (Prepared& p : prepared) {
    CandidateResult& r = p.result;
    if (!r.skipped.empty()) continue;
    r.worst = worstOf(r.layerMetrics, b);
    r.meets = !r.layerMetrics.empty() && b.meets(r.worst);
  }
  std::stable_sort(prepared.begin(), prepared.end(), [](const Prepared& a, const Prepared& c) {
    if (a.result.skipped.empty() != c.result.skipped.empty()) return a.result.skipped.empty();
    return a.result.bitsPerElement < c.result.bitsPerElement;
  });
  for (Prepared& p : prepared) {
    CandidateResult& r = p.result;
    if (!r.skipped.empty() || std::isnan(r.worst)) continue;
    r.pareto = true;
    for (const Prepared& q : prepared) {
      const CandidateResult& o = q.result;
      if (&q == &p || !o.skipped.empty() || std::isnan(o.worst)) continue;
      const bool noWorse = o.bitsPerElement <= r.bitsPerElement && !b.better(r.worst, o.worst);
      const bool strictly = o.bitsPerElement < r.bitsPerElement || b.better(o.worst, r.worst);
      if (noWorse && strictly) {
        r.pareto = false;
        break;
      }
    }
  }
  for (size_t i = 0; i < prepared.size(); ++i) {
    const CandidateResult& r = prepared[i].result;
    if (!r.meets) continue;
    if (choice.chosen < 0) {
      choice.chosen = static_cast<int>(i);
      continue;
    }
    const CandidateResult& c = prepared[static_cast<size_t>(choice.chosen)].result;
    if (r.bitsPerElement < c.bitsPerElement ||
        (r.bitsPerElement == c.bitsPerElement && b.better(r.worst, c.worst))) {
      choice.chosen = static_cast<int>(i);
    }
  }
  for (const Prepared& p : prepared) choice.candidates.push_back(p.result);
  choice.found = choice.chosen >= 0;
  if (choice.found) {
    const CandidateResult& c = choice.candidates[static_cast<size_t>(choice.chosen)];
    choice.spec = c.spec;
    choice.bitsPerElement = c.bitsPerElement;
    choice.worst = c.worst;
    choice.margin = b.margin(c.worst);
  }
}

LayerSpecChoice chooseForLayer(const TensorChoice& choice, size_t layerIndex) {
  LayerSpecChoice best;
  best.spec = "fp16";
  for (size_t i = 0; i < choice.candidates.size(); ++i) {
    const CandidateResult& r = choice.candidates[i];
    if (!r.skipped.empty() || layerIndex >= r.layerMetrics.size()) continue;
    const double v = attentionFieldValue(r.layerMetrics[layerIndex], choice.budget.field);
    if (!choice.budget.meets(v)) continue;
    if (!best.found || r.bitsPerElement < best.bitsPerElement ||
        (r.bitsPerElement == best.bitsPerElement && choice.budget.better(v, best.metric))) {
      best = {true, static_cast<int>(i), r.spec, r.bitsPerElement, v};
    }
  }
  return best;
}

std::vector<int> forcedLayers(const std::vector<LayerChoice>& choices, bool key) {
  double cheapest = std::numeric_limits<double>::infinity();
  for (const LayerChoice& c : choices) {
    const LayerSpecChoice& s = key ? c.key : c.value;
    if (s.found) cheapest = std::min(cheapest, s.bitsPerElement);
  }
  std::vector<int> out;
  for (const LayerChoice& c : choices) {
    const LayerSpecChoice& s = key ? c.key : c.value;
    if (!s.found || s.bitsPerElement > cheapest) out.push_back(c.layer);
  }
  return out;
}

}  // namespace

const char* attentionFieldName(AttentionField field) {
  switch (field) {
    case AttentionField::ScoreMae: return "score_mae";
    case AttentionField::ScoreMax: return "score_max";
    case AttentionField::KlMean: return "kl_mean";
    case AttentionField::KlMax: return "kl_max";
    case AttentionField::Top1Agreement: return "top1_agreement";
    case AttentionField::OutputRelError: return "output_rel_error";
  }
  return "?";
}

Expected<AttentionField> parseAttentionField(std::string_view text) {
  for (AttentionField f : kFields) {
    if (text == attentionFieldName(f)) return f;
  }
  return Status::invalidArgument("unknown metric '" + std::string(text) + "' (allowed: " +
                                 fieldList() + ")");
}

double attentionFieldValue(const AttentionMetrics& m, AttentionField field) {
  switch (field) {
    case AttentionField::ScoreMae: return m.scoreMae;
    case AttentionField::ScoreMax: return m.scoreMax;
    case AttentionField::KlMean: return m.klMean;
    case AttentionField::KlMax: return m.klMax;
    case AttentionField::Top1Agreement: return m.top1Agreement;
    case AttentionField::OutputRelError: return m.outputRelError;
  }
  return 0;
}

bool isMinimumField(AttentionField field) { return field == AttentionField::Top1Agreement; }

bool Budget::meets(double value) const {
  if (std::isnan(value)) return false;
  return isMinimumField(field) ? value >= bound : value <= bound;
}

double Budget::margin(double value) const {
  return isMinimumField(field) ? value - bound : bound - value;
}

bool Budget::better(double a, double b) const { return isMinimumField(field) ? a > b : a < b; }

Expected<Budget> parseBudget(std::string_view text, std::string_view option) {
  const std::string prefix = std::string(option) + " '" + std::string(text) + "': ";
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return Status::invalidArgument(prefix + "expected METRIC=VALUE, e.g. kl_mean=1e-3 (metrics: " +
                                   fieldList() + ")");
  }
  auto field = parseAttentionField(trim(text.substr(0, eq)));
  if (!field) return Status::invalidArgument(prefix + field.status().message());
  const std::string number = trim(text.substr(eq + 1));
  double bound = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), bound);
  if (number.empty() || ec != std::errc() || ptr != number.data() + number.size() ||
      !std::isfinite(bound) || bound < 0) {
    return Status::invalidArgument(prefix + "'" + number + "' is not a finite number ≥ 0");
  }
  if (*field == AttentionField::Top1Agreement && bound > 1) {
    return Status::invalidArgument(prefix + "top1_agreement is a fraction in [0, 1]");
  }
  return Budget{*field, bound};
}

std::string budgetText(const Budget& budget) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s %s %g", attentionFieldName(budget.field),
                isMinimumField(budget.field) ? "≥" : "≤", budget.bound);
  return buf;
}

std::vector<std::string> defaultCandidates(const KvShape& shape) {
  std::vector<std::string> out;
  for (int b : {2, 3, 4, 5, 6, 8}) {
    for (const char* g : {",group=32", ",group=64", ""}) out.push_back("int" + std::to_string(b) + g);
  }
  for (int b : {2, 3, 4, 8}) {
    for (const char* g : {",group=32", ",group=128", ""}) {
      out.push_back("int" + std::to_string(b) + ",axis=channel" + g);
    }
  }
  for (const char* s : {"int4,sym", "int8,sym", "int4,clip=mse", "int3,clip=mse", "fp8_e4m3",
                        "fp8_e5m2", "fp8_e4m3,axis=token", "nf4", "nf4,group=32", "mxfp4", "nvfp4",
                        "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "bf16", "fp16",
                        // Rotated (§1 step 3): what llama.cpp stores today and QuaRot-style grids;
                        // skipped on head dims the rotation does not suit.
                        "q8_0,rot=hadamard", "q4_0,rot=hadamard", "q4_0,rot=hadamard:64", "int4,rot=hadamard",
                        "int3,rot=hadamard", "int2,rot=hadamard,group=32",
                        // Codebook quantizers (§11): TurboQuant, and KVQuant-style non-uniform.
                        "tq2", "tq3", "tq4", "tqp3", "tqp4", "nuq3", "nuq4", "nuq3,axis=channel",
                        "nuq4,axis=channel"}) {
    out.emplace_back(s);
  }
  for (const Preset& p : presetTable()) {
    auto r = resolvePreset(p.name, shape);
    if (!r) continue;  // e.g. quarot-4 on a head dim that is not a power of two
    out.push_back(r->key);
    out.push_back(r->value);
  }
  // Remove duplicates by canonical string, keeping the first.
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (const std::string& s : out) {
    auto spec = parseSpec(s);
    const std::string key = spec ? toString(*spec) : s;
    if (seen.insert(key).second) unique.push_back(s);
  }
  return unique;
}

Expected<std::vector<std::string>> parseCandidateList(std::string_view text,
                                                      std::string_view origin) {
  std::vector<std::string> out;
  size_t pos = 0;
  int line = 0;
  while (pos <= text.size()) {
    const size_t nl = text.find('\n', pos);
    std::string_view raw = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    ++line;
    const size_t hash = raw.find('#');
    const std::string spec = trim(hash == std::string_view::npos ? raw : raw.substr(0, hash));
    if (!spec.empty()) {
      auto parsed = parseSpec(spec);
      if (!parsed) {
        return parsed.status().withContext(std::string(origin) + ":" + std::to_string(line));
      }
      out.push_back(spec);
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  if (out.empty()) return Status::invalidArgument(std::string(origin) + ": no candidate specs");
  return out;
}

Status validateFixedSides(const DumpInfo& info, const std::optional<Budget>& keyBudget,
                          const std::optional<Plan>& fixedKey, const std::optional<Budget>& valueBudget,
                          const std::optional<Plan>& fixedValue) {
  for (const auto& [fixed, budget, isKey] : {std::tuple{&fixedKey, &keyBudget, true},
                                             std::tuple{&fixedValue, &valueBudget, false}}) {
    if (!*fixed) continue;
    const char* flag = isKey ? "--key" : "--value";
    if (*budget) {
      return Status::invalidArgument(std::string("search: give ") + flag + "-budget (search that side) or " + flag +
                                     " (fix it), not both");
    }
    SpecContext ctx{isKey, info.kvHeads, info.headDim, info.hasKeyPreRope};
    KVS_RETURN_IF_ERROR(validatePlan(**fixed, ctx, info.layers).withContext(flag));
  }
  return Status::ok();
}

Expected<SearchResult> searchBudgets(const Dump& dump, const SearchOptions& options,
                                     const Progress& progress) {
  const DumpInfo& info = dump.info();
  const std::string origin = info.path;
  if (!options.keyBudget && !options.valueBudget) {
    return Status::invalidArgument("search: give a key budget, a value budget or both");
  }
  if (!info.hasQuery) {
    return Status::invalidArgument(origin + ": the dump has no queries; the search judges "
                                            "candidates by attention metrics and needs them");
  }
  if (options.sequence < 0 || options.sequence >= info.sequences) {
    return Status::invalidArgument(origin + ": sequence " + std::to_string(options.sequence) +
                                   " does not exist (0…" + std::to_string(info.sequences - 1) + ")");
  }
  if (options.lastQueries < 0) return Status::invalidArgument("search: lastQueries must be ≥ 0");
  // A fixed side is stored under its plan in the joint result instead of staying exact.
  KVS_RETURN_IF_ERROR(validateFixedSides(info, options.keyBudget, options.fixedKey, options.valueBudget,
                                         options.fixedValue));
  SearchResult result;
  result.dump = info;
  if (options.baseline) result.baselineLabel = options.baseline->label;
  result.lastQueries = options.lastQueries;
  result.perLayer = options.perLayer;
  if (options.layers.empty()) {
    for (int l = 0; l < info.layers; ++l) result.layers.push_back(l);
  } else {
    for (int l : options.layers) {
      if (l < 0 || l >= info.layers) {
        return Status::invalidArgument(origin + ": layer " + std::to_string(l) + " does not exist");
      }
    }
    result.layers = options.layers;
  }

  // Candidates: parsed once, duplicates (by canonical string) dropped.
  std::vector<QuantSpec> specs;
  {
    std::vector<std::string> texts =
        options.candidates.empty() ? defaultCandidates({info.headDim, info.layers, info.kvHeads})
                                    : options.candidates;
    // The baseline's specs are measured like any candidate (added when the list lacks them).
    if (options.baseline) {
      texts.push_back(options.baseline->keySpec);
      texts.push_back(options.baseline->valueSpec);
    }
    std::set<std::string> seen;
    for (const std::string& t : texts) {
      auto s = parseSpec(t);
      if (!s) return s.status().withContext("candidate '" + t + "'");
      if (seen.insert(toString(*s)).second) specs.push_back(*s);
    }
  }
  std::vector<Prepared> keyCands, valueCands;
  if (options.keyBudget) keyCands = prepare(specs, true, info);
  if (options.valueBudget) valueCands = prepare(specs, false, info);
  const bool needPreRope =
      info.hasKeyPreRope && std::any_of(keyCands.begin(), keyCands.end(), [](const Prepared& p) {
        return p.spec.prerope && p.result.skipped.empty();
      });
  const RopeParams rope = info.rope();
  const double scale = info.softmaxScale;

  const double total = static_cast<double>(result.layers.size()) *
                       static_cast<double>(keyCands.size() + valueCands.size() + 1);
  double step = 0;
  auto sub = [&](double base) {
    return Progress([&progress, base, total](double f, std::string_view) {
      return report(progress, (base + f) / total, "budget search");
    });
  };

  // Sweep: each layer read once; each candidate quantized once per layer.
  constexpr size_t kBaselineBytes = size_t{1} << 30;
  bool baselineNoted = false;
  for (int layer : result.layers) {
    const std::string where = origin + ": layer " + std::to_string(layer);
    auto read = readLayerForAttention(dump, {layer, options.sequence, true, needPreRope, "the search"});
    if (!read) return read.status();
    const AttentionLayer& tensors = *read;

    // The original attention is the same for every candidate: computed once per layer.
    const AttentionInput baseInput = tensors.input(scale, options.lastQueries);
    std::shared_ptr<const AttentionBaseline> baseline;
    if (auto b = prepareAttentionBaseline(baseInput, kBaselineBytes, sub(step)); b) {
      baseline = *b;
    } else if (b.status().code() != StatusCode::ResourceLimit) {
      return b.status().withContext(where);
    } else if (!baselineNoted) {
      baselineNoted = true;  // too large to keep: each candidate recomputes it (slower, same result)
      result.notes.push_back("the original attention of a layer exceeds " +
                             std::to_string(kBaselineBytes >> 20) +
                             " MiB and is recomputed for every candidate");
    }

    for (int pass = 0; pass < 2; ++pass) {
      const bool isKey = pass == 0;
      std::vector<Prepared>& cands = isKey ? keyCands : valueCands;
      for (Prepared& c : cands) {
        if (!report(progress, step / total, "budget search")) return Status::cancelled();
        if (c.result.skipped.empty()) {
          QuantInput qin;
          qin.tensor = isKey ? &tensors.key : &tensors.value;
          qin.preRope = isKey && tensors.preRope ? &*tensors.preRope : nullptr;
          qin.rope = rope;
          auto q = quantizeTensor(qin, c.spec, sub(step));
          if (!q) {
            if (q.status().code() == StatusCode::Cancelled) return q.status();
            c.result.skipped = q.status().message();
            c.result.layerMetrics.clear();
          } else {
            AttentionInput ain = baseInput;
            (isKey ? ain.keyHat : ain.valueHat) = &q->reconstruction;
            AttentionCaseSelection which{isKey, !isKey, false};
            auto m = baseline ? attentionMetrics(ain, which, *baseline, sub(step))
                              : attentionMetrics(ain, which, sub(step));
            if (!m) return m.status().withContext(where + ": " + c.result.spec);
            std::vector<AttentionMetrics> heads;
            for (const AttentionCases& h : *m) heads.push_back(isKey ? h.keyOnly : h.valueOnly);
            c.result.layerMetrics.push_back(summarizeHeads(heads));
          }
        }
        step += 1;
      }
    }
  }

  for (int pass = 0; pass < 2; ++pass) {
    const bool isKey = pass == 0;
    TensorChoice& choice = isKey ? result.key : result.value;
    const std::optional<Budget>& budget = isKey ? options.keyBudget : options.valueBudget;
    if (!budget) {
      const std::optional<Plan>& fixed = isKey ? options.fixedKey : options.fixedValue;
      if (fixed) {
        choice.spec = toString(*fixed);
        choice.bitsPerElement = planStorage(*fixed, info.layers, info.kvHeads, info.tokens, info.headDim).bitsPerElement();
        result.notes.push_back(std::string(isKey ? "keys" : "values") + " were not searched (no budget) and are stored under " +
                               choice.spec + " in the joint result");
        continue;
      }
      choice.spec = "none";
      result.notes.push_back(std::string(isKey ? "keys" : "values") +
                             " were not searched (no budget) and stay exact");
      continue;
    }
    choice.searched = true;
    choice.budget = *budget;
    decide(choice, isKey ? keyCands : valueCands);
    if (options.baseline) {
      auto spec = parseSpec(isKey ? options.baseline->keySpec : options.baseline->valueSpec);
      const std::string canonical = spec ? toString(*spec) : std::string();
      for (size_t i = 0; i < choice.candidates.size(); ++i) {
        if (choice.candidates[i].spec == canonical) choice.baseline = static_cast<int>(i);
      }
      if (choice.baseline >= 0 && choice.found) {
        const CandidateResult& b = choice.candidates[static_cast<size_t>(choice.baseline)];
        choice.beatsBaseline = choice.bitsPerElement < b.bitsPerElement;
      }
    }
    if (!choice.found) {
      result.notes.push_back(std::string("no ") + (isKey ? "key" : "value") +
                             " candidate meets " + budgetText(*budget) + " on every searched layer");
    }
  }

  // Per-layer choices (the result with --per-layer; the limiting layers otherwise).
  for (size_t li = 0; li < result.layers.size(); ++li) {
    LayerChoice lc;
    lc.layer = result.layers[li];
    auto unsearched = [&](const std::optional<Plan>& fixed) -> LayerSpecChoice {
      if (!fixed) return {true, -1, "none", 16, 0};
      const QuantSpec& s = specForLayer(*fixed, lc.layer, info.layers);
      return {true, -1, toString(s), storageFor(s, info.kvHeads, info.tokens, info.headDim).bitsPerElement(), 0};
    };
    lc.key = result.key.searched ? chooseForLayer(result.key, li) : unsearched(options.fixedKey);
    lc.value = result.value.searched ? chooseForLayer(result.value, li) : unsearched(options.fixedValue);
    for (auto [tc, sc] : {std::pair{&result.key, &lc.key}, std::pair{&result.value, &lc.value}}) {
      if (tc->searched && tc->found && sc->found && sc->bitsPerElement == tc->bitsPerElement) {
        tc->limitingLayers.push_back(lc.layer);
      }
    }
    result.layerChoices.push_back(lc);
  }
  if (result.key.searched) result.forcedKeyLayers = forcedLayers(result.layerChoices, true);
  if (result.value.searched) result.forcedValueLayers = forcedLayers(result.layerChoices, false);

  const double perLayerElements = static_cast<double>(info.kvHeads) * info.headDim;
  result.bytesPerTokenBaseline = static_cast<double>(result.layers.size()) * 2 * 16 * perLayerElements / 8;
  for (const LayerChoice& lc : result.layerChoices) {
    // An unsearched side counts each layer's own spec (16 when exact, a fixed plan's otherwise).
    const double kb = options.perLayer || !result.key.searched ? lc.key.bitsPerElement
                                                               : (result.key.found ? result.key.bitsPerElement : 16);
    const double vb = options.perLayer || !result.value.searched
                          ? lc.value.bitsPerElement
                          : (result.value.found ? result.value.bitsPerElement : 16);
    result.bytesPerTokenChosen += (kb + vb) * perLayerElements / 8;
  }
  if (options.perLayer) {
    for (const LayerChoice& lc : result.layerChoices) {
      if (!lc.key.found || !lc.value.found) {
        result.notes.push_back("layer " + std::to_string(lc.layer) +
                               ": no candidate meets the budget; counted as fp16");
      }
    }
  }

  // Joint result of the chosen pair: read each layer again and quantize the two chosen specs.
  const bool globalReady = (result.key.found || !result.key.searched) &&
                           (result.value.found || !result.value.searched);
  if (!options.perLayer && !globalReady) return result;
  std::vector<AttentionCases> allHeads;
  for (size_t li = 0; li < result.layers.size(); ++li) {
    const int layer = result.layers[li];
    const LayerChoice& lc = result.layerChoices[li];
    const std::string keySpecText = !result.key.searched ? lc.key.spec
                                    : options.perLayer   ? (lc.key.found ? lc.key.spec : "none")
                                                         : result.key.spec;
    const std::string valueSpecText = !result.value.searched ? lc.value.spec
                                      : options.perLayer     ? (lc.value.found ? lc.value.spec : "none")
                                                             : result.value.spec;
    if (!report(progress, step / total, "budget search: joint")) return Status::cancelled();
    auto keySpec = parseSpec(keySpecText);
    auto valueSpec = parseSpec(valueSpecText);
    if (!keySpec || !valueSpec) return Status::internal("search: a chosen spec does not parse");
    auto read = readLayerForAttention(dump, {layer, options.sequence, true, keySpec->prerope, "the search"});
    if (!read) return read.status();
    const AttentionLayer& tensors = *read;
    QuantInput kin{&tensors.key, tensors.preRope ? &*tensors.preRope : nullptr, rope};
    auto kq = quantizeTensor(kin, *keySpec, sub(step));
    if (!kq) return kq.status();
    QuantInput vin{&tensors.value, nullptr, rope};
    auto vq = quantizeTensor(vin, *valueSpec, sub(step));
    if (!vq) return vq.status();
    AttentionInput ain = tensors.input(scale, options.lastQueries);
    ain.keyHat = &kq->reconstruction;
    ain.valueHat = &vq->reconstruction;
    auto m = attentionMetrics(ain, sub(step));
    if (!m) return m.status();
    result.joint.push_back({layer, toString(*keySpec), toString(*valueSpec), summarizeCases(*m)});
    allHeads.insert(allHeads.end(), m->begin(), m->end());
    step += 1;
  }
  result.jointSummary = summarizeCases(allHeads);
  report(progress, 1.0, "budget search");
  return result;
}

}  // namespace kvscope
