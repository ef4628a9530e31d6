// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli eval`: quantize a dump's K and V with specs, plans or a preset and report the damage
// (quantization.md §8; docs/report.md).
#include <iostream>
#include <memory>
#include <string>

#include "app/cli/command.h"
#include "core/engine/presets.h"
#include "core/report/eval.h"
#include "core/report/report_format.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string dump;
  SpecChoice spec;
  std::string mapping;
  std::string layers = "all";
  int sequence = 0;
  std::string queries = "all";
  std::string nonfinite = "refuse";
  std::string json;
  std::string csv;
};

/// Builds EvalOptions from the command line; every error names the option and what is allowed.
Expected<EvalOptions> evalOptions(const Options& o, const DumpInfo& info, const ResolvedPlans& resolved) {
  EvalOptions options;
  // A range beyond the dump's layers is the flag's error, named as such.
  if (auto k = resolve(resolved.plans.key, info.layers); !k) return k.status().withContext("--key");
  if (auto v = resolve(resolved.plans.value, info.layers); !v) return v.status().withContext("--value");
  options.key = resolved.plans.key;
  options.value = resolved.plans.value;
  options.preset = o.spec.preset;
  options.engine = o.spec.engine;
  auto layers = parseLayerList(o.layers, info.layers);
  if (!layers) return layers.status();
  options.layers = *layers;
  options.sequence = o.sequence;
  auto queries = parseQueryCount(o.queries);
  if (!queries) return queries.status();
  options.lastQueries = *queries;
  auto policy = parseNonFinitePolicy(o.nonfinite);
  if (!policy) return policy.status().withContext("--nonfinite");
  options.nonFinite = *policy;
  return options;
}

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.add_option("dump", o->dump, "the KV dump (HDF5)")->required();
  sub.add_option("--key", o->spec.key,
                 "spec or plan for keys, e.g. int4,axis=channel,group=32 or q4_0;first2+last2:q8_0");
  sub.add_option("--value", o->spec.value, "spec or plan for values, e.g. int4,axis=token,group=32");
  sub.add_option("--preset", o->spec.preset, "a named K/V setting (see 'kvscope-cli presets --dump DUMP')");
  addEngineOptions(sub, o->spec);
  sub.add_option("--mapping", o->mapping, "mapping file for a non-canonical dump");
  sub.add_option("--layers", o->layers, "layers to evaluate: all (default) or a list like 0,2,5-7");
  sub.add_option("--sequence", o->sequence, "sequence (batch index) to evaluate (default 0)");
  sub.add_option("--queries", o->queries, "queries for attention metrics: all (default) or last:N");
  sub.add_option("--nonfinite", o->nonfinite,
                 "NaN/Inf in the dump: refuse (default) or skip-heads (evaluate the other heads)");
  sub.add_option("--json", o->json, "write the JSON report to FILE ('-' = standard output)");
  sub.add_option("--csv", o->csv, "write one CSV row per (layer, kv head) to FILE ('-' = standard output)");
  return [o]() -> int {
    if (o->json == "-" && o->csv == "-") {
      return fail(Status::invalidArgument("--json - and --csv - cannot both use standard output"));
    }
    auto dump = openDump(o->dump, o->mapping);
    if (!dump) return fail(dump.status());
    const DumpInfo& info = (*dump)->info();
    const KvShape shape{info.headDim, info.layers, info.kvHeads, info.model};
    auto specs = resolvePlans(o->spec, shape);
    if (!specs) return fail(specs.status());
    if (o->spec.explain) {
      std::cout << explainText(o->spec, *specs, shape);
      return kExitOk;
    }
    if (!o->spec.engine.empty()) printNotes(*specs);
    auto options = evalOptions(*o, info, *specs);
    if (!options) return fail(options.status());
    auto report = evaluate(**dump, *options, cancellationProgress());
    if (!report) return fail(report.status());
    // Files are written only after the whole evaluation: a cancelled run leaves none behind.
    if (!o->json.empty()) {
      if (Status s = writeOutput(o->json, toJson(*report)); !s.isOk()) return fail(s);
    }
    if (!o->csv.empty()) {
      if (Status s = writeOutput(o->csv, toCsv(*report)); !s.isOk()) return fail(s);
    }
    if (o->json.empty() && o->csv.empty()) {
      std::cout << toText(*report);
    } else {
      for (const std::string& note : report->notes) std::cerr << "kvscope-cli: note: " << note << "\n";
    }
    return kExitOk;
  };
};

const Registrar registrar{"eval", "quantize a dump's K and V and report tensor and attention damage", setup};

}  // namespace
}  // namespace kvscope::cli
