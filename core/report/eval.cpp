// SPDX-License-Identifier: GPL-3.0-or-later
// The evaluation driver: layer by layer, quantize K and V, measure, and keep only the numbers.
#include "core/report/eval.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

namespace kvscope {

const char* nonFinitePolicyName(NonFinitePolicy policy) {
  switch (policy) {
    case NonFinitePolicy::Refuse: return "refuse";
    case NonFinitePolicy::SkipHeads: return "skip-heads";
  }
  return "?";
}

Expected<NonFinitePolicy> parseNonFinitePolicy(std::string_view text) {
  if (text == "refuse") return NonFinitePolicy::Refuse;
  if (text == "skip-heads") return NonFinitePolicy::SkipHeads;
  std::string why = "unknown non-finite policy '";
  why.append(text);
  return Status::invalidArgument(why + "' (allowed: refuse, skip-heads)");
}

Expected<int> parseQueryCount(std::string_view text) {
  if (text == "all") return 0;
  constexpr std::string_view prefix = "last:";
  std::string why = "--queries '";
  why.append(text);
  why += "': ";
  if (text.substr(0, prefix.size()) == prefix) {
    std::string_view digits = text.substr(prefix.size());
    int n = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (!digits.empty() && ec == std::errc() && ptr == digits.data() + digits.size() && n >= 1) return n;
    return Status::invalidArgument(why + "N must be a whole number ≥ 1 (allowed: all or last:N)");
  }
  return Status::invalidArgument(why + "not understood (allowed: all or last:N)");
}

namespace {

/// NaN/Inf counts and first location of one head.
struct HeadScan {
  int64_t nan = 0, inf = 0;
  int64_t token = -1, channel = -1;
  [[nodiscard]] bool finite() const { return nan == 0 && inf == 0; }
};

HeadScan scanHead(const Tensor3& x, int64_t head) {
  HeadScan s;
  for (int64_t t = 0; t < x.tokens; ++t) {
    const float* row = x.row(head, t);
    for (int64_t c = 0; c < x.dim; ++c) {
      const float v = row[c];
      if (std::isfinite(v)) continue;
      (std::isnan(v) ? s.nan : s.inf) += 1;
      if (s.token < 0) {
        s.token = t;
        s.channel = c;
      }
    }
  }
  return s;
}

std::string describeScan(const char* tensor, const HeadScan& s) {
  return std::string(tensor) + ": " + std::to_string(s.nan) + " NaN and " + std::to_string(s.inf) +
         " Inf values, first at token " + std::to_string(s.token) + ", channel " + std::to_string(s.channel);
}

/// Refuse policy: the first non-finite tensor of the layer is an error.
Status refuseNonFinite(const LayerData& data, const std::string& origin) {
  auto check = [&](const Tensor3& t, TensorKind kind) -> Status {
    const NonFiniteReport r = scanNonFinite(t);
    if (r.allFinite()) return Status::ok();
    return Status::invalidData(origin + ": " + tensorKindName(kind) + " has " + std::to_string(r.nanCount) +
                               " NaN and " + std::to_string(r.infCount) + " Inf values, first at head " +
                               std::to_string(r.firstHead) + ", token " + std::to_string(r.firstToken) +
                               ", channel " + std::to_string(r.firstChannel) +
                               " (the skip-heads policy evaluates the other heads)");
  };
  KVS_RETURN_IF_ERROR(check(data.key, TensorKind::Key));
  KVS_RETURN_IF_ERROR(check(data.value, TensorKind::Value));
  if (data.keyPreRope) KVS_RETURN_IF_ERROR(check(*data.keyPreRope, TensorKind::KeyPreRope));
  if (data.query) KVS_RETURN_IF_ERROR(check(*data.query, TensorKind::Query));
  return Status::ok();
}

void zeroHead(Tensor3& x, int64_t head) {
  std::fill_n(x.row(head, 0), static_cast<size_t>(x.tokens * x.dim), 0.0f);
}

/// Skip-heads policy: marks kv heads with any non-finite input and zeroes them (and the query
/// heads that read them) so the rest of the layer can be quantized and measured.
void skipNonFiniteHeads(LayerData& data, std::vector<HeadResult>& heads) {
  const int64_t kvh = data.key.heads;
  auto mark = [&](int64_t g, const std::string& why) {
    HeadResult& r = heads[static_cast<size_t>(g)];
    if (!r.skipped) r.skipReason = why;
    r.skipped = true;
  };
  for (int64_t g = 0; g < kvh; ++g) {
    if (HeadScan s = scanHead(data.key, g); !s.finite()) mark(g, describeScan("key", s));
    if (HeadScan s = scanHead(data.value, g); !s.finite()) mark(g, describeScan("value", s));
    if (data.keyPreRope) {
      if (HeadScan s = scanHead(*data.keyPreRope, g); !s.finite()) mark(g, describeScan("key_pre_rope", s));
    }
  }
  if (data.query && kvh > 0 && data.query->heads % kvh == 0) {
    const int64_t perKv = data.query->heads / kvh;
    for (int64_t h = 0; h < data.query->heads; ++h) {
      HeadScan s = scanHead(*data.query, h);
      if (!s.finite()) {
        mark(h / perKv, describeScan(("query head " + std::to_string(h)).c_str(), s));
        zeroHead(*data.query, h);
      }
    }
  }
  for (int64_t g = 0; g < kvh; ++g) {
    if (!heads[static_cast<size_t>(g)].skipped) continue;
    zeroHead(data.key, g);
    zeroHead(data.value, g);
    if (data.keyPreRope) zeroHead(*data.keyPreRope, g);
  }
}

/// Maps a sub-task's [0,1] onto [from, to] of the caller's progress.
Progress subProgress(const Progress& progress, double from, double to) {
  if (!progress) return {};
  return [progress, from, to](double f, std::string_view what) { return progress(from + (to - from) * f, what); };
}

template <typename Field>
void meanInto(double& out, int n, Field sum) {
  out = n > 0 ? sum / n : 0.0;
}

}  // namespace

Expected<std::pair<QuantSpec, QuantSpec>> layerSpecs(const EvalOptions& options, const LayerContext& context) {
  const bool uniform = isUniform(options.key) && isUniform(options.value);
  if (uniform) return std::pair{options.key.base, options.value.base};
  if (context.layers <= 0) {
    return Status::invalidArgument(context.origin + ": a plan with per-layer specs needs the dump's layer count");
  }
  if (context.layer < 0 || context.layer >= context.layers) {
    return Status::invalidArgument(context.origin + ": layer " + std::to_string(context.layer) +
                                   " is outside the plan's " + std::to_string(context.layers) + " layers");
  }
  return std::pair{specForLayer(options.key, context.layer, context.layers),
                   specForLayer(options.value, context.layer, context.layers)};
}

Status evaluateLayerInto(LayerData data, const LayerContext& context, const EvalOptions& options,
                         LayerEvaluation& ev, const Progress& progress) {
  const std::string& origin = context.origin;
  if (!data.key.sameShape(data.value)) {
    return Status::invalidData(origin + ": key and value shapes differ");
  }
  const int64_t kvh = data.key.heads;
  ev.result = LayerResult{};
  ev.notes.clear();
  ev.result.layer = context.layer;
  ev.result.heads.resize(static_cast<size_t>(kvh));
  for (int64_t g = 0; g < kvh; ++g) ev.result.heads[static_cast<size_t>(g)].kvHead = static_cast<int>(g);

  if (options.nonFinite == NonFinitePolicy::Refuse) {
    KVS_RETURN_IF_ERROR(refuseNonFinite(data, origin));
  } else {
    skipNonFiniteHeads(data, ev.result.heads);
  }

  auto specs = layerSpecs(options, context);
  if (!specs) return specs.status();
  const QuantSpec& keySpec = specs->first;
  const QuantSpec& valueSpec = specs->second;
  ev.result.keySpec = keySpec;
  ev.result.valueSpec = valueSpec;

  // The reconstructions reuse ev's buffers: fresh layer-sized allocations cost more than the
  // quantization itself.
  QuantOutput keyOut{std::move(ev.keyHat), {}};
  QuantInput keyIn{&data.key, data.keyPreRope ? &*data.keyPreRope : nullptr, context.rope};
  Status keyStatus = quantizeTensorInto(keyIn, keySpec, keyOut, subProgress(progress, 0.0, 0.4));
  ev.keyHat = std::move(keyOut.reconstruction);
  ev.keyStorage = keyOut.storage;
  KVS_RETURN_IF_ERROR(keyStatus.withContext(origin + ": key"));
  QuantOutput valueOut{std::move(ev.valueHat), {}};
  QuantInput valueIn{&data.value, nullptr, context.rope};
  Status valueStatus = quantizeTensorInto(valueIn, valueSpec, valueOut, subProgress(progress, 0.4, 0.8));
  ev.valueHat = std::move(valueOut.reconstruction);
  ev.valueStorage = valueOut.storage;
  KVS_RETURN_IF_ERROR(valueStatus.withContext(origin + ": value"));

  for (int64_t g = 0; g < kvh; ++g) {
    HeadResult& r = ev.result.heads[static_cast<size_t>(g)];
    if (r.skipped) continue;
    r.key = headMetrics(data.key, ev.keyHat, g);
    r.value = headMetrics(data.value, ev.valueHat, g);
  }

  if (data.query) {
    AttentionInput in;
    in.query = &*data.query;
    in.key = &data.key;
    in.value = &data.value;
    in.keyHat = &ev.keyHat;
    in.valueHat = &ev.valueHat;
    in.softmaxScale = context.softmaxScale;
    in.lastQueries = options.lastQueries;
    auto att = attentionMetrics(in, subProgress(progress, 0.8, 1.0));
    if (att) {
      if (att->size() != static_cast<size_t>(kvh)) {
        return Status::internal(origin + ": attention metrics for " + std::to_string(att->size()) +
                                " kv heads, expected " + std::to_string(kvh));
      }
      for (int64_t g = 0; g < kvh; ++g) {
        HeadResult& r = ev.result.heads[static_cast<size_t>(g)];
        if (!r.skipped) r.attention = (*att)[static_cast<size_t>(g)];
      }
    } else if (att.status().code() == StatusCode::Unsupported) {
      ev.notes.push_back("attention metrics are not available: " + att.status().message());
    } else {
      return att.status().withContext(origin + ": attention");
    }
  }
  if (!report(progress, 1.0, "layer done")) return Status::cancelled();
  return Status::ok();
}

Expected<LayerEvaluation> evaluateLayer(LayerData data, const LayerContext& context,
                                        const EvalOptions& options, const Progress& progress) {
  LayerEvaluation ev;
  KVS_RETURN_IF_ERROR(evaluateLayerInto(std::move(data), context, options, ev, progress));
  return ev;
}

Status validateEvalOptions(const DumpInfo& info, const EvalOptions& options) {
  const std::string& origin = info.path;
  for (int l : options.layers) {
    if (l < 0 || l >= info.layers) {
      return Status::invalidArgument(origin + ": layer " + std::to_string(l) + " does not exist (allowed: 0.." +
                                     std::to_string(info.layers - 1) + ")");
    }
  }
  if (options.sequence < 0 || options.sequence >= info.sequences) {
    return Status::invalidArgument(origin + ": sequence " + std::to_string(options.sequence) +
                                   " does not exist (allowed: 0.." + std::to_string(info.sequences - 1) + ")");
  }
  if (options.lastQueries < 0) {
    return Status::invalidArgument("--queries last:N needs N ≥ 1");
  }
  if (info.hasQuery && options.lastQueries > info.queries) {
    return Status::invalidArgument(origin + ": last " + std::to_string(options.lastQueries) +
                                   " queries requested, but the dump holds " + std::to_string(info.queries) +
                                   " (allowed: all or last:N with N ≤ " + std::to_string(info.queries) + ")");
  }
  SpecContext keyContext{true, info.kvHeads, info.headDim, info.hasKeyPreRope};
  SpecContext valueContext{false, info.kvHeads, info.headDim, info.hasKeyPreRope};
  KVS_RETURN_IF_ERROR(validatePlan(options.key, keyContext, info.layers).withContext(origin + ": key"));
  KVS_RETURN_IF_ERROR(validatePlan(options.value, valueContext, info.layers).withContext(origin + ": value"));
  return Status::ok();
}

EvalSummary summarize(const std::vector<LayerResult>& layers) {
  EvalSummary s;
  double keyMse = 0, keyRel = 0, keySqnr = 0, valueMse = 0, valueRel = 0, valueSqnr = 0;
  int keySqnrN = 0, valueSqnrN = 0, attN = 0;
  AttentionCases attSum{}, attMax{};
  auto zeroCases = [](AttentionCases& c) {
    for (AttentionMetrics* m : {&c.keyOnly, &c.valueOnly, &c.joint}) *m = AttentionMetrics{0, 0, 0, 0, 0, 0};
  };
  zeroCases(attSum);
  zeroCases(attMax);
  for (const LayerResult& layer : layers) {
    for (const HeadResult& h : layer.heads) {
      if (h.skipped) continue;
      ++s.entries;
      keyMse += h.key.mse;
      keyRel += h.key.relError;
      valueMse += h.value.mse;
      valueRel += h.value.relError;
      s.key.maxAbsError = std::max(s.key.maxAbsError, h.key.maxAbsError);
      s.value.maxAbsError = std::max(s.value.maxAbsError, h.value.maxAbsError);
      if (h.key.sqnrDb && std::isfinite(*h.key.sqnrDb)) { keySqnr += *h.key.sqnrDb; ++keySqnrN; }
      if (h.value.sqnrDb && std::isfinite(*h.value.sqnrDb)) { valueSqnr += *h.value.sqnrDb; ++valueSqnrN; }
      if (h.attention) {
        ++attN;
        const AttentionMetrics* in[] = {&h.attention->keyOnly, &h.attention->valueOnly, &h.attention->joint};
        AttentionMetrics* sum[] = {&attSum.keyOnly, &attSum.valueOnly, &attSum.joint};
        AttentionMetrics* mx[] = {&attMax.keyOnly, &attMax.valueOnly, &attMax.joint};
        for (int c = 0; c < 3; ++c) {
          sum[c]->scoreMae += in[c]->scoreMae;
          sum[c]->klMean += in[c]->klMean;
          sum[c]->top1Agreement += in[c]->top1Agreement;
          sum[c]->outputRelError += in[c]->outputRelError;
          mx[c]->scoreMax = std::max(mx[c]->scoreMax, in[c]->scoreMax);
          mx[c]->klMax = std::max(mx[c]->klMax, in[c]->klMax);
        }
      }
    }
  }
  meanInto(s.key.mse, s.entries, keyMse);
  meanInto(s.key.relError, s.entries, keyRel);
  meanInto(s.value.mse, s.entries, valueMse);
  meanInto(s.value.relError, s.entries, valueRel);
  if (keySqnrN > 0) s.key.sqnrDb = keySqnr / keySqnrN;
  if (valueSqnrN > 0) s.value.sqnrDb = valueSqnr / valueSqnrN;
  if (attN > 0) {
    AttentionCases a;
    const AttentionMetrics* sum[] = {&attSum.keyOnly, &attSum.valueOnly, &attSum.joint};
    const AttentionMetrics* mx[] = {&attMax.keyOnly, &attMax.valueOnly, &attMax.joint};
    AttentionMetrics* out[] = {&a.keyOnly, &a.valueOnly, &a.joint};
    for (int c = 0; c < 3; ++c) {
      out[c]->scoreMae = sum[c]->scoreMae / attN;
      out[c]->scoreMax = mx[c]->scoreMax;
      out[c]->klMean = sum[c]->klMean / attN;
      out[c]->klMax = mx[c]->klMax;
      out[c]->top1Agreement = sum[c]->top1Agreement / attN;
      out[c]->outputRelError = sum[c]->outputRelError / attN;
    }
    s.attention = a;
  }
  return s;
}

Expected<EvalReport> evaluate(const Dump& dump, const EvalOptions& options, const Progress& progress) {
  const DumpInfo& info = dump.info();
  KVS_RETURN_IF_ERROR(validateEvalOptions(info, options));

  EvalReport rep;
  rep.dump = info;
  rep.sequence = options.sequence;
  rep.key = options.key;
  rep.value = options.value;
  rep.preset = options.preset;
  rep.engine = options.engine;
  rep.lastQueries = options.lastQueries;
  rep.nonFinite = options.nonFinite;
  // Storage does not depend on the data, so bytes per token covers all L layers, each under its
  // own spec, whichever layers are evaluated (docs/report.md).
  auto keyLayers = planLayerStorage(options.key, info.layers, info.kvHeads, info.tokens, info.headDim);
  if (!keyLayers) return keyLayers.status().withContext(info.path + ": key");
  auto valueLayers = planLayerStorage(options.value, info.layers, info.kvHeads, info.tokens, info.headDim);
  if (!valueLayers) return valueLayers.status().withContext(info.path + ": value");
  rep.keyStorage = planStorage(options.key, info.layers, info.kvHeads, info.tokens, info.headDim);
  rep.valueStorage = planStorage(options.value, info.layers, info.kvHeads, info.tokens, info.headDim);
  rep.bytesPerTokenBaseline = static_cast<double>(info.bytesPerTokenFp16());
  rep.bytesPerTokenQuantized = bytesPerToken(*keyLayers, *valueLayers, info.tokens);
  if (!info.hasQuery) rep.notes.push_back("attention metrics are null: the dump has no query");

  std::vector<int> layers = options.layers;
  if (layers.empty()) {
    for (int l = 0; l < info.layers; ++l) layers.push_back(l);
  }
  if (!options.keepLayerOrder) {
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  }

  bool attentionUnsupported = false;
  LayerEvaluation ev;  // reused: its reconstructions keep their buffers from layer to layer
  const size_t n = layers.size();
  for (size_t i = 0; i < n; ++i) {
    const int l = layers[i];
    const double from = static_cast<double>(i) / static_cast<double>(n);
    const double to = static_cast<double>(i + 1) / static_cast<double>(n);
    if (!report(progress, from, "reading layer " + std::to_string(l))) return Status::cancelled();

    LayerData data;
    auto key = dump.read(l, TensorKind::Key, options.sequence);
    if (!key) return key.status();
    data.key = std::move(*key);
    auto value = dump.read(l, TensorKind::Value, options.sequence);
    if (!value) return value.status();
    data.value = std::move(*value);
    if (specForLayer(options.key, l, info.layers).prerope) {
      auto pre = dump.read(l, TensorKind::KeyPreRope, options.sequence);
      if (!pre) return pre.status();
      data.keyPreRope = std::move(*pre);
    }
    if (info.hasQuery && !attentionUnsupported) {
      auto q = dump.read(l, TensorKind::Query, options.sequence);
      if (!q) return q.status();
      data.query = std::move(*q);
    }

    LayerContext context;
    context.layer = l;
    context.rope = info.rope();
    context.softmaxScale = info.softmaxScale;
    context.origin = info.path + ": layer " + std::to_string(l);
    context.layers = info.layers;
    KVS_RETURN_IF_ERROR(evaluateLayerInto(std::move(data), context, options, ev, subProgress(progress, from, to)));
    if (!ev.notes.empty()) {
      attentionUnsupported = true;  // the engine said no: do not read queries again
      for (auto& note : ev.notes) rep.notes.push_back(std::move(note));
    }
    for (const HeadResult& h : ev.result.heads) {
      if (h.skipped) {
        rep.notes.push_back("layer " + std::to_string(l) + ", kv head " + std::to_string(h.kvHead) +
                            " skipped: " + h.skipReason);
      }
    }
    if (options.onLayer) options.onLayer(ev.result);
    rep.layers.push_back(std::move(ev.result));
  }
  rep.summary = summarize(rep.layers);
  if (!report(progress, 1.0, "done")) return Status::cancelled();
  return rep;
}

}  // namespace kvscope
