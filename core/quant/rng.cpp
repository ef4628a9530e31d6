// SPDX-License-Identifier: GPL-3.0-or-later
// Normal draws of the contract's generator (quantization.md §1 step 3).
#include "core/quant/rng.h"

#include <cmath>
#include <numbers>

namespace kvscope {

double NormalStream::next() {
  if (hasSpare_) {
    hasSpare_ = false;
    return spare_;
  }
  const double u1 = uniforms_.uniform();
  const double u2 = uniforms_.uniform();
  // 1 − u1 lies in (0, 1]: the logarithm is finite.
  const double r = std::sqrt(-2.0 * std::log(1.0 - u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(angle);
  hasSpare_ = true;
  return r * std::cos(angle);
}

std::vector<double> normalMatrix(uint64_t seed, int64_t rows, int64_t cols) {
  NormalStream stream(seed);
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (double& v : out) v = stream.next();
  return out;
}

}  // namespace kvscope
