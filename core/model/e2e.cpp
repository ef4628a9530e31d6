// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/e2e.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/model/forward.h"
#include "core/model/logits.h"
#include "core/model/quantized_kv_store.h"
#include "core/quant/quantize.h"
#include "core/util/atomic_file.h"

namespace kvscope {
namespace {

std::string where() { return "the dump does not fit the model (was it recorded from another model?): "; }

Status checkFits(const ModelHparams& hp, const DumpInfo& info, const std::vector<int>& tokens) {
  const int T = static_cast<int>(tokens.size());
  if (T < 2) return Status::invalidData(info.path + ": /tokens: e2e needs at least 2 tokens (one next token to score)");
  if (T > hp.contextLength)
    return Status::invalidData(where() + std::to_string(T) + " tokens exceed the model's context length " +
                               std::to_string(hp.contextLength));
  for (int i = 0; i < T; ++i) {
    const int t = tokens[static_cast<size_t>(i)];
    if (t < 0 || t >= hp.vocab)
      return Status::invalidData(where() + "token " + std::to_string(t) + " at position " + std::to_string(i) +
                                 " is outside the vocabulary [0, " + std::to_string(hp.vocab) + ")");
  }
  if (info.layers != hp.layers)
    return Status::invalidData(where() + std::to_string(info.layers) + " layers, the model has " +
                               std::to_string(hp.layers));
  if (info.kvHeads != hp.kvHeads || info.headDim != hp.headDim || info.tokens != T)
    return Status::invalidData(where() + "key is [" + std::to_string(info.kvHeads) + ", " + std::to_string(info.tokens) +
                               ", " + std::to_string(info.headDim) + "], the model needs [" +
                               std::to_string(hp.kvHeads) + ", " + std::to_string(T) + ", " +
                               std::to_string(hp.headDim) + "]");
  return Status::ok();
}

/// llama.cpp's percentile of sorted values (tools/perplexity/perplexity.cpp, kl_divergence):
/// linear interpolation at fraction·(n − 1).
double percentile(const std::vector<double>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  double p = fraction * static_cast<double>(sorted.size() - 1);
  const auto ip = static_cast<size_t>(p);
  p -= static_cast<double>(ip);
  return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

double median(const std::vector<double>& sorted) {
  if (sorted.empty()) return 0;
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5 * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

E2eTensorInfo describeTensor(const Plan& plan, const std::vector<QuantSpec>& specs, int L, int KVH, int T, int D) {
  E2eTensorInfo info;
  info.spec = plan;
  info.specText = toString(plan);
  info.bitsPerElement = planStorage(plan, L, KVH, T, D).bitsPerElement();
  info.layerSpecs = specs;
  if (isUniform(plan)) {
    info.mode = streamingModeName(streamingModeFor(plan.base));
    info.storage = streamingDescription(plan.base);
    return info;
  }
  // One mode when every layer streams alike; the storage sentence per run of layers that share a spec.
  info.mode = streamingModeName(streamingModeFor(specs.front()));
  for (int l = 0; l < L;) {
    const QuantSpec& s = specs[static_cast<size_t>(l)];
    int end = l + 1;
    while (end < L && specs[static_cast<size_t>(end)] == s) ++end;
    if (streamingModeFor(s) != streamingModeFor(specs.front())) info.mode = "per-layer";
    const std::string layers =
        end - l == 1 ? "layer " + std::to_string(l) : "layers " + std::to_string(l) + "-" + std::to_string(end - 1);
    info.storage += (l == 0 ? "" : "; ") + layers + " (" + toString(s) + "): " + streamingDescription(s);
    l = end;
  }
  return info;
}

/// Notes on channel groups left incomplete at the end (they stay in full precision).
void channelGroupNotes(const char* name, const Plan& plan, const std::vector<QuantSpec>& specs, int T,
                       std::vector<std::string>& notes) {
  std::vector<std::string> seen;
  for (const QuantSpec& s : specs) {
    if (streamingModeFor(s) != StreamingMode::ChannelGroups) continue;
    const auto eligible = static_cast<int>(quantizedTokens(s, T).count);
    const int tail = eligible % s.group;
    if (tail == 0) continue;
    std::string note = std::string(name) + ": the last " + std::to_string(tail) + " tokens before the residual " +
                       "window form an incomplete channel group of " + std::to_string(s.group) +
                       " and stay in full precision (bits_per_element counts them as quantized)";
    if (!isUniform(plan)) note += " (" + toString(s) + ")";
    if (std::find(seen.begin(), seen.end(), note) != seen.end()) continue;
    seen.push_back(note);
    notes.push_back(note);
  }
}

/// The max |a − b| of two [T, KVH·D] row sets, a in dump layout [KVH, T, D].
double maxAbsDiff(const Tensor3& dump, const float* rows, int T, int kvh, int d) {
  double worst = 0;
  for (int h = 0; h < kvh; ++h)
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < d; ++i) {
        const double diff =
            std::abs(static_cast<double>(dump.at(h, t, i)) - rows[(static_cast<size_t>(t) * kvh + h) * d + i]);
        worst = std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(worst, diff);
      }
  return worst;
}

}  // namespace

Expected<std::vector<E2eResult>> runE2e(const std::shared_ptr<const Model>& model, const Dump& dump,
                                        const std::vector<E2eSetting>& settings, const E2eOptions& options,
                                        const Progress& progress) {
  const ModelHparams& hp = model->hparams();
  const DumpInfo& info = dump.info();
  auto ids = dump.tokens();
  if (!ids) return ids.status();
  if (ids->empty())
    return Status::invalidData(info.path + ": no /tokens dataset: e2e replays the recorded token sequence");
  std::vector<int> tokens;
  for (int64_t t : *ids) {
    if (t < 0 || t > std::numeric_limits<int>::max())
      return Status::invalidData(info.path + ": /tokens: id " + std::to_string(t) + " is not a token id");
    tokens.push_back(static_cast<int>(t));
  }
  KVS_RETURN_IF_ERROR(checkFits(hp, info, tokens));
  const int T = static_cast<int>(tokens.size()), L = hp.layers, KVH = hp.kvHeads, D = hp.headDim, dim = hp.dim;
  if (options.scoreFrom < 0 || options.scoreFrom > T - 2)
    return Status::invalidArgument("--score-from " + std::to_string(options.scoreFrom) +
                                   ": must be between 0 and " + std::to_string(T - 2) +
                                   " (the last position has no next token to score)");
  if (settings.empty()) return Status::invalidArgument("e2e: no setting to replay");

  // The model's own RoPE for prerope specs, whatever the dump's attributes say.
  const RopeParams rope{hp.rope.theta, hp.rope.style, hp.rope.invFreq};
  const SpecContext kc{true, KVH, D, true};
  const SpecContext vc{false, KVH, D, false};
  std::vector<E2eResult> results(settings.size());
  std::vector<std::unique_ptr<QuantizedCacheStore>> stores;
  bool anyCalibrated = false, needsPreRope = false;
  for (size_t i = 0; i < settings.size(); ++i) {
    const E2eSetting& s = settings[i];
    auto keySpecs = resolve(s.key, L);
    if (!keySpecs) return keySpecs.status().withContext("--key");
    auto valueSpecs = resolve(s.value, L);
    if (!valueSpecs) return valueSpecs.status().withContext("--value");
    KVS_RETURN_IF_ERROR(validatePlan(s.key, kc, L));
    KVS_RETURN_IF_ERROR(validatePlan(s.value, vc, L));
    if (!s.querySpec.empty()) {
      auto q = parseSpec(s.querySpec);
      if (!q) return q.status().withContext("the engine's query conversion");
    }
    E2eResult& r = results[i];
    r.model = info.model.empty() ? model->name() : info.model;
    r.modelFormat = modelFormatKey(model->format());
    r.architecture = std::string(model->architecture().name);
    r.tokens = T;
    r.label = s.label;
    r.preset = s.preset;
    r.engine = s.engine;
    r.querySpec = s.querySpec;
    r.key = describeTensor(s.key, *keySpecs, L, KVH, T, D);
    r.value = describeTensor(s.value, *valueSpecs, L, KVH, T, D);
    r.notes = s.notes;
    channelGroupNotes("key", s.key, *keySpecs, T, r.notes);
    channelGroupNotes("value", s.value, *valueSpecs, T, r.notes);
    for (int l = 0; l < L; ++l) {
      const QuantSpec& ks = (*keySpecs)[static_cast<size_t>(l)];
      const bool kCal = streamingModeFor(ks) == StreamingMode::Calibrated;
      anyCalibrated = anyCalibrated || kCal ||
                      streamingModeFor((*valueSpecs)[static_cast<size_t>(l)]) == StreamingMode::Calibrated;
      needsPreRope = needsPreRope || (kCal && ks.prerope);
    }
    std::vector<std::string> query;
    if (!s.querySpec.empty()) query.assign(static_cast<size_t>(L), s.querySpec);
    // The calibration source is set below, once every setting is known.
    stores.push_back(std::make_unique<QuantizedCacheStore>(KVH, D, std::move(*keySpecs), std::move(*valueSpecs), rope,
                                                          CalibrationSource{}, std::move(query)));
  }
  if (needsPreRope && !info.hasKeyPreRope)
    return Status::invalidArgument(info.path + ": a prerope spec with whole-cache scales needs key_pre_rope in the dump");

  // Calibrated specs read the dump's tensors of the layer being replayed; settings share the read.
  int calibratedLayer = -1;
  CalibrationLayer calibrated;
  CalibrationSource source = [&](int layer) -> Expected<CalibrationLayer> {
    if (layer != calibratedLayer) {
      auto k = dump.read(layer, TensorKind::Key);
      if (!k) return k.status();
      auto v = dump.read(layer, TensorKind::Value);
      if (!v) return v.status();
      calibrated.key = std::move(*k);
      calibrated.value = std::move(*v);
      calibrated.keyPreRope = Tensor3();
      if (info.hasKeyPreRope) {
        auto p = dump.read(layer, TensorKind::KeyPreRope);
        if (!p) return p.status();
        calibrated.keyPreRope = std::move(*p);
      }
      calibratedLayer = layer;
    }
    return calibrated;
  };
  if (anyCalibrated) {
    for (size_t i = 0; i < settings.size(); ++i) {
      std::vector<std::string> query;
      if (!settings[i].querySpec.empty()) query.assign(static_cast<size_t>(L), settings[i].querySpec);
      stores[i] = std::make_unique<QuantizedCacheStore>(KVH, D, results[i].key.layerSpecs, results[i].value.layerSpecs,
                                                        rope, source, std::move(query));
    }
  }

  // The streams: the exact cache first, then one per setting.
  std::vector<Stream> streamStore(settings.size() + 1);
  std::vector<Stream*> streams;
  for (Stream& s : streamStore) streams.push_back(&s);
  std::vector<CacheStore> cacheStores;
  cacheStores.reserve(settings.size());
  for (auto& s : stores) cacheStores.push_back(s->asCacheStore(hp.heads));
  std::vector<const CacheStore*> storePtrs{nullptr};
  for (const CacheStore& c : cacheStores) storePtrs.push_back(&c);

  // The exact replay against the dump's K and V, layer by layer.
  double kvDiff = 0;
  auto observe = [&](size_t stream, const LayerTensors& t) -> Status {
    if (stream != 0) return Status::ok();
    auto k = dump.read(t.layer, TensorKind::Key);
    if (!k) return k.status();
    kvDiff = std::max(kvDiff, maxAbsDiff(*k, t.key, T, KVH, D));
    auto v = dump.read(t.layer, TensorKind::Value);
    if (!v) return v.status();
    kvDiff = std::max(kvDiff, maxAbsDiff(*v, t.value, T, KVH, D));
    return Status::ok();
  };
  std::vector<std::vector<double>> hiddenErr(settings.size(), std::vector<double>(static_cast<size_t>(L), 0.0));
  auto afterLayer = [&](int l) -> Status {
    const std::vector<float>& fp = streams[0]->hidden;
    for (size_t i = 0; i < settings.size(); ++i) {
      const std::vector<float>& q = streams[i + 1]->hidden;
      double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
      for (int p = 0; p < T; ++p) {
        double hn = 0, hd = 0;
        for (int j = 0; j < dim; ++j) {
          const size_t at = static_cast<size_t>(p) * dim + j;
          const double diff = static_cast<double>(q[at]) - fp[at];
          hn += static_cast<double>(fp[at]) * fp[at];
          hd += diff * diff;
        }
        sum += hn > 0 ? std::sqrt(hd / hn) : 0.0;
      }
      hiddenErr[i][static_cast<size_t>(l)] = sum / T;
    }
    return Status::ok();
  };
  const double layerShare = 0.85;
  std::vector<std::vector<AttentionFigures>> figures;
  Forward forward(model);
  KVS_RETURN_IF_ERROR(forward.runLockstep(streams, storePtrs, tokens, figures, observe, afterLayer,
                                          [&](double f, std::string_view what) {
                                            return report(progress, layerShare * f, what);
                                          }));

  std::vector<std::vector<NextTokenFigures>> next;
  std::vector<const Stream*> quantized(streams.begin() + 1, streams.end());
  KVS_RETURN_IF_ERROR(compareNextTokens(forward, *streams[0], quantized, tokens, next, [&](double f) {
    return report(progress, layerShare + (1 - layerShare) * f, "next-token distributions");
  }));

  std::optional<double> logitsDiff;
  std::vector<std::string> warnings;
  if (info.hasLogits) {
    auto stored = dump.logits();
    if (!stored) return stored.status();
    std::vector<float> fpLogits;
    KVS_RETURN_IF_ERROR(allLogits(forward, *streams[0], fpLogits));
    if (stored->size() != fpLogits.size()) {
      warnings.push_back("the dump's /logits have " + std::to_string(stored->size()) + " values, the replay " +
                         std::to_string(fpLogits.size()) + ": not compared");
    } else {
      double worst = 0;
      for (size_t i = 0; i < fpLogits.size(); ++i) {
        const double d = std::abs(static_cast<double>(fpLogits[i]) - (*stored)[i]);
        worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
      }
      logitsDiff = worst;
      if (!(worst <= 1e-3)) {
        std::ostringstream os;
        os << "the dump's /logits differ from this model's exact replay by up to " << worst
           << " (> 1e-3): the dump probably came from another model";
        warnings.push_back(os.str());
      }
    }
  }
  if (!(kvDiff <= 1e-3)) {
    std::ostringstream os;
    os << "the dump's keys or values differ from this model's exact replay by up to " << kvDiff
       << " (> 1e-3): the dump probably came from another model or another version of it";
    warnings.push_back(os.str());
  }
  if (model->bos() && tokens[0] != *model->bos() && model->addsBos())
    warnings.push_back("the sequence does not start with the model's BOS token (" + std::to_string(*model->bos()) + ")");
  if (info.ropeStyle != hp.rope.style)
    warnings.push_back(std::string("the dump says rope_style ") + ropeStyleName(info.ropeStyle) + ", but the model uses " +
                       ropeStyleName(hp.rope.style) + " pairs");

  for (size_t i = 0; i < settings.size(); ++i) {
    E2eResult& r = results[i];
    r.dumpKvMaxAbsDiff = kvDiff;
    r.dumpLogitsMaxAbsDiff = logitsDiff;
    r.warnings.insert(r.warnings.end(), warnings.begin(), warnings.end());
    const std::vector<NextTokenFigures>& f = next[i];
    std::vector<double> kls;
    double nllFp = 0, nllQ = 0, dp = 0, dp2 = 0;
    int agree = 0;
    for (int p = 0; p < T; ++p) {
      const NextTokenFigures& x = f[static_cast<size_t>(p)];
      E2ePosition e;
      e.position = p;
      e.token = tokens[static_cast<size_t>(p)];
      e.kl = x.kl;
      e.top1Agrees = x.top1Agrees;
      if (p + 1 < T) {
        e.nllFp = x.nllFp;
        e.nllQuant = x.nllQuant;
        e.deltaP = x.pQuant - x.pFp;
        if (p >= options.scoreFrom) {
          kls.push_back(x.kl);
          nllFp += x.nllFp;
          nllQ += x.nllQuant;
          dp += *e.deltaP;
          dp2 += *e.deltaP * *e.deltaP;
          agree += x.top1Agrees ? 1 : 0;
        }
      }
      r.positions.push_back(e);
    }
    E2eSummary& s = r.summary;
    s.scored = static_cast<int>(kls.size());
    s.scoreFrom = options.scoreFrom;
    const double n = static_cast<double>(s.scored);
    double klSum = 0;
    for (double k : kls) klSum += k;
    std::sort(kls.begin(), kls.end());
    s.klMean = klSum / n;
    s.klMedian = median(kls);
    s.klP90 = percentile(kls, 0.90);
    s.klP95 = percentile(kls, 0.95);
    s.klP99 = percentile(kls, 0.99);
    s.klMax = kls.back();
    s.top1Agreement = agree / n;
    s.meanDeltaP = dp / n;
    s.rmsDeltaP = std::sqrt(dp2 / n);
    s.nllFp = nllFp / n;
    s.nllQuant = nllQ / n;
    s.pplFp = std::exp(s.nllFp);
    s.pplQuant = std::exp(s.nllQuant);
    s.pplRatio = std::exp(s.nllQuant - s.nllFp);
    for (int l = 0; l < L; ++l) {
      const AttentionFigures& a = figures[i + 1][static_cast<size_t>(l)];
      E2eLayer e;
      e.layer = l;
      e.keySpec = toString(r.key.layerSpecs[static_cast<size_t>(l)]);
      e.valueSpec = toString(r.value.layerSpecs[static_cast<size_t>(l)]);
      const double c = a.count > 0 ? static_cast<double>(a.count) : 1.0;
      e.attentionKlMean = a.klSum / c;
      e.attentionKlMax = a.klMax;
      e.attentionTop1 = a.count > 0 ? a.top1 / c : 1.0;
      e.outputRelError = a.outputRelErrorSum / c;
      e.hiddenRelError = hiddenErr[i][static_cast<size_t>(l)];
      r.layers.push_back(e);
    }
  }
  return results;
}

std::string e2eToJson(const E2eResult& r) {
  using nlohmann::json;
  auto tensor = [](const E2eTensorInfo& t) {
    return json{{"spec", t.specText}, {"bits_per_element", t.bitsPerElement}, {"mode", t.mode},
                {"storage", t.storage}};
  };
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json positions = json::array();
  for (const E2ePosition& p : r.positions) {
    positions.push_back({{"position", p.position},
                         {"token", p.token},
                         {"kl", p.kl},
                         {"top1_agrees", p.top1Agrees},
                         {"nll_fp", opt(p.nllFp)},
                         {"nll_quant", opt(p.nllQuant)},
                         {"delta_p", opt(p.deltaP)}});
  }
  json layers = json::array();
  for (const E2eLayer& l : r.layers) {
    layers.push_back({{"layer", l.layer},
                      {"attention_kl_mean", l.attentionKlMean},
                      {"attention_kl_max", l.attentionKlMax},
                      {"attention_top1_agreement", l.attentionTop1},
                      {"attention_output_rel_error", l.outputRelError},
                      {"hidden_rel_error", l.hiddenRelError},
                      {"key_spec", l.keySpec},
                      {"value_spec", l.valueSpec}});
  }
  const E2eSummary& s = r.summary;
  json out{{"kvscope_e2e", 2},
           {"model", r.model},
           {"model_format", r.modelFormat},
           {"architecture", r.architecture},
           {"tokens", r.tokens},
           {"key", tensor(r.key)},
           {"value", tensor(r.value)},
           {"query", r.querySpec.empty() ? json(nullptr) : json{{"spec", r.querySpec}}},
           {"summary",
            {{"positions_scored", s.scored},
             {"score_from", s.scoreFrom},
             {"kl_mean", s.klMean},
             {"kl_median", s.klMedian},
             {"kl_p90", s.klP90},
             {"kl_p95", s.klP95},
             {"kl_p99", s.klP99},
             {"kl_max", s.klMax},
             {"top1_agreement", s.top1Agreement},
             {"mean_delta_p", s.meanDeltaP},
             {"rms_delta_p", s.rmsDeltaP},
             {"nll_fp", s.nllFp},
             {"nll_quant", s.nllQuant},
             {"ppl_fp", s.pplFp},
             {"ppl_quant", s.pplQuant},
             {"ppl_ratio", s.pplRatio}}},
           {"dump_logits_max_abs_diff", opt(r.dumpLogitsMaxAbsDiff)},
           {"dump_kv_max_abs_diff", opt(r.dumpKvMaxAbsDiff)},
           {"warnings", r.warnings},
           {"notes", r.notes},
           {"positions", positions},
           {"layers", layers}};
  if (!r.label.empty()) out["label"] = r.label;
  if (!r.preset.empty()) out["preset"] = r.preset;
  if (!r.engine.empty()) out["engine"] = r.engine;
  return out.dump(2) + "\n";
}

Expected<std::vector<E2eSetting>> parseSweep(const std::string& text, const KvShape& shape) {
  std::string body = text;
  std::error_code ec;
  if (!text.empty() && std::filesystem::is_regular_file(text, ec)) {
    auto content = readTextFile(text);
    if (!content) return content.status();
    std::string joined;
    std::istringstream lines(*content);
    for (std::string line; std::getline(lines, line);) {
      if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
      joined += line + ";";
    }
    body = joined;
  }
  auto trim = [](std::string s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
  };
  std::vector<E2eSetting> out;
  std::istringstream items(body);
  for (std::string item; std::getline(items, item, ';');) {
    item = trim(item);
    if (item.empty()) continue;
    E2eSetting e;
    e.label = item;
    const auto colon = item.find(':');
    if (colon == std::string::npos) {
      if (findPreset(item) != nullptr) {
        // Parsed as plans: a preset may store a spec per layer.
        auto resolved = resolvePreset(item, shape);
        if (!resolved) return resolved.status();
        auto plans = parseResolvedPlans(*resolved, "preset " + item);
        if (!plans) return plans.status();
        e.key = plans->key;
        e.value = plans->value;
        e.preset = item;
      } else {
        auto s = parseSpec(item);
        if (!s) return s.status().withContext("--sweep entry '" + item + "' (neither a preset nor a spec for K and V)");
        QuantSpec valueSpec = *s;
        valueSpec.prerope = false;
        e.key = *s;
        e.value = valueSpec;
      }
    } else {
      auto k = parseSpec(trim(item.substr(0, colon)));
      if (!k) return k.status().withContext("--sweep entry '" + item + "', key");
      auto v = parseSpec(trim(item.substr(colon + 1)));
      if (!v) return v.status().withContext("--sweep entry '" + item + "', value");
      e.key = *k;
      e.value = *v;
    }
    out.push_back(std::move(e));
  }
  if (out.empty())
    return Status::invalidArgument("--sweep '" + text + "': no entries (expected KEY_SPEC:VALUE_SPEC;… or preset names)");
  return out;
}

}  // namespace kvscope
