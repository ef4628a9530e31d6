// SPDX-License-Identifier: GPL-3.0-or-later
// The whole pipeline of quantization.md §1 for one tensor of one layer, and storage (§5).
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant/spec.h"
#include "core/quant/storage.h"
#include "core/util/status.h"
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
/// x <- x·H with H the normalized Sylvester Hadamard matrix, per token row of D values (D = 2^k).
void hadamardInPlace(Tensor3& x);
/// x <- x·H for `rows` rows of `d` values (d a power of two), the float32 transform of
/// docs/spec-strings.md.
void hadamardTransformRows(float* x, int64_t rows, int64_t d);

/// ceil(f·n) as §1 step 4 writes it (computed in double), bounded by n; 0 for f ≤ 0.
int64_t outlierCount(double fraction, int64_t n);
/// Flat indices of the `count` values of largest |x| among values[0..n) (ties: lower index
/// first), in that order. Values must be finite.
std::vector<int64_t> selectOutliers(const float* values, int64_t n, int64_t count);

/// Input of the pipeline for one tensor of one layer.
struct QuantInput {
  const Tensor3* tensor = nullptr;    ///< `key` or `value`: the reference
  const Tensor3* preRope = nullptr;   ///< `key_pre_rope` (needed when spec.prerope)
  RopeParams rope;
};

/// Result of the pipeline.
struct QuantOutput {
  Tensor3 reconstruction;  ///< same shape as the input tensor, comparable with it
  StorageCount storage;
};

/// Runs §1 steps 1-6. Cancels between heads when `progress` returns false.
Expected<QuantOutput> quantizeTensor(const QuantInput& input, const QuantSpec& spec,
                                     const Progress& progress = {});
/// The same into `out`, reusing its reconstruction's buffer: loops over candidates (search, GUI
/// sliders) then allocate no layer-sized memory. On failure `out` holds no meaningful result.
Status quantizeTensorInto(const QuantInput& input, const QuantSpec& spec, QuantOutput& out,
                          const Progress& progress = {});

}  // namespace kvscope
