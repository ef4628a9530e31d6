// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli info DUMP`: what a dump holds (metadata only unless --scan reads every layer).
#include <iostream>

#include "app/cli/command.h"
#include "core/command/dump_summary.h"

namespace kvscope::cli {
namespace {

std::function<int()> setupInfo(CLI::App& sub) {
  struct Args {
    std::string dump, mapping;
    bool json = false, scan = false, allowExternal = false;
  };
  auto a = std::make_shared<Args>();
  sub.add_option("dump", a->dump, "Dump file (.h5)")->required();
  sub.add_option("--mapping", a->mapping, "Mapping file (JSON) for a non-canonical file");
  sub.add_flag("--json", a->json, "Print a JSON object instead of text");
  sub.add_flag("--scan", a->scan,
               "Read every layer of every sequence the file stores and report NaN/Inf counts "
               "(slow on big dumps; Ctrl-C stops it)");
  sub.add_flag("--allow-external", a->allowExternal,
               "Follow external links, external raw storage, virtual datasets");
  return [a]() -> int {
    auto opened = openDump(a->dump, a->mapping, a->allowExternal);
    if (!opened) return fail(opened.status());
    auto summary = summarizeDump(**opened, a->scan, cancellationProgress());
    if (!summary) return fail(summary.status());
    if (a->json) {
      std::cout << dumpSummaryJson(*summary).dump(2) << "\n";
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
