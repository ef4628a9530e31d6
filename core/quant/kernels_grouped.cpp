// SPDX-License-Identifier: GPL-3.0-or-later
// Group parameters, clipping (quantization.md §4) and the vectorized apply loops of the grouped
// formats.
// The kernels never read floating-point exception flags; telling GCC so lets it if-convert the
// clamps and selects of the element loops into vector code (results are unchanged).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "core/quant/kernels_grouped.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvscope::kernels {

const std::array<float, 15>& nf4Thresholds() {
  static const std::array<float, 15> thresholds = [] {
    std::array<float, 15> t{};
    for (int i = 0; i < 15; ++i) {
      // Exact in double: both codes are floats of similar magnitude.
      const double mid = (static_cast<double>(kNf4Codebook[i]) + kNf4Codebook[i + 1]) / 2.0;
      float f = static_cast<float>(mid);
      if (static_cast<double>(f) <= mid) f = std::nextafter(f, std::numeric_limits<float>::infinity());
      t[i] = f;
    }
    return t;
  }();
  return thresholds;
}

GroupedKind groupedKind(const QuantSpec& spec) {
  switch (formatInfo(spec.format).levels) {
    case GroupedLevels::E4m3: return GroupedKind::E4m3;
    case GroupedLevels::E5m2: return GroupedKind::E5m2;
    case GroupedLevels::Nf4: return GroupedKind::Nf4;
    case GroupedLevels::Integer:
    case GroupedLevels::None: break;
  }
  return spec.symmetric ? GroupedKind::Sym : GroupedKind::Asym;
}

namespace {

/// `minscale=S`: the engines' scale floor (vLLM's 1e-6, TensorRT-LLM's exported 1), after meta.
KVSCOPE_INLINE GroupParams floored(const QuantSpec& spec, GroupParams p) {
  if (spec.minScale > 0) p.scale = std::max(p.scale, static_cast<float>(spec.minScale));
  return p;
}

/// fp8's divisor: `div=N` (vLLM's --calculate-kv-scales uses 200 and 100) or the format's Fmax.
KVSCOPE_INLINE double fp8Divisor(const QuantSpec& spec, double fmax) { return spec.divisor > 0 ? spec.divisor : fmax; }

}  // namespace

GroupParams paramsFromMaxAbs(const QuantSpec& spec, double a) {
  GroupParams p;
  switch (groupedKind(spec)) {
    case GroupedKind::Sym: {
      const double qmax = static_cast<double>((1 << (spec.bits - 1)) - 1);
      p.scale = fp::metaRound(a / qmax, spec.scale);
      break;
    }
    case GroupedKind::E4m3:
      p.scale = spec.unitscale ? 1.0f : fp::metaRound(a / fp8Divisor(spec, fp::kE4m3Max), spec.scale);
      break;
    case GroupedKind::E5m2:
      p.scale = spec.unitscale ? 1.0f : fp::metaRound(a / fp8Divisor(spec, fp::kE5m2Max), spec.scale);
      break;
    case GroupedKind::Nf4: p.scale = fp::metaRound(a, spec.scale); break;
    case GroupedKind::Asym: {  // not a max-abs format; treat as the range [-a, a]
      const double n = static_cast<double>((1 << spec.bits) - 1);
      p.scale = fp::metaRound(2.0 * a / n, spec.scale);
      p.zero = fp::metaRound(-a, spec.scale);
      break;
    }
  }
  return floored(spec, p);
}

GroupParams paramsFromRange(const QuantSpec& spec, double lo, double hi) {
  if (groupedKind(spec) != GroupedKind::Asym) {
    return paramsFromMaxAbs(spec, std::max(std::fabs(lo), std::fabs(hi)));
  }
  const double n = static_cast<double>((1 << spec.bits) - 1);
  GroupParams p;
  p.scale = fp::metaRound((hi - lo) / n, spec.scale);
  p.zero = fp::metaRound(lo, spec.scale);
  return floored(spec, p);
}

namespace {

// One loop per call shape: in place (x == out, the fast path) and out of place (scratch for the
// mse search). Distinct pointers keep the compiler from falling back to a scalar loop for a
// possible overlap.
template <class F>
KVSCOPE_INLINE void forEach(const float* x, float* out, int64_t n, F f) {
  if (x == out) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(out[i]);
  } else {
    const float* __restrict in = x;
    float* __restrict o = out;
    for (int64_t i = 0; i < n; ++i) o[i] = f(in[i]);
  }
}

}  // namespace

