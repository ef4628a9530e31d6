// SPDX-License-Identifier: GPL-3.0-or-later
// RoPE for `prerope` keys (quantization.md §1 step 1): each (first, second) channel pair of a
// token rotated by its position's angle, in double.
#include "core/quant/rope.h"

#include <cmath>
#include <vector>

namespace kvscope {
namespace {

/// cos and sin of ±position·freq[i] for every pair, in double: float angles at position 32k
/// lose whole radians of phase.
void angles(const std::vector<double>& freq, double position, double sign, double* c, double* s) {
  for (size_t i = 0; i < freq.size(); ++i) {
    const double angle = sign * position * freq[i];
    c[i] = std::cos(angle);
    s[i] = std::sin(angle);
  }
}

/// Rotates the pairs of one head's `dim` values.
inline void rotateHead(float* row, int64_t pairs, bool interleaved, const double* c, const double* s) {
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t a = interleaved ? 2 * i : i;
    const int64_t b = interleaved ? 2 * i + 1 : i + pairs;
    const double x0 = row[a], x1 = row[b];
    row[a] = static_cast<float>(x0 * c[i] - x1 * s[i]);
    row[b] = static_cast<float>(x0 * s[i] + x1 * c[i]);
  }
}

/// Rotates each (first, second) channel pair of every token by ±angle(position, pair).
void rotatePairs(Tensor3& x, const RopeParams& rope, int64_t positionOffset, double sign) {
  const int64_t d = x.dim;
  const int64_t pairs = d / 2;
  if (pairs == 0) return;
  const std::vector<double> freq = ropeInverseFrequencies(rope, d);
  const bool interleaved = rope.style == RopeStyle::Interleaved;
#pragma omp parallel for schedule(static) if (x.tokens * d > 65536)
  for (int64_t t = 0; t < x.tokens; ++t) {
    std::vector<double> c(static_cast<size_t>(pairs)), s(static_cast<size_t>(pairs));
    angles(freq, static_cast<double>(t + positionOffset), sign, c.data(), s.data());
    for (int64_t h = 0; h < x.heads; ++h) rotateHead(x.row(h, t), pairs, interleaved, c.data(), s.data());
  }
}

}  // namespace

std::vector<double> ropeInverseFrequencies(const RopeParams& rope, int64_t dim) {
  const int64_t pairs = dim / 2;
  if (static_cast<int64_t>(rope.invFreq.size()) == pairs) return rope.invFreq;
  std::vector<double> freq(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    freq[static_cast<size_t>(i)] = std::pow(rope.theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
  }
  return freq;
}

void applyRopeRows(float* rows, int64_t count, int64_t heads, int64_t dim, int64_t firstPosition, RopeStyle style,
                   const std::vector<double>& invFreq) {
  const int64_t pairs = dim / 2;
  if (pairs == 0 || static_cast<int64_t>(invFreq.size()) != pairs) return;
  const bool interleaved = style == RopeStyle::Interleaved;
#pragma omp parallel for schedule(static) if (count * heads * dim > 65536)
  for (int64_t r = 0; r < count; ++r) {
    std::vector<double> c(static_cast<size_t>(pairs)), s(static_cast<size_t>(pairs));
    angles(invFreq, static_cast<double>(firstPosition + r), +1.0, c.data(), s.data());
    float* row = rows + r * heads * dim;
    for (int64_t h = 0; h < heads; ++h) rotateHead(row + h * dim, pairs, interleaved, c.data(), s.data());
  }
}

void applyRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset) {
  rotatePairs(x, rope, positionOffset, +1.0);
}

void applyInverseRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset) {
  rotatePairs(x, rope, positionOffset, -1.0);
}

}  // namespace kvscope
