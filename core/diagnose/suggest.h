// SPDX-License-Identifier: GPL-3.0-or-later
// What a diagnosis finding asks of the K and V settings, as settings one can apply: `sinks=S`
// for massive first tokens, per-channel keys, pre-RoPE keys and rotation for a key bias or
// outlier channels, `rot=random` for a head dim that is not a power of two (docs/diagnose.md,
// "Settings a finding suggests"). The GUI's diagnosis panel offers them as "Apply" buttons.
#pragma once

#include <string>
#include <vector>

#include "core/diagnose/diagnose.h"
#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "core/util/status.h"

namespace kvscope {

/// How much a finding is expected to cost a quantizer: "high" (breaks low-bit settings
/// outright: key_bias, massive_tokens), "medium" (outlier_channels, low_entropy_heads,
/// side_sensitivity), "low" (head_dim: an engine limitation, not damage).
const char* findingSeverity(FindingKind kind);

/// One setting a finding suggests.
struct SettingSuggestion {
  /// What it sets, in spec-string words: "sinks=S", "axis=channel", "prerope", "rot=hadamard",
  /// "rot=random".
  std::string option;
  bool key = false;    ///< applies to the K setting
  bool value = false;  ///< applies to the V setting
  std::string label;   ///< for people, e.g. "keep tokens 0–3 in fp16 (sinks=4) on K and V"
};

/// The settings `finding` suggests for a dump of shape `info` (empty when it suggests none:
/// low_entropy_heads, side_sensitivity, massive tokens beyond the sink window, a head dim that is a
/// power of two). Only what applies to the dump is offered: `prerope` needs key_pre_rope, and
/// rotation is `rot=hadamard` when D is a power of two, else `rot=random`.
std::vector<SettingSuggestion> suggestedSettings(const Finding& finding, const DumpInfo& info);

/// `spec` with the suggestion's option set (sinks: the larger of the two; axis=channel on a
/// format without axes, e.g. q4_0 or tq4: `int<b>,axis=channel,group=32` with b its bits, keeping
/// kept tokens, outliers, rotation and prerope), checked with validateSpec against `context`.
Expected<QuantSpec> applySuggestion(const QuantSpec& spec, const SettingSuggestion& suggestion,
                                    const SpecContext& context);

/// The same on every part of a plan (its default and each override).
Expected<Plan> applySuggestion(const Plan& plan, const SettingSuggestion& suggestion, const SpecContext& context);

}  // namespace kvscope
