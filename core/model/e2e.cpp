// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/e2e.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/model/quantized_kv_store.h"
#include "core/model/transformer.h"
#include "core/engine/presets.h"
#include "core/quant/quantize.h"
#include "core/util/atomic_file.h"
#include "core/util/json_text.h"

namespace kvscope {
namespace {

std::vector<double> logSoftmax(const float* logits, int n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>(logits[i]) - lse;
  return out;
}

int argmax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

// Softmax of scale·q·k_j over rows [0, span) of one kv head of a cache, in double.
void attentionProbs(const float* q, const std::vector<float>& keys, int kvDim, int offset, int d, int span,
                    double scale, std::vector<double>& p) {
  p.resize(static_cast<size_t>(span));
  double mx = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < span; ++j) {
    const float* k = keys.data() + static_cast<size_t>(j) * kvDim + offset;
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * k[i];
    p[static_cast<size_t>(j)] = scale * dot;
    mx = std::max(mx, p[static_cast<size_t>(j)]);
  }
  double sum = 0;
  for (double& v : p) sum += (v = std::exp(v - mx));
  for (double& v : p) v /= sum;
}

struct LayerAccumulator {
  double klSum = 0, klMax = 0, top1 = 0, outErr = 0, hiddenErr = 0;
  int64_t heads = 0, positions = 0;
};

Status checkFits(const ModelConfig& c, const Recording& r) {
  const std::string where = "the dump does not fit the model (was it recorded from another model?): ";
  const int T = r.tokenCount();
  if (T < 1) return Status::invalidData("the dump has no /tokens: e2e replays the recorded token sequence");
  if (T > c.seqLen)
    return Status::invalidData(where + std::to_string(T) + " tokens exceed the model's seq_len " +
                               std::to_string(c.seqLen));
  for (int i = 0; i < T; ++i) {
    const int t = r.tokens[static_cast<size_t>(i)];
    if (t < 0 || t >= c.vocabSize)
      return Status::invalidData(where + "token " + std::to_string(t) + " at position " + std::to_string(i) +
                                 " is outside the vocabulary [0, " + std::to_string(c.vocabSize) + ")");
  }
  if (!r.layers.empty()) {
    if (static_cast<int>(r.layers.size()) != c.layers)
      return Status::invalidData(where + std::to_string(r.layers.size()) + " layers, the model has " +
                                 std::to_string(c.layers));
    const Tensor3& k = r.layers[0].key;
    if (k.heads != c.kvHeads || k.dim != c.headDim() || k.tokens != T)
      return Status::invalidData(where + "key is [" + std::to_string(k.heads) + ", " + std::to_string(k.tokens) +
                                 ", " + std::to_string(k.dim) + "], the model needs [" + std::to_string(c.kvHeads) +
                                 ", " + std::to_string(T) + ", " + std::to_string(c.headDim()) + "]");
  }
  return Status::ok();
}

}  // namespace

Expected<E2eBaseline> e2eBaseline(const std::shared_ptr<const Checkpoint>& model, const Recording& recording,
                                  const Progress& progress) {
  const ModelConfig& c = model->config();
  KVS_RETURN_IF_ERROR(checkFits(c, recording));
  const int T = recording.tokenCount(), V = c.vocabSize, L = c.layers, dim = c.dim;
  E2eBaseline b;
  b.logits.resize(static_cast<size_t>(T) * V);
  b.hidden.resize(static_cast<size_t>(T) * L * dim);
  Transformer tf(model);
  for (int p = 0; p < T; ++p) {
    KVS_RETURN_IF_ERROR(tf.step(recording.tokens[static_cast<size_t>(p)], p));
    std::copy(tf.logits().begin(), tf.logits().end(), b.logits.begin() + static_cast<ptrdiff_t>(p) * V);
    for (int l = 0; l < L; ++l)
      std::copy(tf.hidden(l).begin(), tf.hidden(l).end(),
                b.hidden.begin() + (static_cast<ptrdiff_t>(p) * L + l) * dim);
    if (!report(progress, static_cast<double>(p + 1) / T, "exact replay")) return Status::cancelled();
  }
  if (recording.tokens[0] != kBosToken)
    b.warnings.push_back("the sequence does not start with BOS (token 1)");
  if (recording.ropeStyle != RopeStyle::Interleaved)
    b.warnings.push_back("the dump says rope_style half, but llama2.c models use interleaved pairs");
  if (!recording.logits.empty()) {
    if (recording.logits.size() != b.logits.size()) {
      b.warnings.push_back("the dump's /logits have " + std::to_string(recording.logits.size()) +
                           " values, the replay " + std::to_string(b.logits.size()) + ": not compared");
    } else {
      // std::max(worst, NaN) keeps `worst`: all-NaN /logits would compare as a difference of 0.
      double worst = 0;
      int64_t nonFinite = 0;
      for (size_t i = 0; i < b.logits.size(); ++i) {
        const double diff = std::abs(static_cast<double>(b.logits[i]) - recording.logits[i]);
        if (!std::isfinite(diff)) ++nonFinite;
        else worst = std::max(worst, diff);
      }
      if (nonFinite > 0) {
        worst = std::numeric_limits<double>::quiet_NaN();
        b.warnings.push_back("the dump's /logits hold " + std::to_string(nonFinite) + " of " +
                             std::to_string(b.logits.size()) +
                             " values that are NaN or infinite (or the replay does there): not compared, so "
                             "nothing says the dump came from this model");
      }
      b.dumpLogitsMaxAbsDiff = worst;
      if (nonFinite == 0 && !(worst <= 1e-3)) {
        std::ostringstream os;
        os << "the dump's /logits differ from this model's exact replay by up to " << worst
           << " (> 1e-3): the dump probably came from another model";
        b.warnings.push_back(os.str());
      }
    }
  }
  return b;
}

