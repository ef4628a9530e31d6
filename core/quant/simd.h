// SPDX-License-Identifier: GPL-3.0-or-later
// What the hot loops of quantization use to be fast on any x86-64: function multi-versioning
// (each marked function is compiled for AVX2 and for the baseline, and the loader picks one), and
// GCC vector types for the reductions the compiler will not vectorize by itself.
#pragma once

#include <cstring>

/// Compiles a function twice, for AVX2 and for baseline x86-64, picking one at load time (GCC
/// function multi-versioning). AVX2 without FMA: no multiply-add is contracted, so both versions
/// round every operation alike and give identical results. Callees it should vectorize with it
/// must be inline (KVSCOPE_INLINE) and visible.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(KVSCOPE_NO_SIMD_CLONES) && \
    !defined(__SANITIZE_ADDRESS__)
#define KVSCOPE_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KVSCOPE_SIMD_CLONES
#endif

/// Forces inlining, so a helper is compiled for the instruction set of each clone that calls it.
#define KVSCOPE_INLINE [[gnu::always_inline]] inline

// The vector type only ever lives in registers of inlined code, so the ABI of passing it (which
// differs with and without AVX) never matters.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace kvscope::simd {

/// Eight floats (two SSE registers on the baseline, one AVX register in the AVX2 clones).
typedef float F8 __attribute__((vector_size(32)));  // NOLINT(modernize-use-using): GCC syntax

/// Four doubles (two SSE registers on the baseline, one AVX register in the AVX2 clones). Its
/// alignment is a double's, so it may point into any array of doubles (GCC vectors alias their
/// element type).
typedef double D4 __attribute__((vector_size(32), aligned(8)));  // NOLINT(modernize-use-using): GCC syntax

/// Loads eight floats from any address.
KVSCOPE_INLINE F8 load(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// The lane-wise minimum and maximum (the first operand when they compare equal).
KVSCOPE_INLINE F8 min(F8 a, F8 b) { return b < a ? b : a; }
KVSCOPE_INLINE F8 max(F8 a, F8 b) { return b > a ? b : a; }

/// The smallest and largest lane.
KVSCOPE_INLINE float minLane(F8 v) {
  float m = v[0];
  for (int i = 1; i < 8; ++i) m = v[i] < m ? v[i] : m;
  return m;
}
KVSCOPE_INLINE float maxLane(F8 v) {
  float m = v[0];
  for (int i = 1; i < 8; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

}  // namespace kvscope::simd

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
