// SPDX-License-Identifier: GPL-3.0-or-later
// What the hot loops of core (quantization, attention, view data) use to be fast on any x86-64:
// function multi-versioning (each marked function is compiled for AVX-512, AVX2 and the
// baseline, and the loader picks one), and GCC vector types for what the compiler will not
// vectorize by itself. With KVSCOPE_PORTABLE everything here falls back to portable code.
#pragma once

#include <cstdint>
#include <cstring>

/// Compiles a function three times, for AVX-512 (x86-64-v4: its auto-vectorized loops use
/// 16-lane registers), AVX2 and baseline x86-64, picking one at load time (GCC function
/// multi-versioning). The build turns multiply-add contraction off (-ffp-contract=off, in
/// cmake/KvscopeWarnings.cmake), so every version rounds every operation alike and gives
/// identical results. Callees it should vectorize with it must be inline (KVSCOPE_INLINE) and
/// visible. Defining KVSCOPE_NO_AVX512 leaves out the AVX-512 version (to compare the two).
/// KVSCOPE_PORTABLE (the CMake option of that name) builds core without any x86 code: no clones,
/// no intrinsics, no streaming stores; the GCC vector types below compile on every target.
#if defined(__x86_64__) && !defined(KVSCOPE_PORTABLE)
#define KVSCOPE_HAS_SSE_STREAMING 1
#else
#define KVSCOPE_HAS_SSE_STREAMING 0
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(KVSCOPE_NO_SIMD_CLONES) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(KVSCOPE_PORTABLE)
/// KVSCOPE_SIMD_CLONES_256 is the same without the AVX-512 version, for loops that streamed
/// sixteen-lane vectors made slower (measured: the attention detail's weighted sums).
#define KVSCOPE_SIMD_CLONES_256 __attribute__((target_clones("avx2", "default")))
#if defined(KVSCOPE_NO_AVX512)
#define KVSCOPE_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KVSCOPE_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
/// A few kernels have a hand-written AVX-512 version besides their clones (KVSCOPE_TARGET_V4,
/// intrinsics), taken when simd::hasX86_64V4(); it must give the clones' bits exactly.
#define KVSCOPE_X86_64_V4 1
#define KVSCOPE_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#endif
#else
#define KVSCOPE_SIMD_CLONES
#define KVSCOPE_SIMD_CLONES_256
#endif

/// Forces inlining, so a helper is compiled for the instruction set of each clone that calls it.
#define KVSCOPE_INLINE [[gnu::always_inline]] inline

#if KVSCOPE_HAS_SSE_STREAMING
#include <xmmintrin.h>
#else
#include <atomic>
#endif

// The vector type only ever lives in registers of inlined code, so the ABI of passing it (which
// differs with and without AVX) never matters.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace kvscope::simd {

#if defined(KVSCOPE_X86_64_V4)
/// Whether this CPU runs x86-64-v4 code (AVX-512 F, BW, CD, DQ, VL).
inline bool hasX86_64V4() {
  static const bool yes = __builtin_cpu_supports("x86-64-v4") != 0;
  return yes;
}
#endif

/// Eight floats (two SSE registers on the baseline, one AVX register in the AVX2 clones).
typedef float F8 __attribute__((vector_size(32)));  // NOLINT(modernize-use-using): GCC syntax

/// Eight 32-bit integers, the lane-wise companion of F8 (comparisons of F8 give I8 masks; a cast
/// between the two reinterprets the bits).
typedef int32_t I8 __attribute__((vector_size(32)));  // NOLINT(modernize-use-using): GCC syntax

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

/// Stores eight floats to any address.
KVSCOPE_INLINE void store(float* p, F8 v) { std::memcpy(p, &v, sizeof v); }

/// Eight unsigned 32-bit integers (their arithmetic wraps, as the finite check needs).
typedef uint32_t U8 __attribute__((vector_size(32)));  // NOLINT(modernize-use-using): GCC syntax

/// Bit 31 set when v is NaN or infinite: an exponent of all ones carries into it. ORing these
/// over many values checks them all at once (the vector versions below do it lane by lane).
KVSCOPE_INLINE uint32_t nonFiniteBits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits & 0x7f800000u) + 0x00800000u;
}

/// Per lane, bit 31 set when v is NaN or infinite: an exponent of all ones carries into it.
/// ORing these over many vectors checks them all at once.
KVSCOPE_INLINE U8 nonFiniteBits(F8 v) { return (reinterpret_cast<U8>(v) & 0x7f800000u) + 0x00800000u; }

/// Lane-wise |v| (the sign bit cleared).
KVSCOPE_INLINE F8 abs(F8 v) { return reinterpret_cast<F8>(reinterpret_cast<I8>(v) & 0x7fffffff); }

