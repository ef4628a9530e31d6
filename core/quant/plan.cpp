// SPDX-License-Identifier: GPL-3.0-or-later
// Plans (quantization.md §12): parsing with errors that name the part, the canonical printer,
// resolution to per-layer specs, and a plan's storage.
#include "core/quant/plan.h"

#include <algorithm>
#include <charconv>
#include <system_error>

namespace kvscope {

namespace {

// Far above any model's layer count; keeps range arithmetic clear of overflow.
constexpr int kMaxLayerNumber = 1'000'000;

constexpr const char* kRangesAllowed =
    "allowed: RANGE(+RANGE)* with RANGE one of N, N-M, firstN, lastN, e.g. 3, 0-2, first2, "
    "first2+last2";
constexpr const char* kPlanAllowed =
    "allowed: SPEC;LAYERS:SPEC;… e.g. q4_0;first2+last2:q8_0";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// A whole number made of digits only (no sign, no spaces), at most kMaxLayerNumber.
bool parseLayerNumber(std::string_view text, int& out) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  long long v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v > kMaxLayerNumber) return false;
  out = static_cast<int>(v);
  return true;
}

Expected<LayerRange> parseRange(std::string_view item) {
  const std::string text(item);
  auto bad = [&](const std::string& why) { return Status::invalidArgument(why + " (" + kRangesAllowed + ")"); };
  for (const auto& [prefix, kind] : {std::pair{std::string_view("first"), LayerRange::Kind::First},
                                     std::pair{std::string_view("last"), LayerRange::Kind::Last}}) {
    if (item.substr(0, prefix.size()) != prefix) continue;
    int n = 0;
    if (!parseLayerNumber(item.substr(prefix.size()), n)) {
      return bad("'" + text + "' is not a layer range: " + std::string(prefix) + " needs a layer count N");
    }
    if (n == 0) return bad("'" + text + "' names no layers: " + std::string(prefix) + "N needs N ≥ 1");
    LayerRange r;
    r.kind = kind;
    r.count = n;
    return r;
  }
  const size_t dash = item.find('-');
  LayerRange r;
  r.kind = LayerRange::Kind::Span;
  if (dash == std::string_view::npos) {
    if (!parseLayerNumber(item, r.from)) return bad("'" + text + "' is not a layer range");
    r.to = r.from;
    return r;
  }
  if (!parseLayerNumber(trim(item.substr(0, dash)), r.from) || !parseLayerNumber(trim(item.substr(dash + 1)), r.to)) {
    return bad("'" + text + "' is not a layer range: N-M needs two layer numbers");
  }
  if (r.to < r.from) {
    return bad("'" + text + "' ends before it starts: N-M needs M ≥ N");
  }
  return r;
}

/// True when `head` (the text before a part's first ':') is meant as layers rather than as the
/// start of a spec: specs have a format name first and options after ',' with '=', so a head
/// without ',' or '=' can only be an attempt at layers (or a malformed spec either way).
bool meantAsLayers(std::string_view head) {
  return head.find(',') == std::string_view::npos && head.find('=') == std::string_view::npos;
}

}  // namespace

Expected<std::vector<LayerRange>> parseLayerRanges(std::string_view text) {
  const std::string whole(trim(text));
  auto bad = [&](const Status& why) { return Status::invalidArgument("layers '" + whole + "': " + why.message()); };
  if (whole.empty()) {
    return Status::invalidArgument(std::string("no layers given (") + kRangesAllowed + ")");
  }
  std::vector<LayerRange> ranges;
  size_t pos = 0;
  std::string_view rest = trim(text);
  while (true) {
    const size_t plus = rest.find('+', pos);
    std::string_view item = trim(rest.substr(pos, plus == std::string_view::npos ? std::string_view::npos : plus - pos));
    if (item.empty()) {
      return bad(Status::invalidArgument(std::string("empty range (a stray '+'?; ") + kRangesAllowed + ")"));
    }
    auto r = parseRange(item);
    if (!r) return bad(r.status());
    ranges.push_back(*r);
    if (plus == std::string_view::npos) break;
    pos = plus + 1;
  }
  return ranges;
}

