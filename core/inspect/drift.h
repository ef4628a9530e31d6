// SPDX-License-Identifier: GPL-3.0-or-later
// The drift view's data of one (layer, query head, query row): the row's scores and probabilities
// under the original tensors and the three cases, and the kv head's metrics along query positions
// (quantization.md §6). Every setting's drift lane in the GUI calls it (core/inspect/drift_data.h),
// so the slicing of the kv head, its query group and the reconstructions exists once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/attention/detail.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// One layer's tensors and reconstructions, and which row to show.
struct DriftInput {
  /// Original K and V: the layer's kv heads [firstHead, firstHead + key->heads) (all of them, or
  /// the ones a head-first read holds), and `query` those kv heads' query heads [group·heads, Tq, D].
  const Tensor3* key = nullptr;
  const Tensor3* value = nullptr;
  const Tensor3* query = nullptr;
  int64_t firstHead = 0;  ///< the layer kv head held at index 0 of `key`, `value` (its group in `query`)
  int64_t kvHeads = 0;    ///< the layer's kv heads (the series' lines); 0 = key->heads
  /// K̂ and V̂: the whole layer ([KVH, T, D]) or only the kv head shown; `hatHead` says where the
  /// kv head of `queryHead` sits in them (its index for a whole layer, 0 for one head).
  const Tensor3* keyHat = nullptr;
  const Tensor3* valueHat = nullptr;
  int64_t hatHead = 0;
  int queryHead = 0;   ///< a layer query head; its kv head is queryHead / (H / KVH)
  int queryIndex = 0;  ///< a row of `query`
  double softmaxScale = 0;  ///< 0 = 1/sqrt(D)
  bool row = true;     ///< false: only the series (the caller has the row already)
  bool series = true;  ///< false: only the row (the caller has the series already)
  /// Identifies the layer of `key`, `value` and `query` for the workspace's slices; the caller
  /// keeps it alive while the workspace may hold them, so that its address cannot be reused by
  /// another layer. Null: slice every call.
  std::shared_ptr<const void> owner;
};

/// What the drift view shows.
struct DriftResult {
  int kvHead = 0;
  /// attentionRowDetail of the row, with queryHead and kvHead as layer indices (empty when
  /// DriftInput::row is false).
  std::optional<AttentionRowDetail> row;
  /// The kv head's series grouped by kv head: KVH lines, line kvHead filled, the others empty.
  AttentionPositionSeries series;  ///< empty when DriftInput::series is false
};

/// The kv head's original slices (K, V and its query group), kept between calls for the same
/// layer and head; and the reconstructions' slices of a whole layer.
struct DriftWorkspace {
  std::shared_ptr<const void> owner;  ///< DriftInput::owner of the slices
  int64_t head = -1;
  Tensor3 key, value, query;
  Tensor3 keyHat, valueHat;
};

/// Computes the row and the kv head's position series. Errors name what is out of range (query
/// head, query row, the reconstructions' head, shapes that do not match). Cancels when
/// `progress` returns false.
Expected<DriftResult> computeDrift(const DriftInput& input, DriftWorkspace& workspace, const Progress& progress = {});

}  // namespace kvscope
