// SPDX-License-Identifier: GPL-3.0-or-later
// The contract's generator (quantization.md §1 step 3): SplitMix64 draws, uniforms from their
// top 53 bits and normal pairs by Box–Muller, so the same seed gives the same rotation and QJL
// matrices on every machine.
#pragma once

#include <cstdint>
#include <vector>

namespace kvscope {

/// SplitMix64 (Steele, Lea, Flood 2014) exactly as §1 step 3 writes it.
class SplitMix64 {
 public:
  /// A stream whose state starts at `seed`.
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  /// The next 64-bit draw.
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// A uniform in [0, 1): (draw >> 11) · 2^-53.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

/// Normal draws by Box–Muller from pairs of uniforms (u1, u2): r = √(−2·ln(1 − u1)), then
/// r·cos(2πu2) and r·sin(2πu2), in that order.
class NormalStream {
 public:
  /// A stream of the generator seeded with `seed`.
  explicit NormalStream(uint64_t seed) : uniforms_(seed) {}
  /// The next normal draw.
  double next();

 private:
  SplitMix64 uniforms_;
  double spare_ = 0.0;
  bool hasSpare_ = false;
};

/// rows × cols normal draws of the stream seeded with `seed`, row-major.
std::vector<double> normalMatrix(uint64_t seed, int64_t rows, int64_t cols);

}  // namespace kvscope
