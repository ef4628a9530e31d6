// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/quant/finite_check.h"

#include <algorithm>
#include <cmath>

#include "core/util/simd.h"

namespace kvscope {

// An exponent of all ones carries into bit 31 when 2^23 is added to it (simd::nonFiniteBits).
KVSCOPE_SIMD_CLONES bool copyAndCheck(const float* __restrict src, float* __restrict dst, int64_t n) {
  uint32_t carry = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = src[i];
    dst[i] = v;
    carry |= simd::nonFiniteBits(v);
  }
  return (carry & 0x80000000u) != 0;
}

bool copyTensorAndCheck(const Tensor3& src, Tensor3& dst) {
  const auto n = static_cast<int64_t>(src.size());
  constexpr int64_t kChunk = int64_t{1} << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n > kChunk)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t at = c * kChunk;
    bad |= copyAndCheck(src.data.data() + at, dst.data.data() + at, std::min(kChunk, n - at)) ? 1 : 0;
  }
  return bad != 0;
}

std::string firstNonFinite(const Tensor3& x) {
  for (int64_t h = 0; h < x.heads; ++h) {
    for (int64_t t = 0; t < x.tokens; ++t) {
      const float* row = x.row(h, t);
      for (int64_t c = 0; c < x.dim; ++c) {
        if (!std::isfinite(row[c])) {
          return "non-finite value at head " + std::to_string(h) + ", token " + std::to_string(t) +
                 ", channel " + std::to_string(c);
        }
      }
    }
  }
  return {};
}

}  // namespace kvscope
