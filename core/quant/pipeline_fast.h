// SPDX-License-Identifier: GPL-3.0-or-later
// The fast strategy of quantization.md §1 steps 2–6 (core/quant/pipeline_fast.cpp): the layer in
// pieces of token rows, each read, checked, rotated, stripped of its outliers, quantized,
// restored and written while it is in cache, never compacted. It gives the reference
// composition's bits (core/quant/pipeline_reference.h); quantize.cpp chooses between the two.
#pragma once

#include <cstdint>

#include "core/quant/spec.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// Whether quantizeFast covers `spec` on a [kvHeads, tokens, headDim] tensor: its format splits
/// into pieces of whole token rows (formatPieceRows), and with a rotation or outliers it needs no
/// tensor-wide range (its scale would be that of the rotated, stripped tensor).
bool fastStrategyCovers(const QuantSpec& spec, int64_t kvHeads, int64_t tokens, int64_t headDim);

/// Steps 2–6 of `src` into `dst` (shaped like src, sized) for a spec fastStrategyCovers, RoPE
/// (step 1's end) excepted. Sets `nonFinite` (and stops) when src holds a non-finite value. Sets
/// `handled` to false, having written nothing that matters, when a head's sampled outlier floor
/// was misjudged (fewer candidates than outliers): the caller then runs the reference.
Status quantizeFast(const Tensor3& src, const QuantSpec& spec, Tensor3& dst, const Progress& progress,
                    bool& nonFinite, bool& handled);

}  // namespace kvscope
