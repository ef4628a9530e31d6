// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/compute/heatmap_data.h"

namespace kvscope::ui {

HeatmapData computeHeatmap(const Tensor3& x, const Tensor3* xHat, int64_t head, HeatmapValue value,
                           int maxColumns) {
  HeatmapData out;
  if (value == HeatmapValue::Error && (!xHat || !xHat->sameShape(x))) return out;
  computeHeatmapInto(x, head, xHat, head, value, maxColumns, out);
  return out;
}

}  // namespace kvscope::ui
