// SPDX-License-Identifier: GPL-3.0-or-later
// Fast block quantizers. The ggml kernels keep ggml's float32 operation order (x*id, then +8.5f,
// then a truncating cast; q*d + m on dequantization) and its fp16 rounding of scales, but skip the
// bit packing, which does not change any value.
// The kernels never read floating-point exception flags; telling GCC so lets it if-convert the
// clamps and selects of the element loops into vector code (results are unchanged).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "core/quant/kernels_block.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/quant/fp_types.h"
#include "core/quant/fp_vec.h"
#include "core/quant/kernels_grouped.h"
#include "core/util/simd.h"

namespace kvscope::kernels {
namespace {

constexpr int kQk = 32;

// n a multiple of 8.
KVSCOPE_INLINE float maxAbs(const float* x, int n) {
  simd::F8 m = {};
  for (int i = 0; i < n; i += 8) {
    const simd::F8 v = simd::load(x + i);
    m = simd::max(m, v < 0 ? -v : v);
  }
  return simd::maxLane(m);
}

// ggml's "value of largest magnitude, first one on ties" (its strict > keeps the first), from the
// block's min and max: only when -lo and hi are equal does the order matter.
float signedMax(const float* x, int n, MinMax mm) {
  if (mm.hi > -mm.lo) return mm.hi;
  if (-mm.lo > mm.hi) return mm.lo;
  if (mm.hi == 0.0f) return 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) == mm.hi) return x[i];
  }
  return 0.0f;
}

void mxfp4One(float* x) {
  const float a = maxAbs(x, kQk);
  if (!(a > 0.0f) || !std::isfinite(a)) {
    if (a == 0.0f) std::fill(x, x + kQk, 0.0f);
    return;
  }
  const int e = mxfp4Exponent(a);
  const float scale = std::ldexp(1.0f, e);
  // x / 2^e == x · 2^-e exactly (both are the exact product, rounded once); 2^-e is a float for
  // every e in E8M0's range, so the division can be a multiplication.
  const float inverse = std::ldexp(1.0f, -e);
  for (int i = 0; i < kQk; ++i) x[i] = fp::roundE2m1(x[i] * inverse) * scale;
}

// SGLang's KVFP4 (docs/formats.md "kvfp4"): 16 values, one power-of-two scale 2^e with
// e = ceil(log2(max(a/6, 1e-10))), elements on the e2m1 levels with ties away from zero.
void kvfp4One(float* x) {
  const float a = maxAbs(x, 16);
  const int e = kvfp4Exponent(a);
  const float scale = std::ldexp(1.0f, e), inverse = std::ldexp(1.0f, -e);  // e in [-33, 126]: both exact
  for (int i = 0; i < 16; ++i) x[i] = e2m1TiesAway(x[i] * inverse) * scale;
}

KVSCOPE_SIMD_CLONES void kvfp4(float* x, int64_t blocks, float /*g*/) {
  for (int64_t b = 0; b < blocks; ++b) kvfp4One(x + b * 16);
}


// ---- Eight blocks at a time -------------------------------------------------------------------
// A block's scale needs a horizontal reduction and a few scalar steps; done for one block of 16
// or 32 values they cost more than its elements. The batched kernels below reduce eight blocks
// at once (simd::reduceEach) and compute the eight scales in the lanes of one vector, with the
// same operations as the one-block versions, then run each block's elements with its scale.

using simd::F16;
using simd::F8;
using simd::I16;
using simd::I8;

/// Per-block minimum and maximum of eight consecutive blocks of `Vecs`·8 values at x. With
/// Check, also ORs the finite-check bits of every value into *bits (simd::nonFiniteBits).
template <int Vecs, bool Check = false>
KVSCOPE_INLINE void minMax8(const float* x, F8* lo, F8* hi, [[maybe_unused]] simd::U8* bits = nullptr) {
  F8 l[8], h[8];
  for (int k = 0; k < 8; ++k) {
    const float* p = x + k * Vecs * 8;
    F8 vl = simd::load(p), vh = vl;
    if constexpr (Check) *bits |= simd::nonFiniteBits(vl);
    for (int j = 1; j < Vecs; ++j) {
      const F8 v = simd::load(p + 8 * j);
      vl = simd::min(vl, v);
      vh = simd::max(vh, v);
      if constexpr (Check) *bits |= simd::nonFiniteBits(v);
    }
    l[k] = vl;
    h[k] = vh;
  }
  *lo = simd::reduceEach(l, [](F8 a, F8 b) { return simd::min(a, b); });
  *hi = simd::reduceEach(h, [](F8 a, F8 b) { return simd::max(a, b); });
}