Expected<Plan> parsePlan(std::string_view text) {
  const std::string whole(text);
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (true) {
    const size_t semi = text.find(';', pos);
    parts.push_back(trim(text.substr(pos, semi == std::string_view::npos ? std::string_view::npos : semi - pos)));
    if (semi == std::string_view::npos) break;
    pos = semi + 1;
  }
  // "part 2 '3-1:q8_0': <an error from below>" and "part 2 '' is empty (…)".
  auto partError = [&](size_t i, const std::string& why) {
    return Status::invalidArgument("plan '" + whole + "': part " + std::to_string(i + 1) + " '" +
                                   std::string(parts[i]) + "': " + why);
  };
  auto partIs = [&](size_t i, const std::string& what) {
    return Status::invalidArgument("plan '" + whole + "': part " + std::to_string(i + 1) + " '" +
                                   std::string(parts[i]) + "' " + what);
  };

  // The first part is the spec of every layer no later part names.
  std::string_view first = parts.front();
  if (const size_t colon = first.find(':'); colon != std::string_view::npos) {
    std::string_view head = trim(first.substr(0, colon));
    if (meantAsLayers(head) && parseLayerRanges(head)) {
      return partIs(0, "names layers, but the first part is the spec of every other layer (" +
                              std::string(kPlanAllowed) + ")");
    }
  }
  if (parts.size() == 1) {  // a plain spec: its errors as always
    auto spec = parseSpec(first);
    if (!spec) return spec.status();
    return Plan(*spec);
  }

  Plan plan;
  if (first.empty()) {
    return partIs(0, "is empty: the first part is the spec of every other layer (" + std::string(kPlanAllowed) + ")");
  }
  auto base = parseSpec(first);
  if (!base) return partError(0, base.status().message());
  plan.base = *base;

  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view part = parts[i];
    if (part.empty()) {
      return partIs(i, std::string("is empty (a stray ';'?; ") + kPlanAllowed + ")");
    }
    const size_t colon = part.find(':');
    std::string_view head = colon == std::string_view::npos ? std::string_view{} : trim(part.substr(0, colon));
    if (colon == std::string_view::npos || !meantAsLayers(head)) {
      return partIs(i, "gives no layers (allowed: LAYERS:SPEC after the first part, with LAYERS like 3, 0-2, "
                          "first2, last2 or first2+last2)");
    }
    auto ranges = parseLayerRanges(head);
    if (!ranges) return partError(i, ranges.status().message());
    std::string_view specText = trim(part.substr(colon + 1));
    auto spec = parseSpec(specText);
    if (!spec) return partError(i, spec.status().message());
    plan.overrides.push_back({std::move(*ranges), *spec});
  }
  return plan;
}

std::string toString(const LayerRange& range) {
  switch (range.kind) {
    case LayerRange::Kind::First: return "first" + std::to_string(range.count);
    case LayerRange::Kind::Last: return "last" + std::to_string(range.count);
    case LayerRange::Kind::Span:
      return range.from == range.to ? std::to_string(range.from)
                                    : std::to_string(range.from) + "-" + std::to_string(range.to);
  }
  return "?";
}

std::string toString(const std::vector<LayerRange>& ranges) {
  std::string out;
  for (const LayerRange& r : ranges) {
    if (!out.empty()) out += '+';
    out += toString(r);
  }
  return out;
}

std::string toString(const Plan& plan) {
  std::string out = toString(plan.base);
  for (const PlanOverride& o : plan.overrides) {
    out += ';';
    out += toString(o.layers);
    out += ':';
    out += toString(o.spec);
  }
  return out;
}

bool isUniform(const Plan& plan) {
  for (const PlanOverride& o : plan.overrides) {
    if (!(o.spec == plan.base)) return false;
  }
  return true;
}

bool covers(const LayerRange& range, int layer, int layers) {
  switch (range.kind) {
    case LayerRange::Kind::Span: return layer >= range.from && layer <= range.to;
    case LayerRange::Kind::First: return layer >= 0 && layer < range.count;
    case LayerRange::Kind::Last: return layer < layers && layer >= layers - range.count;
  }
  return false;
}

