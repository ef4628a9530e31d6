// SPDX-License-Identifier: GPL-3.0-or-later
// Fused row passes of the attention engine; see softmax_rows.h. What "Eigen's value" means here
// was read from Eigen 3.4's code for the baseline build (SSE2, no FMA):
//   - exp: pexp_double (arch/Default/GenericPacketMathFunctions.h) with SSE's pmin/pmax
//     (_mm_min_pd(b, a), _mm_max_pd(b, a)), pfloor (print: ±2^52, then −1 where it rounded up)
//     and pldexp<Packet2d> (exponent clamped to ±2099, 2^e as four factors 2^b·2^b·2^b·2^(e−3b));
//     pmadd is a multiply then an add. The dense assignment loop (AssignEvaluator.h) runs the
//     packet exp over [0, n & ~1) of a destination on a 16-byte boundary and std::exp after it.
//   - sum: redux_impl<…, LinearVectorizedTraversal> (Redux.h): two packets of two (lanes j mod 4)
//     over [0, n & ~3), added lane-wise, one more packet when n & 2, the two lanes added, an
//     odd last element added last; n < 4 adds in index order.
//   - max over finite values does not depend on the order.
// The code below does the same operations per element with vectors of eight doubles; -ffp-
// contract=off keeps every multiply and add separate in every clone.
#include "core/attention/softmax_rows.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/util/simd.h"

