// SPDX-License-Identifier: GPL-3.0-or-later
// Per-position attention detail for the GUI's drift view: one query row's scores and
// probabilities, and a layer's metrics along query positions (quantization.md §6).
#pragma once

#include <cstdint>
#include <vector>

#include "core/attention/attention.h"
#include "core/util/status.h"

namespace kvscope {

/// One case of one query row, over keys 0 … position.
struct AttentionRowCase {
  std::vector<double> scores;         ///< s_j (original) or ŝ_j: softmax_scale · q·k_j
  std::vector<double> probabilities;  ///< softmax of `scores`
  double kl = 0;                      ///< KL(P‖P̂) against the original row (0 for the original)
  double outputRelError = 0;          ///< ‖ô − o‖₂ / ‖o‖₂ (0 for the original)
  int64_t top1 = 0;                   ///< argmax of `probabilities`, first index on ties
};

/// A single query row under the original tensors and the three cases (float64 throughout).
struct AttentionRowDetail {
  int queryHead = 0;
  int kvHead = 0;          ///< queryHead / (H / KVH)
  int queryIndex = 0;      ///< row of the query tensor
  int64_t position = 0;    ///< T − Tq + queryIndex; the row sees keys 0 … position
  AttentionRowCase original;
  AttentionRowCase keyOnly;    ///< K̂, V: scores and probabilities move
  AttentionRowCase valueOnly;  ///< K, V̂: scores and probabilities equal the original's
  AttentionRowCase joint;      ///< K̂, V̂: scores and probabilities equal key_only's
};

/// Computes one row's detail; `input.lastQueries` is ignored. Needs keyHat and valueHat.
Expected<AttentionRowDetail> attentionRowDetail(const AttentionInput& input, int queryHead,
                                                int queryIndex);

/// What one line of a position series averages over.
enum class SeriesGrouping {
  KvHead,     ///< one line per kv head: the mean over its H/KVH query heads
  QueryHead,  ///< one line per query head
};

/// A layer's per-query metrics along query positions (the selected queries of `lastQueries`).
struct AttentionPositionSeries {
  SeriesGrouping grouping = SeriesGrouping::KvHead;
  std::vector<int64_t> positions;  ///< position of each selected query, ascending
  /// [line][query]: KL(P‖P̂), the same for key_only and joint (value_only's is 0).
  std::vector<std::vector<double>> kl;
  std::vector<std::vector<double>> relKeyOnly;    ///< [line][query] output rel error, key_only
  std::vector<std::vector<double>> relValueOnly;  ///< [line][query] output rel error, value_only
  std::vector<std::vector<double>> relJoint;      ///< [line][query] output rel error, joint
};

/// Computes the series with the same engine as attentionMetrics (so their means agree).
Expected<AttentionPositionSeries> attentionPositionSeries(const AttentionInput& input,
                                                          SeriesGrouping grouping,
                                                          const Progress& progress = {});

}  // namespace kvscope
