// SPDX-License-Identifier: GPL-3.0-or-later
// Small floating-point types as rounding functions on float (quantization.md §2): fp16, bf16,
// fp8 e4m3 / e5m2 and fp4 e2m1, all round-to-nearest-even. The element functions are branch-free
// so loops over them auto-vectorize; the bit encoders serve tests, the GUI and ggml's fp16 scales.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/quant/spec.h"

namespace kvscope::fp {

/// The bits of a float.
inline uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
/// The float of some bits.
inline float fromBits(uint32_t u) { return std::bit_cast<float>(u); }

/// Rounds a >= 0 (finite) to the nearest value, ties to even, of a binary format with `MBits`
/// mantissa bits and smallest normal exponent `EMin`; overflow is left to the caller.
template <int MBits, int EMin>
inline float roundMagnitude(float a) {
  static_assert(MBits >= 1 && MBits <= 22 && EMin >= -126 && EMin - MBits + 23 <= 127);
  constexpr int kShift = 23 - MBits;
  constexpr uint32_t kHalfMinus1 = (1u << (kShift - 1)) - 1u;
  constexpr uint32_t kMask = ~((1u << kShift) - 1u);
  // Normal range: integer round-half-even on the dropped mantissa bits (a carry bumps the exponent).
  uint32_t u = bitsOf(a);
  u += kHalfMinus1 + ((u >> kShift) & 1u);
  const float normal = fromBits(u & kMask);
  // Subnormal range: adding 2^(EMin-MBits+23) makes the hardware's RNE round to the subnormal step.
  const float magic = fromBits(static_cast<uint32_t>(EMin - MBits + 23 + 127) << 23);
  const float sub = (a + magic) - magic;
  const float minNormal = fromBits(static_cast<uint32_t>(EMin + 127) << 23);
  return a >= minNormal ? normal : sub;
}

/// Rounds v to a small float format; beyond `maxFinite` it saturates (fp8, fp4) or becomes
/// infinity (IEEE fp16/bf16). NaN stays NaN.
template <int MBits, int EMin, bool Saturate>
inline float roundSmallFloat(float v, float maxFinite) {
  const float a = std::fabs(v);
  float r = roundMagnitude<MBits, EMin>(a);
  const float over = Saturate ? maxFinite : std::numeric_limits<float>::infinity();
  r = r > maxFinite ? over : r;
  r = a != a ? a : r;  // NaN in, NaN out
  return std::copysign(r, v);
}

inline constexpr float kFp16Max = 65504.0f;      ///< largest finite fp16
inline constexpr float kBf16Max = 3.38953139e38f;  ///< largest finite bf16
inline constexpr float kE4m3Max = 448.0f;        ///< largest e4m3 (OCP "fn": no infinities)
inline constexpr float kE5m2Max = 57344.0f;      ///< largest finite e5m2
inline constexpr float kE2m1Max = 6.0f;          ///< largest e2m1

/// v rounded to IEEE binary16 (RNE, overflow to infinity), as a float.
inline float roundFp16(float v) { return roundSmallFloat<10, -14, false>(v, kFp16Max); }
/// v rounded to bfloat16 (RNE, overflow to infinity), as a float.
inline float roundBf16(float v) { return roundSmallFloat<7, -126, false>(v, kBf16Max); }
/// v rounded to fp8 e4m3 (RNE, saturating at ±448), as a float.
inline float roundE4m3(float v) { return roundSmallFloat<3, -6, true>(v, kE4m3Max); }
/// v rounded to fp8 e5m2 (RNE, saturating at ±57344), as a float.
inline float roundE5m2(float v) { return roundSmallFloat<2, -14, true>(v, kE5m2Max); }
/// v rounded to fp4 e2m1 ±{0, 0.5, 1, 1.5, 2, 3, 4, 6} (ties to the even code, saturating).
inline float roundE2m1(float v) { return roundSmallFloat<1, 0, true>(v, kE2m1Max); }

/// Rounds a double to a format with `mbits` mantissa bits, smallest normal exponent `emin`,
/// ties to even, overflowing to infinity above `maxFinite` (for per-group metadata).
inline double roundDoubleTo(double v, int mbits, int emin, double maxFinite) {
  if (!std::isfinite(v) || v == 0.0) return v;
  int e = std::ilogb(v);
  if (e < emin) e = emin;
  const double r = std::ldexp(std::nearbyint(std::ldexp(v, mbits - e)), e - mbits);
  if (std::fabs(r) > maxFinite) return std::copysign(std::numeric_limits<double>::infinity(), v);
  return r;
}

/// meta(x) of quantization.md: x rounded to the metadata type (RNE), as a float.
inline float metaRound(double v, MetaType type) {
  switch (type) {
    case MetaType::Fp16: return static_cast<float>(roundDoubleTo(v, 10, -14, kFp16Max));
    case MetaType::Bf16: return static_cast<float>(roundDoubleTo(v, 7, -126, kBf16Max));
    case MetaType::Fp32: break;
  }
  return static_cast<float>(v);
}

/// IEEE binary16 bits of f, round-to-nearest-even (as ggml's GGML_FP32_TO_FP16).
inline uint16_t fp16Bits(float f) {
  const uint32_t sign = (bitsOf(f) >> 16) & 0x8000u;
  const float a = std::fabs(f);
  if (a != a) return static_cast<uint16_t>(sign | 0x7e00u);
  const float r = roundFp16(a);
  if (r == std::numeric_limits<float>::infinity()) return static_cast<uint16_t>(sign | 0x7c00u);
  const uint32_t u = bitsOf(r);
  const int e = static_cast<int>(u >> 23) - 127;
  if (e < -14) {  // subnormal or zero: r is an exact multiple of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::ldexp(r, 24)));
  }
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e + 15) << 10) | ((u >> 13) & 0x3ffu));
}

