// SPDX-License-Identifier: GPL-3.0-or-later
// Plan search: the cheapest plan (a K spec and a V spec per layer, chosen from the candidates)
// whose damage meets the key and value budgets, optionally only plans an engine's flags can
// express, then the chosen plans evaluated together (docs/search-and-capacity.md, "Plans").
// Built on the sensitivity map: every (layer, candidate) is measured once; combinations are
// never re-measured, they are added up.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/io/dump.h"
#include "core/quant/plan.h"
#include "core/report/eval.h"
#include "core/search/search.h"
#include "core/sensitivity/sensitivity.h"
#include "core/util/status.h"

namespace kvscope {

// ---- The solver, on tables of numbers ------------------------------------------------------

/// One option of one layer: its cost (bits per element) and its damage on up to two budgets.
/// A NaN damage on an active bound makes the option unavailable on that layer.
struct PlanOption {
  double cost = 0;
  std::array<double, 2> damage{0, 0};
};

/// A bound on one damage dimension, aggregated over the layers: the mean (maximum = false) or
/// the maximum (maximum = true) over layers must be ≤ bound. Inactive bounds constrain nothing.
struct PlanBound {
  bool active = false;
  bool maximum = false;
  double bound = 0;
};

/// The solver's answer.
struct PlanSolution {
  bool found = false;              ///< some choice meets every active bound
  bool exact = true;               ///< false when the state limit thinned the search (then a heuristic)
  std::vector<int> choice;         ///< per layer, the index of its option
  double cost = 0;                 ///< Σ cost over layers
  std::array<double, 2> aggregate{0, 0};  ///< each dimension's mean (or max) over layers
};

/// Per layer one option, minimising the total cost subject to every active bound; among equal
/// costs the smaller aggregate of dimension 0, then 1. Exact: a dynamic programme over layers
/// that keeps every state (cost, damage so far) no other state dominates and drops states that
/// can no longer meet a bound. `stateLimit` caps the states kept per layer; a search that hits
/// it keeps an even sample of them and reports exact = false.
PlanSolution cheapestPlan(const std::vector<std::vector<PlanOption>>& layers,
                          const std::array<PlanBound, 2>& bounds, size_t stateLimit = 200000);

// ---- Plans from a dump -----------------------------------------------------------------------

// PlanShape (what plans may look like: kvscope's plans, or what an engine's flags can express)
// and planShapeName live in core/engine/engine.h with the engine rows.

/// What to search.
struct PlanSearchOptions {
  std::optional<Budget> keyBudget;    ///< none: keys are not searched (exact, or fixedKey)
  std::optional<Budget> valueBudget;  ///< none: values are not searched (exact, or fixedValue)
  std::optional<Plan> fixedKey;       ///< an unsearched side's plan in the joint result
  std::optional<Plan> fixedValue;
  std::vector<std::string> candidates;  ///< spec strings; empty = sensitivityCandidates()
  /// "" = any plan; otherwise an engine name or alias (engineTable): the row's plan shape and
  /// cache types (EngineDef::planTypes), or uniform candidates for a row without plan types.
  std::string engine;
  int sequence = 0;
  int lastQueries = 0;
  bool evaluateJoint = true;  ///< evaluate the chosen plans together (eval's report)
};

/// One layer of the chosen plan.
struct PlanLayerChoice {
  int layer = 0;
  std::string keySpec, valueSpec;        ///< canonical specs
  double keyBits = 16, valueBits = 16;   ///< bits per element
  double keyDamage = 0, valueDamage = 0; ///< the budget field on this layer (NaN: side not searched)
};

/// A uniform pair (one K spec, one V spec for every layer) with its predicted damage.
struct UniformPair {
  bool found = false;
  std::string keySpec, valueSpec;
  double bytesPerToken = 0;              ///< K+V over all layers
  double keyDamage = 0, valueDamage = 0; ///< budget fields aggregated like the plan's
  bool meets = false;                    ///< within both budgets
};

// EngineFlags (an engine's own flags for the chosen plans, or why it cannot express them) lives in
// core/engine/engine.h with the rows that write them.

/// Everything a plan search produced.
struct PlanSearchResult {
  DumpInfo dump;
  PlanShape shape = PlanShape::PerLayer;
  std::string engine;                  ///< canonical engine name; empty for any plan
  std::optional<Budget> keyBudget, valueBudget;
  bool found = false;                  ///< a plan meets both budgets
  bool exact = true;                   ///< the solver's optimality (false: heuristic, see notes)
  Plan key, value;                     ///< the chosen plans (valid when found)
  std::string keyPlan, valuePlan;      ///< their canonical strings
  double keyBits = 16, valueBits = 16; ///< bits per element of each plan (§12)
  double keyDamage = 0, valueDamage = 0;  ///< predicted aggregate (mean or max over layers) of each budget field
  double bytesPerToken = 0;            ///< K+V over all layers under the plans
  double bytesPerTokenBaseline = 0;    ///< fp16 K+V
  std::vector<PlanLayerChoice> layers; ///< every layer
  UniformPair uniform;                 ///< the cheapest uniform pair within the budgets (same candidates)
  UniformPair uniformAtBytes;          ///< the uniform pair of the plan's bytes per token or the next larger
  std::vector<EngineFlags> engineFlags;  ///< every plan engine's flags (planEngines()), or why not
  std::optional<EvalReport> joint;     ///< the chosen plans evaluated together
  std::vector<std::string> notes;
};

/// Runs the sensitivity map over the candidates (or the engine's own types) and searches it.
/// Cancels via `progress`.
Expected<PlanSearchResult> planSearch(const Dump& dump, const PlanSearchOptions& options,
                                      const Progress& progress = {});
/// The search on a map already computed (whose candidates must hold the specs the shape needs:
/// planCandidates()); no joint evaluation. The GUI and the bench reuse a map this way.
Expected<PlanSearchResult> planFromMap(const SensitivityMap& map, const PlanSearchOptions& options);
/// The candidate specs planSearch maps for `options` at the dump's shape (the engine's types
/// for an engine, else options.candidates or sensitivityCandidates()).
Expected<std::vector<std::string>> planCandidates(const DumpInfo& info, const PlanSearchOptions& options);

/// The ladder (sensitivityCandidates()) plus the uniform search's chosen K and V specs of
/// `search`. Over these a plan for the same budgets never costs more bytes per token than that
/// search's pair: the pair is a plan, and a side whose worst layer meets a bound meets it on the
/// mean over layers too (the plan search's rule). The GUI's plan search uses them.
std::vector<std::string> planCandidatesWith(const SearchResult& search);

/// The plan of a spec per layer, compact: the most frequent spec as the base, each other spec
/// on its runs of layers (`N` or `N-M`, joined by '+'). resolve(compactPlan(s), s.size()) == s.
Plan compactPlan(const std::vector<QuantSpec>& perLayer);

/// Each plan engine's flags (planEngines(), table order) for `key`/`value` at the dump's shape.
std::vector<EngineFlags> engineFlagsFor(const Plan& key, const Plan& value, const DumpInfo& info);

/// JSON (`kvscope_plan_search: 1`, fields in docs/search-and-capacity.md); the joint report
/// is eval's JSON under "joint".
std::string planSearchToJson(const PlanSearchResult& result);
/// A readable summary: plans, per-layer table, uniform comparison, engine flags, joint summary.
std::string planSearchToText(const PlanSearchResult& result);

}  // namespace kvscope