const QuantSpec& specForLayer(const Plan& plan, int layer, int layers) {
  for (auto it = plan.overrides.rbegin(); it != plan.overrides.rend(); ++it) {
    for (const LayerRange& r : it->layers) {
      if (covers(r, layer, layers)) return it->spec;
    }
  }
  return plan.base;
}

Expected<std::vector<QuantSpec>> resolve(const Plan& plan, int layers) {
  for (size_t i = 0; i < plan.overrides.size(); ++i) {
    const PlanOverride& o = plan.overrides[i];
    for (const LayerRange& r : o.layers) {
      const bool counted = r.kind != LayerRange::Kind::Span;
      const bool beyond = counted ? r.count > layers : r.to >= layers;
      if (!beyond) continue;
      const std::string what = counted ? toString(r) + " names " + std::to_string(r.count) + " layers"
                                       : "layer " + std::to_string(r.to) + " does not exist";
      return Status::invalidArgument("plan '" + toString(plan) + "': part " + std::to_string(i + 2) + " '" +
                                     toString(o.layers) + ":" + toString(o.spec) + "': " + what +
                                     " (the model has " + std::to_string(layers) + " layers, 0 … " +
                                     std::to_string(layers - 1) + ")");
    }
  }
  std::vector<QuantSpec> out;
  out.reserve(static_cast<size_t>(std::max(layers, 0)));
  for (int l = 0; l < layers; ++l) out.push_back(specForLayer(plan, l, layers));
  return out;
}

Status validatePlan(const Plan& plan, const SpecContext& context, int layers) {
  if (plan.overrides.empty()) return validateSpec(plan.base, context);  // a plain spec: as always
  if (layers <= 0) {
    KVS_RETURN_IF_ERROR(validateSpec(plan.base, context));
    for (const PlanOverride& o : plan.overrides) KVS_RETURN_IF_ERROR(validateSpec(o.spec, context));
    return Status::ok();
  }
  auto specs = resolve(plan, layers);
  if (!specs) return specs.status();
  for (int l = 0; l < layers; ++l) {
    KVS_RETURN_IF_ERROR(validateSpec((*specs)[static_cast<size_t>(l)], context).withContext("layer " + std::to_string(l)));
  }
  return Status::ok();
}

bool anyPrerope(const Plan& plan) {
  if (plan.base.prerope) return true;
  for (const PlanOverride& o : plan.overrides) {
    if (o.spec.prerope) return true;
  }
  return false;
}

Expected<std::vector<StorageCount>> planLayerStorage(const Plan& plan, int layers, int64_t kvHeads,
                                                     int64_t tokens, int64_t headDim) {
  auto specs = resolve(plan, layers);
  if (!specs) return specs.status();
  std::vector<StorageCount> out;
  out.reserve(specs->size());
  for (const QuantSpec& s : *specs) out.push_back(storageFor(s, kvHeads, tokens, headDim));
  return out;
}

StorageCount sumStorage(const std::vector<StorageCount>& perLayer) {
  StorageCount sum;
  for (const StorageCount& s : perLayer) {
    sum.payloadBits += s.payloadBits;
    sum.metadataBits += s.metadataBits;
    sum.outlierBits += s.outlierBits;
    sum.keptBits += s.keptBits;
    sum.elements += s.elements;
  }
  return sum;
}

StorageCount planStorage(const Plan& plan, int layers, int64_t kvHeads, int64_t tokens, int64_t headDim) {
  if (isUniform(plan)) return storageFor(plan.base, kvHeads, tokens, headDim);
  StorageCount sum;
  for (int l = 0; l < layers; ++l) {
    sum = sumStorage({sum, storageFor(specForLayer(plan, l, layers), kvHeads, tokens, headDim)});
  }
  return sum;
}

double bytesPerToken(const std::vector<StorageCount>& keyLayers, const std::vector<StorageCount>& valueLayers,
                     int64_t tokens) {
  if (tokens <= 0) return 0;
  double bits = 0;
  for (size_t l = 0; l < keyLayers.size() && l < valueLayers.size(); ++l) {
    bits += keyLayers[l].totalBits() + valueLayers[l].totalBits();
  }
  return bits / 8.0 / static_cast<double>(tokens);
}

}  // namespace kvscope
