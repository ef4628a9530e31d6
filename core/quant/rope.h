// SPDX-License-Identifier: GPL-3.0-or-later
// Step 1 of the pipeline (quantization.md §1, `prerope`): rotary position embedding of key rows.
#pragma once

#include <cstdint>

#include "core/util/tensor.h"
#include "core/util/vocabulary.h"

namespace kvscope {

/// RoPE parameters from the dump, for `prerope`.
struct RopeParams {
  double theta = 10000.0;
  RopeStyle style = RopeStyle::Half;
};

/// Applies RoPE in place to x [heads, tokens, dim], token j at position j (+ positionOffset).
void applyRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset = 0);
/// Inverse of applyRope.
void applyInverseRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset = 0);

}  // namespace kvscope