/// Copies one block of kQk values from `in` to `out` (when they differ) for a one-block kernel
/// to work on in place; with Check, false when one of them is not finite.
template <bool Check>
KVSCOPE_INLINE bool blockToOut(const float* in, float* out) {
  if constexpr (Check) {
    simd::U8 bits{};
    for (int j = 0; j < kQk; j += 8) bits |= simd::nonFiniteBits(simd::load(in + j));
    if (simd::anyNonFinite(bits)) return false;
  }
  if (in != out) std::memcpy(out, in, kQk * sizeof(float));
  return true;
}

/// Lane-wise select: where `mask` is all ones, a; elsewhere b.
KVSCOPE_INLINE F8 select(I8 mask, F8 a, F8 b) {
  return reinterpret_cast<F8>((reinterpret_cast<I8>(a) & mask) | (reinterpret_cast<I8>(b) & ~mask));
}

void nvfp4One(float* x, float g) {
  constexpr int kBlock = 16;
  const float a = maxAbs(x, kBlock);
  const float d = g == 0.0f ? 0.0f : fp::roundE4m3(a / (6.0f * g));
  const float dg = d * g;
  if (d == 0.0f || dg == 0.0f) {
    std::fill(x, x + kBlock, 0.0f);
    return;
  }
  for (int i = 0; i < kBlock; ++i) x[i] = fp::roundE2m1(x[i] / dg) * dg;
}

/// nvfp4, eight blocks at a time, from `in` to `out` (which may be the same).
/// The max |x| of each of eight consecutive nvfp4 blocks at p (lane k: block k).
KVSCOPE_INLINE F8 nvfp4Maxima8(const float* p) {
  F8 m[8];
  for (int k = 0; k < 8; ++k) m[k] = simd::max(simd::abs(simd::load(p + 16 * k)), simd::abs(simd::load(p + 16 * k + 8)));
  return simd::reduceEach(m, [](F8 u, F8 v) { return simd::max(u, v); });
}

/// With `maxima` (nvfp4BlockMaxima's, one per block) the block maxima are read, not recomputed.
KVSCOPE_INLINE void nvfp4Run(const float* in, float* out, int64_t blocks, float g, const float* maxima = nullptr) {
  constexpr int kBlock = 16;
  int64_t b = 0;
  if (g != 0.0f) {
    for (; b + 8 <= blocks; b += 8) {
      const float* p = in + b * kBlock;
      float* o = out + b * kBlock;
      const F8 a = maxima != nullptr ? simd::load(maxima + b) : nvfp4Maxima8(p);
      const F8 d = fp::roundE4m3(a / (6.0f * g));
      const F8 dg = d * g;
      // A block whose d or d·g is zero becomes zeros (its quotients below are then discarded).
      const I8 zero = (d == 0.0f) | (dg == 0.0f);
      const I8 keep = ~zero;
      // Block k's scale and mask, broadcast from lane k (no round trip through memory).
      // Each block is one sixteen-lane vector.
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const F16 s = F16{} + dg[k];
        const I16 keepK = I16{} + keep[k];
        // Quotients are finite or ±inf, never NaN, except in discarded zero blocks.
        const F16 r = fp::roundE2m1NotNan(simd::load16(p + 16 * k) / s) * s;
        simd::store(o + 16 * k, reinterpret_cast<F16>(reinterpret_cast<I16>(r) & keepK));
      }
    }
  }
  for (; b < blocks; ++b) {
    if (out != in) std::memcpy(out + b * kBlock, in + b * kBlock, kBlock * sizeof(float));
    nvfp4One(out + b * kBlock, g);
  }
}

KVSCOPE_SIMD_CLONES void nvfp4(float* x, int64_t blocks, float g) { nvfp4Run(x, x, blocks, g); }

/// 2^e for e in E8M0's range [-127, 127], exactly (2^-127 is subnormal), without a libm call.
KVSCOPE_INLINE float pow2(int e) {
  return std::bit_cast<float>(e >= -126 ? static_cast<uint32_t>(e + 127) << 23 : uint32_t{0x00400000});
}

