// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli search`: the cheapest K spec and V spec within attention budgets
// (docs/search-and-capacity.md).
#include <iostream>
#include <memory>
#include <string>
#include <tuple>

#include "app/cli/command.h"
#include "core/report/eval.h"
#include "core/search/search.h"
#include "core/search/search_format.h"
#include "core/util/atomic_file.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string dump, mapping;
  std::string keyBudget, valueBudget;
  std::string key, value;  ///< a fixed (unsearched) side's spec or plan
  std::string candidates = "default";
  bool perLayer = false;
  std::string layers = "all";
  std::string queries = "all";
  int sequence = 0;
  std::string json;
};

Expected<SearchOptions> searchOptions(const Options& o, const DumpInfo& info) {
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

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.add_option("dump", o->dump, "the KV dump (HDF5, with queries)")->required();
  sub.add_option("--key-budget", o->keyBudget,
                 "bound on a key_only metric, e.g. kl_mean=1e-3 (top1_agreement is a minimum)");
  sub.add_option("--value-budget", o->valueBudget,
                 "bound on a value_only metric, e.g. output_rel_error=0.02");
  sub.add_option("--key", o->key,
                 "without --key-budget: store keys under this spec or plan in the joint result (default: exact)");
  sub.add_option("--value", o->value,
                 "without --value-budget: store values under this spec or plan in the joint result (default: exact)");
  sub.add_option("--candidates", o->candidates,
                 "'default' or a file of spec strings, one per line, # comments");
  sub.add_flag("--per-layer", o->perLayer, "choose a spec per layer");
  sub.add_option("--layers", o->layers, "layers to search: all (default) or a list like 0,2,5-7");
  sub.add_option("--queries", o->queries, "queries for the metrics: all (default) or last:N");
  sub.add_option("--sequence", o->sequence, "sequence (batch index), default 0");
  sub.add_option("--mapping", o->mapping, "mapping file for a non-canonical dump");
  sub.add_option("--json", o->json, "write JSON to FILE ('-' = standard output)");
  return [o]() -> int {
    auto dump = openDump(o->dump, o->mapping);
    if (!dump) return fail(dump.status());
    auto options = searchOptions(*o, (*dump)->info());
    if (!options) return fail(options.status());
    auto result = searchBudgets(**dump, *options, cancellationProgress());
    if (!result) return fail(result.status());
    if (!o->json.empty()) {
      if (Status s = writeOutput(o->json, searchToJson(*result)); !s.isOk()) return fail(s);
      return kExitOk;  // like eval: text only when no JSON was asked for
    }
    std::cout << searchToText(*result);
    return kExitOk;
  };
};

const Registrar registrar{"search", "cheapest K and V specs within attention-metric budgets", setup};

}  // namespace
}  // namespace kvscope::cli
