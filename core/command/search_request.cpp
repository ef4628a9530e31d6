// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/command/search_request.h"

#include <sstream>
#include <tuple>

#include "core/command/layer_list.h"
#include "core/quant/plan.h"
#include "core/report/eval.h"
#include "core/util/atomic_file.h"

namespace kvscope {

namespace {

// --plan: the engine name alone (its flags are what the search writes).
Expected<std::string> planEngine(const std::string& text) {
  if (text.empty()) return std::string();
  std::istringstream in(text);
  std::string name, extra;
  in >> name >> extra;
  if (!extra.empty()) {
    return Status::invalidArgument("--engine \"" + text + "\": with --plan, --engine names the engine whose flags "
                                   "the plan must fit (e.g. --engine vllm); the search writes its flags");
  }
  return name;
}

}  // namespace

Expected<SearchOptions> searchOptionsFor(const SearchRequest& o, const DumpInfo& info) {
  SearchOptions s;
  if (o.keyBudget.empty() && o.valueBudget.empty()) {
    return Status::invalidArgument(
        "give --key-budget METRIC=VALUE and/or --value-budget METRIC=VALUE, e.g. "
        "--key-budget kl_mean=1e-3 --value-budget output_rel_error=0.02");
  }
  if (!o.keyBudget.empty()) {
    auto b = parseBudget(o.keyBudget, "--key-budget");
    if (!b) return b.status();
    s.keyBudget = *b;
  }
  if (!o.valueBudget.empty()) {
    auto b = parseBudget(o.valueBudget, "--value-budget");
    if (!b) return b.status();
    s.valueBudget = *b;
  }
  for (const auto& [text, out, flag] : {std::tuple{&o.key, &s.fixedKey, "--key"},
                                        std::tuple{&o.value, &s.fixedValue, "--value"}}) {
    if (text->empty()) continue;
    auto plan = parsePlan(*text);
    if (!plan) return plan.status().withContext(flag);
    *out = *plan;
  }
  if (o.candidates != "default") {
    auto text = readTextFile(o.candidates);
    if (!text) return text.status();
    auto list = parseCandidateList(*text, o.candidates);
    if (!list) return list.status();
    s.candidates = *list;
  }
  auto layers = parseLayerList(o.layers, info.layers);
  if (!layers) return layers.status();
  s.layers = *layers;
  auto queries = parseQueryCount(o.queries);
  if (!queries) return queries.status();
  s.lastQueries = *queries;
  s.perLayer = o.perLayer;
  s.sequence = o.sequence;
  return s;
}

Expected<PlanSearchOptions> planSearchOptionsFor(const SearchRequest& o, const SearchOptions& s) {
  if (o.perLayer) return Status::invalidArgument("--plan chooses a spec per layer already; drop --per-layer");
  if (o.layers != "all") return Status::invalidArgument("--plan: a plan covers every layer; drop --layers");
  if (!o.baseline.preset.empty() || o.explain) {
    return Status::invalidArgument("--plan takes --engine NAME (the engine the plan must fit), not --preset or --explain");
  }
  auto engine = planEngine(o.baseline.engine);
  if (!engine) return engine.status();
  PlanSearchOptions p;
  p.keyBudget = s.keyBudget;
  p.valueBudget = s.valueBudget;
  p.fixedKey = s.fixedKey;
  p.fixedValue = s.fixedValue;
  p.candidates = s.candidates;
  p.engine = *engine;
  p.sequence = s.sequence;
  p.lastQueries = s.lastQueries;
  if (!p.engine.empty() && !s.candidates.empty()) {
    return Status::invalidArgument("--plan --engine " + p.engine +
                                   " searches that engine's own cache types; drop --candidates");
  }
  return p;
}

Status setSearchBaseline(const ResolvedSetting& base, SearchOptions& options) {
  // The baseline is measured like a candidate, and candidates are one spec for every layer.
  for (const Plan* p : {&base.plans.key, &base.plans.value}) {
    if (!isUniform(*p))
      return Status::invalidArgument("'" + base.label + "' stores '" + toString(*p) +
                                     "', a spec per layer; search compares against a baseline "
                                     "with one spec for every layer");
  }
  options.baseline = SearchBaseline{base.label, toString(base.plans.key.base), toString(base.plans.value.base)};
  return Status::ok();
}

}  // namespace kvscope
