// SPDX-License-Identifier: GPL-3.0-or-later
// The pipeline's finite check (quantization needs finite values): copies that say whether they
// met a NaN or an infinity, in one vectorizable pass.
#pragma once

#include <cstdint>
#include <string>

#include "core/util/tensor.h"

namespace kvscope {

/// Copies n floats and says whether any of them is non-finite.
bool copyAndCheck(const float* __restrict src, float* __restrict dst, int64_t n);
/// Copies `src` into `dst` (same shape, dst sized), all cores; says whether any value is
/// non-finite.
bool copyTensorAndCheck(const Tensor3& src, Tensor3& dst);
/// The first non-finite element of `x` (head, token, channel), as a message; empty when all are
/// finite.
std::string firstNonFinite(const Tensor3& x);

}  // namespace kvscope
