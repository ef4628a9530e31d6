// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/diagnose/diagnose.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/attention/attention.h"
#include "core/metrics/dump_layer.h"
#include "core/attention/engine.h"
#include "core/metrics/outliers.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

namespace th = diagnose_thresholds;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lo + hi);
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The channel that RoPE rotates together with `c` (docs/dump-format.md, rope_style).
int ropePartner(int c, int d, RopeStyle style) {
  if (style == RopeStyle::Interleaved) return c ^ 1;
  return c < d / 2 ? c + d / 2 : c - d / 2;
}

// A candidate piece of evidence and how strong it is (evidence is kept strongest first).
struct Scored {
  double strength = 0;
  Evidence evidence;
};

/// What a kind's evidence is grouped by, and the index of one piece of evidence in it.
std::pair<const char*, int64_t> groupOf(FindingKind kind, const Evidence& e) {
  switch (kind) {
    case FindingKind::KeyBias:
    case FindingKind::OutlierChannels: return {"channel", e.channel};
    case FindingKind::MassiveTokens: return {"token", e.token};
    case FindingKind::LowEntropyHeads: return {"query_head", e.queryHead};
    case FindingKind::SideSensitivity: return {"layer", e.layer};
    case FindingKind::HeadDim: break;
  }
  return {"", -1};
}

/// Sorts `items` strongest first, lists the strongest kMaxEvidence and keeps all of them in
/// groups by what each is about (f.kind must be set).
void keepStrongest(std::vector<Scored>& items, Finding& f) {
  std::stable_sort(items.begin(), items.end(),
                   [](const Scored& a, const Scored& b) { return a.strength > b.strength; });
  f.matches = static_cast<int>(items.size());
  for (size_t i = 0; i < items.size() && i < static_cast<size_t>(th::kMaxEvidence); ++i) {
    f.evidence.push_back(items[i].evidence);
  }
  // Items are strongest first, so a group's first entry is its strongest and groups appear in
  // the order of their strongest place.
  std::map<int64_t, size_t> slot;
  for (const Scored& s : items) {
    const auto [about, index] = groupOf(f.kind, s.evidence);
    if (*about == '\0') continue;
    auto [it, added] = slot.try_emplace(index, f.groups.size());
    if (added) f.groups.push_back(EvidenceGroup{about, index, {}});
    f.groups[it->second].evidence.push_back(s.evidence);
  }
}

// Channels whose mean dominates their spread in kv head `g` of `x` (key or pre-RoPE key).
void findBias(const Tensor3& x, int layer, int g, const char* tensor, std::vector<Scored>& out,
              std::set<int>& channels) {
  const int64_t t = x.tokens, d = x.dim;
  std::vector<double> mean(static_cast<size_t>(d), 0.0), m2(static_cast<size_t>(d), 0.0);
  for (int64_t i = 0; i < t; ++i) {
    const float* row = x.row(g, i);
    for (int64_t c = 0; c < d; ++c) mean[static_cast<size_t>(c)] += row[c];
  }
  for (double& m : mean) m /= static_cast<double>(t);
  for (int64_t i = 0; i < t; ++i) {
    const float* row = x.row(g, i);
    for (int64_t c = 0; c < d; ++c) {
      const double z = row[c] - mean[static_cast<size_t>(c)];
      m2[static_cast<size_t>(c)] += z * z;
    }
  }
  std::vector<double> rms(static_cast<size_t>(d)), sd(static_cast<size_t>(d));
  for (int64_t c = 0; c < d; ++c) {
    const size_t k = static_cast<size_t>(c);
    sd[k] = std::sqrt(m2[k] / static_cast<double>(t));
    rms[k] = std::sqrt(mean[k] * mean[k] + sd[k] * sd[k]);
  }
  const double medRms = median(rms);
  for (int64_t c = 0; c < d; ++c) {
    const size_t k = static_cast<size_t>(c);
    const double a = std::abs(mean[k]);
    if (!(a >= th::kBiasMeanToStd * sd[k]) || !(a >= th::kBiasMeanToMedianRms * medRms) || a == 0) continue;
    Scored s;
    s.strength = a;
    s.evidence.layer = layer;
    s.evidence.kvHead = g;
    s.evidence.channel = static_cast<int>(c);
    s.evidence.tensor = tensor;
    s.evidence.numbers = {{"mean", mean[k]},
                          {"std", sd[k]},
                          {"mean_to_std", sd[k] > 0 ? a / sd[k] : INFINITY},
                          {"median_channel_rms", medRms}};
    out.push_back(std::move(s));
    channels.insert(static_cast<int>(c));
  }
}

