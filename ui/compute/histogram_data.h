// SPDX-License-Identifier: GPL-3.0-or-later
// Histograms of a slice of one layer tensor (a whole kv head, one channel or one token), for the
// original and the reconstruction on shared bins, with the shape statistics the view shows.
#pragma once

#include <cstdint>
#include <vector>

#include "core/util/tensor.h"

namespace kvscope::ui {

/// Which values of the selected kv head are counted.
enum class HistogramScope { Head, Channel, Token };

struct HistogramData {
  std::vector<double> edges;          ///< bins + 1 ascending edges
  std::vector<double> original;       ///< count per bin
  std::vector<double> reconstructed;  ///< count per bin (empty without a reconstruction)
  int64_t count = 0;                  ///< values counted
  double min = 0, max = 0;            ///< range of the original values
  double kurtosis = 0;                ///< Pearson kurtosis m4/m2² of the original (3 for a normal)
  double maxOverMedian = 0;           ///< max |x| / median |x| of the original (0 when the median is 0)
};

/// Counts head `head` of `x` (and `xHat`, same shape) restricted to `scope`: `index` is the
/// channel (Channel) or the token (Token). Bins span both tensors' values.
HistogramData computeHistogram(const Tensor3& x, const Tensor3* xHat, int64_t head,
                               HistogramScope scope, int64_t index, int bins);

}  // namespace kvscope::ui
