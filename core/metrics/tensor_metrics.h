// SPDX-License-Identifier: GPL-3.0-or-later
// Tensor reconstruction metrics (quantization.md §7), per kv head.
#pragma once

#include <optional>
#include <vector>

#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// §7 for one kv head of one tensor.
struct TensorMetrics {
  double mse = 0;                ///< mean (x̂−x)²
  double relError = 0;           ///< ‖x̂−x‖₂/‖x‖₂ (0 when both are 0; +inf when only x is 0)
  std::optional<double> sqnrDb;  ///< 10·log10(Σx²/Σ(x̂−x)²); empty when the error is zero
  double maxAbsError = 0;        ///< max |x̂−x|
};

/// Metrics of `reconstruction` against `reference` for every head (index = head), summed in
/// double. The shapes must match.
Expected<std::vector<TensorMetrics>> tensorMetrics(const Tensor3& reference, const Tensor3& reconstruction);

/// The same for one head (no shape check beyond the head index).
TensorMetrics headMetrics(const Tensor3& reference, const Tensor3& reconstruction, int64_t head);

}  // namespace kvscope
