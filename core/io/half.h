// SPDX-License-Identifier: GPL-3.0-or-later
// IEEE binary16 <-> float32 conversions, done by us so that rounding is round-to-nearest-even
// by construction and fp16 reads avoid HDF5's slow generic float conversion.
#pragma once

#include <cstdint>
#include <cstring>

namespace kvscope {

/// Rounds a float32 to the nearest binary16 (ties to even); overflow gives ±Inf, NaN stays NaN.
inline uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (absx < 0x38800000u) {  // result is subnormal or zero: exponent below 2^-14
    if (absx < 0x33000000u)
      return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t exp = absx >> 23;
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // bring to units of 2^-24
    uint32_t h = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t h = ((absx - 0x38000000u) >> 13);
  const uint32_t rest = absx & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

/// Exact binary16 -> float32.
inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

/// Rounds a float32 to the nearest binary16 value and back (what storing as fp16 does).
inline float roundToHalf(float f) { return halfToFloat(floatToHalf(f)); }

}  // namespace kvscope
