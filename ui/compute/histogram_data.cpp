// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/compute/histogram_data.h"

#include <algorithm>
#include <cmath>

namespace kvscope::ui {

namespace {

std::vector<float> slice(const Tensor3& x, int64_t head, HistogramScope scope, int64_t index) {
  std::vector<float> out;
  if (head < 0 || head >= x.heads) return out;
  switch (scope) {
    case HistogramScope::Head:
      out.assign(x.row(head, 0), x.row(head, 0) + x.tokens * x.dim);
      break;
    case HistogramScope::Channel:
      if (index < 0 || index >= x.dim) break;
      out.reserve(static_cast<size_t>(x.tokens));
      for (int64_t t = 0; t < x.tokens; ++t) out.push_back(x.at(head, t, index));
      break;
    case HistogramScope::Token:
      if (index < 0 || index >= x.tokens) break;
      out.assign(x.row(head, index), x.row(head, index) + x.dim);
      break;
  }
  return out;
}

}  // namespace

HistogramData computeHistogram(const Tensor3& x, const Tensor3* xHat, int64_t head,
                               HistogramScope scope, int64_t index, int bins) {
  HistogramData out;
  const std::vector<float> values = slice(x, head, scope, index);
  std::vector<float> hat;
  if (xHat && xHat->sameShape(x)) hat = slice(*xHat, head, scope, index);
  if (values.empty() || bins < 1) return out;

  out.count = static_cast<int64_t>(values.size());
  const auto [mn, mx] = std::minmax_element(values.begin(), values.end());
  out.min = *mn;
  out.max = *mx;
  double lo = out.min, hi = out.max;
  if (!hat.empty()) {
    const auto [hmn, hmx] = std::minmax_element(hat.begin(), hat.end());
    lo = std::min(lo, static_cast<double>(*hmn));
    hi = std::max(hi, static_cast<double>(*hmx));
  }
  if (!(hi > lo)) {  // a constant slice still gets one visible bin around its value
    lo -= 0.5;
    hi += 0.5;
  }
  out.edges.resize(static_cast<size_t>(bins) + 1);
  for (int i = 0; i <= bins; ++i) out.edges[static_cast<size_t>(i)] = lo + (hi - lo) * i / bins;
  const auto binOf = [&](double v) {
    const auto b = static_cast<int>((v - lo) / (hi - lo) * bins);
    return static_cast<size_t>(std::clamp(b, 0, bins - 1));
  };
  out.original.assign(static_cast<size_t>(bins), 0.0);
  for (float v : values) out.original[binOf(v)] += 1;
  if (!hat.empty()) {
    out.reconstructed.assign(static_cast<size_t>(bins), 0.0);
    for (float v : hat) out.reconstructed[binOf(v)] += 1;
  }

  double mean = 0;
  for (float v : values) mean += v;
  mean /= static_cast<double>(values.size());
  double m2 = 0, m4 = 0;
  for (float v : values) {
    const double d = v - mean;
    m2 += d * d;
    m4 += d * d * d * d;
  }
  m2 /= static_cast<double>(values.size());
  m4 /= static_cast<double>(values.size());
  out.kurtosis = m2 > 0 ? m4 / (m2 * m2) : 0.0;

  std::vector<float> magnitudes(values.size());
  std::transform(values.begin(), values.end(), magnitudes.begin(), [](float v) { return std::fabs(v); });
  const float maxAbs = *std::max_element(magnitudes.begin(), magnitudes.end());
  const size_t mid = magnitudes.size() / 2;
  std::nth_element(magnitudes.begin(), magnitudes.begin() + static_cast<std::ptrdiff_t>(mid), magnitudes.end());
  double median = magnitudes[mid];
  if (magnitudes.size() % 2 == 0) {
    const float below = *std::max_element(magnitudes.begin(), magnitudes.begin() + static_cast<std::ptrdiff_t>(mid));
    median = 0.5 * (median + below);
  }
  out.maxOverMedian = median > 0 ? maxAbs / median : 0.0;
  return out;
}

}  // namespace kvscope::ui
