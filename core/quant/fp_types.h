// SPDX-License-Identifier: GPL-3.0-or-later
// The small floating-point types (core/util/small_float.h) plus what quantization adds to them:
// meta(x), the rounding of per-group metadata to a spec's metadata type.
#pragma once

#include "core/quant/spec.h"
#include "core/util/small_float.h"

namespace kvscope::fp {

/// meta(x) of quantization.md: x rounded to the metadata type (RNE), as a float.
inline float metaRound(double v, MetaType type) {
  switch (type) {
    case MetaType::Fp16: return static_cast<float>(roundDoubleTo(v, 10, -14, kFp16Max));
    case MetaType::Bf16: return static_cast<float>(roundDoubleTo(v, 7, -126, kBf16Max));
    case MetaType::Fp32: break;
  }
  return static_cast<float>(v);
}

}  // namespace kvscope::fp
