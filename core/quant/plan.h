// SPDX-License-Identifier: GPL-3.0-or-later
// Plans (quantization.md §12): a spec per layer, written `SPEC(;LAYERS:SPEC)*`, e.g.
// `q4_0;first2+last2:q8_0`. A plain spec is a plan with one part (docs/spec-strings.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/quant/quantize.h"
#include "core/quant/spec.h"
#include "core/util/status.h"

namespace kvscope {

/// One RANGE of a LAYERS expression: `N`, `N-M`, `firstN` or `lastN`.
struct LayerRange {
  enum class Kind { Span, First, Last };
  Kind kind = Kind::Span;
  int from = 0;   ///< Span: first layer (N)
  int to = 0;     ///< Span: last layer, inclusive (M; N for a single layer)
  int count = 0;  ///< First, Last: how many layers (N ≥ 1)
  bool operator==(const LayerRange&) const = default;
};

/// `LAYERS:SPEC`: the layers of the union of `layers` get `spec`.
struct PlanOverride {
  std::vector<LayerRange> layers;  ///< RANGE(+RANGE)*, in the order written
  QuantSpec spec;
  bool operator==(const PlanOverride&) const = default;
};

/// A spec per layer: `base` everywhere, then each override in order (later parts win).
struct Plan {
  QuantSpec base;                        ///< the first part: every layer no override names
  std::vector<PlanOverride> overrides;   ///< the later parts, in the order written

  Plan() = default;
  /// A plain spec is a plan with one part (implicit, so a QuantSpec goes wherever a Plan does).
  Plan(const QuantSpec& spec) : base(spec) {}  // NOLINT(google-explicit-constructor)
  bool operator==(const Plan&) const = default;
};

/// Parses `SPEC(;LAYERS:SPEC)*`. A part is `LAYERS:SPEC` only when the text before its first
/// ':' reads as a LAYERS expression (digits, '-', '+', first, last); otherwise it is a spec.
/// Errors name the part (1-based) and what is allowed; a one-part plan's spec error is
/// parseSpec's own. Layer numbers are checked against a model only by resolve/validatePlan.
Expected<Plan> parsePlan(std::string_view text);
/// Parses a LAYERS expression `RANGE(+RANGE)*` alone (also the GUI's range field).
Expected<std::vector<LayerRange>> parseLayerRanges(std::string_view text);

/// The canonical plan string: each part's spec canonical (toString(QuantSpec)), ranges as
/// `N`, `N-M`, `firstN`, `lastN` joined by '+', parts in order; a one-part plan prints as its
/// spec alone. parsePlan(toString(p)) == p.
std::string toString(const Plan& plan);
/// `N`, `N-M`, `firstN` or `lastN`.
std::string toString(const LayerRange& range);
/// RANGE(+RANGE)*.
std::string toString(const std::vector<LayerRange>& ranges);

/// True when every layer gets the same spec whatever the layer count (no override, or every
/// override's spec equals the base).
bool isUniform(const Plan& plan);
/// True when `range` covers `layer` in a model of `layers` layers.
bool covers(const LayerRange& range, int layer, int layers);
/// The spec of one layer: the last part that covers it (`base` when none does). Never fails:
/// ranges beyond the model cover nothing here (resolve and validatePlan report them).
const QuantSpec& specForLayer(const Plan& plan, int layer, int layers);
/// Every layer's spec for a model of `layers` layers. Errors when a range names a layer
/// ≥ `layers` (N, N-M, or firstN/lastN with N > layers), naming the part and the range.
Expected<std::vector<QuantSpec>> resolve(const Plan& plan, int layers);
/// resolve(), then validateSpec on each layer's spec; errors name the layer and its spec.
/// `layers` = 0 (unknown) checks each part's spec once and skips the layer-number checks.
Status validatePlan(const Plan& plan, const SpecContext& context, int layers);
/// True when any layer's spec (base or override) satisfies `prerope`.
bool anyPrerope(const Plan& plan);

/// Storage of each layer tensor (shape [kvHeads, tokens, headDim]) under its own spec (§5):
/// entry l is storageFor(resolve(plan)[l], …). Errors as resolve.
Expected<std::vector<StorageCount>> planLayerStorage(const Plan& plan, int layers, int64_t kvHeads,
                                                     int64_t tokens, int64_t headDim);
/// The sum of per-layer counts: its bitsPerElement() is a plan's bits per element (§12: its
/// storage over all layers / all elements).
StorageCount sumStorage(const std::vector<StorageCount>& perLayer);
/// The count a report prints for a plan (§8, §12): a uniform plan's is that of one layer tensor
/// (what a plain spec always reported); otherwise the sum over all layers. Its bitsPerElement()
/// is the plan's either way.
StorageCount planStorage(const Plan& plan, int layers, int64_t kvHeads, int64_t tokens, int64_t headDim);
/// K+V bytes per token over all layers (§5, §12): Σ_l (K_l + V_l bits) / 8 / tokens; 0 when
/// tokens = 0. The two vectors have one entry per layer.
double bytesPerToken(const std::vector<StorageCount>& keyLayers, const std::vector<StorageCount>& valueLayers,
                     int64_t tokens);

}  // namespace kvscope
