// SPDX-License-Identifier: GPL-3.0-or-later
// Step 1 of the pipeline (quantization.md §1, `prerope`): rotary position embedding of key rows.
#pragma once

#include <cstdint>
#include <vector>

#include "core/util/tensor.h"
#include "core/util/vocabulary.h"

namespace kvscope {

/// The inverse frequencies RoPE uses for head dim `dim`: rope.invFreq, or theta^(−2i/dim).
std::vector<double> ropeInverseFrequencies(const RopeParams& rope, int64_t dim);

/// Applies RoPE in place to x [heads, tokens, dim], token j at position j (+ positionOffset).
void applyRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset = 0);
/// Inverse of applyRope.
void applyInverseRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset = 0);

/// RoPE on position-major rows (a model's layout): `count` rows of `heads`·dim values, row r at
/// position firstPosition + r, with the given inverse frequencies ([dim/2]). The same arithmetic
/// as applyRope, so both give the same bits.
void applyRopeRows(float* rows, int64_t count, int64_t heads, int64_t dim, int64_t firstPosition,
                   RopeStyle style, const std::vector<double>& invFreq);

}  // namespace kvscope
