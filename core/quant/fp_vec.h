// SPDX-License-Identifier: GPL-3.0-or-later
// fp_types.h's rounding functions on eight floats at once, for kernels that work on eight blocks
// at a time (their per-block scales then cost vector operations, not scalar ones per block). Each
// lane does exactly the scalar function's operations, so the results are the same bits.
#pragma once

#include <cstdint>
#include <limits>

#include "core/quant/fp_types.h"
#include "core/util/simd.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace kvscope::fp {

/// roundSmallFloat lane by lane (formats with EMin > -126: fp16, fp8, fp4).
template <int MBits, int EMin, bool Saturate>
KVSCOPE_INLINE simd::F8 roundSmallFloat8(simd::F8 v, float maxFinite) {
  using simd::F8;
  using simd::I8;
  static_assert(MBits >= 1 && MBits <= 22 && EMin > -126 && EMin + 2 * 24 < 127);
  const I8 bits = reinterpret_cast<I8>(v);
  const I8 abits = bits & 0x7fffffff;
  const auto maxBits = static_cast<int32_t>(bitsOf(maxFinite));
  const auto clampBits = static_cast<int32_t>(bitsOf(2.0f * maxFinite));
  const I8 clamped = abits < clampBits ? abits : clampBits;
  const F8 a = reinterpret_cast<F8>(clamped);
  constexpr int32_t kEMinBits = (EMin + 127) << 23;
  I8 e = clamped & 0x7f800000;
  e = e > kEMinBits ? e : kEMinBits;
  const F8 magic = reinterpret_cast<F8>(e + ((23 - MBits) << 23));
  I8 r = reinterpret_cast<I8>((a + magic) - magic);
  const I8 over = (maxBits - r) >> 31;
  const int32_t overValue = Saturate ? maxBits : 0x7f800000;
  r = (r & ~over) | (overValue & over);
  const I8 nan = (0x7f800000 - abits) >> 31;
  r = (r & ~nan) | (abits & nan);
  return reinterpret_cast<F8>(r | (bits & static_cast<int32_t>(0x80000000u)));
}

KVSCOPE_INLINE simd::F8 roundFp16(simd::F8 v) { return roundSmallFloat8<10, -14, false>(v, kFp16Max); }
KVSCOPE_INLINE simd::F8 roundE4m3(simd::F8 v) { return roundSmallFloat8<3, -6, true>(v, kE4m3Max); }

/// roundE2m1 for values that are not NaN, in half the operations (the block kernels' hot loop):
/// the same clamp and magic-number rounding, then saturation as a float minimum. For eight or
/// sixteen lanes (F8 / I8 or F16 / I16).
template <class F, class I>
KVSCOPE_INLINE F roundE2m1NotNan(F v) {
  const I bits = reinterpret_cast<I>(v);
  const I sign = bits & static_cast<int32_t>(0x80000000u);
  I clamped = bits ^ sign;
  const auto clampBits = static_cast<int32_t>(bitsOf(2.0f * kE2m1Max));
  clamped = clamped < clampBits ? clamped : clampBits;
  constexpr int32_t kEMinBits = 127 << 23;  // e2m1's smallest normal exponent is 0
  I e = clamped & 0x7f800000;
  e = e > kEMinBits ? e : kEMinBits;
  const F magic = reinterpret_cast<F>(e + (22 << 23));
  F r = (reinterpret_cast<F>(clamped) + magic) - magic;
  r = r < kE2m1Max ? r : kE2m1Max;
  return reinterpret_cast<F>(reinterpret_cast<I>(r) | sign);
}
KVSCOPE_INLINE simd::F8 roundE2m1NotNan(simd::F8 v) { return roundE2m1NotNan<simd::F8, simd::I8>(v); }
KVSCOPE_INLINE simd::F16 roundE2m1NotNan(simd::F16 v) { return roundE2m1NotNan<simd::F16, simd::I16>(v); }

/// roundDoubleTo (fp_types.h) lane by lane, on four doubles.
template <int MBits, int EMin>
KVSCOPE_INLINE simd::D4 roundDoubleTo4(simd::D4 v, double maxFinite) {
  using simd::D4;
  using simd::I4;
  const I4 bits = reinterpret_cast<I4>(v);
  const I4 sign = bits & static_cast<int64_t>(0x8000000000000000ull);
  const D4 a = reinterpret_cast<D4>(bits ^ sign);
  I4 e = ((reinterpret_cast<I4>(a) >> 52) & 0x7ff) - 1023;
  e = e > EMin ? e : I4{} + EMin;
  const D4 magic = reinterpret_cast<D4>((e - MBits + 52 + 1023) << 52);
  const D4 r = (a + magic) - magic;
  const double inf = std::numeric_limits<double>::infinity();
  // Huge values and rounded values above the largest finite become infinity; zero and NaN stay.
  const I4 keep = (a == 0.0) | (a != a);
  const I4 overflow = ~keep & (~(a <= maxFinite * 2.0) | (r > maxFinite));
  D4 out = r;
  out = overflow ? D4{} + inf : out;
  out = keep ? a : out;
  return reinterpret_cast<D4>(reinterpret_cast<I4>(out) | sign);
}

/// metaRound (fp_types.h) of four doubles, as floats.
KVSCOPE_INLINE void metaRound4(simd::D4 v, MetaType type, float* out) {
  simd::D4 r = v;
  switch (type) {
    case MetaType::Fp16: r = roundDoubleTo4<10, -14>(v, kFp16Max); break;
    case MetaType::Bf16: r = roundDoubleTo4<7, -126>(v, kBf16Max); break;
    case MetaType::Fp32: break;
  }
  for (int k = 0; k < 4; ++k) out[k] = static_cast<float>(r[k]);
}

}  // namespace kvscope::fp

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
