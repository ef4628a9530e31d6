// SPDX-License-Identifier: GPL-3.0-or-later
// Budget search: for K and for V separately, the cheapest candidate spec whose attention damage
// stays within a budget (key budget on key_only metrics, value budget on value_only metrics),
// then the joint result of the chosen pair (docs/search-and-capacity.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/attention/attention.h"
#include "core/io/dump.h"
#include "core/quant/plan.h"
#include "core/engine/presets.h"
#include "core/util/status.h"

namespace kvscope {

/// A field of §6.
enum class AttentionField { ScoreMae, ScoreMax, KlMean, KlMax, Top1Agreement, OutputRelError };
/// "score_mae", "score_max", "kl_mean", "kl_max", "top1_agreement", "output_rel_error".
const char* attentionFieldName(AttentionField field);
/// Parses a field name; errors list the allowed names.
Expected<AttentionField> parseAttentionField(std::string_view text);
/// The field's value in `m`.
double attentionFieldValue(const AttentionMetrics& m, AttentionField field);
/// True for top1_agreement (its budget is a minimum); every other field's budget is a maximum.
bool isMinimumField(AttentionField field);

/// "METRIC=VALUE": a bound on one field.
struct Budget {
  AttentionField field = AttentionField::KlMean;
  double bound = 0;
  /// True when `value` satisfies the bound (≤ bound, or ≥ bound for top1_agreement).
  [[nodiscard]] bool meets(double value) const;
  /// How far inside the bound `value` is: bound − value (maximum) or value − bound (minimum).
  [[nodiscard]] double margin(double value) const;
  /// Of two values, true when `a` is strictly better than `b`.
  [[nodiscard]] bool better(double a, double b) const;
};
/// Parses "kl_mean=1e-3"; `option` (e.g. "--key-budget") prefixes errors.
Expected<Budget> parseBudget(std::string_view text, std::string_view option);
/// "kl_mean ≤ 0.001" / "top1_agreement ≥ 0.99".
std::string budgetText(const Budget& budget);

/// The built-in candidate spec strings: formats × bit widths × axes × group sizes, then every
/// preset's key and value spec as it resolves for `shape` (presets that do not apply to the
/// shape are left out; duplicates removed by canonical string).
std::vector<std::string> defaultCandidates(const KvShape& shape);
/// Parses a candidate file: one spec per line, `#` starts a comment, blank lines ignored.
/// Errors name `origin` and the line.
Expected<std::vector<std::string>> parseCandidateList(std::string_view text, std::string_view origin);

/// A setting the search must beat (e.g. what an engine's flags store): its K and V specs are
/// measured with the candidates, and the result says whether the choice is cheaper.
struct SearchBaseline {
  std::string label;      ///< e.g. the engine string "llama.cpp -ctk q4_0 -ctv q8_0"
  std::string keySpec;    ///< spec string for keys
  std::string valueSpec;  ///< spec string for values
};

/// What to search.
struct SearchOptions {
  std::optional<Budget> keyBudget;    ///< none: keys are not searched and stay exact (`none`)
  std::optional<Budget> valueBudget;  ///< none: values are not searched and stay exact
  std::optional<Plan> fixedKey;       ///< keys not searched are stored under this spec or plan (not with keyBudget)
  std::optional<Plan> fixedValue;     ///< the same for values
  std::vector<std::string> candidates;  ///< spec strings; empty = defaultCandidates()
  bool perLayer = false;       ///< also choose (and report as the result) a spec per layer
  std::vector<int> layers;     ///< layers to search, ascending; empty = all
  int sequence = 0;            ///< batch index
  int lastQueries = 0;         ///< 0 = all queries, N = the last N
  std::optional<SearchBaseline> baseline;  ///< measured alongside; the result compares against it
};

/// One candidate for one tensor.
struct CandidateResult {
  std::string spec;              ///< canonical spec string
  std::string skipped;           ///< non-empty: not applicable to this dump, and why
  double bitsPerElement = 0;     ///< §5 at the dump's shape
  /// Per searched layer (same order as SearchResult::layers): the case's metrics over the
  /// layer's kv heads (means; *_max fields the max), key_only for K, value_only for V.
  std::vector<AttentionMetrics> layerMetrics;
  double worst = 0;              ///< the budget field's worst value over layers
  bool meets = false;            ///< worst meets the budget
  bool pareto = false;           ///< no other candidate has ≤ bits and a better-or-equal worst
};

/// The choice for one tensor under its budget.
struct TensorChoice {
  bool searched = false;          ///< false when no budget was given
  Budget budget;
  bool found = false;             ///< some candidate meets the budget on every searched layer
  int chosen = -1;                ///< index into `candidates`, -1 when none
  std::string spec;               ///< the chosen canonical spec (not searched: "none" or the fixed plan)
  double bitsPerElement = 16;
  double worst = 0;               ///< its budget field's worst value over layers
  double margin = 0;              ///< budget.margin(worst)
  std::vector<int> limitingLayers;  ///< layers whose own cheapest passing candidate is this one
  std::vector<CandidateResult> candidates;  ///< every candidate, ascending bits (Pareto plot)
  int baseline = -1;              ///< index into `candidates` of the baseline's spec; -1 without one
  /// With a baseline: the chosen spec meets the budget with fewer bits per element than the
  /// baseline (false when the baseline is itself the cheapest passing candidate or none passes).
  bool beatsBaseline = false;
};

/// One layer's own choice (the cheapest candidate meeting the budget on that layer alone).
struct LayerSpecChoice {
  bool found = false;
  int candidate = -1;             ///< index into the tensor's candidates
  std::string spec;               ///< "fp16" stand-in when none is found
  double bitsPerElement = 16;
  double metric = 0;              ///< the budget field on this layer
};

/// Per-layer choices.
struct LayerChoice {
  int layer = 0;
  LayerSpecChoice key;
  LayerSpecChoice value;
};

/// The chosen pair's three cases on one layer (means over kv heads; *_max the max).
struct JointLayer {
  int layer = 0;
  std::string keySpec;
  std::string valueSpec;
  AttentionCases attention;
};

/// Everything a search produced.
struct SearchResult {
  DumpInfo dump;
  std::vector<int> layers;        ///< searched layers
  int lastQueries = 0;
  TensorChoice key;
  TensorChoice value;
  bool perLayer = false;
  std::vector<LayerChoice> layerChoices;  ///< always filled; the result in --per-layer mode
  std::vector<int> forcedKeyLayers;       ///< layers whose own K choice costs more than the cheapest layer's
  std::vector<int> forcedValueLayers;     ///< the same for V
  double bytesPerTokenBaseline = 0;  ///< fp16 K+V bytes per token over the searched layers
  double bytesPerTokenChosen = 0;    ///< chosen specs (per layer in --per-layer mode), same layers
  std::vector<JointLayer> joint;     ///< the chosen pair per layer (empty when nothing was found)
  std::optional<AttentionCases> jointSummary;  ///< over all joint (layer, kv head) entries
  std::string baselineLabel;         ///< the baseline's label; empty without one
  std::vector<std::string> notes;
};

/// A side given both a budget and a fixed plan is refused naming the flags; a fixed plan must be
/// valid for the dump (its layers, kv heads, head dim). Used by the uniform and the plan search.
Status validateFixedSides(const DumpInfo& info, const std::optional<Budget>& keyBudget,
                          const std::optional<Plan>& fixedKey, const std::optional<Budget>& valueBudget,
                          const std::optional<Plan>& fixedValue);

/// Runs the search. Each searched layer is read once for the candidate sweep (and once more for
/// the joint result); each candidate is quantized once per layer. Cancels via `progress`.
Expected<SearchResult> searchBudgets(const Dump& dump, const SearchOptions& options,
                                     const Progress& progress = {});

}  // namespace kvscope