/// mxfp4, eight blocks' maxima at a time; each block's elements in sixteen-lane vectors. Blocks
/// whose max |x| is zero, subnormal or not finite (rare) take the one-block path.
KVSCOPE_SIMD_CLONES void mxfp4(float* x, int64_t blocks, float /*g*/) {
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    float* p = x + b * kQk;
    F8 lo, hi;
    minMax8<4>(p, &lo, &hi);
    const F8 amax = simd::max(simd::max(F8{}, hi), -lo);  // maxAbs's value
    for (int k = 0; k < 8; ++k) {
      float* block = p + k * kQk;
      const float a = amax[k];
      if (!(a >= std::numeric_limits<float>::min() && a <= std::numeric_limits<float>::max())) {
        mxfp4One(block);
        continue;
      }
      const int e = mxfp4Exponent(a);
      const float scale = pow2(e), inverse = pow2(-e);  // x·2^-e is x/2^e exactly (see mxfp4One)
      for (int j = 0; j < kQk; j += 16) {
        simd::store(block + j, fp::roundE2m1NotNan(simd::load16(block + j) * inverse) * scale);
      }
    }
  }
  for (; b < blocks; ++b) mxfp4One(x + b * kQk);
}

// When a ggml block's d is so small that id = 1/d overflows (|d| < 2^-128), x·id is infinite or
// NaN and ggml's cast of it to int8_t gives code 0 on x86 (the conversion yields 0x80000000, whose
// low byte is 0); fp16(d) is 0 then, so every value becomes ±0. The kernels reproduce that
// explicitly instead of converting a non-finite float (undefined behaviour in C++).
bool degenerateInverse(float id) { return !(std::fabs(id) <= std::numeric_limits<float>::max()); }

void q8_0One(float* x) {
  const float amax = maxAbs(x, kQk);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float dh = fp::roundFp16(d);
  if (degenerateInverse(id)) {
    for (int i = 0; i < kQk; ++i) x[i] = 0.0f * dh;
    return;
  }
  for (int i = 0; i < kQk; ++i) x[i] = roundHalfAway(x[i] * id) * dh;
}

/// Lane-wise id = d != 0 ? 1/d : 0, as ggml computes it.
KVSCOPE_INLINE F8 inverseOrZero(F8 d) {
  const I8 nonzero = d != 0.0f;
  const F8 safe = select(nonzero, d, F8{} + 1.0f);
  return select(nonzero, 1.0f / safe, F8{});
}

/// What every ggml kernel derives from d, for eight blocks: id = 1/d (0 for d = 0, as ggml), the
/// fp16-rounded d, and which blocks' id overflowed (degenerateInverse; those take the one-block
/// path).
struct GgmlScales8 {
  float id[8], dh[8];
  int degenerate[8];
};
KVSCOPE_INLINE GgmlScales8 ggmlScales8(F8 d) {
  GgmlScales8 out;
  const F8 id = inverseOrZero(d);
  simd::store(out.id, id);
  simd::store(out.dh, fp::roundFp16(d));
  const I8 bad = simd::abs(id) > std::numeric_limits<float>::max();
  std::memcpy(out.degenerate, &bad, sizeof out.degenerate);
  return out;
}

/// q8_0 of `blocks` blocks from `in` to `out` (the same or distinct); with Check, every value
/// read is checked first and the kernel returns false (having written part of `out`) at a
/// batch holding a NaN or an infinity.
template <bool Check>
KVSCOPE_INLINE bool q8_0Run(const float* in, float* out, int64_t blocks) {
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const float* p = in + b * kQk;
    float* o = out + b * kQk;
    F8 lo, hi;
    simd::U8 bits{};
    minMax8<4, Check>(p, &lo, &hi, &bits);
    if (Check && simd::anyNonFinite(bits)) return false;
    // maxAbs's value: the largest |x|, +0 for a block of zeros.
    const F8 amax = simd::max(simd::max(F8{}, hi), -lo);
    const GgmlScales8 sc = ggmlScales8(amax / 127.0f);
    for (int k = 0; k < 8; ++k) {
      if (sc.degenerate[k] != 0) {
        blockToOut<false>(p + k * kQk, o + k * kQk);
        q8_0One(o + k * kQk);
        continue;
      }
      for (int j = 0; j < kQk; j += 16) {
        const F16 v = simd::load16(p + k * kQk + j) * sc.id[k];
        // roundHalfAway lane by lane.
        const F16 half = reinterpret_cast<I16>(v) < 0 ? F16{} - kJustBelowHalf : F16{} + kJustBelowHalf;
        const F16 r = __builtin_convertvector(__builtin_convertvector(v + half, I16), F16);
        simd::store(o + k * kQk + j, r * sc.dh[k]);
      }
    }
  }
  for (; b < blocks; ++b) {
    if (!blockToOut<Check>(in + b * kQk, out + b * kQk)) return false;
    q8_0One(out + b * kQk);
  }
  return true;
}