Expected<E2eResult> runE2e(const std::shared_ptr<const Checkpoint>& model, const Recording& recording,
                           const E2eBaseline& baseline, const Plan& key, const Plan& value,
                           const Progress& progress) {
  const ModelConfig& c = model->config();
  KVS_RETURN_IF_ERROR(checkFits(c, recording));
  const int T = recording.tokenCount(), V = c.vocabSize, L = c.layers, dim = c.dim, D = c.headDim();
  const int H = c.heads, KVH = c.kvHeads, kvDim = c.kvDim(), group = H / KVH;
  if (baseline.logits.size() != static_cast<size_t>(T) * V)
    return Status::internal("e2e baseline does not match the recording");

  const bool hasPreRope = !recording.layers.empty() && recording.layers[0].keyPreRope.heads > 0;
  SpecContext kc{true, KVH, D, true};
  SpecContext vc{false, KVH, D, false};
  // A range beyond the model is the flag's error; a plain spec's check reads as it always did.
  auto keySpecs = resolve(key, L);
  if (!keySpecs) return keySpecs.status().withContext("--key");
  auto valueSpecs = resolve(value, L);
  if (!valueSpecs) return valueSpecs.status().withContext("--value");
  KVS_RETURN_IF_ERROR(validatePlan(key, kc, L));
  KVS_RETURN_IF_ERROR(validatePlan(value, vc, L));

  E2eResult r;
  r.model = recording.model;
  r.tokens = T;
  auto describeTensor = [&](const Plan& plan, const std::vector<QuantSpec>& specs) {
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
    // One mode when every layer streams alike; the storage sentence per run of layers that
    // share a spec.
    info.mode = streamingModeName(streamingModeFor(specs.front()));
    for (int l = 0; l < L;) {
      const QuantSpec& s = specs[static_cast<size_t>(l)];
      int end = l + 1;
      while (end < L && specs[static_cast<size_t>(end)] == s) ++end;
      if (streamingModeFor(s) != streamingModeFor(specs.front())) info.mode = "per-layer";
      const std::string layers = end - l == 1 ? "layer " + std::to_string(l)
                                              : "layers " + std::to_string(l) + "-" + std::to_string(end - 1);
      info.storage += (l == 0 ? "" : "; ") + layers + " (" + toString(s) + "): " + streamingDescription(s);
      l = end;
    }
    return info;
  };
  r.key = describeTensor(key, *keySpecs);
  r.value = describeTensor(value, *valueSpecs);
  r.dumpLogitsMaxAbsDiff = baseline.dumpLogitsMaxAbsDiff;
  r.warnings = baseline.warnings;

  bool calibrated = false, calibratedPrerope = false;
  for (int l = 0; l < L; ++l) {
    const QuantSpec& ks = (*keySpecs)[static_cast<size_t>(l)];
    const bool keyCalibrated = streamingModeFor(ks) == StreamingMode::Calibrated;
    calibrated = calibrated || keyCalibrated ||
                 streamingModeFor((*valueSpecs)[static_cast<size_t>(l)]) == StreamingMode::Calibrated;
    calibratedPrerope = calibratedPrerope || (keyCalibrated && ks.prerope);
  }
  std::vector<CalibrationLayer> calibration;
  if (calibrated) {
    if (recording.layers.empty())
      return Status::invalidArgument("a spec with whole-cache scales needs the dump's key and value tensors");
    if (calibratedPrerope && !hasPreRope)
      return Status::invalidArgument("spec '" + r.key.specText + "': prerope needs key_pre_rope in the dump");
    for (const LayerRecording& lr : recording.layers)
      calibration.push_back({&lr.key, lr.keyPreRope.heads > 0 ? &lr.keyPreRope : nullptr, &lr.value});
  }
  // The model's own RoPE, whatever the dump's attributes say.
  QuantizedKvStore store(c, key, value, RopeParams{kLlamaRopeTheta, RopeStyle::Interleaved},
                         std::move(calibration));
  struct Tensor {
    const char* name;
    const Plan* plan;
    const std::vector<QuantSpec>* specs;
  };
  for (const Tensor& t : {Tensor{"key", &key, &*keySpecs}, Tensor{"value", &value, &*valueSpecs}}) {
    // One note per distinct spec, in layer order (a plan's layers often share one).
    std::vector<std::string> seen;
    for (const QuantSpec& s : *t.specs) {
      if (streamingModeFor(s) != StreamingMode::ChannelGroups) continue;
      const auto eligible = static_cast<int>(quantizedTokens(s, T).count);
      const int tail = eligible % s.group;
      if (tail == 0) continue;
      std::string note = std::string(t.name) + ": the last " + std::to_string(tail) + " tokens before the residual " +
                         "window form an incomplete channel group of " + std::to_string(s.group) +
                         " and stay in full precision (bits_per_element counts them as quantized)";
      if (!isUniform(*t.plan)) note += " (" + toString(s) + ")";
      if (std::find(seen.begin(), seen.end(), note) != seen.end()) continue;
      seen.push_back(note);
      r.notes.push_back(note);
    }
  }
  Transformer tf(model, &store);

  std::vector<LayerAccumulator> acc(static_cast<size_t>(L));
  std::vector<double> p, pHat;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  double klSum = 0, klMax = 0, nllFp = 0, nllQuant = 0;
  int agree = 0;
  for (int pos = 0; pos < T; ++pos) {
    const int token = recording.tokens[static_cast<size_t>(pos)];
    KVS_RETURN_IF_ERROR(tf.step(token, pos));

    const float* fpLogits = baseline.logits.data() + static_cast<size_t>(pos) * V;
    std::vector<double> lp = logSoftmax(fpLogits, V), lq = logSoftmax(tf.logits().data(), V);
    double kl = 0;
    for (int i = 0; i < V; ++i) kl += std::exp(lp[static_cast<size_t>(i)]) * (lp[static_cast<size_t>(i)] - lq[static_cast<size_t>(i)]);
    kl = std::max(kl, 0.0);  // rounding can leave −1e-17
    E2ePosition e;
    e.position = pos;
    e.token = token;
    e.kl = kl;
    e.top1Agrees = argmax(fpLogits, V) == argmax(tf.logits().data(), V);
    if (pos + 1 < T) {
      const int next = recording.tokens[static_cast<size_t>(pos + 1)];
      e.nllFp = -lp[static_cast<size_t>(next)];
      e.nllQuant = -lq[static_cast<size_t>(next)];
      nllFp += *e.nllFp;
      nllQuant += *e.nllQuant;
    }
    klSum += kl;
    klMax = std::max(klMax, kl);
    agree += e.top1Agrees ? 1 : 0;
    r.positions.push_back(e);

    // What each layer's attention saw: stored cache against the same replay's exact rows.
    for (int l = 0; l < L; ++l) {
      const LayerCache& lc = tf.cache(l);
      const std::vector<float>& q = tf.query(l);
      LayerAccumulator& a = acc[static_cast<size_t>(l)];
      for (int h = 0; h < H; ++h) {
        const int off = (h / group) * D;
        const float* qh = q.data() + static_cast<size_t>(h) * D;
        attentionProbs(qh, lc.exactKey, kvDim, off, D, pos + 1, scale, p);
        attentionProbs(qh, lc.key, kvDim, off, D, pos + 1, scale, pHat);
        double akl = 0, oNorm = 0, dNorm = 0;
        for (int j = 0; j <= pos; ++j) {
          const double pj = p[static_cast<size_t>(j)], qj = pHat[static_cast<size_t>(j)];
          if (pj > 0) akl += pj * (std::log(pj) - std::log(std::max(qj, 1e-300)));
        }
        for (int i = 0; i < D; ++i) {
          double o = 0, oh = 0;
          for (int j = 0; j <= pos; ++j) {
            o += p[static_cast<size_t>(j)] * lc.row(lc.exactValue, j)[off + i];
            oh += pHat[static_cast<size_t>(j)] * lc.row(lc.value, j)[off + i];
          }
          oNorm += o * o;
          dNorm += (oh - o) * (oh - o);
        }
        akl = std::max(akl, 0.0);
        a.klSum += akl;
        a.klMax = std::max(a.klMax, akl);
        a.top1 += (std::max_element(p.begin(), p.end()) - p.begin()) ==
                          (std::max_element(pHat.begin(), pHat.end()) - pHat.begin())
                      ? 1
                      : 0;
        a.outErr += oNorm > 0 ? std::sqrt(dNorm / oNorm) : 0.0;
        ++a.heads;
      }
      const float* hFp = baseline.hidden.data() + (static_cast<size_t>(pos) * L + l) * dim;
      double hn = 0, hd = 0;
      for (int i = 0; i < dim; ++i) {
        const double diff = static_cast<double>(tf.hidden(l)[static_cast<size_t>(i)]) - hFp[i];
        hn += static_cast<double>(hFp[i]) * hFp[i];
        hd += diff * diff;
      }
      a.hiddenErr += hn > 0 ? std::sqrt(hd / hn) : 0.0;
      ++a.positions;
    }
    if (!report(progress, static_cast<double>(pos + 1) / T, "quantized replay")) return Status::cancelled();
  }

  r.summary.klMean = klSum / T;
  r.summary.klMax = klMax;
  r.summary.top1Agreement = static_cast<double>(agree) / T;
  if (T > 1) {
    r.summary.nllFp = nllFp / (T - 1);
    r.summary.nllQuant = nllQuant / (T - 1);
  }
  r.summary.pplRatio = std::exp(r.summary.nllQuant - r.summary.nllFp);
  for (int l = 0; l < L; ++l) {
    const LayerAccumulator& a = acc[static_cast<size_t>(l)];
    E2eLayer e;
    e.layer = l;
    e.keySpec = toString((*keySpecs)[static_cast<size_t>(l)]);
    e.valueSpec = toString((*valueSpecs)[static_cast<size_t>(l)]);
    e.attentionKlMean = a.klSum / static_cast<double>(a.heads);
    e.attentionKlMax = a.klMax;
    e.attentionTop1 = a.top1 / static_cast<double>(a.heads);
    e.outputRelError = a.outErr / static_cast<double>(a.heads);
    e.hiddenRelError = a.hiddenErr / static_cast<double>(a.positions);
    r.layers.push_back(e);
  }
  return r;
}

