// SPDX-License-Identifier: GPL-3.0-or-later
// A/B comparison of two evaluations (two K/V settings, specs or plans, of the same dump, or of two
// dumps side by side): both reports as §8 gives them and their differences B − A, per (layer, kv
// head) and overall. The GUI's `kvscope DUMP --preset A --compare-preset B --export-dir DIR`
// (and `--compare-dump`) writes it as comparison.json.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/report/eval.h"
#include "core/util/status.h"

namespace kvscope {

/// Whether A and B must have evaluated the same dump.
enum class DumpMatch {
  Same,  ///< the same dump and sequence (two settings on one dump)
  Any,   ///< two dumps side by side: their own paths and sequences, the same (layer, kv head) entries
};

/// Checks that `a` and `b` evaluated the same (layer, kv head) entries, and with DumpMatch::Same
/// the same dump and sequence; the error names what differs.
Status checkComparable(const EvalReport& a, const EvalReport& b, DumpMatch match = DumpMatch::Same);

/// {"kvscope_comparison": 1, "definition": "b − a", "a": report A, "b": report B,
///  "differences": {"bits_per_element": {key, value}, "bytes_per_token", "summary": {key, value,
///  attention}, "heads": [{layer, kv_head, key, value, attention}]}}. Reports are reportJson's;
/// each difference object has the fields of the report's metric objects, each b − a (null where
/// either side is null or skipped). Call checkComparable first.
nlohmann::ordered_json comparisonJson(const EvalReport& a, const EvalReport& b);

/// comparisonJson as text (2-space indent, trailing newline).
std::string toComparisonJson(const EvalReport& a, const EvalReport& b);

/// b − a of one JSON value tree: numbers subtract, objects recurse over a's keys, anything else
/// (null on either side, strings, arrays) gives null.
nlohmann::ordered_json jsonDifference(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

}  // namespace kvscope
