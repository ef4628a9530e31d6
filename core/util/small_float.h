// SPDX-License-Identifier: GPL-3.0-or-later
// Small floating-point types as rounding functions on float (quantization.md §2): fp16, bf16,
// fp8 e4m3 / e5m2 and fp4 e2m1, all round-to-nearest-even. Vocabulary at the bottom of core: the
// dump reader and writer convert fp16/bf16 with it, the formats build on it. The element
// functions are branch-free so loops over them auto-vectorize; the bit encoders serve tests, the
// GUI and ggml's fp16 scales.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kvscope::fp {

/// The bits of a float.
inline uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
/// The float of some bits.
inline float fromBits(uint32_t u) { return std::bit_cast<float>(u); }
/// The bits of |v|: for finite v (and for +inf) they order like |v|, so selections and radix
/// histograms of magnitudes can work on integers.
inline uint32_t magnitudeKey(float v) { return bitsOf(v) & 0x7fffffffu; }

/// Rounds v to nearest-even onto a binary format with `MBits` mantissa bits and smallest normal
/// exponent `EMin`; beyond `maxFinite` it saturates (fp8, fp4) or becomes infinity (IEEE fp16,
/// bf16). NaN stays NaN.
///
/// One formula for normals and subnormals: adding M = 2^(max(e, EMin) - MBits + 23) (e the
/// exponent of |v|) makes the FPU's own round-to-nearest-even drop exactly the bits the format
/// lacks. Selects are written as sign masks, not ?:, so that GCC vectorizes the loops that call
/// this even with -ftrapping-math (it will not if-convert around float arithmetic).
template <int MBits, int EMin, bool Saturate>
inline float roundSmallFloat(float v, float maxFinite) {
  static_assert(MBits >= 1 && MBits <= 22);
  const uint32_t bits = bitsOf(v);
  const auto abits = static_cast<int32_t>(bits & 0x7fffffffu);
  const auto maxBits = static_cast<int32_t>(bitsOf(maxFinite));
  int32_t r;
  if constexpr (EMin == -126) {
    // bfloat16 shares float's exponent range: integer round-half-even of the dropped bits is exact
    // for subnormals too, and overflow carries into the infinity pattern by itself.
    constexpr int kShift = 23 - MBits;
    const int32_t a = std::min(abits, 0x7f800000);  // NaN is restored below; avoids overflow
    const int32_t half = (1 << (kShift - 1)) - 1 + ((a >> kShift) & 1);
    r = (a + half) & ~((1 << kShift) - 1);
  } else {
    static_assert(EMin > -126 && EMin + 2 * 24 < 127);
    // Values above 2·maxFinite all end as maxFinite or infinity; clamping keeps M finite.
    const auto clampBits = static_cast<int32_t>(bitsOf(2.0f * maxFinite));
    const int32_t clamped = std::min(abits, clampBits);
    const float a = fromBits(static_cast<uint32_t>(clamped));
    constexpr int32_t kEMinBits = (EMin + 127) << 23;
    const int32_t e = std::max(clamped & 0x7f800000, kEMinBits);
    const float magic = fromBits(static_cast<uint32_t>(e + ((23 - MBits) << 23)));
    r = static_cast<int32_t>(bitsOf((a + magic) - magic));
  }
  const int32_t over = (maxBits - r) >> 31;  // all ones when r > maxFinite
  const int32_t overValue = Saturate ? maxBits : 0x7f800000;
  r = (r & ~over) | (overValue & over);
  const int32_t nan = (0x7f800000 - abits) >> 31;  // all ones when v is NaN
  r = (r & ~nan) | (abits & nan);
  return fromBits(static_cast<uint32_t>(r) | (bits & 0x80000000u));
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
/// ties to even, overflowing to infinity above `maxFinite` (for per-group metadata). Uses the
/// magic-number addition in double (no libm calls: this runs once per group).
inline double roundDoubleTo(double v, int mbits, int emin, double maxFinite) {
  const double a = std::fabs(v);
  if (!(a <= maxFinite * 2.0) || a == 0.0) {  // NaN stays, huge becomes infinity, zero stays
    return a == 0.0 || a != a ? v : std::copysign(std::numeric_limits<double>::infinity(), v);
  }
  const int e = std::max(static_cast<int>((std::bit_cast<uint64_t>(a) >> 52) & 0x7ffu) - 1023, emin);
  const double magic = std::bit_cast<double>(static_cast<uint64_t>(e - mbits + 52 + 1023) << 52);
  const double r = (a + magic) - magic;
  if (r > maxFinite) return std::copysign(std::numeric_limits<double>::infinity(), v);
  return std::copysign(r, v);
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
