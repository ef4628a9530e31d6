// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli sensitivity`: per (layer, kv head) and per side, the attention damage of each
// candidate spec (docs/sensitivity.md).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "app/cli/command.h"
#include "core/command/sensitivity_request.h"
#include "core/search/search.h"
#include "core/sensitivity/sensitivity.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string dump, mapping;
  SensitivityRequest request;  ///< --candidates, --side, --layers, --queries, --sequence
  std::string metric = "kl_mean";
  std::string json, csv;
  bool progress = false;
};

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  addInputOption(sub, "dump", o->dump, "the KV dump (HDF5, with queries)")->required();
  addInputOption(sub, "--candidates", o->request.candidates,
                 "default (an 8-to-2-bit ladder), search (the budget search's set), a file of "
                 "specs (one per line, # comments) or SPEC;SPEC;…");
  sub.add_option("--metric", o->metric,
                 "field shown in the text grid: kl_mean (default), kl_max, score_mae, score_max, "
                 "top1_agreement, output_rel_error (V always shows output_rel_error)");
  sub.add_option("--side", o->request.side, "key, value or both (default)");
  sub.add_option("--layers", o->request.layers, "layers to map: all (default) or a list like 0,2,5-7");
  sub.add_option("--queries", o->request.queries, "queries for the metrics: all (default) or last:N");
  sub.add_option("--sequence", o->request.sequence, "sequence (batch index), default 0");
  addInputOption(sub, "--mapping", o->mapping, "mapping file for a non-canonical dump");
  addOutputOption(sub, "--json", o->json, "write the map as JSON to FILE ('-' = standard output)");
  addOutputOption(sub, "--csv", o->csv, "write one CSV row per (side, layer, kv head, candidate) to FILE ('-' = standard output)");
  sub.add_flag("--progress", o->progress, "print the fraction done to standard error");
  return [o]() -> int {
    if (o->json == "-" && o->csv == "-") {
      return fail(Status::invalidArgument("--json - and --csv - cannot both use standard output"));
    }
    auto field = parseAttentionField(o->metric);
    if (!field) return fail(field.status().withContext("--metric"));
    auto dump = openDump(o->dump, o->mapping);
    if (!dump) return fail(dump.status());
    auto options = sensitivityOptionsFor(o->request, (*dump)->info());
    if (!options) return fail(options.status());
    Progress progress = cancellationProgress();
    if (o->progress) {
      auto last = std::make_shared<int>(-1);
      progress = [last](double f, std::string_view) {
        const int percent = static_cast<int>(f * 100);
        if (percent != *last) {
          *last = percent;
          std::fprintf(stderr, "\rsensitivity: %3d%%", percent);
          if (percent >= 100) std::fprintf(stderr, "\n");
        }
        return !interrupted();
      };
    }
    auto map = sensitivityMap(**dump, *options, progress);
    if (!map) return fail(map.status());
    // Files are written only after the whole map: a cancelled run leaves none behind.
    if (!o->json.empty()) {
      if (Status s = writeOutput(o->json, sensitivityToJson(*map)); !s.isOk()) return fail(s);
    }
    if (!o->csv.empty()) {
      if (Status s = writeOutput(o->csv, sensitivityToCsv(*map)); !s.isOk()) return fail(s);
    }
    if (o->json.empty() && o->csv.empty()) {
      std::cout << sensitivityToText(*map, *field);
    } else {
      for (const std::string& note : map->notes) std::cerr << "kvscope-cli: note: " << note << "\n";
    }
    return kExitOk;
  };
};

const Registrar registrar{"sensitivity",
                          "per layer, kv head and side, the attention damage of each candidate spec",
                          setup};

}  // namespace
}  // namespace kvscope::cli
