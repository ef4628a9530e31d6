// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli info DUMP`: what a dump holds (metadata only unless --scan reads every layer).
#include <iostream>

#include "app/cli/command.h"
#include "core/command/dump_summary.h"
#include "core/util/json_text.h"

namespace kvscope::cli {
namespace {

std::function<int()> setupInfo(CLI::App& sub) {
  struct Args {
    std::string dump, mapping;
    bool json = false, scan = false, allowExternal = false;
  };
  auto a = std::make_shared<Args>();
  addInputOption(sub, "dump", a->dump, "Dump file (.h5)")->required();
  addInputOption(sub, "--mapping", a->mapping, "Mapping file (JSON) for a non-canonical file");
  sub.add_flag("--json", a->json, "Print a JSON object instead of text");
  sub.add_flag("--scan", a->scan,
               "Read every layer of every sequence the file stores and report NaN/Inf counts "
               "(slow on big dumps; Ctrl-C stops it)");
  sub.add_flag("--allow-external", a->allowExternal,
               "Follow external links, external raw storage, virtual datasets");
  return [a]() -> int {
    auto opened = openDump(a->dump, a->mapping, a->allowExternal);
    if (!opened) return fail(opened.status());
    // --scan reads every tensor: minutes on a large dump (docs/reliability.md), so it shows progress.
    const Progress progress = a->scan ? cliProgress("info --scan " + a->dump, true) : cancellationProgress();
    auto summary = summarizeDump(**opened, a->scan, progress);
    if (!summary) return fail(summary.status());
    if (a->json) {
      std::cout << jsonText(dumpSummaryJson(*summary));
      return kExitOk;
    }
    std::cout << dumpSummaryText(*summary);
    return kExitOk;
  };
}

const Registrar kRegistrar{
    "info", "Show what a dump holds (shapes, types, optional datasets, size)", setupInfo};

}  // namespace
}  // namespace kvscope::cli