namespace kvscope::attention_engine {
namespace {

typedef double D8 __attribute__((vector_size(64)));    // NOLINT(modernize-use-using): GCC syntax
typedef int64_t L8 __attribute__((vector_size(64)));   // NOLINT(modernize-use-using): GCC syntax
typedef double D4v __attribute__((vector_size(32)));   // NOLINT(modernize-use-using): GCC syntax
typedef float F8v __attribute__((vector_size(32)));    // NOLINT(modernize-use-using): GCC syntax

KVSCOPE_INLINE D8 splat(double v) { return D8{v, v, v, v, v, v, v, v}; }

KVSCOPE_INLINE D8 loadScaled(const float* p, double scale) {
  F8v f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, D8) * scale;
}

KVSCOPE_INLINE D8 loadD(const double* p) {
  D8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

KVSCOPE_INLINE void storeD(double* p, D8 v) { std::memcpy(p, &v, sizeof v); }

KVSCOPE_INLINE D4v lo4(D8 v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3); }
KVSCOPE_INLINE D4v hi4(D8 v) { return __builtin_shufflevector(v, v, 4, 5, 6, 7); }

KVSCOPE_INLINE D8 absBits(D8 a) {
  return reinterpret_cast<D8>(reinterpret_cast<L8>(a) & (L8{} + INT64_MAX));
}

// floor(a) for |a| < 2^51, the value Eigen's pfloor<Packet2d> (print: |a| ± 2^52 with the sign
// put back, then −1 where it rounded up) gives there, and the same +0 for a = −0: round to
// nearest by adding and subtracting 1.5·2^52, then −1 where that rounded up. Both arguments
// it gets (log2(e)·x + 1/2 with |x| ≤ 709.784, and a quarter of that) are far inside the range.
KVSCOPE_INLINE D8 eigenFloor(D8 a) {
  const D8 shifter = splat(6755399441055744.0);  // 1.5·2^52
  D8 r = a + shifter;
  r = r - shifter;
  return r - ((r > a) ? splat(1.0) : splat(0.0));
}

// 2^b for integral b in [-1022, 1023], from the bits of b + 1023 + 2^52.
KVSCOPE_INLINE D8 pow2(D8 b) {
  const D8 t = (b + splat(1023.0)) + splat(4503599627370496.0);
  return reinterpret_cast<D8>(reinterpret_cast<L8>(t) << 52);
}

// pldexp<Packet2d>: a · 2^e as ((a·2^b)·2^b)·2^b·2^(e−3b), b = floor(e/4).
KVSCOPE_INLINE D8 eigenLdexp(D8 a, D8 exponent) {
  D8 e = (splat(-2099.0) > exponent) ? splat(-2099.0) : exponent;
  e = (splat(2099.0) < e) ? splat(2099.0) : e;
  const D8 b = eigenFloor(e * splat(0.25));
  const D8 c = pow2(b);
  D8 out = ((a * c) * c) * c;
  return out * pow2(((e - b) - b) - b);
}

// pexp_double with the SSE packet primitives.
KVSCOPE_INLINE D8 eigenExp(D8 x0) {
  D8 x = (splat(709.784) < x0) ? splat(709.784) : x0;
  x = (splat(-709.784) > x) ? splat(-709.784) : x;
  D8 fx = splat(1.4426950408889634073599) * x + splat(0.5);
  fx = eigenFloor(fx);
  const D8 tmp = fx * splat(0.693145751953125);
  const D8 z = fx * splat(1.42860682030941723212e-6);
  x = x - tmp;
  x = x - z;
  const D8 x2 = x * x;
  D8 px = splat(1.26177193074810590878e-4);
  px = px * x2 + splat(3.02994407707441961300e-2);
  px = px * x2 + splat(9.99999999999999999910e-1);
  px = px * x;
  D8 qx = splat(3.00198505138664455042e-6);
  qx = qx * x2 + splat(2.52448340349684104192e-3);
  qx = qx * x2 + splat(2.27265548208155028766e-1);
  qx = qx * x2 + splat(2.00000000000000000009e0);
  x = px / (qx - px);
  x = splat(2.0) * x + splat(1.0);
  const D8 r = eigenLdexp(x, fx);
  return (x0 > r) ? x0 : r;
}

// Eigen's sum order: four lane accumulators over [0, n & ~3), then the fixed finish.
struct OrderSum {
  D4v acc = {-0.0, -0.0, -0.0, -0.0};  // −0 + x = x for every x, as the first packet's load
  KVSCOPE_INLINE void add8(D8 v) {
    acc = acc + lo4(v);
    acc = acc + hi4(v);
  }
  // Finishes with x[j] for j in [done, n), done a multiple of 4 not past n & ~3.
  KVSCOPE_INLINE double finish(const double* rest, int64_t done, int64_t n) const {
    if (n < 4) {
      double r = rest[0];
      for (int64_t j = 1; j < n; ++j) r += rest[j];
      return r;
    }
    D4v a = acc;
    const int64_t e2 = n & ~int64_t{3};
    int64_t j = done;
    for (; j < e2; j += 4) a = a + D4v{rest[j - done], rest[j - done + 1], rest[j - done + 2], rest[j - done + 3]};
    double l0 = a[0] + a[2], l1 = a[1] + a[3];
    if (n & 2) {
      l0 += rest[j - done];
      l1 += rest[j - done + 1];
    }
    double r = l0 + l1;
    if (n & 1) r += rest[n - 1 - done];
    return r;
  }
};

}  // namespace

double eigenPacketExp(double x) { return eigenExp(splat(x))[0]; }

float gemmFloat(double x) { return std::fabs(x) < static_cast<double>(FLT_MIN) ? 0.0f : static_cast<float>(x); }

KVSCOPE_SIMD_CLONES double eigenOrderSum(const double* x, int64_t n) {
  if (n <= 0) return 0.0;
  OrderSum sum;
  const int64_t e2 = n & ~int64_t{3};
  int64_t j = 0;
  if (n >= 4) {
    for (; j + 8 <= e2; j += 8) sum.add8(loadD(x + j));
  }
  return sum.finish(x + j, j, n);
}

