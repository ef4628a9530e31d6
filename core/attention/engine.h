// SPDX-License-Identifier: GPL-3.0-or-later
// The batched attention engine behind attentionMetrics and the per-position detail: one pass
// over (kv head, query chunk) work items, GEMMs in float32, softmax/KL/norms in float64.
#pragma once

#include <atomic>
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

/// Queries per work item and how items split a layer (fixed when a baseline is prepared).
struct Shape {
  int64_t kvHeads = 0, tokens = 0, dim = 0, heads = 0, queries = 0;
  int64_t group = 0;           ///< query heads per kv head
  int64_t selected = 0;        ///< Tq'
  int64_t firstQuery = 0;      ///< Tq - Tq'
  int64_t chunk = 0;           ///< queries per item
  int64_t chunksPerHead = 0;
  double scale = 0;
};

/// The original attention of one work item.
struct ItemBaseline {
  std::vector<float> scores;   ///< [rows, ncol] Qc·Kᵀ (unscaled)
  std::vector<float> out;      ///< [rows, D] P·V
  std::vector<double> rowMax;  ///< per row: max of the scaled scores
  std::vector<double> rowSum;  ///< per row: Σ exp(s − max)
  std::vector<double> prob;    ///< [rows, ncol] P in float64 (zero past each row's position)
};

/// Computes the selected cases of §6 per kv head; fills `rows` when it is not null. With
/// `baseline`, the original scores, normalizers and outputs come from it.
Expected<std::vector<AttentionCases>> run(const AttentionInput& input,
                                          const AttentionCaseSelection& which, RowValues* rows,
                                          const Progress& progress,
                                          const AttentionBaseline* baseline = nullptr);

/// `run` for several layers whose items share one parallel loop (attentionMetricsOfLayers).
Expected<std::vector<std::vector<AttentionCases>>> runLayers(const std::vector<AttentionInput>& inputs,
                                                             const AttentionCaseSelection& which,
                                                             const Progress& progress);

/// Checks shapes and presence of the tensors the selected cases need.
Status checkInput(const AttentionInput& input, const AttentionCaseSelection& which);

/// Whether rows go through the fused passes of softmax_rows.h (true, the default) or through the
/// Eigen expressions they reproduce bit for bit (false): for tests and A/B benchmarks only.
std::atomic<bool>& fusedRows();

/// Floating-point operations of the GEMMs `run` performs (for throughput reports).
double gemmFlops(const AttentionInput& input, const AttentionCaseSelection& which);

}  // namespace kvscope::attention_engine

namespace kvscope {
/// See attention.h; complete here for the engine.
class AttentionBaseline {
 public:
  const Tensor3* query = nullptr;
  const Tensor3* key = nullptr;
  const Tensor3* value = nullptr;
  double softmaxScale = 0;
  int lastQueries = 0;
  attention_engine::Shape shape;
  std::vector<attention_engine::ItemBaseline> items;  ///< item = kv head · chunksPerHead + chunk
};
}  // namespace kvscope
