// SPDX-License-Identifier: GPL-3.0-or-later
// The float32 Walsh–Hadamard transform in its three versions: the scalar stages, eight-float
// vectors compiled into every SIMD clone, and sixteen-float vectors for AVX-512 where the CPU has
// it (core/util/simd.h decides, core/util/simd_avx512.h holds its one intrinsic; the portable
// build has only the first two).
#include "core/quant/hadamard.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/quant/finite_check.h"
#include "core/util/simd.h"
#include "core/util/simd_avx512.h"


namespace kvscope {

namespace {

bool isPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Below this many elements threads cost more than they save.
constexpr int64_t kParallelThreshold = int64_t{1} << 16;

using simd::F8;

// The fast Walsh–Hadamard transform (Sylvester order, so the result is x·H) in float32: every
// value is multiplied by the float nearest 1/√D, then stages of stride 1, 2, 4, … each turn
// (a, b) into (a + b, a - b). Scaling first keeps every partial sum within √D of the inputs'
// size, so a sum overflows only where the result itself could. Every version below performs
// exactly these float operations, in this order, so all give the same bits
// (docs/spec-strings.md, "rot=hadamard").
KVSCOPE_SIMD_CLONES void hadamardRows(float* x, int64_t rows, int64_t d, float norm) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    for (int64_t i = 0; i < d; ++i) row[i] *= norm;
    for (int64_t len = 1; len < d; len <<= 1) {
      for (int64_t i = 0; i < d; i += 2 * len) {
        for (int64_t j = i; j < i + len; ++j) {
          const float a = row[j], b = row[j + len];
          row[j] = a + b;
          row[j + len] = a - b;
        }
      }
    }
  }
}

/// The butterflies of stage `Len` (1, 2 or 4) inside one vector of eight floats: lanes (j, j+Len)
/// become (a+b, a-b), the same two operations the scalar stage does.
template <int Len>
KVSCOPE_INLINE F8 butterflyInside(F8 v) {
  if constexpr (Len == 1) {
    const F8 swapped = __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
    return __builtin_shufflevector(v + swapped, swapped - v, 0, 9, 2, 11, 4, 13, 6, 15);
  } else if constexpr (Len == 2) {
    const F8 swapped = __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
    return __builtin_shufflevector(v + swapped, swapped - v, 0, 1, 10, 11, 4, 5, 14, 15);
  } else {
    const F8 swapped = __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
    return __builtin_shufflevector(v + swapped, swapped - v, 0, 1, 2, 3, 12, 13, 14, 15);
  }
}

/// The butterflies of every stage whose partners are Stride, 2·Stride, … vectors apart in v[0..N).
template <int N, int Stride>
KVSCOPE_INLINE void butterflyAcross(F8* v) {
  if constexpr (Stride < N) {
    for (int i = 0; i < N; i += 2 * Stride) {
      for (int j = i; j < i + Stride; ++j) {
        const F8 a = v[j], b = v[j + Stride];
        v[j] = a + b;
        v[j + Stride] = a - b;
      }
    }
    butterflyAcross<N, 2 * Stride>(v);
  }
}

/// hadamardRows for D = 8·V (V = 4…32), one row at a time held in vectors of eight floats: stages
/// 1-4 inside each vector, then the wider ones across them; the scalar order on the same floats.
template <int V>
KVSCOPE_INLINE void hadamardRowsBlocked(float* x, int64_t rows, float norm) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * 8 * V;
    F8 v[V];
    for (int k = 0; k < V; ++k) {
      std::memcpy(&v[k], row + 8 * k, sizeof(F8));
      v[k] = butterflyInside<4>(butterflyInside<2>(butterflyInside<1>(v[k] * norm)));
    }
    butterflyAcross<V, 1>(v);
    for (int k = 0; k < V; ++k) std::memcpy(row + 8 * k, &v[k], sizeof(F8));
  }
}

/// x·H for `rows` rows of `d` values (d a power of two) in the clones.
KVSCOPE_SIMD_CLONES void hadamardClonedRows(float* x, int64_t rows, int64_t d, float norm) {
  switch (d) {
    case 32: hadamardRowsBlocked<4>(x, rows, norm); return;
    case 64: hadamardRowsBlocked<8>(x, rows, norm); return;
    case 128: hadamardRowsBlocked<16>(x, rows, norm); return;
    case 256: hadamardRowsBlocked<32>(x, rows, norm); return;
    default: hadamardRows(x, rows, d, norm); return;
  }
}

