// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli eval`: quantize a dump's K and V with specs, plans or a preset and report the damage
// (quantization.md §8; docs/report.md).
#include <iostream>
#include <memory>
#include <string>

#include "app/cli/command.h"
#include "core/command/eval_request.h"
#include "core/engine/presets.h"
#include "core/report/eval.h"
#include "core/report/report_format.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string dump;
  SpecChoice spec;
  std::string mapping;
  EvalRequest request;  ///< --layers, --sequence, --queries, --nonfinite (the setting comes from `spec`)
  std::string json;
  std::string csv;
};

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  addInputOption(sub, "dump", o->dump, "the KV dump (HDF5)")->required();
  sub.add_option("--key", o->spec.key,
                 "spec or plan for keys, e.g. int4,axis=channel,group=32 or q4_0;first2+last2:q8_0");
  sub.add_option("--value", o->spec.value, "spec or plan for values, e.g. int4,axis=token,group=32");
  sub.add_option("--preset", o->spec.preset, "a named K/V setting (see 'kvscope-cli presets --dump DUMP')");
  addEngineOptions(sub, o->spec);
  addInputOption(sub, "--mapping", o->mapping, "mapping file for a non-canonical dump");
  sub.add_option("--layers", o->request.layers, "layers to evaluate: all (default) or a list like 0,2,5-7");
  sub.add_option("--sequence", o->request.sequence, "sequence (batch index) to evaluate (default 0)");
  sub.add_option("--queries", o->request.queries, "queries for attention metrics: all (default) or last:N");
  sub.add_option("--nonfinite", o->request.nonfinite,
                 "NaN/Inf in the dump: refuse (default) or skip-heads (evaluate the other heads)");
  addOutputOption(sub, "--json", o->json, "write the JSON report to FILE ('-' = standard output)");
  addOutputOption(sub, "--csv", o->csv, "write one CSV row per (layer, kv head) to FILE ('-' = standard output)");
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
    EvalRequest request = o->request;
    request.setting = SettingText{o->spec.key, o->spec.value, o->spec.preset, o->spec.engine};
    auto options = evalOptionsFor(request, info, *specs);
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
