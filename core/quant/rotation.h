// SPDX-License-Identifier: GPL-3.0-or-later
// Step 3 of the pipeline (quantization.md §1): the orthonormal rotations x ↦ x·R of
// rot=hadamard, rot=hadamard:N, rot=rht and rot=random, applied to token rows of one head.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant/spec.h"

namespace kvscope {

/// x ← x·R for `rows` rows of `d` values (R of spec.rotation; the identity for none). The
/// spec's rotation must suit d (checkRotation).
void rotateRows(const QuantSpec& spec, float* x, int64_t rows, int64_t d);
/// x ← x·Rᵀ, the inverse of rotateRows.
void unrotateRows(const QuantSpec& spec, float* x, int64_t rows, int64_t d);
/// R itself, d × d row-major in double (the random matrix exactly as rotateRows uses it, before
/// its rounding to float), for tests and documentation.
std::vector<double> rotationMatrix(const QuantSpec& spec, int64_t d);
/// rot=rht's signs σ_k (±1) for head dim d and `seed`.
std::vector<float> rhtSigns(uint64_t seed, int64_t d);
/// Multiply-adds one vector's rotation costs (capacity's decode cost): D·log2 N for the
/// Hadamard kinds (N the block or D), D² for rot=random, 0 for none.
double rotationCost(const QuantSpec& spec, int64_t d);

}  // namespace kvscope