#if defined(KVSCOPE_X86_64_V4)
/// The butterflies of the stages whose partners are Stride, 2·Stride, … vectors apart.
template <int V, int Stride>
KVSCOPE_TARGET_V4 inline void butterflyAcrossV4(simd::F16* v) {
  if constexpr (Stride < V) {
    for (int i = 0; i < V; i += 2 * Stride) {
      for (int j = i; j < i + Stride; ++j) {
        const simd::F16 a = v[j], b = v[j + Stride];
        v[j] = a + b;
        v[j + Stride] = a - b;
      }
    }
    butterflyAcrossV4<V, 2 * Stride>(v);
  }
}

/// hadamardRowsBlocked for AVX-512 with D = 16·V (V = 2…16): a row is V vectors of sixteen
/// floats, stages 1-8 inside each vector (simd::v4::butterflyLanes, a fused multiply-add with
/// exact products), then the stages from 16 up across them. Reads `in` and writes `out` (which
/// may be `in`); with Check, says whether any value of `in` is non-finite (the check of
/// copyAndCheck, folded into the loads).
template <int V, bool Check>
KVSCOPE_TARGET_V4 bool hadamardRowsV4(const float* in, float* out, int64_t rows, float norm) {
  using simd::v4::butterflyLanes;
  simd::U16 carry{};
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = in + r * 16 * V;
    float* to = out + r * 16 * V;
    simd::F16 v[V];
#pragma GCC unroll 16
    for (int k = 0; k < V; ++k) {
      const simd::F16 x = simd::load16(from + 16 * k);
      if constexpr (Check) carry |= simd::nonFiniteBits(x);
      v[k] = butterflyLanes<8>(butterflyLanes<4>(butterflyLanes<2>(butterflyLanes<1>(x * norm))));
    }
    butterflyAcrossV4<V, 1>(v);
#pragma GCC unroll 16
    for (int k = 0; k < V; ++k) simd::store(to + 16 * k, v[k]);
  }
  return simd::anyNonFinite(carry);
}
#endif

/// The float32 factor of every rotated value: 1/√d rounded to float.
float hadamardNorm(int64_t d) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))); }

/// x·H for `rows` rows of `d` values (d a power of two).
void hadamardAnyRows(float* x, int64_t rows, int64_t d) {
  const float norm = hadamardNorm(d);
#if defined(KVSCOPE_X86_64_V4)
  if (simd::hasX86_64V4()) {
    switch (d) {
      case 32: hadamardRowsV4<2, false>(x, x, rows, norm); return;
      case 64: hadamardRowsV4<4, false>(x, x, rows, norm); return;
      case 128: hadamardRowsV4<8, false>(x, x, rows, norm); return;
      case 256: hadamardRowsV4<16, false>(x, x, rows, norm); return;
      default: break;
    }
  }
#endif
  hadamardClonedRows(x, rows, d, norm);
}

}  // namespace

void hadamardTransformRows(float* x, int64_t rows, int64_t d) {
  if (!isPowerOfTwo(d)) return;  // callers validate; a no-op beats a corrupt tensor
  hadamardAnyRows(x, rows, d);
}

void hadamardInPlace(Tensor3& x) {
  const int64_t d = x.dim;
  if (!isPowerOfTwo(d)) return;  // callers validate; a no-op beats a corrupt tensor
  const int64_t rows = x.heads * x.tokens;
  constexpr int64_t kRowsPerTask = 64;
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel for schedule(dynamic, 4) if (rows * d > kParallelThreshold)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t r0 = t * kRowsPerTask;
    hadamardAnyRows(x.data.data() + r0 * d, std::min(kRowsPerTask, rows - r0), d);
  }
}

bool copyCheckAndHadamard(const float* in, float* out, int64_t rows, int64_t d) {
#if defined(KVSCOPE_X86_64_V4)
  if (simd::hasX86_64V4()) {
    const float norm = hadamardNorm(d);
    switch (d) {
      case 32: return hadamardRowsV4<2, true>(in, out, rows, norm);
      case 64: return hadamardRowsV4<4, true>(in, out, rows, norm);
      case 128: return hadamardRowsV4<8, true>(in, out, rows, norm);
      case 256: return hadamardRowsV4<16, true>(in, out, rows, norm);
      default: break;
    }
  }
#endif
  if (copyAndCheck(in, out, rows * d)) return true;
  hadamardAnyRows(out, rows, d);
  return false;
}

}  // namespace kvscope
