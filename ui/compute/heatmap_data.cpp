// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/compute/heatmap_data.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvscope::ui {

HeatmapData computeHeatmap(const Tensor3& x, const Tensor3* xHat, int64_t head, HeatmapValue value,
                           int maxColumns) {
  HeatmapData out;
  if (head < 0 || head >= x.heads || x.tokens == 0 || x.dim == 0) return out;
  if (value == HeatmapValue::Error && (!xHat || !xHat->sameShape(x))) return out;
  out.channels = static_cast<int>(x.dim);
  out.tokens = static_cast<int>(x.tokens);
  out.columns = std::clamp(maxColumns, 1, out.tokens);
  const auto nCells = static_cast<size_t>(out.channels) * static_cast<size_t>(out.columns);
  out.cells.assign(nCells, 0.0f);
  out.cellToken.assign(nCells, 0);
  out.channelMax.assign(static_cast<size_t>(out.channels), 0.0f);

  std::vector<double> inverseSigma(static_cast<size_t>(out.channels), 1.0);
  if (value == HeatmapValue::Normalized) {
    for (int c = 0; c < out.channels; ++c) {
      double sum = 0, sum2 = 0;
      for (int64_t t = 0; t < x.tokens; ++t) {
        const double v = x.at(head, t, c);
        sum += v;
        sum2 += v * v;
      }
      const double n = static_cast<double>(x.tokens);
      const double var = std::max(0.0, sum2 / n - (sum / n) * (sum / n));
      inverseSigma[static_cast<size_t>(c)] = var > 0 ? 1.0 / std::sqrt(var) : 0.0;
    }
  }

  float minPositive = std::numeric_limits<float>::infinity();
  for (int b = 0; b < out.columns; ++b) {
    const int t0 = out.binStart(b);
    const int t1 = out.binStart(b + 1);
    for (int c = 0; c < out.channels; ++c) {
      float best = -1.0f;
      int bestToken = t0;
      for (int t = t0; t < t1; ++t) {
        const float v = x.at(head, t, c);
        float m = 0;
        switch (value) {
          case HeatmapValue::Magnitude: m = std::fabs(v); break;
          case HeatmapValue::Normalized:
            m = static_cast<float>(std::fabs(v) * inverseSigma[static_cast<size_t>(c)]);
            break;
          case HeatmapValue::Error: m = std::fabs(xHat->at(head, t, c) - v); break;
        }
        if (!(m <= best)) {  // also takes NaN, so it shows instead of hiding
          best = m;
          bestToken = t;
        }
      }
      const size_t i = static_cast<size_t>(c) * static_cast<size_t>(out.columns) + static_cast<size_t>(b);
      out.cells[i] = best;
      out.cellToken[i] = bestToken;
      out.channelMax[static_cast<size_t>(c)] = std::max(out.channelMax[static_cast<size_t>(c)], best);
      out.maxValue = std::max(out.maxValue, best);
      if (best > 0) minPositive = std::min(minPositive, best);
    }
  }
  out.minPositive = std::isfinite(minPositive) ? minPositive : 0.0f;
  return out;
}

}  // namespace kvscope::ui
