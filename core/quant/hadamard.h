// SPDX-License-Identifier: GPL-3.0-or-later
// The float32 fast Walsh–Hadamard transform x ↦ x·H (H the normalized Sylvester matrix) behind
// rot=hadamard, rot=hadamard:N and rot=rht (quantization.md §1 step 3; the float32 reading is in
// docs/spec-strings.md, "rot=hadamard"). Every version (scalar, vector clones, AVX-512) performs
// the same float operations in the same order and gives the same bits.
#pragma once

#include <cstdint>

#include "core/util/tensor.h"

namespace kvscope {

/// x <- x·H with H the normalized Sylvester Hadamard matrix, per token row of D values (D = 2^k).
void hadamardInPlace(Tensor3& x);
/// x <- x·H for `rows` rows of `d` values (d a power of two), the float32 transform of
/// docs/spec-strings.md.
void hadamardTransformRows(float* x, int64_t rows, int64_t d);
/// Copies `rows` rows of `d` values (d a power of two) from `in` to `out` and transforms `out`
/// (x·H), in one pass where AVX-512 allows; says whether any value of `in` is non-finite (then
/// `out` is unspecified).
bool copyCheckAndHadamard(const float* in, float* out, int64_t rows, int64_t d);

}  // namespace kvscope