KVSCOPE_SIMD_CLONES RowScan scanScores(const float* scores, const float* deltaScores, int64_t n, double scale) {
  RowScan out;
  D8 m1 = splat(-INFINITY), m2 = splat(-INFINITY), am = splat(0.0);
  // x − x is 0 for a finite x and NaN otherwise: one NaN makes `nan` NaN. (Comparisons whose
  // result is used as a mask would not vectorize here with GCC 12.)
  D8 nan = splat(0.0);
  OrderSum abs;
  const int64_t e2 = n & ~int64_t{3};
  int64_t j = 0;
  if (deltaScores) {
    for (; j + 8 <= e2; j += 8) {
      const D8 s = loadScaled(scores + j, scale);
      const D8 d = loadScaled(deltaScores + j, scale);
      const D8 h = s + d;
      const D8 ad = absBits(d);
      nan = nan + ((s - s) + (d - d)) + (h - h);
      m1 = s > m1 ? s : m1;
      m2 = h > m2 ? h : m2;
      am = ad > am ? ad : am;
      abs.add8(ad);
    }
  } else {
    for (; j + 8 <= e2; j += 8) {
      const D8 s = loadScaled(scores + j, scale);
      nan = nan + (s - s);
      m1 = s > m1 ? s : m1;
    }
  }
  double best1 = -INFINITY, best2 = -INFINITY, bestAbs = 0.0;
  bool finite = true;
  for (int i = 0; i < 8; ++i) {
    best1 = m1[i] > best1 ? m1[i] : best1;
    best2 = m2[i] > best2 ? m2[i] : best2;
    bestAbs = am[i] > bestAbs ? am[i] : bestAbs;
    finite = finite && nan[i] == 0.0;
  }
  // The rest one element at a time (at most 11), the same operations.
  double rest[12] = {};
  const int64_t done = j;
  for (; j < n; ++j) {
    const double s = static_cast<double>(scores[j]) * scale;
    finite = finite && std::fabs(s) <= DBL_MAX;
    best1 = s > best1 ? s : best1;
    if (deltaScores) {
      const double d = static_cast<double>(deltaScores[j]) * scale;
      const double h = s + d;
      finite = finite && std::fabs(d) <= DBL_MAX && std::fabs(h) <= DBL_MAX;
      best2 = h > best2 ? h : best2;
      rest[j - done] = std::fabs(d);
      bestAbs = rest[j - done] > bestAbs ? rest[j - done] : bestAbs;
    }
  }
  out.maxScore = best1;
  if (deltaScores) {
    out.maxScoreHat = best2;
    out.absDeltaMax = bestAbs;
    out.absDeltaSum = abs.finish(rest, done, n);
  }
  out.finite = finite;
  return out;
}

KVSCOPE_SIMD_CLONES double expScores(const float* scores, const float* deltaScores, int64_t n, double scale,
                                     double m, double* e) {
  const int64_t pairs = n & ~int64_t{1};
  const D8 mv = splat(m);
  int64_t j = 0;
  for (; j + 8 <= pairs; j += 8) {
    D8 x = loadScaled(scores + j, scale);
    if (deltaScores) x = x + loadScaled(deltaScores + j, scale);
    storeD(e + j, eigenExp(x - mv));
  }
  if (j < pairs) {  // the last packets, through a padded vector
    float s[8] = {}, d[8] = {};
    std::memcpy(s, scores + j, static_cast<size_t>(pairs - j) * sizeof(float));
    if (deltaScores) std::memcpy(d, deltaScores + j, static_cast<size_t>(pairs - j) * sizeof(float));
    D8 x = loadScaled(s, scale);
    if (deltaScores) x = x + loadScaled(d, scale);
    const D8 r = eigenExp(x - mv);
    for (int64_t i = j; i < pairs; ++i) e[i] = r[i - j];
  }
  if (n & 1) {
    double x = static_cast<double>(scores[n - 1]) * scale;
    if (deltaScores) x = x + static_cast<double>(deltaScores[n - 1]) * scale;
    e[n - 1] = std::exp(x - m);
  }
  return eigenOrderSum(e, n);
}