std::string e2eToJson(const E2eResult& r) {
  using nlohmann::json;
  auto tensor = [](const E2eTensorInfo& t) {
    return json{{"spec", t.specText}, {"bits_per_element", t.bitsPerElement}, {"mode", t.mode},
                {"storage", t.storage}};
  };
  json positions = json::array();
  for (const E2ePosition& p : r.positions) {
    positions.push_back({{"position", p.position},
                         {"token", p.token},
                         {"kl", p.kl},
                         {"top1_agrees", p.top1Agrees},
                         {"nll_fp", p.nllFp ? json(*p.nllFp) : json(nullptr)},
                         {"nll_quant", p.nllQuant ? json(*p.nllQuant) : json(nullptr)}});
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
  json out{{"kvscope_e2e", 1},
           {"model", r.model},
           {"tokens", r.tokens},
           {"key", tensor(r.key)},
           {"value", tensor(r.value)},
           {"summary",
            {{"kl_mean", r.summary.klMean},
             {"kl_max", r.summary.klMax},
             {"top1_agreement", r.summary.top1Agreement},
             {"nll_fp", r.summary.nllFp},
             {"nll_quant", r.summary.nllQuant},
             {"ppl_ratio", r.summary.pplRatio}}},
           {"dump_logits_max_abs_diff", r.dumpLogitsMaxAbsDiff ? json(*r.dumpLogitsMaxAbsDiff) : json(nullptr)},
           {"warnings", r.warnings},
           {"notes", r.notes},
           {"positions", positions},
           {"layers", layers}};
  if (!r.preset.empty()) out["preset"] = r.preset;
  if (!r.engine.empty()) out["engine"] = r.engine;
  return jsonText(out);
}

Expected<std::vector<SweepEntry>> parseSweep(const std::string& text, const KvShape& shape) {
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
  std::vector<SweepEntry> out;
  std::istringstream items(body);
  for (std::string item; std::getline(items, item, ';');) {
    item = trim(item);
    if (item.empty()) continue;
    SweepEntry e;
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
