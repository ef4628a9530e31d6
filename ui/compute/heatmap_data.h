// SPDX-License-Identifier: GPL-3.0-or-later
// Channel × token magnitudes of one kv head for the heat map. The data and its computation are
// core's (core/metrics/view_data.h), shared with the layer worker and the benchmark.
#pragma once

#include <cstdint>

#include "core/metrics/view_data.h"
#include "core/util/tensor.h"

namespace kvscope::ui {

using HeatmapValue = kvscope::HeatmapValue;
using HeatmapData = kvscope::HeatmapData;

/// Bins head `head` of `x` into at most `maxColumns` token columns. `xHat` is needed (same
/// shape) for HeatmapValue::Error and ignored otherwise.
HeatmapData computeHeatmap(const Tensor3& x, const Tensor3* xHat, int64_t head, HeatmapValue value,
                           int maxColumns);

}  // namespace kvscope::ui