std::vector<double> tokenNorms(const Tensor3& x, int g) {
  std::vector<double> n(static_cast<size_t>(x.tokens));
  for (int64_t i = 0; i < x.tokens; ++i) {
    const float* row = x.row(g, i);
    double s = 0;
    for (int64_t c = 0; c < x.dim; ++c) s += static_cast<double>(row[c]) * row[c];
    n[static_cast<size_t>(i)] = std::sqrt(s);
  }
  return n;
}

void findMassive(const std::vector<double>& norms, int layer, int g, const char* tensor,
                 std::vector<Scored>& out) {
  const double med = median(norms);
  if (!(med > 0)) return;
  for (size_t i = 0; i < norms.size(); ++i) {
    const double r = norms[i] / med;
    if (!(r >= th::kMassiveNormRatio)) continue;
    Scored s;
    s.strength = r;
    s.evidence.layer = layer;
    s.evidence.kvHead = g;
    s.evidence.token = static_cast<int64_t>(i);
    s.evidence.tensor = tensor;
    s.evidence.numbers = {{"norm", norms[i]}, {"median_norm", med}, {"ratio", r}};
    out.push_back(std::move(s));
  }
}

// Mean entropy (nats) and mean top-1 probability per query head, from the original attention's
// scores and normalizers: for p_j = exp(σ·s_j − m) / Z, H = m + ln Z − σ·Σ p_j s_j, and the top
// probability is 1 / Z.
std::vector<std::pair<double, double>> headEntropies(const AttentionBaseline& b) {
  const attention_engine::Shape& s = b.shape;
  std::vector<std::pair<double, double>> sums(static_cast<size_t>(s.heads), {0.0, 0.0});
  for (int64_t item = 0; item < static_cast<int64_t>(b.items.size()); ++item) {
    const attention_engine::ItemBaseline& it = b.items[static_cast<size_t>(item)];
    const int64_t g = item / s.chunksPerHead, c = item % s.chunksPerHead;
    const int64_t i0 = s.firstQuery + c * s.chunk;
    const int64_t i1 = std::min(s.queries, i0 + s.chunk);
    const int64_t nq = i1 - i0;
    const int64_t ncol = s.tokens - s.queries + i1;
    for (int64_t r = 0; r < s.group * nq; ++r) {
      const int64_t hh = r / nq, i = i0 + r % nq;
      const int64_t nk = s.tokens - s.queries + i + 1;
      const float* row = it.scores.data() + r * ncol;
      const double m = it.rowMax[static_cast<size_t>(r)], z = it.rowSum[static_cast<size_t>(r)];
      double weighted = 0;
      for (int64_t j = 0; j < nk; ++j) {
        const double sc = s.scale * row[j];
        weighted += std::exp(sc - m) * sc;
      }
      const double h = std::max(0.0, m + std::log(z) - weighted / z);
      auto& acc = sums[static_cast<size_t>(g * s.group + hh)];
      acc.first += h;
      acc.second += 1.0 / z;
    }
  }
  for (auto& acc : sums) {
    acc.first /= static_cast<double>(s.selected);
    acc.second /= static_cast<double>(s.selected);
  }
  return sums;
}

nlohmann::ordered_json number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

std::string evidenceText(const Evidence& e) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (e.layer >= 0) add("layer " + std::to_string(e.layer));
  if (e.kvHead >= 0) add("kv head " + std::to_string(e.kvHead));
  if (e.queryHead >= 0) add("query head " + std::to_string(e.queryHead));
  if (e.channel >= 0) add("channel " + std::to_string(e.channel));
  if (e.token >= 0) add("token " + std::to_string(e.token));
  if (!e.tensor.empty()) add(e.tensor);
  std::string nums;
  for (const auto& [name, v] : e.numbers) nums += (nums.empty() ? "" : ", ") + name + " " + fmt(v);
  return out + (nums.empty() ? "" : ": " + nums);
}

}  // namespace

