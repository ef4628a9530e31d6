// SPDX-License-Identifier: GPL-3.0-or-later
// Tensor metrics of quantization.md §7.
#include "core/metrics/tensor_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace kvscope {

TensorMetrics headMetrics(const Tensor3& reference, const Tensor3& reconstruction, int64_t head) {
  const size_t n = static_cast<size_t>(reference.tokens * reference.dim);
  const float* x = reference.data.data() + reference.index(head, 0, 0);
  const float* y = reconstruction.data.data() + reconstruction.index(head, 0, 0);
  double signal = 0, error = 0, maxAbs = 0;
  for (size_t i = 0; i < n; ++i) {
    const double xi = x[i];
    const double e = static_cast<double>(y[i]) - xi;
    signal += xi * xi;
    error += e * e;
    maxAbs = std::max(maxAbs, std::fabs(e));
  }
  TensorMetrics m;
  m.mse = n ? error / static_cast<double>(n) : 0.0;
  m.maxAbsError = maxAbs;
  if (error == 0) {
    m.relError = 0;
  } else {
    m.relError = signal > 0 ? std::sqrt(error / signal) : std::numeric_limits<double>::infinity();
    m.sqnrDb = 10.0 * std::log10(signal / error);  // -inf for an all-zero reference
  }
  return m;
}

Expected<std::vector<TensorMetrics>> tensorMetrics(const Tensor3& reference, const Tensor3& reconstruction) {
  if (!reference.sameShape(reconstruction)) {
    return Status::internal("tensorMetrics: reconstruction shape differs from the reference");
  }
  std::vector<TensorMetrics> out(static_cast<size_t>(reference.heads));
  for (int64_t h = 0; h < reference.heads; ++h) out[static_cast<size_t>(h)] = headMetrics(reference, reconstruction, h);
  return out;
}

}  // namespace kvscope
