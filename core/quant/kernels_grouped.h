// SPDX-License-Identifier: GPL-3.0-or-later
// Per-element quantizers of the grouped formats (int asym/sym, fp8, nf4) and the per-group
// parameters (quantization.md §2, §4). Element functions are inline and branch-free so the loops
// of the fast path vectorize; the parameter functions run once per group and are shared by the
// fast path and describeGroup. The scalar reference (reference.cpp) re-derives everything itself.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/quant/fp_types.h"
#include "core/util/simd.h"
#include "core/quant/spec.h"

namespace kvscope::kernels {

/// std::round (half away from zero) for |v| < 2^31, written so that it vectorizes: adding the
/// largest float below 0.5 with v's sign, then truncating, is exact under round-to-nearest-even
/// (checked against std::round for every float in range).
inline float roundHalfAway(float v) {
  return static_cast<float>(static_cast<int32_t>(v + std::copysign(0.49999997f, v)));
}

/// The divisor for a scale s >= 0: s itself, or the smallest subnormal when s = 0 (then every
/// formula below multiplies by s = 0 again, so the quotient's size does not matter). A max()
/// rather than a select keeps the compiler from branching around the division.
inline float safeDivisor(float s) { return std::max(s, std::numeric_limits<float>::denorm_min()); }

/// Largest float below 0.5: adding it and truncating rounds halves up (see roundHalfAway).
inline constexpr float kJustBelowHalf = 0.49999997f;

/// The largest float below top + 0.5: clamping v to [-kJustBelowHalf, that] before rounding gives
/// exactly clamp(rnd(v), 0, top) (rounding is monotone), with one clamp instead of two.
inline float roundingCeiling(float top) { return std::nextafter(top + 0.5f, 0.0f); }

/// int asym: q = clamp(rnd((x-m)/s), 0, n), x̂ = q·s + m; s = 0 gives m. `ceiling` is
/// roundingCeiling(n). For v >= -0.5, rnd(v) is trunc(v + kJustBelowHalf).
inline float quantAsym(float x, float s, float m, float ceiling) {
  float v = (x - m) / safeDivisor(s);
  // A NaN quotient (only from infinite metadata) clamps to the lower end, as a vector max does,
  // so no NaN reaches the conversion and every build gives the same result.
  v = v > -kJustBelowHalf ? v : -kJustBelowHalf;
  v = v < ceiling ? v : ceiling;
  const auto q = static_cast<float>(static_cast<int32_t>(v + kJustBelowHalf));
  return q * s + m;
}

/// int sym: q = clamp(rnd(x/s), -qmax, qmax), x̂ = q·s; s = 0 gives 0. `ceiling` is
/// roundingCeiling(qmax).
inline float quantSym(float x, float s, float ceiling) {
  float v = x / safeDivisor(s);
  v = v > -ceiling ? v : -ceiling;  // NaN: the lower end (see quantAsym)
  v = v < ceiling ? v : ceiling;
  return roundHalfAway(v) * s;
}

/// fp8 e4m3: x̂ = s·e4m3(x/s); s = 0 gives 0.
inline float quantE4m3(float x, float s) {
  const float sd = safeDivisor(s);
  return fp::roundE4m3(x / sd) * s;
}

/// fp8 e5m2: x̂ = s·e5m2(x/s); s = 0 gives 0.
inline float quantE5m2(float x, float s) {
  const float sd = safeDivisor(s);
  return fp::roundE5m2(x / sd) * s;
}

/// The NF4 codebook of quantization.md §2 (QLoRA), as float32.
inline constexpr std::array<float, 16> kNf4Codebook{
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};

/// thresholds[i]: the smallest float strictly above the exact midpoint of codes i and i+1, so
/// "v >= thresholds[i]" means code i+1 is strictly nearer (a tie goes to the lower code).
const std::array<float, 15>& nf4Thresholds();

/// nf4: x̂ = s·c[k], k the code nearest x/s (ties: lower k); s = 0 gives 0.
inline float quantNf4(float x, float s, const float* thresholds) {
  const float sd = safeDivisor(s);
  const float v = x / sd;
  float c = kNf4Codebook[0];
  for (int i = 0; i < 15; ++i) c = v >= thresholds[i] ? kNf4Codebook[i + 1] : c;
  return c * s;
}

/// The parameters one group is stored with.
struct GroupParams {
  float scale = 0.0f;  ///< meta-rounded scale (1 with unitscale)
  float zero = 0.0f;   ///< asym: meta-rounded min m; otherwise 0
};

/// Which element quantizer a grouped spec uses.
enum class GroupedKind { Asym, Sym, E4m3, E5m2, Nf4 };
/// The element quantizer of a grouped spec (int/fp8/nf4).
GroupedKind groupedKind(const QuantSpec& spec);

/// Parameters from a (clipped) range: asym uses lo/hi, the others the max-abs a.
GroupParams paramsFromRange(const QuantSpec& spec, double lo, double hi);
/// Parameters from a max-abs value a (sym, fp8, nf4).
GroupParams paramsFromMaxAbs(const QuantSpec& spec, double a);

/// Quantizes n contiguous values in place with fixed parameters (vectorized loop).
void applyGroup(const QuantSpec& spec, GroupParams params, float* x, int64_t n);
/// As applyGroup, but writes to `out` (may alias x).
void applyGroupTo(const QuantSpec& spec, GroupParams params, const float* x, float* out, int64_t n);

/// The clipped range of a group of n values (§4), as (lo', hi'); for max-abs formats lo' = -a',
/// hi' = a'. `scratch` must hold n floats (it is overwritten). Handles Clip::None too.
struct ClipRange {
  double lo = 0, hi = 0;
};
ClipRange clippedRange(const QuantSpec& spec, const float* x, int64_t n, float* scratch);

/// Min and max of n >= 1 values.
struct MinMax {
  float lo, hi;
};
/// The min and max of x[0..n), n >= 1 (vectorized).
MinMax minMax(const float* x, int64_t n);

/// minMax's loop, inline, for callers that are compiled for several instruction sets: two
/// vectors of eight lanes; the result equals a sequential scan (min and max do not depend on
/// order, up to the sign of zero, which no caller can see). With Check it also ORs into *carry
/// the finite-check bits of every value: bit 31 ends up set when some value is NaN or infinite
/// (an exponent of all ones carries into it).
template <bool Check>
KVSCOPE_INLINE MinMax minMaxScan(const float* x, int64_t n, [[maybe_unused]] uint32_t* carry) {
  float lo = x[0], hi = x[0];
  int64_t i = 0;
  if (n >= 16) {
    simd::F8 l0 = simd::load(x), h0 = l0, l1 = simd::load(x + 8), h1 = l1;
    simd::U8 c = simd::nonFiniteBits(l0) | simd::nonFiniteBits(l1);
    for (i = 16; i + 16 <= n; i += 16) {
      const simd::F8 a = simd::load(x + i), b = simd::load(x + i + 8);
      if constexpr (Check) c |= simd::nonFiniteBits(a) | simd::nonFiniteBits(b);
      l0 = simd::min(l0, a);
      h0 = simd::max(h0, a);
      l1 = simd::min(l1, b);
      h1 = simd::max(h1, b);
    }
    lo = simd::minLane(simd::min(l0, l1));
    hi = simd::maxLane(simd::max(h0, h1));
    if constexpr (Check) {
      for (int k = 0; k < 8; ++k) *carry |= c[k];
    }
  }
  for (int64_t j = i; j < n; ++j) {
    if constexpr (Check) *carry |= simd::nonFiniteBits(x[j]);
    lo = x[j] < lo ? x[j] : lo;
    hi = x[j] > hi ? x[j] : hi;
  }
  return {lo, hi};
}

KVSCOPE_INLINE MinMax minMaxInline(const float* x, int64_t n) { return minMaxScan<false>(x, n, nullptr); }
KVSCOPE_INLINE MinMax minMaxCheckInline(const float* x, int64_t n, uint32_t* carry) {
  return minMaxScan<true>(x, n, carry);
}

/// Index k of §4's percentile rule, clamped so the clipped range never inverts.
int64_t percentileDrop(double p, int64_t n, bool asym);
/// Candidate ratio r_i = 1 - 0.05 i of `clip=mse`, i = 0..10.
double mseRatio(int i);
inline constexpr int kMseCandidates = 11;

}  // namespace kvscope::kernels
