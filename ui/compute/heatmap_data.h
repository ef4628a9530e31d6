// SPDX-License-Identifier: GPL-3.0-or-later
// Channel × token magnitudes of one kv head, binned along tokens with a per-bin MAX so that a
// lone outlier token stays visible however many tokens share a pixel column.
#pragma once

#include <cstdint>
#include <vector>

#include "core/util/tensor.h"

namespace kvscope::ui {

/// What a heat map cell shows.
enum class HeatmapValue {
  Magnitude,   ///< |x|
  Normalized,  ///< |x| / σ of its channel (over all tokens of the head)
  Error,       ///< |x̂ − x|
};

/// The binned grid; cell (channel c, column b) = max over the tokens of bin b.
struct HeatmapData {
  int channels = 0;
  int tokens = 0;
  int columns = 0;               ///< number of token bins (≤ tokens)
  std::vector<float> cells;      ///< channels × columns, row-major by channel
  std::vector<int> cellToken;    ///< the token where each cell's maximum lies
  std::vector<float> channelMax; ///< per channel, the max over all tokens
  float maxValue = 0;            ///< the largest cell
  float minPositive = 0;         ///< the smallest cell > 0 (log colour scales start here)

  /// First token of bin `column`; bin b covers [binStart(b), binStart(b + 1)).
  [[nodiscard]] int binStart(int column) const {
    return columns > 0 ? static_cast<int>(int64_t{column} * tokens / columns) : 0;
  }
  [[nodiscard]] float cell(int channel, int column) const {
    return cells[static_cast<size_t>(channel) * static_cast<size_t>(columns) + static_cast<size_t>(column)];
  }
};

/// Bins head `head` of `x` into at most `maxColumns` token columns. `xHat` is needed (same
/// shape) for HeatmapValue::Error and ignored otherwise.
HeatmapData computeHeatmap(const Tensor3& x, const Tensor3* xHat, int64_t head, HeatmapValue value,
                           int maxColumns);

}  // namespace kvscope::ui