KVSCOPE_SIMD_CLONES void q8_0(float* x, int64_t blocks, float /*g*/) { q8_0Run<false>(x, x, blocks); }

// q4_0 / q5_0: d = max / -half, code = min(top, trunc(x*id + half + 0.5)), x̂ = (code - half)·fp16(d).
template <int Half, int Top>
KVSCOPE_INLINE void symmetricOne(float* x) {
  const float max = signedMax(x, kQk, minMax(x, kQk));
  const float d = max / static_cast<float>(-Half);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float dh = fp::roundFp16(d);
  if (degenerateInverse(id)) {
    for (int i = 0; i < kQk; ++i) x[i] = static_cast<float>(-Half) * dh;
    return;
  }
  constexpr float kOffset = static_cast<float>(Half) + 0.5f;
  for (int i = 0; i < kQk; ++i) {
    const float x0 = x[i] * id;
    const int code = std::min(Top, static_cast<int>(x0 + kOffset));
    x[i] = static_cast<float>(code - Half) * dh;
  }
}

template <int Half, int Top, bool Check>
KVSCOPE_INLINE bool symmetricBlocks(const float* in, float* out, int64_t blocks) {
  constexpr float kOffset = static_cast<float>(Half) + 0.5f;
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const float* p = in + b * kQk;
    float* o = out + b * kQk;
    F8 lo, hi;
    simd::U8 bits{};
    minMax8<4, Check>(p, &lo, &hi, &bits);
    if (Check && simd::anyNonFinite(bits)) return false;
    // signedMax: hi or lo, whichever is larger in magnitude, +0 for a block of zeros; on a tie
    // the first in the block, looked up per block (rare in real data).
    F8 max = select(hi > -lo, hi, select(-lo > hi, lo, F8{}));
    const I8 tie = (hi == -lo) & (hi != 0.0f);
    float maxes[8];
    simd::store(maxes, max);
    int ties[8];
    std::memcpy(ties, &tie, sizeof ties);
    for (int k = 0; k < 8; ++k) {
      if (ties[k] != 0) maxes[k] = signedMax(p + k * kQk, kQk, MinMax{lo[k], hi[k]});
    }
    max = simd::load(maxes);
    const GgmlScales8 sc = ggmlScales8(max / static_cast<float>(-Half));
    for (int k = 0; k < 8; ++k) {
      if (sc.degenerate[k] != 0) {
        blockToOut<false>(p + k * kQk, o + k * kQk);
        symmetricOne<Half, Top>(o + k * kQk);
        continue;
      }
      for (int j = 0; j < kQk; j += 16) {
        const F16 x0 = simd::load16(p + k * kQk + j) * sc.id[k];
        I16 code = __builtin_convertvector(x0 + kOffset, I16);
        code = code < Top ? code : Top;
        simd::store(o + k * kQk + j, __builtin_convertvector(code - Half, F16) * sc.dh[k]);
      }
    }
  }
  for (; b < blocks; ++b) {
    if (!blockToOut<Check>(in + b * kQk, out + b * kQk)) return false;
    symmetricOne<Half, Top>(out + b * kQk);
  }
  return true;
}

// q4_1 / q5_1: d = (max-min)/top, code = trunc((x-min)*id + 0.5) (q4_1 caps at 15, q5_1 keeps
// 5 bits), x̂ = code·fp16(d) + fp16(min).
template <int Top, bool Cap>
KVSCOPE_INLINE void affineOne(float* x) {
  const MinMax mm = minMax(x, kQk);
  const float d = (mm.hi - mm.lo) / static_cast<float>(Top);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float dh = fp::roundFp16(d);
  const float mh = fp::roundFp16(mm.lo);
  if (degenerateInverse(id)) {
    for (int i = 0; i < kQk; ++i) x[i] = 0.0f * dh + mh;
    return;
  }
  for (int i = 0; i < kQk; ++i) {
    const float x0 = (x[i] - mm.lo) * id;
    int code = static_cast<int>(x0 + 0.5f);
    code = Cap ? std::min(Top, code) : (code & Top);
    x[i] = static_cast<float>(code) * dh + mh;
  }
}

