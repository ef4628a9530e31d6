// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli diagnose`: findings that predict how a quantizer will fail on a dump, each with
// its evidence and what to do (docs/diagnose.md).
#include <iostream>
#include <memory>
#include <string>

#include "app/cli/command.h"
#include "core/command/diagnose_request.h"
#include "core/diagnose/diagnose.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string dump, mapping;
  DiagnoseRequest request;  ///< --layers, --sequence
  std::string json;
};

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  addInputOption(sub, "dump", o->dump, "the KV dump (HDF5; queries enable the attention findings)")->required();
  sub.add_option("--layers", o->request.layers, "layers to check: all (default) or a list like 0,2,5-7");
  sub.add_option("--sequence", o->request.sequence, "sequence (batch index), default 0");
  addInputOption(sub, "--mapping", o->mapping, "mapping file for a non-canonical dump");
  addOutputOption(sub, "--json", o->json, "write the findings as JSON to FILE ('-' = standard output)");
  return [o]() -> int {
    auto dump = openDump(o->dump, o->mapping);
    if (!dump) return fail(dump.status());
    auto options = diagnoseOptionsFor(o->request, (*dump)->info());
    if (!options) return fail(options.status());
    auto dx = diagnose(**dump, *options, cancellationProgress());
    if (!dx) return fail(dx.status());
    if (!o->json.empty()) {
      if (Status s = writeOutput(o->json, diagnosisToJson(*dx)); !s.isOk()) return fail(s);
      return kExitOk;
    }
    std::cout << diagnosisToText(*dx);
    return kExitOk;
  };
};

const Registrar registrar{"diagnose", "findings that predict how a quantizer fails on a dump, with evidence and advice",
                          setup};

}  // namespace
}  // namespace kvscope::cli