const char* findingKindName(FindingKind kind) {
  switch (kind) {
    case FindingKind::KeyBias: return "key_bias";
    case FindingKind::MassiveTokens: return "massive_tokens";
    case FindingKind::OutlierChannels: return "outlier_channels";
    case FindingKind::LowEntropyHeads: return "low_entropy_heads";
    case FindingKind::HeadDim: return "head_dim";
    case FindingKind::SideSensitivity: return "side_sensitivity";
  }
  return "?";
}

Expected<Diagnosis> diagnose(const Dump& dump, const DiagnoseOptions& options, const Progress& progress) {
  const DumpInfo& info = dump.info();
  const std::string& origin = info.path;
  if (options.sequence < 0 || options.sequence >= info.sequences) {
    return Status::invalidArgument(origin + ": sequence " + std::to_string(options.sequence) +
                                   " does not exist (allowed: 0.." + std::to_string(info.sequences - 1) + ")");
  }
  Diagnosis dx;
  dx.dump = info;
  if (options.layers.empty()) {
    for (int l = 0; l < info.layers; ++l) dx.layers.push_back(l);
  } else {
    for (int l : options.layers) {
      if (l < 0 || l >= info.layers) {
        return Status::invalidArgument(origin + ": layer " + std::to_string(l) +
                                       " does not exist (allowed: 0.." + std::to_string(info.layers - 1) + ")");
      }
    }
    dx.layers = options.layers;
    std::sort(dx.layers.begin(), dx.layers.end());
    dx.layers.erase(std::unique(dx.layers.begin(), dx.layers.end()), dx.layers.end());
  }
  const int d = info.headDim;
  auto probe = parseSpec(th::kProbeSpec);
  if (!probe) return Status::internal("diagnose: the probe spec does not parse");
  const RopeParams rope = info.rope();

  std::vector<Scored> bias, massive, outliers, lowEntropy;
  struct SideLayer {
    int layer = 0;
    double key = 0, value = 0, keyKl = 0;
  };
  std::vector<SideLayer> sides;
  const size_t n = dx.layers.size();
  for (size_t li = 0; li < n; ++li) {
    const int layer = dx.layers[li];
    const std::string where = origin + ": layer " + std::to_string(layer);
    if (!report(progress, static_cast<double>(li) / static_cast<double>(n),
                "diagnose: layer " + std::to_string(layer))) {
      return Status::cancelled();
    }
    auto read = readLayerForAttention(
        dump, {layer, options.sequence, info.hasQuery, info.hasKeyPreRope, "diagnose"});
    if (!read) return read.status();
    const AttentionLayer& tensors = *read;
    const Tensor3* key = &tensors.key;
    const Tensor3* value = &tensors.value;
    const Tensor3* preRope = tensors.preRope ? &*tensors.preRope : nullptr;

    OutlierOptions oo;
    oo.threshold = th::kOutlierRatio;
    oo.topTokens = 0;
    // Heads are independent: each fills its own lists, merged in head order (deterministic).
    struct HeadFound {
      std::vector<Scored> bias, massive, outliers;
    };
    std::vector<HeadFound> found(static_cast<size_t>(info.kvHeads));
#pragma omp parallel for schedule(dynamic, 1)
    for (int g = 0; g < info.kvHeads; ++g) {
      HeadFound& hf = found[static_cast<size_t>(g)];
      // A k_proj bias is added before RoPE: the pre-RoPE key shows it undisturbed by rotation.
      std::set<int> biasChannels;
      if (preRope) findBias(*preRope, layer, g, "key_pre_rope", hf.bias, biasChannels);
      else findBias(*key, layer, g, "key", hf.bias, biasChannels);
      findMassive(tokenNorms(*key, g), layer, g, "key", hf.massive);
      findMassive(tokenNorms(*value, g), layer, g, "value", hf.massive);
      const TensorOutliers prof = profileHead(*key, g, oo);
      for (const ChannelStat& c : prof.outlierChannels) {
        if (c.persistence < th::kOutlierPersistence) continue;
        // The bias is its own finding (and RoPE moves part of it into the partner channel).
        if (biasChannels.count(c.channel) || biasChannels.count(ropePartner(c.channel, d, info.ropeStyle))) {
          continue;
        }
        Scored s;
        s.strength = c.ratio;
        s.evidence.layer = layer;
        s.evidence.kvHead = g;
        s.evidence.channel = c.channel;
        s.evidence.tensor = "key";
        s.evidence.numbers = {{"max_abs", c.maxAbs}, {"ratio", c.ratio}, {"persistence", c.persistence}};
        hf.outliers.push_back(std::move(s));
      }
    }
    for (HeadFound& hf : found) {
      for (auto [from, to] : {std::pair{&hf.bias, &bias}, std::pair{&hf.massive, &massive},
                              std::pair{&hf.outliers, &outliers}}) {
        to->insert(to->end(), std::make_move_iterator(from->begin()), std::make_move_iterator(from->end()));
      }
    }

    if (!info.hasQuery) continue;
    const AttentionInput in = tensors.input(info.softmaxScale, std::min(th::kProbeQueries, info.queries));
    auto baseline = prepareAttentionBaseline(in);
    if (!baseline) return baseline.status().withContext(where);
    const auto entropies = headEntropies(**baseline);
    const int group = info.heads / std::max(1, info.kvHeads);
    for (size_t h = 0; h < entropies.size(); ++h) {
      if (!(entropies[h].first <= th::kLowEntropyNats)) continue;
      Scored s;
      s.strength = -entropies[h].first;
      s.evidence.layer = layer;
      s.evidence.queryHead = static_cast<int>(h);
      s.evidence.kvHead = static_cast<int>(h) / group;
      s.evidence.tensor = "attention";
      s.evidence.numbers = {{"entropy_nats", entropies[h].first}, {"top1_probability", entropies[h].second}};
      lowEntropy.push_back(std::move(s));
    }

    // The probe: one 4-bit candidate on each side, key_only against value_only.
    SideLayer side;
    side.layer = layer;
    for (int pass = 0; pass < 2; ++pass) {
      const bool isKey = pass == 0;
      QuantInput qin{isKey ? key : value, nullptr, rope};
      auto q = quantizeTensor(qin, *probe);
      if (!q) return q.status().withContext(where + ": probe " + th::kProbeSpec);
      AttentionInput ain = in;
      (isKey ? ain.keyHat : ain.valueHat) = &q->reconstruction;
      auto m = attentionMetrics(ain, AttentionCaseSelection{isKey, !isKey, false}, **baseline);
      if (!m) return m.status().withContext(where + ": probe");
      double rel = 0, kl = 0;
      for (const AttentionCases& c : *m) {
        rel += (isKey ? c.keyOnly : c.valueOnly).outputRelError;
        kl += c.keyOnly.klMean;
      }
      rel /= static_cast<double>(m->size());
      (isKey ? side.key : side.value) = rel;
      if (isKey) side.keyKl = kl / static_cast<double>(m->size());
    }
    sides.push_back(side);
  }
  if (!info.hasQuery) {
    dx.notes.push_back("the dump has no queries: low-entropy heads and K/V sensitivity were not checked");
  }

  if (!bias.empty()) {
    Finding f;
    f.kind = FindingKind::KeyBias;
    keepStrongest(bias, f);
    std::set<int> layers;
    for (const Scored& s : bias) layers.insert(s.evidence.layer);
    f.summary = std::to_string(f.matches) + " key channel(s) in " + std::to_string(layers.size()) +
                " layer(s) carry a constant offset (|mean| ≥ " + fmt(th::kBiasMeanToStd) +
                "× their spread), e.g. a k_proj bias";
    f.advice = "per-token scales spend their range on the offset and leave few codes for the rest of "
               "the key: quantize keys per channel (axis=channel), before RoPE (prerope), or rotate "
               "them (rot=hadamard) so the offset is spread over all channels";
    dx.findings.push_back(std::move(f));
  }
  if (!massive.empty()) {
    Finding f;
    f.kind = FindingKind::MassiveTokens;
    keepStrongest(massive, f);
    std::set<int64_t> tokens;
    for (const Scored& s : massive) tokens.insert(s.evidence.token);
    const int64_t last = *tokens.rbegin();
    std::string list;
    for (int64_t t : tokens) list += (list.empty() ? "" : ", ") + std::to_string(t);
    f.summary = "token(s) " + list + " have key or value norms ≥ " + fmt(th::kMassiveNormRatio) +
                "× the median token (massive activations / attention sinks)";
    if (last < th::kSinkWindow) {
      f.sinks = static_cast<int>(last + 1);
      f.advice = "keep them in fp16: sinks=" + std::to_string(last + 1) +
                 " (otherwise a per-channel or per-tensor scale spans their range and the other "
                 "tokens lose their resolution)";
    } else {
      f.advice = "some lie beyond the first " + std::to_string(th::kSinkWindow) +
                 " tokens, which sinks=S cannot keep: use per-token scales (axis=token) or dense-and-"
                 "sparse outliers (outliers=F)";
    }
    dx.findings.push_back(std::move(f));
  }
  if (!outliers.empty()) {
    Finding f;
    f.kind = FindingKind::OutlierChannels;
    keepStrongest(outliers, f);
    std::set<std::pair<int, int>> heads;
    for (const Scored& s : outliers) heads.insert({s.evidence.layer, s.evidence.kvHead});
    f.summary = std::to_string(f.matches) + " persistent outlier key channel(s) (max |k| > " +
                fmt(th::kOutlierRatio) + "× the median channel, in the top 1 % of ≥ " +
                fmt(100 * th::kOutlierPersistence) + " % of tokens) in " + std::to_string(heads.size()) +
                " (layer, kv head) pair(s)";
    f.advice = "group keys per channel (axis=channel, as KIVI does) or rotate them (rot=hadamard); "
               "per-token groups that contain such a channel waste their range on it";
    dx.findings.push_back(std::move(f));
  }
  if (!lowEntropy.empty()) {
    Finding f;
    f.kind = FindingKind::LowEntropyHeads;
    keepStrongest(lowEntropy, f);
    f.summary = std::to_string(f.matches) + " query head(s) attend nearly one-hot (mean entropy ≤ " +
                fmt(th::kLowEntropyNats) + " nats over the last " + std::to_string(th::kProbeQueries) +
                " queries)";
    f.advice = "a key error that moves one score past the winning margin flips such a head's choice: "
               "their kl_max and top1_agreement are what a key budget will feel; look them up in "
               "'kvscope-cli sensitivity' and budget on kl_max or top1_agreement";
    dx.findings.push_back(std::move(f));
  }
  const bool mult64 = d % 64 == 0;
  const bool pow2 = d > 0 && (d & (d - 1)) == 0;
  if (!mult64 || !pow2) {
    Finding f;
    f.kind = FindingKind::HeadDim;
    f.matches = 1;
    Evidence e;
    e.numbers = {{"head_dim", static_cast<double>(d)}};
    f.evidence.push_back(e);
    f.summary = "head dim " + std::to_string(d) + " is " + (mult64 ? "" : "not a multiple of 64") +
                (!mult64 && !pow2 ? " and " : "") + (pow2 ? "" : "not a power of two");
    std::string advice;
    if (!mult64) {
      advice += "llama.cpp's Hadamard rotation of quantized caches and ik_llama.cpp's -khad/-vhad need a "
                "multiple of 64, so those engines store this cache unrotated; ";
    }
    if (!pow2) {
      advice += "vLLM's int4_per_token_head refuses head sizes that are not a power of two, and "
                "kvscope's rot=hadamard needs one (use rot=random, or rot=hadamard:N with N a power of "
                "two dividing D); ";
    }
    advice += "compare unrotated specs (rot=none) with per-channel keys for this model";
    f.advice = advice;
    dx.findings.push_back(std::move(f));
  }
  if (!sides.empty()) {
    double k = 0, v = 0;
    for (const SideLayer& s : sides) {
      k += s.key;
      v += s.value;
    }
    k /= static_cast<double>(sides.size());
    v /= static_cast<double>(sides.size());
    const double ratio = v > 0 ? k / v : (k > 0 ? INFINITY : 1.0);
    if (ratio >= th::kSideRatio || ratio <= 1.0 / th::kSideRatio) {
      Finding f;
      f.kind = FindingKind::SideSensitivity;
      const bool keys = ratio >= 1;
      std::vector<Scored> items;
      for (const SideLayer& s : sides) {
        Scored sc;
        const double r = s.value > 0 ? s.key / s.value : INFINITY;
        sc.strength = keys ? r : -r;
        sc.evidence.layer = s.layer;
        sc.evidence.tensor = "attention";
        sc.evidence.numbers = {{"key_only_output_rel_error", s.key},
                               {"value_only_output_rel_error", s.value},
                               {"key_to_value", r},
                               {"key_only_kl_mean", s.keyKl}};
        items.push_back(std::move(sc));
      }
      keepStrongest(items, f);
      f.summary = std::string(keys ? "keys" : "values") + " are " + fmt(keys ? ratio : 1.0 / ratio) +
                  "× more sensitive than " + (keys ? "values" : "keys") + " under the probe " +
                  th::kProbeSpec + " (mean output_rel_error " + fmt(k) + " for K, " + fmt(v) + " for V)";
      f.advice = std::string("spend the bits on ") + (keys ? "K" : "V") + ": e.g. " +
                 (keys ? "K at 8 bits and V at 4" : "V at 8 bits and K at 4") +
                 "; 'kvscope-cli search' with separate key and value budgets finds the cheapest pair";
      dx.findings.push_back(std::move(f));
    }
  }
  report(progress, 1.0, "diagnose");
  return dx;
}

