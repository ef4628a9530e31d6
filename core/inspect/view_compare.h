// SPDX-License-Identifier: GPL-3.0-or-later
// What the GUI's A/B comparison draws for one kv head, from two reconstructions of the same
// tensor: a reconstruction counted on another histogram's bins, and a heat map of the change in
// absolute error. Plain core code (no Qt), so tests check it against hand-computed values.
#pragma once

#include <cstdint>
#include <vector>

#include "core/inspect/view_data.h"
#include "core/util/tensor.h"

namespace kvscope {

/// Counts head `head` of `x` restricted to `scope` (`index`: the channel or the token, as for
/// computeHistogramInto) on the uniform bins `edges` (at least two ascending edges), with the
/// bin rule of computeHistogramInto: floor((v − lo) / (hi − lo) · bins), clamped to the outer
/// bins, so values beyond the edges count in the first or last bin. `out` gets edges − 1 counts.
void countOnEdges(const Tensor3& x, int64_t head, HistogramScope scope, int64_t index,
                  const std::vector<double>& edges, std::vector<double>& out);

/// Channel × token heat map of d = |b̂ − x| − |â − x| for head `head` of `x` (head `aHead` of
/// `aHat`, `bHead` of `bHat`; same tokens and dim): positive where B's error is larger. Tokens
/// are binned to at most `maxColumns` columns; each cell holds the d of largest |d| in its bin
/// (the first on ties), cellToken its token, channelMax each channel's largest |d|, maxValue the
/// largest |d| of all cells and minPositive the smallest non-zero |d|.
void computeErrorDifferenceInto(const Tensor3& x, int64_t head, const Tensor3& aHat, int64_t aHead,
                                const Tensor3& bHat, int64_t bHead, int maxColumns, HeatmapData& out);

}  // namespace kvscope
