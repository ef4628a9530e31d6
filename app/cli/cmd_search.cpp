// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli search`: the cheapest K spec and V spec within attention budgets
// (docs/search-and-capacity.md).
#include <iostream>
#include <memory>
#include <string>
#include <tuple>

#include "app/cli/command.h"
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

#include "core/model/e2e.h"
#include "core/model/model.h"
#include "core/model/record.h"
#include "core/report/eval.h"
#include "core/sensitivity/plan_search.h"
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
  SpecChoice baseline;  ///< --engine or --preset: the setting the choice must beat
  bool plan = false;    ///< --plan: the cheapest per-layer plan (--engine: what that engine can express)
  bool e2e = false;     ///< --e2e: the plan against the uniform pair of its bytes, end to end
  std::string model;    ///< --model: the checkpoint for --e2e (default: the dump's model_path)
};

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

struct E2ePair {
  E2eResult plan, uniform;
  std::string uniformLabel;
};

// --e2e: the plan and the uniform pair of the same (or the next larger) bytes, replayed.
Expected<E2ePair> runE2eCheck(const Options& o, const Dump& dump, const PlanSearchResult& r) {
  const DumpInfo& info = dump.info();
  const std::string modelPath = o.model.empty() ? info.modelPath : o.model;
  if (modelPath.empty()) {
    return Status::invalidArgument("--e2e: " + info.path + " has no model_path attribute (only dumps written by "
                                   "'kvscope-cli record' carry one); give --model CHECKPOINT");
  }
  if (!r.found) return Status::invalidArgument("--e2e: no plan was found, nothing to check");
  if (!r.uniformAtBytes.found) {
    return Status::invalidArgument("--e2e: no uniform pair of the candidates has the plan's bytes per token or more");
  }
  auto model = Model::load(modelPath);
  if (!model) return model.status().withContext("--e2e");
  auto kp = parsePlan(r.uniformAtBytes.keySpec);
  auto vp = parsePlan(r.uniformAtBytes.valueSpec);
  if (!kp || !vp) return Status::internal("--e2e: the uniform pair does not parse");
  std::vector<E2eSetting> settings(2);
  settings[0].label = "plan";
  settings[0].key = r.key;
  settings[0].value = r.value;
  settings[1].label = "uniform";
  settings[1].key = *kp;
  settings[1].value = *vp;
  auto results = runE2e(*model, dump, settings, {}, cliProgress("search --e2e"));
  if (!results) return results.status().withContext("--e2e: " + info.path);
  E2ePair out;
  out.plan = std::move((*results)[0]);
  out.uniform = std::move((*results)[1]);
  out.uniformLabel = "K " + r.uniformAtBytes.keySpec + ", V " + r.uniformAtBytes.valueSpec;
  return out;
}

std::string e2eText(const E2ePair& p, const PlanSearchResult& r) {
  std::ostringstream os;
  char line[400];
  os << "\nend to end (" << p.plan.model << ", " << p.plan.tokens << " tokens replayed)\n";
  std::snprintf(line, sizeof line, "%-9s  %10s  %12s  %12s  %8s  %9s\n", "setting", "bytes/tok", "kl_mean", "kl_max",
                "top1", "ppl_ratio");
  os << line;
  for (int i = 0; i < 2; ++i) {
    const E2eResult& e = i == 0 ? p.plan : p.uniform;
    std::snprintf(line, sizeof line, "%-9s  %10.1f  %12.4g  %12.4g  %8.4f  %9.5f\n", i == 0 ? "plan" : "uniform",
                  i == 0 ? r.bytesPerToken : r.uniformAtBytes.bytesPerToken, e.summary.klMean, e.summary.klMax,
                  e.summary.top1Agreement, e.summary.pplRatio);
    os << line;
  }
  os << "plan:    K " << r.keyPlan << ", V " << r.valuePlan << "\nuniform: " << p.uniformLabel << "\n";
  for (const std::string& w : p.plan.warnings) os << "warning: " << w << "\n";
  return os.str();
}