std::string diagnosisToJson(const Diagnosis& dx) {
  nlohmann::ordered_json j;
  j["kvscope_diagnose"] = 1;
  j["dump"] = dx.dump.path;
  j["model"] = dx.dump.model;
  j["layers"] = dx.layers;
  nlohmann::ordered_json t;
  t["key_bias_mean_to_std"] = th::kBiasMeanToStd;
  t["key_bias_mean_to_median_rms"] = th::kBiasMeanToMedianRms;
  t["massive_norm_ratio"] = th::kMassiveNormRatio;
  t["sink_window"] = th::kSinkWindow;
  t["outlier_ratio"] = th::kOutlierRatio;
  t["outlier_persistence"] = th::kOutlierPersistence;
  t["low_entropy_nats"] = th::kLowEntropyNats;
  t["side_ratio"] = th::kSideRatio;
  t["probe_spec"] = th::kProbeSpec;
  t["probe_queries"] = th::kProbeQueries;
  j["thresholds"] = t;
  auto findings = nlohmann::ordered_json::array();
  for (const Finding& f : dx.findings) {
    nlohmann::ordered_json e;
    e["kind"] = findingKindName(f.kind);
    e["summary"] = f.summary;
    e["advice"] = f.advice;
    e["matches"] = f.matches;
    auto evidence = [](const std::vector<Evidence>& list) {
      auto ev = nlohmann::ordered_json::array();
      for (const Evidence& x : list) {
        nlohmann::ordered_json o;
        if (x.layer >= 0) o["layer"] = x.layer;
        if (x.kvHead >= 0) o["kv_head"] = x.kvHead;
        if (x.queryHead >= 0) o["query_head"] = x.queryHead;
        if (x.channel >= 0) o["channel"] = x.channel;
        if (x.token >= 0) o["token"] = x.token;
        if (!x.tensor.empty()) o["tensor"] = x.tensor;
        for (const auto& [name, v] : x.numbers) o[name] = number(v);
        ev.push_back(o);
      }
      return ev;
    };
    e["evidence"] = evidence(f.evidence);
    auto groups = nlohmann::ordered_json::array();
    for (const EvidenceGroup& g : f.groups) {
      nlohmann::ordered_json o;
      o["about"] = g.about;
      o[g.about] = g.index;
      o["matches"] = g.evidence.size();
      o["evidence"] = evidence(g.evidence);
      groups.push_back(o);
    }
    e["groups"] = groups;
    findings.push_back(e);
  }
  j["findings"] = findings;
  j["notes"] = dx.notes;
  return j.dump(2) + "\n";
}

std::string diagnosisToText(const Diagnosis& dx) {
  std::ostringstream out;
  out << dx.dump.path << ": " << dx.findings.size() << " finding(s) over " << dx.layers.size() << " layer(s)\n";
  for (const Finding& f : dx.findings) {
    out << "\n" << findingKindName(f.kind) << ": " << f.summary << "\n  what to do: " << f.advice << "\n";
    for (const Evidence& e : f.evidence) out << "  - " << evidenceText(e) << "\n";
    if (f.matches > static_cast<int>(f.evidence.size())) {
      out << "  (" << f.matches - static_cast<int>(f.evidence.size()) << " more)\n";
    }
    if (f.groups.size() > 1) {
      // The summary of all of it: each channel (token, head, layer) and how many places it has.
      std::string line;
      for (const EvidenceGroup& g : f.groups) {
        line += (line.empty() ? "" : ", ") + std::to_string(g.index) + " (" + std::to_string(g.evidence.size()) + ")";
      }
      out << "  by " << f.groups.front().about << ": " << line << "\n";
    }
  }
  if (dx.findings.empty()) out << "nothing found that predicts a quantizer failure\n";
  for (const std::string& n : dx.notes) out << "note: " << n << "\n";
  return out.str();
}

}  // namespace kvscope
