// SPDX-License-Identifier: GPL-3.0-or-later
// The batched attention engine behind attentionMetrics and the per-position detail: one pass
// over (kv head, query chunk) work items, GEMMs in float32, softmax/KL/norms in float64.
#pragma once

#include <cstdint>
#include <vector>

#include "core/attention/attention.h"

namespace kvscope::attention_engine {

/// Per (query head, selected query) values, row index = h * selectedQueries + i'.
struct RowValues {
  int64_t selectedQueries = 0;      ///< Tq' (the queries the metrics cover)
  int64_t firstQuery = 0;           ///< index into Tq of the first selected query
  std::vector<double> kl;           ///< KL(P‖P̂) of key_only (= joint; 0 when keys not computed)
  std::vector<double> relKeyOnly;   ///< output relative error, key_only
  std::vector<double> relValueOnly; ///< output relative error, value_only
  std::vector<double> relJoint;     ///< output relative error, joint
};

/// Computes the selected cases of §6 per kv head; fills `rows` when it is not null.
Expected<std::vector<AttentionCases>> run(const AttentionInput& input,
                                          const AttentionCaseSelection& which, RowValues* rows,
                                          const Progress& progress);

/// Checks shapes and presence of the tensors the selected cases need.
Status checkInput(const AttentionInput& input, const AttentionCaseSelection& which);

/// Floating-point operations of the GEMMs `run` performs (for throughput reports).
double gemmFlops(const AttentionInput& input, const AttentionCaseSelection& which);

}  // namespace kvscope::attention_engine
