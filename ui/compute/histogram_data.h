// SPDX-License-Identifier: GPL-3.0-or-later
// Histograms of a slice of one layer tensor (a whole kv head, one channel or one token), for the
// original and the reconstruction on shared bins. The data and its computation are core's
// (core/metrics/view_data.h), shared with the layer worker and the benchmark.
#pragma once

#include <cstdint>

#include "core/metrics/view_data.h"
#include "core/util/tensor.h"

namespace kvscope::ui {

using HistogramScope = kvscope::HistogramScope;
using HistogramData = kvscope::HistogramData;

/// Counts head `head` of `x` (and `xHat`, same shape) restricted to `scope`: `index` is the
/// channel (Channel) or the token (Token). Bins span both tensors' values.
HistogramData computeHistogram(const Tensor3& x, const Tensor3* xHat, int64_t head,
                               HistogramScope scope, int64_t index, int bins);

}  // namespace kvscope::ui