template <int Top, bool Cap, bool Check>
KVSCOPE_INLINE bool affineBlocks(const float* in, float* out, int64_t blocks) {
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const float* p = in + b * kQk;
    float* o = out + b * kQk;
    F8 lo, hi;
    simd::U8 bits{};
    minMax8<4, Check>(p, &lo, &hi, &bits);
    if (Check && simd::anyNonFinite(bits)) return false;
    const GgmlScales8 sc = ggmlScales8((hi - lo) / static_cast<float>(Top));
    float los[8], mhs[8];
    simd::store(los, lo);
    simd::store(mhs, fp::roundFp16(lo));
    for (int k = 0; k < 8; ++k) {
      if (sc.degenerate[k] != 0) {
        blockToOut<false>(p + k * kQk, o + k * kQk);
        affineOne<Top, Cap>(o + k * kQk);
        continue;
      }
      for (int j = 0; j < kQk; j += 16) {
        const F16 x0 = (simd::load16(p + k * kQk + j) - los[k]) * sc.id[k];
        I16 code = __builtin_convertvector(x0 + 0.5f, I16);
        if constexpr (Cap) {
          code = code < Top ? code : Top;
        } else {
          code &= Top;
        }
        simd::store(o + k * kQk + j, __builtin_convertvector(code, F16) * sc.dh[k] + mhs[k]);
      }
    }
  }
  for (; b < blocks; ++b) {
    if (!blockToOut<Check>(in + b * kQk, out + b * kQk)) return false;
    affineOne<Top, Cap>(out + b * kQk);
  }
  return true;
}

KVSCOPE_SIMD_CLONES void q4_0(float* x, int64_t blocks, float /*g*/) { symmetricBlocks<8, 15, false>(x, x, blocks); }
KVSCOPE_SIMD_CLONES void q5_0(float* x, int64_t blocks, float /*g*/) { symmetricBlocks<16, 31, false>(x, x, blocks); }
KVSCOPE_SIMD_CLONES void q4_1(float* x, int64_t blocks, float /*g*/) { affineBlocks<15, true, false>(x, x, blocks); }
KVSCOPE_SIMD_CLONES void q5_1(float* x, int64_t blocks, float /*g*/) { affineBlocks<31, false, false>(x, x, blocks); }

// The same reading `in` and writing `out`, checking every value read.
KVSCOPE_SIMD_CLONES bool q8_0From(const float* in, float* out, int64_t blocks) { return q8_0Run<true>(in, out, blocks); }
KVSCOPE_SIMD_CLONES bool q4_0From(const float* in, float* out, int64_t blocks) {
  return symmetricBlocks<8, 15, true>(in, out, blocks);
}
KVSCOPE_SIMD_CLONES bool q5_0From(const float* in, float* out, int64_t blocks) {
  return symmetricBlocks<16, 31, true>(in, out, blocks);
}
KVSCOPE_SIMD_CLONES bool q4_1From(const float* in, float* out, int64_t blocks) {
  return affineBlocks<15, true, true>(in, out, blocks);
}
KVSCOPE_SIMD_CLONES bool q5_1From(const float* in, float* out, int64_t blocks) {
  return affineBlocks<31, false, true>(in, out, blocks);
}

KVSCOPE_SIMD_CLONES void iq4nl(float* x, int64_t blocks, float /*g*/) {
  for (int64_t b = 0; b < blocks; ++b) {
    float* p = x + b * kQk;
    int codes[32];
    const float dh = iq4nlQuantize(p, codes);
    for (int j = 0; j < kQk; ++j) p[j] = dh * static_cast<float>(kIq4nlValues[codes[j]]);
  }
}

}  // namespace

