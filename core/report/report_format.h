// SPDX-License-Identifier: GPL-3.0-or-later
// Serializers of an EvalReport: the §8 JSON report, a CSV table, and a readable summary.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/report/eval.h"

namespace kvscope {

/// {mse, rel_error, sqnr_db, max_abs_error}; non-finite numbers and an absent sqnr are null.
nlohmann::ordered_json tensorMetricsJson(const TensorMetrics& m);
/// {score_mae, score_max, kl_mean, kl_max, top1_agreement, output_rel_error}.
nlohmann::ordered_json attentionMetricsJson(const AttentionMetrics& m);
/// {key_only, value_only, joint}, or null when `cases` is empty.
nlohmann::ordered_json attentionCasesJson(const std::optional<AttentionCases>& cases);

/// The §8 report as a JSON value (field order as in the spec, extras after).
nlohmann::ordered_json reportJson(const EvalReport& report);
/// The §8 report as text (2-space indent, doubles in shortest round-trip form, trailing newline).
std::string toJson(const EvalReport& report);
/// One row per (layer, kv head) with every metric; empty cells for null values (docs/report.md).
std::string toCsv(const EvalReport& report);
/// A readable summary table for a terminal.
std::string toText(const EvalReport& report);

}  // namespace kvscope
