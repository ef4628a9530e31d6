// SPDX-License-Identifier: GPL-3.0-or-later
// What the drift view draws for one setting: the attention row of the selected query (the layer
// worker's, when it computed that row) and the kv head's metrics along query positions. Every
// setting's lane (the controls' B and a pinned A) computes it with these functions.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/attention/detail.h"
#include "core/inspect/drift.h"
#include "core/inspect/layer_data.h"
#include "core/util/status.h"

namespace kvscope {

/// The drift view's data of one setting for one (layer, query head, query row).
struct DriftData {
  int layer = 0;
  int64_t kvHead = 0;
  /// What the series was computed from: it still holds when only the row changes.
  LayerTensorsPtr tensors;
  QuantSpec keySpec, valueSpec;
  /// The row, shared with the layer result that computed it (a row holds 8 vectors of T doubles:
  /// copying it on the GUI thread for every result cost a 2 MiB copy, sometimes page faults).
  std::shared_ptr<const AttentionRowDetail> row;
  AttentionPositionSeries series;  ///< grouped by kv head; empty until computed
  bool hasSeries = false;
};
using DriftDataPtr = std::shared_ptr<const DriftData>;

/// The row `layer`'s worker computed, as drift data without the series; nullptr when it did not
/// compute the row of (queryHead, queryIndex).
[[nodiscard]] DriftDataPtr rowOnlyDrift(const LayerQuantPtr& layer, int queryHead, int queryIndex);

/// The drift data of `layer` (a LayerQuantPool result with queries) for (queryHead, queryIndex):
/// the layer's own row when it has it, else computed; the series of `previous` when it was
/// computed from the same tensors, kv head and specs, else computed (core's computeDrift, with
/// `workspace`'s slices kept while the layer and head stay). Errors name what is out of range.
Expected<DriftDataPtr> computeDriftData(const LayerQuantPtr& layer, int queryHead, int queryIndex, double softmaxScale,
                                        const DriftDataPtr& previous, DriftWorkspace& workspace,
                                        const Progress& progress = {});

/// Indices of the `k` largest of `values` (all of them when there are fewer), largest first, the
/// lower index first among equal values: the drift view's top keys of an attention row.
[[nodiscard]] std::vector<int64_t> topIndices(const std::vector<double>& values, int k);

}  // namespace kvscope
