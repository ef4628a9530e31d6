// SPDX-License-Identifier: GPL-3.0-or-later
// `search`'s options as the user writes them, turned into SearchOptions (budgets) or
// PlanSearchOptions (--plan) for a dump (the CLI and Python share it).
#pragma once

#include <string>

#include "core/engine/setting.h"
#include "core/io/dump.h"
#include "core/search/search.h"
#include "core/sensitivity/plan_search.h"
#include "core/util/status.h"

namespace kvscope {

/// What `search` was given; the strings are the flags' (docs/search-and-capacity.md).
struct SearchRequest {
  std::string keyBudget, valueBudget;   ///< --key-budget, --value-budget: METRIC=VALUE
  std::string key, value;               ///< --key, --value: an unsearched side's spec or plan
  std::string candidates = "default";   ///< --candidates: default or a file of specs
  bool perLayer = false;                ///< --per-layer
  std::string layers = "all";           ///< --layers
  std::string queries = "all";          ///< --queries
  int sequence = 0;                     ///< --sequence
  SettingText baseline;                 ///< --preset or --engine (its preset and engine fields)
  bool explain = false;                 ///< --explain (the CLI's; refused with --plan)
  bool plan = false;                    ///< --plan
};

/// The SearchOptions of `request` on a dump of `info` (budgets, fixed sides, candidates, layers,
/// queries), without the baseline; errors name the flag.
Expected<SearchOptions> searchOptionsFor(const SearchRequest& request, const DumpInfo& info);

/// The PlanSearchOptions of a --plan request from its SearchOptions; refuses the flags a plan
/// search does not take, naming them.
Expected<PlanSearchOptions> planSearchOptionsFor(const SearchRequest& request, const SearchOptions& options);

/// Sets options.baseline from the baseline setting resolved for the dump (resolveSetting): a
/// baseline is measured like a candidate, so it must store one spec for every layer.
Status setSearchBaseline(const ResolvedSetting& baseline, SearchOptions& options);

}  // namespace kvscope