nlohmann::ordered_json e2eJson(const E2ePair& p, const PlanSearchResult& r) {
  auto one = [](const E2eResult& e, const std::string& key, const std::string& value, double bytes) {
    return nlohmann::ordered_json{{"key", key},
                                  {"value", value},
                                  {"bytes_per_token", bytes},
                                  {"kl_mean", e.summary.klMean},
                                  {"kl_max", e.summary.klMax},
                                  {"top1_agreement", e.summary.top1Agreement},
                                  {"ppl_ratio", e.summary.pplRatio}};
  };
  return {{"model", p.plan.model},
          {"tokens", p.plan.tokens},
          {"plan", one(p.plan, r.keyPlan, r.valuePlan, r.bytesPerToken)},
          {"uniform", one(p.uniform, r.uniformAtBytes.keySpec, r.uniformAtBytes.valueSpec,
                          r.uniformAtBytes.bytesPerToken)}};
}

int runPlan(const Options& o, const Dump& dump, const SearchOptions& s) {
  if (o.perLayer) return fail(Status::invalidArgument("--plan chooses a spec per layer already; drop --per-layer"));
  if (o.layers != "all") return fail(Status::invalidArgument("--plan: a plan covers every layer; drop --layers"));
  if (!o.baseline.preset.empty() || o.baseline.explain) {
    return fail(Status::invalidArgument("--plan takes --engine NAME (the engine the plan must fit), not --preset or --explain"));
  }
  auto engine = planEngine(o.baseline.engine);
  if (!engine) return fail(engine.status());
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
    return fail(Status::invalidArgument("--plan --engine " + p.engine + " searches that engine's own cache types; drop --candidates"));
  }
  auto result = planSearch(dump, p, cancellationProgress());
  if (!result) return fail(result.status());
  std::optional<E2ePair> e2e;
  if (o.e2e) {
    auto e = runE2eCheck(o, dump, *result);
    if (!e) return fail(e.status());
    e2e = std::move(*e);
  }
  if (!o.json.empty()) {
    std::string text = planSearchToJson(*result);
    if (e2e) {
      auto j = nlohmann::ordered_json::parse(text);
      j["e2e"] = e2eJson(*e2e, *result);
      text = j.dump(2) + "\n";
    }
    if (Status st = writeOutput(o.json, text); !st.isOk()) return fail(st);
    return kExitOk;
  }
  std::cout << planSearchToText(*result);
  if (e2e) std::cout << e2eText(*e2e, *result);
  return kExitOk;
}

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
  sub.add_option("--preset", o->baseline.preset, "a named K/V setting the choice must beat (a baseline)");
  addEngineOptions(sub, o->baseline);
  sub.add_flag("--plan", o->plan,
               "the cheapest plan (a K and a V spec per layer) within the budgets; with --engine NAME only "
               "plans that engine's flags express (llama.cpp, ik_llama.cpp, vllm)");
  sub.add_flag("--e2e", o->e2e, "with --plan: replay the plan and the uniform pair of its bytes through the model");
  sub.add_option("--model", o->model, "with --e2e: the llama2.c checkpoint (default: the dump's model_path)");
  return [o]() -> int {
    auto dump = openDump(o->dump, o->mapping);
    if (!dump) return fail(dump.status());
    const DumpInfo& info = (*dump)->info();
    auto options = searchOptions(*o, info);
    if (!options) return fail(options.status());
    if (o->plan) return runPlan(*o, **dump, *options);
    if (o->e2e || !o->model.empty()) return fail(Status::invalidArgument("--e2e and --model go with --plan"));
    if (!o->baseline.engine.empty() || !o->baseline.preset.empty()) {
      const KvShape shape{info.headDim, info.layers, info.kvHeads, info.model};
      auto base = resolvePlans(o->baseline, shape);
      if (!base) return fail(base.status());
      if (o->baseline.explain) {
        std::cout << explainText(o->baseline, *base, shape);
        return kExitOk;
      }
      // The baseline is measured like a candidate, and candidates are one spec for every layer.
      for (const Plan* p : {&base->plans.key, &base->plans.value}) {
        if (!isUniform(*p))
          return fail(Status::invalidArgument("'" + base->label + "' stores '" + toString(*p) +
                                              "', a spec per layer; search compares against a baseline "
                                              "with one spec for every layer"));
      }
      if (!o->baseline.engine.empty()) printNotes(*base);
      options->baseline = SearchBaseline{base->label, toString(base->plans.key.base), toString(base->plans.value.base)};
    } else if (o->baseline.explain) {
      return fail(Status::invalidArgument("--explain explains --engine or --preset; give one"));
    }
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