// ggml's quantize_row_iq4_nl_ref (quantize_row_iq4_nl_impl with no importance weights and
// ntry = -1): codes from d0 = max/-127, then the weighted least-squares scale
// d = Σw·q·x / Σw·q² with w = x², stored as fp16.
float iq4nlQuantize(const float* x, int* codes) {
  constexpr float kGroupMaxEps = 1e-15f;
  const MinMax mm = minMax(x, kQk);
  const float amax = std::max(-mm.lo, mm.hi);
  const float max = signedMax(x, kQk, mm);
  if (amax < kGroupMaxEps) {
    std::fill(codes, codes + kQk, 0);
    return 0.0f;
  }
  float d = max / static_cast<float>(kIq4nlValues[0]);
  const float id = 1.0f / d;
  // best_index_int8 as a count: the boundary between codes i and i+1 is passed exactly when ggml's
  // test "x - v[i] < v[i+1] - x" fails (monotone in x), so the code is the number of failures.
  constexpr auto v = [] {
    std::array<float, 16> f{};
    for (int i = 0; i < 16; ++i) f[i] = kIq4nlValues[i];
    return f;
  }();
  for (int j = 0; j < kQk; ++j) {
    const float al = id * x[j];
    int l = 0;
    for (int i = 0; i < 15; ++i) l += (al - v[i] < v[i + 1] - al) ? 0 : 1;
    codes[j] = l;
  }
  float sumqx = 0.0f, sumq2 = 0.0f;  // in ggml's order: sequential float sums
  for (int j = 0; j < kQk; ++j) {
    const float q = v[codes[j]];
    const float w = x[j] * x[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
  return fp::roundFp16(d);
}

float mxfp4Scale(const float* x, float /*g*/, float* zero) {
  *zero = 0.0f;
  const float a = maxAbs(x, kQk);
  return a > 0.0f ? std::ldexp(1.0f, mxfp4Exponent(a)) : 0.0f;
}
float kvfp4Scale(const float* x, float /*g*/, float* zero) {
  *zero = 0.0f;
  return std::ldexp(1.0f, kvfp4Exponent(maxAbs(x, 16)));
}
float nvfp4Scale(const float* x, float g, float* zero) {
  *zero = 0.0f;
  const float a = maxAbs(x, 16);
  const float d = g == 0.0f ? 0.0f : fp::roundE4m3(a / (6.0f * g));
  return d * g;
}
float q8_0Scale(const float* x, float /*g*/, float* zero) {
  *zero = 0.0f;
  return fp::roundFp16(maxAbs(x, kQk) / 127.0f);
}
float q4_0Scale(const float* x, float /*g*/, float* zero) {
  *zero = 0.0f;
  return fp::roundFp16(signedMax(x, kQk, minMax(x, kQk)) / -8.0f);
}
float q5_0Scale(const float* x, float /*g*/, float* zero) {
  *zero = 0.0f;
  return fp::roundFp16(signedMax(x, kQk, minMax(x, kQk)) / -16.0f);
}
float q4_1Scale(const float* x, float /*g*/, float* zero) {
  const MinMax mm = minMax(x, kQk);
  *zero = fp::roundFp16(mm.lo);
  return fp::roundFp16((mm.hi - mm.lo) / 15.0f);
}
float q5_1Scale(const float* x, float /*g*/, float* zero) {
  const MinMax mm = minMax(x, kQk);
  *zero = fp::roundFp16(mm.lo);
  return fp::roundFp16((mm.hi - mm.lo) / 31.0f);
}
float iq4nlScale(const float* x, float /*g*/, float* zero) {
  *zero = 0.0f;
  int codes[kQk];
  return iq4nlQuantize(x, codes);
}

float blockScale(FormatId format, const float* x, float g, float* zero) {
  *zero = 0.0f;
  const FormatInfo& info = formatInfo(format);
  return info.blockScale != nullptr ? info.blockScale(x, g, zero) : 0.0f;
}

float e2m1CodeValue(int code) { return fp::e2m1Value(static_cast<uint8_t>(code)); }
float iq4nlCodeValue(int code) { return static_cast<float>(kIq4nlValues[static_cast<size_t>(code)]); }

void mxfp4Blocks(float* x, int64_t blocks, float g) { mxfp4(x, blocks, g); }
void nvfp4Blocks(float* x, int64_t blocks, float g) { nvfp4(x, blocks, g); }
void kvfp4Blocks(float* x, int64_t blocks, float g) { kvfp4(x, blocks, g); }
void q8_0Blocks(float* x, int64_t blocks, float g) { q8_0(x, blocks, g); }
void q4_0Blocks(float* x, int64_t blocks, float g) { q4_0(x, blocks, g); }
void q4_1Blocks(float* x, int64_t blocks, float g) { q4_1(x, blocks, g); }
void q5_0Blocks(float* x, int64_t blocks, float g) { q5_0(x, blocks, g); }
void q5_1Blocks(float* x, int64_t blocks, float g) { q5_1(x, blocks, g); }
void iq4nlBlocks(float* x, int64_t blocks, float g) { iq4nl(x, blocks, g); }
bool q8_0BlocksFrom(const float* in, float* out, int64_t blocks) { return q8_0From(in, out, blocks); }
bool q4_0BlocksFrom(const float* in, float* out, int64_t blocks) { return q4_0From(in, out, blocks); }
bool q4_1BlocksFrom(const float* in, float* out, int64_t blocks) { return q4_1From(in, out, blocks); }
bool q5_0BlocksFrom(const float* in, float* out, int64_t blocks) { return q5_0From(in, out, blocks); }
bool q5_1BlocksFrom(const float* in, float* out, int64_t blocks) { return q5_1From(in, out, blocks); }

int iq4nlBestIndex(float x) {
  const auto& v = kIq4nlValues;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < v[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - v[mu - 1] < v[mu] - x ? mu - 1 : mu;
}

float nvfp4GlobalScale(float maxAbs) {
  return static_cast<float>(static_cast<double>(maxAbs) / (448.0 * 6.0));
}

int mxfp4Exponent(float maxAbs) {
  // floor(log2 a) is the exponent field for normal a (ilogb only for subnormals); E8M0 holds
  // 2^-127 .. 2^127.
  const int field = static_cast<int>((fp::bitsOf(maxAbs) >> 23) & 0xffu);
  const int e = field != 0 ? field - 127 : std::ilogb(maxAbs);
  return std::clamp(e - 2, -127, 127);
}

int kvfp4Exponent(float maxAbs) {
  // torch.clamp(a / 6, min=1e-10) in float32, then ceil(log2): y = 1.m · 2^E is above 2^E unless
  // m = 0. y ≥ 1e-10 is normal; an infinite a (not expected) gives E = 128.
  const float y = std::max(maxAbs / 6.0f, 1e-10f);
  const uint32_t bits = fp::bitsOf(y);
  const int field = static_cast<int>((bits >> 23) & 0xffu);
  const int e = field - 127 + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return std::min(e, 127);
}

float e2m1TiesAway(float v) {
  const float av = std::fabs(v);
  const float m = av >= 5.0f    ? 6.0f
                  : av >= 3.5f  ? 4.0f
                  : av >= 2.5f  ? 3.0f
                  : av >= 1.75f ? 2.0f
                  : av >= 1.25f ? 1.5f
                  : av >= 0.75f ? 1.0f
                  : av >= 0.25f ? 0.5f
                                : 0.0f;
  return v < 0.0f ? -m : m;
}

KVSCOPE_SIMD_CLONES void nvfp4From(const float* in, float* out, int64_t blocks, float g, const float* maxima) {
  nvfp4Run(in, out, blocks, g, maxima);
}

KVSCOPE_SIMD_CLONES bool nvfp4BlockMaxima(const float* x, int64_t blocks, float* maxima, float* largest) {
  simd::U8 bits{};
  F8 all{};
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const float* p = x + b * 16;
    for (int j = 0; j < 16 * 8; j += 8) bits |= simd::nonFiniteBits(simd::load(p + j));
    const F8 a = nvfp4Maxima8(p);
    simd::store(maxima + b, a);
    all = simd::max(all, a);
  }
  float top = simd::maxLane(all);
  uint32_t rest = 0;
  for (; b < blocks; ++b) {
    float a = 0.0f;
    for (int j = 0; j < 16; ++j) {
      const float v = x[b * 16 + j];
      rest |= simd::nonFiniteBits(v);
      a = std::max(a, std::fabs(v));
    }
    maxima[b] = a;
    top = std::max(top, a);
  }
  *largest = top;
  for (int i = 0; i < 8; ++i) rest |= bits[i];
  return (rest & 0x80000000u) != 0;
}

BlockFromKernel blockFromKernel(FormatId format) { return formatInfo(format).blockFromKernel; }

BlockKernel blockKernel(FormatId format) { return formatInfo(format).blockKernel; }

}  // namespace kvscope::kernels
