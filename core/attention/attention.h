// SPDX-License-Identifier: GPL-3.0-or-later
// Attention reconstruction metrics (quantization.md §6) for one layer.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// The six fields of §6 for one case of one kv head.
struct AttentionMetrics {
  double scoreMae = 0;
  double scoreMax = 0;
  double klMean = 0;
  double klMax = 0;
  double top1Agreement = 1;
  double outputRelError = 0;
};

/// key_only (K̂, V), value_only (K, V̂), joint (K̂, V̂).
struct AttentionCases {
  AttentionMetrics keyOnly;
  AttentionMetrics valueOnly;
  AttentionMetrics joint;
};

/// One layer's tensors. Query [H, Tq, D]: row i is the query of position T - Tq + i.
struct AttentionInput {
  const Tensor3* query = nullptr;
  const Tensor3* key = nullptr;       ///< original K [KVH, T, D]
  const Tensor3* value = nullptr;     ///< original V
  const Tensor3* keyHat = nullptr;    ///< reconstructed K
  const Tensor3* valueHat = nullptr;  ///< reconstructed V
  double softmaxScale = 0;            ///< 0 = 1/sqrt(D)
  int lastQueries = 0;                ///< 0 = all queries; N = only the last N (`--queries last:N`)
};

/// Metrics per kv head (index = kv head) for the three cases. Cancels when `progress` says so.
Expected<std::vector<AttentionCases>> attentionMetrics(const AttentionInput& input,
                                                       const Progress& progress = {});

/// How many work items attentionMetrics splits a layer of this shape into with the current
/// OpenMP thread count (0 for a shape it refuses).
int64_t attentionWorkItems(int64_t heads, int64_t kvHeads, int64_t tokens, int64_t queries, int lastQueries);

/// attentionMetrics of several layers (same result per layer as one call each): their work items
/// share one parallel loop, so threads that outnumber one layer's items still find work.
Expected<std::vector<std::vector<AttentionCases>>> attentionMetricsOfLayers(
    const std::vector<AttentionInput>& inputs, const Progress& progress = {});

/// Which of the three cases to compute; a case left out keeps AttentionMetrics' defaults.
/// key_only needs keyHat, value_only valueHat, joint both (the others may then be null).
struct AttentionCaseSelection {
  bool keyOnly = true;
  bool valueOnly = true;
  bool joint = true;
};

/// attentionMetrics restricted to some cases (the budget search needs key_only for key
/// candidates and value_only for value candidates only).
Expected<std::vector<AttentionCases>> attentionMetrics(const AttentionInput& input,
                                                       const AttentionCaseSelection& which,
                                                       const Progress& progress = {});

/// The original (unquantized) attention of one layer: scores, softmax normalizers and outputs,
/// kept so that many reconstructions can be measured without recomputing them (budget search).
class AttentionBaseline;

/// Computes the baseline of `input` (keyHat and valueHat are ignored). Fails with
/// ResourceLimit when it would hold more than `maxBytes` (about 12·H·Tq'·T bytes: float scores, float64 probabilities).
Expected<std::shared_ptr<const AttentionBaseline>> prepareAttentionBaseline(
    const AttentionInput& input, size_t maxBytes = size_t{1} << 30, const Progress& progress = {});

/// attentionMetrics reusing a baseline prepared from the same query, key, value, softmax scale
/// and lastQueries (otherwise InvalidArgument). Results equal those computed without it.
Expected<std::vector<AttentionCases>> attentionMetrics(const AttentionInput& input,
                                                       const AttentionCaseSelection& which,
                                                       const AttentionBaseline& baseline,
                                                       const Progress& progress = {});

}  // namespace kvscope
