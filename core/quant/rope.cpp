// SPDX-License-Identifier: GPL-3.0-or-later
// RoPE for `prerope` keys (quantization.md §1 step 1): each (first, second) channel pair of a
// token rotated by its position's angle, in double.
#include "core/quant/rope.h"

#include <cmath>
#include <vector>

namespace kvscope {
namespace {

/// Rotates each (first, second) channel pair of every token by ±angle(position, pair).
void rotatePairs(Tensor3& x, const RopeParams& rope, int64_t positionOffset, double sign) {
  const int64_t d = x.dim;
  const int64_t pairs = d / 2;
  if (pairs == 0) return;
  // Frequencies and angles in double: float angles at position 32k lose whole radians of phase.
  std::vector<double> freq(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    freq[static_cast<size_t>(i)] =
        std::pow(rope.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  }
  const bool interleaved = rope.style == RopeStyle::Interleaved;
#pragma omp parallel for schedule(static) if (x.tokens * d > 65536)
  for (int64_t t = 0; t < x.tokens; ++t) {
    std::vector<double> c(static_cast<size_t>(pairs)), s(static_cast<size_t>(pairs));
    const double pos = static_cast<double>(t + positionOffset);
    for (int64_t i = 0; i < pairs; ++i) {
      const double angle = sign * pos * freq[static_cast<size_t>(i)];
      c[static_cast<size_t>(i)] = std::cos(angle);
      s[static_cast<size_t>(i)] = std::sin(angle);
    }
    for (int64_t h = 0; h < x.heads; ++h) {
      float* row = x.row(h, t);
      for (int64_t i = 0; i < pairs; ++i) {
        const int64_t a = interleaved ? 2 * i : i;
        const int64_t b = interleaved ? 2 * i + 1 : i + pairs;
        const double x0 = row[a], x1 = row[b];
        const double ci = c[static_cast<size_t>(i)], si = s[static_cast<size_t>(i)];
        row[a] = static_cast<float>(x0 * ci - x1 * si);
        row[b] = static_cast<float>(x0 * si + x1 * ci);
      }
    }
  }
}

}  // namespace

void applyRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset) {
  rotatePairs(x, rope, positionOffset, +1.0);
}

void applyInverseRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset) {
  rotatePairs(x, rope, positionOffset, -1.0);
}

}  // namespace kvscope