/// Sixteen floats and their 32-bit integer companion: one AVX-512 register in the x86-64-v4
/// clones, two AVX registers in the AVX2 ones (GCC splits the operations), so a kernel written
/// with them runs at the width each clone has.
typedef float F16 __attribute__((vector_size(64)));    // NOLINT(modernize-use-using): GCC syntax
typedef int32_t I16 __attribute__((vector_size(64)));  // NOLINT(modernize-use-using): GCC syntax
/// Sixteen unsigned 32-bit integers (wrapping arithmetic, for the finite check).
typedef uint32_t U16 __attribute__((vector_size(64)));  // NOLINT(modernize-use-using): GCC syntax

/// Loads and stores sixteen floats at any address.
KVSCOPE_INLINE F16 load16(const float* p) {
  F16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
KVSCOPE_INLINE void store(float* p, F16 v) { std::memcpy(p, &v, sizeof v); }

/// nonFiniteBits, min and max above, for sixteen floats.
KVSCOPE_INLINE U16 nonFiniteBits(F16 v) { return (reinterpret_cast<U16>(v) & 0x7f800000u) + 0x00800000u; }
KVSCOPE_INLINE F16 min(F16 a, F16 b) { return b < a ? b : a; }
KVSCOPE_INLINE F16 max(F16 a, F16 b) { return b > a ? b : a; }

/// Whether finite-check bits (nonFiniteBits, ORed lane by lane) flag a NaN or an infinity in
/// any lane.
KVSCOPE_INLINE bool anyNonFinite(U8 bits) {
  uint32_t all = 0;
  for (int i = 0; i < 8; ++i) all |= bits[i];
  return (all & 0x80000000u) != 0;
}
KVSCOPE_INLINE bool anyNonFinite(U16 bits) {
  uint32_t all = 0;
  for (int i = 0; i < 16; ++i) all |= bits[i];
  return (all & 0x80000000u) != 0;
}

/// Copies n floats (n a multiple of 4) to a 16-byte aligned `dst` with non-temporal (streaming)
/// stores where the target has them (KVSCOPE_HAS_SSE_STREAMING), a plain copy elsewhere: a
/// layer-sized output does not fit in cache anyway, and streaming it skips reading every line of
/// it from memory before it is overwritten. The caller calls streamFence once after its last
/// copy, before other threads read `dst` (a fence per copy would wait for each one's stores to
/// drain instead of overlapping them with the next piece's work).
inline void streamCopy(float* dst, const float* src, int64_t n) {
#if KVSCOPE_HAS_SSE_STREAMING
  for (int64_t i = 0; i < n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
#else
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
#endif
}

/// Orders every streamed store before what follows (sfence; a release fence elsewhere).
inline void streamFence() {
#if KVSCOPE_HAS_SSE_STREAMING
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

/// Asks for the cache line at p to be fetched for one read (no temporal locality): a hint, with
/// no effect on results (GCC and clang have it on every target).
KVSCOPE_INLINE void prefetchOnce(const void* p) { __builtin_prefetch(p, 0, 0); }

/// Four 64-bit integers, the lane-wise companion of D4 (masks of D4 comparisons, shuffle indices).
typedef int64_t I4 __attribute__((vector_size(32)));  // NOLINT(modernize-use-using): GCC syntax

/// Lane-wise |v| of four doubles (the sign bit cleared).
KVSCOPE_INLINE D4 abs(D4 v) { return reinterpret_cast<D4>(reinterpret_cast<I4>(v) & 0x7fffffffffffffffll); }

/// Eight horizontal reductions at once: lane k of the result is op over the eight lanes of v[k].
/// `op` must be associative and commutative on the values it sees (min and max of finite floats).
template <class Op>
KVSCOPE_INLINE F8 reduceEach(const F8* v, Op op) {
  // Each level halves the lanes per input and doubles the inputs per vector. (Constant shuffles
  // with __builtin_shufflevector, which GCC 12 and clang both have.)
  F8 a[4], b[2];
  for (int i = 0; i < 4; ++i) {
    a[i] = op(__builtin_shufflevector(v[2 * i], v[2 * i + 1], 0, 8, 2, 10, 4, 12, 6, 14),
              __builtin_shufflevector(v[2 * i], v[2 * i + 1], 1, 9, 3, 11, 5, 13, 7, 15));
  }
  // a[i]: lanes (0,1) hold pairs of v[2i], v[2i+1] for lanes 0-1 of each, and so on.
  for (int i = 0; i < 2; ++i) {
    b[i] = op(__builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 1, 8, 9, 4, 5, 12, 13),
              __builtin_shufflevector(a[2 * i], a[2 * i + 1], 2, 3, 10, 11, 6, 7, 14, 15));
  }
  return op(__builtin_shufflevector(b[0], b[1], 0, 1, 2, 3, 8, 9, 10, 11),
            __builtin_shufflevector(b[0], b[1], 4, 5, 6, 7, 12, 13, 14, 15));
}

}  // namespace kvscope::simd

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
