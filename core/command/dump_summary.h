// SPDX-License-Identifier: GPL-3.0-or-later
// `info`: what a dump holds, and with a scan the NaN/Inf count of every tensor the file stores.
// The CLI prints it, Python returns its JSON as a dict: one builder for both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/dump.h"
#include "core/util/status.h"
#include "core/util/vocabulary.h"

namespace kvscope {

/// One scanned tensor of one sequence.
struct ScanRow {
  int layer = 0;
  int sequence = 0;
  TensorKind kind = TensorKind::Key;
  NonFiniteReport report;
};

/// The dump's metadata, its warnings and (when scanned) every tensor's NaN/Inf counts.
struct DumpSummary {
  DumpInfo info;
  std::vector<std::string> warnings;  ///< the open's warnings, then the scan's
  bool scanned = false;
  std::vector<ScanRow> scan;          ///< layer by layer, then sequence, then tensor kind
};

/// Summarizes an open dump; `scan` reads every layer of every sequence the file stores (a
/// declared batch whose chunks were never written is scanned only where data is stored, and a
/// warning says so). Cancels via `progress` between tensors.
Expected<DumpSummary> summarizeDump(const Dump& dump, bool scan, const Progress& progress = {});

/// `info --json` (docs/dump-format.md, "kvscope-cli info").
nlohmann::json dumpSummaryJson(const DumpSummary& summary);
/// `info`'s text: one "key: value" line per field.
std::string dumpSummaryText(const DumpSummary& summary);

}  // namespace kvscope