/// The float value of IEEE binary16 bits (exact).
inline float fp16Value(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return fromBits(sign | 0x7f800000u | (man << 13));
  return fromBits(sign | ((exp + 112u) << 23) | (man << 13));
}

/// bfloat16 bits of f, round-to-nearest-even.
inline uint16_t bf16Bits(float f) {
  if (f != f) return static_cast<uint16_t>((bitsOf(f) >> 16) | 0x40u);
  return static_cast<uint16_t>(bitsOf(roundBf16(f)) >> 16);
}
/// The float value of bfloat16 bits (exact).
inline float bf16Value(uint16_t h) { return fromBits(static_cast<uint32_t>(h) << 16); }

/// Decodes a small-float code with `EBits` exponent and `MBits` mantissa bits (bias
/// 2^(EBits-1)-1, no infinities/NaN handled: callers use finite codes only).
template <int EBits, int MBits>
inline float decodeSmallFloat(uint32_t code) {
  constexpr int kBias = (1 << (EBits - 1)) - 1;
  const bool neg = (code >> (EBits + MBits)) & 1u;
  const int exp = static_cast<int>((code >> MBits) & ((1u << EBits) - 1u));
  const int man = static_cast<int>(code & ((1u << MBits) - 1u));
  const float v = exp == 0 ? std::ldexp(static_cast<float>(man), 1 - kBias - MBits)
                           : std::ldexp(static_cast<float>((1 << MBits) + man), exp - kBias - MBits);
  return neg ? -v : v;
}

/// Encodes an exactly representable finite value r of the small format (e.g. from roundE4m3).
template <int EBits, int MBits>
inline uint32_t encodeSmallFloat(float r) {
  constexpr int kBias = (1 << (EBits - 1)) - 1;
  const uint32_t sign = std::signbit(r) ? (1u << (EBits + MBits)) : 0u;
  const float a = std::fabs(r);
  if (a == 0.0f) return sign;
  int e = std::ilogb(a);
  if (e < 1 - kBias) {  // subnormal
    return sign | static_cast<uint32_t>(std::ldexp(a, kBias - 1 + MBits));
  }
  const uint32_t man = static_cast<uint32_t>(std::ldexp(a, MBits - e)) - (1u << MBits);
  return sign | (static_cast<uint32_t>(e + kBias) << MBits) | man;
}

/// fp8 e4m3 code of v (RNE, saturating to ±448).
inline uint8_t e4m3Bits(float v) { return static_cast<uint8_t>(encodeSmallFloat<4, 3>(roundE4m3(v))); }
/// Value of an e4m3 code (0x7f / 0xff are NaN in OCP e4m3; they decode as NaN).
inline float e4m3Value(uint8_t c) {
  if ((c & 0x7fu) == 0x7fu) return std::numeric_limits<float>::quiet_NaN();
  return decodeSmallFloat<4, 3>(c);
}
/// fp8 e5m2 code of v (RNE, saturating to ±57344).
inline uint8_t e5m2Bits(float v) { return static_cast<uint8_t>(encodeSmallFloat<5, 2>(roundE5m2(v))); }
/// Value of an e5m2 code (exponent 31 is infinity/NaN).
inline float e5m2Value(uint8_t c) {
  if (((c >> 2) & 0x1fu) == 0x1fu) {
    if (c & 3u) return std::numeric_limits<float>::quiet_NaN();
    return (c & 0x80u) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  return decodeSmallFloat<5, 2>(c);
}
/// fp4 e2m1 code (4 bits) of v (ties to even code, saturating to ±6).
inline uint8_t e2m1Bits(float v) { return static_cast<uint8_t>(encodeSmallFloat<2, 1>(roundE2m1(v))); }
/// Value of an e2m1 code.
inline float e2m1Value(uint8_t c) { return decodeSmallFloat<2, 1>(c & 0xfu); }

}  // namespace kvscope::fp
