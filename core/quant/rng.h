// SPDX-License-Identifier: GPL-3.0-or-later
// The contract's generator (quantization.md §1.3): every random object (rotation signs and
// matrices, the QJL matrix of §11) comes from it, so one seed gives one matrix on every machine.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace kvscope {

/// SplitMix64 (Steele, Lea, Flood 2014) exactly as §1.3 writes it.
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
  /// A uniform double in [0, 1): the draw's top 53 bits times 2^-53.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

/// Standard normal values by Box–Muller from pairs of the generator's uniforms (§1.3):
/// r = sqrt(-2 ln(1 - u1)), then r cos(2 pi u2) and r sin(2 pi u2).
class NormalStream {
 public:
  /// A stream over SplitMix64(seed).
  explicit NormalStream(uint64_t seed) : uniforms_(seed) {}
  /// The next normal value.
  double next() {
    if (haveSecond_) {
      haveSecond_ = false;
      return second_;
    }
    const double u1 = uniforms_.uniform();
    const double u2 = uniforms_.uniform();
    const double r = std::sqrt(-2.0 * std::log(1.0 - u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    second_ = r * std::sin(angle);
    haveSecond_ = true;
    return r * std::cos(angle);
  }

 private:
  SplitMix64 uniforms_;
  double second_ = 0.0;
  bool haveSecond_ = false;
};

}  // namespace kvscope