KVSCOPE_SIMD_CLONES void applyGroupTo(const QuantSpec& spec, GroupParams params, const float* x, float* out, int64_t n) {
  const float s = params.scale;
  switch (groupedKind(spec)) {
    case GroupedKind::Asym: {
      const float m = params.zero;
      const float ceiling = roundingCeiling(static_cast<float>((1 << spec.bits) - 1));
      forEach(x, out, n, [=](float v) { return quantAsym(v, s, m, ceiling); });
      break;
    }
    case GroupedKind::Sym: {
      const float ceiling = roundingCeiling(static_cast<float>((1 << (spec.bits - 1)) - 1));
      forEach(x, out, n, [=](float v) { return quantSym(v, s, ceiling); });
      break;
    }
    case GroupedKind::E4m3: forEach(x, out, n, [=](float v) { return quantE4m3(v, s); }); break;
    case GroupedKind::E5m2: forEach(x, out, n, [=](float v) { return quantE5m2(v, s); }); break;
    case GroupedKind::Nf4: {
      const float* t = nf4Thresholds().data();
      forEach(x, out, n, [=](float v) { return quantNf4(v, s, t); });
      break;
    }
  }
}

void applyGroup(const QuantSpec& spec, GroupParams params, float* x, int64_t n) {
  applyGroupTo(spec, params, x, x, n);
}

int64_t percentileDrop(double p, int64_t n, bool asym) {
  // A tiny allowance so that e.g. p = 0.9, n = 10 drops one value although 1-0.9 < 0.1 in binary.
  const double raw = (1.0 - p) * static_cast<double>(n) / (asym ? 2.0 : 1.0);
  auto k = static_cast<int64_t>(std::floor(raw + 1e-9));
  const int64_t limit = asym ? (n - 1) / 2 : n - 1;
  return std::clamp<int64_t>(k, 0, std::max<int64_t>(limit, 0));
}

double mseRatio(int i) { return static_cast<double>(20 - i) / 20.0; }

KVSCOPE_SIMD_CLONES MinMax minMax(const float* x, int64_t n) { return minMaxInline(x, n); }

namespace {

double squaredError(const float* x, const float* q, int64_t n) {
  double e = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(q[i]) - static_cast<double>(x[i]);
    e += d * d;
  }
  return e;
}

}  // namespace

ClipRange clippedRange(const QuantSpec& spec, const float* x, int64_t n, float* scratch) {
  const bool asym = groupedKind(spec) == GroupedKind::Asym;
  if (n <= 0) return {};
  switch (spec.clip.kind) {
    case Clip::Kind::None: {
      const MinMax mm = minMax(x, n);
      if (asym) return {mm.lo, mm.hi};
      const double a = std::max(std::fabs(static_cast<double>(mm.lo)), std::fabs(static_cast<double>(mm.hi)));
      return {-a, a};
    }
    case Clip::Kind::Percentile: {
      const int64_t k = percentileDrop(spec.clip.p, n, asym);
      if (asym) {
        std::copy(x, x + n, scratch);
        std::nth_element(scratch, scratch + k, scratch + n);
        const double lo = scratch[k];
        std::nth_element(scratch, scratch + (n - 1 - k), scratch + n);
        const double hi = scratch[n - 1 - k];
        return {lo, hi};
      }
      for (int64_t i = 0; i < n; ++i) scratch[i] = std::fabs(x[i]);
      std::nth_element(scratch, scratch + (n - 1 - k), scratch + n);
      const double a = scratch[n - 1 - k];
      return {-a, a};
    }
    case Clip::Kind::Mse: {
      const MinMax mm = minMax(x, n);
      const double lo = mm.lo, hi = mm.hi;
      const double a = std::max(std::fabs(lo), std::fabs(hi));
      ClipRange best{lo, hi};
      if (!asym) best = {-a, a};
      double bestErr = std::numeric_limits<double>::infinity();
      for (int i = 0; i < kMseCandidates; ++i) {
        const double r = mseRatio(i);
        ClipRange c;
        if (asym) {
          const double shrink = (1.0 - r) * (hi - lo) / 2.0;
          c = {lo + shrink, hi - shrink};
        } else {
          c = {-r * a, r * a};
        }
        applyGroupTo(spec, paramsFromRange(spec, c.lo, c.hi), x, scratch, n);
        const double err = squaredError(x, scratch, n);
        if (err < bestErr) {  // strict: ties keep the larger r, tried first
          bestErr = err;
          best = c;
        }
      }
      return best;
    }
  }
  return {};
}

}  // namespace kvscope::kernels