KVSCOPE_SIMD_CLONES double normalizeRow(const double* e, double* pOut, bool divide, double z, double* eHat,
                                        double zHat, const float* deltaScores, double scale, int64_t n,
                                        const RowOutputs& out) {
  OrderSum kl;
  const int64_t e2 = n & ~int64_t{3};
  const bool hat = eHat != nullptr;
  int64_t j = 0;
  const D8 zv = splat(z), zh = splat(zHat);
  for (; j + 8 <= e2; j += 8) {
    D8 p = loadD(e + j);
    if (divide) {
      p = p / zv;
      storeD(pOut + j, p);
    }
    D8 ph = p;
    if (hat) {
      ph = loadD(eHat + j) / zh;
      storeD(eHat + j, ph);
      kl.add8(p * loadScaled(deltaScores + j, scale));
    }
    // The floats the GEMMs read, flushed below 2^-126 as gemmFloat does.
    const D8 tiny = splat(static_cast<double>(FLT_MIN));
    if (out.prob) {
      const D8 f = absBits(p) < tiny ? splat(0.0) : p;
      const F8v v = __builtin_convertvector(f, F8v);
      std::memcpy(out.prob + j, &v, sizeof v);
    }
    if (out.deltaProb) {
      D8 dp = ph - p;
      dp = absBits(dp) < tiny ? splat(0.0) : dp;
      const F8v v = __builtin_convertvector(dp, F8v);
      std::memcpy(out.deltaProb + j, &v, sizeof v);
    }
    if (out.probHat) {
      const D8 f = absBits(ph) < tiny ? splat(0.0) : ph;
      const F8v v = __builtin_convertvector(f, F8v);
      std::memcpy(out.probHat + j, &v, sizeof v);
    }
  }
  double rest[12] = {};
  const int64_t done = j;
  for (; j < n; ++j) {
    double p = e[j];
    if (divide) {
      p = p / z;
      pOut[j] = p;
    }
    double ph = p;
    if (hat) {
      ph = eHat[j] / zHat;
      eHat[j] = ph;
      rest[j - done] = p * (static_cast<double>(deltaScores[j]) * scale);
    }
    if (out.prob) out.prob[j] = gemmFloat(p);
    if (out.deltaProb) out.deltaProb[j] = gemmFloat(ph - p);
    if (out.probHat) out.probHat[j] = gemmFloat(ph);
  }
  return hat ? kl.finish(rest, done, n) : 0.0;
}

KVSCOPE_SIMD_CLONES void candidatesAtLeast(const float* scores, const float* deltaScores, int64_t n, double scale,
                                           double threshold, std::vector<int64_t>& out) {
  out.clear();
  // Blocks of 32 whose largest value is below the threshold are skipped (almost all of them);
  // the others are looked at one value at a time.
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    D8 x[4];
    for (int b = 0; b < 4; ++b) {
      x[b] = loadScaled(scores + j + 8 * b, scale);
      if (deltaScores) x[b] = x[b] + loadScaled(deltaScores + j + 8 * b, scale);
    }
    D8 m = x[0] > x[1] ? x[0] : x[1];
    const D8 m23 = x[2] > x[3] ? x[2] : x[3];
    m = m > m23 ? m : m23;
    double top = m[0];
    for (int i = 1; i < 8; ++i) top = m[i] > top ? m[i] : top;
    if (!(top >= threshold)) continue;
    for (int b = 0; b < 4; ++b) {
      for (int i = 0; i < 8; ++i) {
        if (x[b][i] >= threshold) out.push_back(j + 8 * b + i);
      }
    }
  }
  for (; j < n; ++j) {
    double x = static_cast<double>(scores[j]) * scale;
    if (deltaScores) x = x + static_cast<double>(deltaScores[j]) * scale;
    if (x >= threshold) out.push_back(j);
  }
}

}  // namespace kvscope::attention_engine
