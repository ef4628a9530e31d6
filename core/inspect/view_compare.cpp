// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/inspect/view_compare.h"

#include <algorithm>
#include <cmath>

namespace kvscope {

void countOnEdges(const Tensor3& x, int64_t head, HistogramScope scope, int64_t index,
                  const std::vector<double>& edges, std::vector<double>& out) {
  out.clear();
  if (edges.size() < 2 || head < 0 || head >= x.heads) return;
  const int bins = static_cast<int>(edges.size()) - 1;
  out.assign(static_cast<size_t>(bins), 0.0);
  const double lo = edges.front(), hi = edges.back();
  const double span = hi - lo;
  if (!(span > 0)) return;
  // floor((v − lo) / span · bins) by a multiply; within rounding of an edge the division decides,
  // so the counts are those of the formula (as computeHistogramInto counts).
  const double perUnit = bins / span;
  const auto count = [&](float value) {
    const double v = value;
    const double t = (v - lo) * perUnit;
    double whole = std::floor(t);
    const double f = t - whole;
    if (f < 1e-6 || f > 1 - 1e-6) whole = std::floor((v - lo) / span * bins);
    const int b = whole < 0 ? 0 : whole >= bins ? bins - 1 : static_cast<int>(whole);
    out[static_cast<size_t>(b)] += 1.0;
  };
  const int64_t t0 = scope == HistogramScope::Token ? index : 0;
  const int64_t t1 = scope == HistogramScope::Token ? index + 1 : x.tokens;
  const int64_t c0 = scope == HistogramScope::Channel ? index : 0;
  const int64_t c1 = scope == HistogramScope::Channel ? index + 1 : x.dim;
  if (t0 < 0 || t1 > x.tokens || c0 < 0 || c1 > x.dim) {
    out.clear();
    return;
  }
  for (int64_t t = t0; t < t1; ++t) {
    const float* row = x.row(head, t);
    for (int64_t c = c0; c < c1; ++c) count(row[c]);
  }
}

void computeErrorDifferenceInto(const Tensor3& x, int64_t head, const Tensor3& aHat, int64_t aHead,
                                const Tensor3& bHat, int64_t bHead, int maxColumns, HeatmapData& out) {
  out.cells.clear();
  out.cellToken.clear();
  out.channelMax.clear();
  out.maxValue = out.minPositive = 0;
  out.channels = static_cast<int>(x.dim);
  out.tokens = static_cast<int>(x.tokens);
  out.columns = 0;
  if (head < 0 || head >= x.heads || aHead < 0 || aHead >= aHat.heads || bHead < 0 || bHead >= bHat.heads ||
      aHat.tokens != x.tokens || bHat.tokens != x.tokens || aHat.dim != x.dim || bHat.dim != x.dim || x.tokens == 0 ||
      x.dim == 0) {
    out.channels = out.tokens = 0;
    return;
  }
  out.columns = static_cast<int>(std::clamp<int64_t>(maxColumns, 1, x.tokens));
  const auto cells = static_cast<size_t>(out.channels) * static_cast<size_t>(out.columns);
  out.cells.assign(cells, 0.0f);
  out.cellToken.assign(cells, -1);
  out.channelMax.assign(static_cast<size_t>(out.channels), 0.0f);
  float minPositive = 0;
  // Token rows are contiguous: each bin walks its tokens once, keeping every channel's best d.
  std::vector<float> best(static_cast<size_t>(out.channels));
  std::vector<int> bestToken(static_cast<size_t>(out.channels));
  for (int col = 0; col < out.columns; ++col) {
    const int t0 = out.binStart(col), t1 = out.binStart(col + 1);
    std::fill(best.begin(), best.end(), 0.0f);
    std::fill(bestToken.begin(), bestToken.end(), t0);
    for (int t = t0; t < t1; ++t) {
      const float* xr = x.row(head, t);
      const float* ar = aHat.row(aHead, t);
      const float* br = bHat.row(bHead, t);
      for (int c = 0; c < out.channels; ++c) {
        const float d = std::fabs(br[c] - xr[c]) - std::fabs(ar[c] - xr[c]);
        if (std::fabs(d) > std::fabs(best[static_cast<size_t>(c)])) {
          best[static_cast<size_t>(c)] = d;
          bestToken[static_cast<size_t>(c)] = t;
        }
      }
    }
    for (int c = 0; c < out.channels; ++c) {
      const size_t i = static_cast<size_t>(c) * static_cast<size_t>(out.columns) + static_cast<size_t>(col);
      out.cells[i] = best[static_cast<size_t>(c)];
      out.cellToken[i] = bestToken[static_cast<size_t>(c)];
      const float m = std::fabs(best[static_cast<size_t>(c)]);
      out.channelMax[static_cast<size_t>(c)] = std::max(out.channelMax[static_cast<size_t>(c)], m);
      out.maxValue = std::max(out.maxValue, m);
      if (m > 0 && (minPositive == 0 || m < minPositive)) minPositive = m;
    }
  }
  out.minPositive = minPositive;
}

}  // namespace kvscope
