// SPDX-License-Identifier: GPL-3.0-or-later
// The few AVX-512 operations that core's two hand-written x86-64-v4 kernels need and GCC's
// vector types cannot express, as intrinsics in this one place: the Hadamard rows
// (core/quant/hadamard.cpp) and the outlier candidates (core/quant/outlier_select.cpp). Present
// only where core/util/simd.h defines KVSCOPE_X86_64_V4 (never in the portable build); callers
// take them only when simd::hasX86_64V4(), beside a portable version with the same results.
#pragma once

#include <bit>
#include <cstdint>

#include "core/util/simd.h"
#include "core/util/small_float.h"

#if defined(KVSCOPE_X86_64_V4)
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics start from an "undefined" register it then warns about; the F16
// parameters never cross a non-inlined call (simd.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kvscope::simd::v4 {

/// One stage of stride `Len` (1, 2, 4 or 8) of a Walsh–Hadamard transform inside one vector of
/// sixteen floats: lane j becomes v[j]·s + v[j^Len], with s = +1 where j's Len bit is clear
/// (a + b) and −1 where it is set (a − b). The product is exact, so the fused multiply-add rounds
/// a + b and a − b once, as the scalar stage does (signed zeros included).
template <int Len>
KVSCOPE_TARGET_V4 inline F16 butterflyLanes(F16 in) {
  const auto v = std::bit_cast<__m512>(in);
  const auto sign = [](int j) { return (j & Len) != 0 ? -1.0f : 1.0f; };
  const __m512 signs = _mm512_setr_ps(sign(0), sign(1), sign(2), sign(3), sign(4), sign(5), sign(6), sign(7), sign(8),
                                      sign(9), sign(10), sign(11), sign(12), sign(13), sign(14), sign(15));
  __m512 partner;
  if constexpr (Len == 1) {
    partner = _mm512_permute_ps(v, 0xB1);  // lanes 1,0,3,2 in each 128-bit quarter
  } else if constexpr (Len == 2) {
    partner = _mm512_permute_ps(v, 0x4E);  // 2,3,0,1
  } else if constexpr (Len == 4) {
    partner = _mm512_shuffle_f32x4(v, v, 0xB1);  // quarters 1,0,3,2
  } else {
    partner = _mm512_shuffle_f32x4(v, v, 0x4E);  // quarters 2,3,0,1
  }
  return std::bit_cast<F16>(_mm512_fmadd_ps(v, signs, partner));
}

/// Writes to `hits` the offsets i of x[0..n) with fp::magnitudeKey(x[i]) ≥ floor, in ascending
/// order, and returns how many: sixteen keys per compare, the set lanes' offsets packed
/// (compressed) onto the list without a branch per value. `hits` must hold n + 16 entries.
KVSCOPE_TARGET_V4 inline int64_t offsetsAtLeast(const float* x, int64_t n, uint32_t floor, int32_t* hits) {
  int64_t count = 0;
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i atLeast = _mm512_set1_epi32(static_cast<int32_t>(floor));
  __m512i at = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i keys = _mm512_and_si512(_mm512_loadu_si512(x + i), magnitude);
    const __mmask16 mask = _mm512_cmpge_epu32_mask(keys, atLeast);
    _mm512_storeu_si512(hits + count, _mm512_maskz_compress_epi32(mask, at));
    count += std::popcount(static_cast<uint32_t>(mask));
    at = _mm512_add_epi32(at, _mm512_set1_epi32(16));
  }
  for (; i < n; ++i) {
    if (fp::magnitudeKey(x[i]) >= floor) hits[count++] = static_cast<int32_t>(i);
  }
  return count;
}

}  // namespace kvscope::simd::v4

#pragma GCC diagnostic pop
#endif
