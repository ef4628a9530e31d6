// SPDX-License-Identifier: GPL-3.0-or-later
// Scalar references: the spec's formulas, one value at a time, with ggml's block structs packed
// and unpacked as ggml does (core/quant/ggml_blocks.h). Slow on purpose; clarity first.
#include "core/quant/reference.h"

#include "core/quant/codebook.h"
#include "core/quant/hqq.h"
#include "core/quant/lmdeploy_tq.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/quant/codebook.h"
#include "core/quant/format_ops.h"
#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/fp_types.h"
#include "core/quant/ggml_blocks.h"

namespace kvscope {
namespace reference {

float roundToFormat(float v, int mbits, int emin, double maxFinite, bool saturate) {
  if (std::isnan(v)) return v;
  const double a = std::fabs(static_cast<double>(v));
  double r;
  if (a == 0.0 || std::isinf(a)) {
    r = a;
  } else {
    const int e = std::max(std::ilogb(a), emin);
    const double step = std::ldexp(1.0, e - mbits);
    r = std::nearbyint(a / step) * step;  // default rounding mode: ties to even
  }
  if (r > maxFinite) r = saturate ? maxFinite : std::numeric_limits<double>::infinity();
  return static_cast<float>(std::copysign(r, static_cast<double>(v)));
}

float fp16(float v) { return roundToFormat(v, 10, -14, 65504.0, false); }
float bf16(float v) { return roundToFormat(v, 7, -126, 3.38953139e38, false); }
float e4m3(float v) { return roundToFormat(v, 3, -6, 448.0, true); }
float e5m2(float v) { return roundToFormat(v, 2, -14, 57344.0, true); }
float e2m1(float v) { return roundToFormat(v, 1, 0, 6.0, true); }

namespace {

constexpr double kNf4[16] = {-1.0,
                             -0.6961928009986877,
                             -0.5250730514526367,
                             -0.39491748809814453,
                             -0.28444138169288635,
                             -0.18477343022823334,
                             -0.09105003625154495,
                             0.0,
                             0.07958029955625534,
                             0.16093020141124725,
                             0.24611230194568634,
                             0.33791524171829224,
                             0.44070982933044434,
                             0.5626170039176941,
                             0.7229568362236023,
                             1.0};

}  // namespace

float packedScale(float s) { return std::bit_cast<float>(std::bit_cast<uint32_t>(s) & ~uint32_t{0xF}); }

namespace {

bool isAsym(const QuantSpec& spec) { return formatInfo(spec.format).levels == GroupedLevels::Integer && !spec.symmetric; }

double meta(double v, const QuantSpec& spec) {
  switch (spec.scale) {
    case MetaType::Fp16: return fp::roundDoubleTo(v, 10, -14, 65504.0);
    case MetaType::Bf16: return fp::roundDoubleTo(v, 7, -126, 3.38953139e38);
    case MetaType::Fp32: break;
  }
  return static_cast<float>(v);  // fp32
}

}  // namespace

int nf4Index(float v) {
  int best = 0;
  double bestDistance = std::fabs(static_cast<double>(v) - static_cast<double>(static_cast<float>(kNf4[0])));
  for (int k = 1; k < 16; ++k) {
    const double d = std::fabs(static_cast<double>(v) - static_cast<double>(static_cast<float>(kNf4[k])));
    if (d < bestDistance) {  // strict: ties keep the lower k
      bestDistance = d;
      best = k;
    }
  }
  return best;
}

std::vector<std::vector<int64_t>> groupIndices(const QuantSpec& spec, int64_t heads, int64_t tokens,
                                               int64_t dim) {
  std::vector<std::vector<int64_t>> groups;
  auto at = [&](int64_t h, int64_t t, int64_t d) { return (h * tokens + t) * dim + d; };
  switch (spec.axis) {
    case Axis::Tensor: {
      groups.emplace_back();
      for (int64_t i = 0; i < heads * tokens * dim; ++i) groups.back().push_back(i);
      break;
    }
    case Axis::Head:
      for (int64_t h = 0; h < heads; ++h) {
        groups.emplace_back();
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t d = 0; d < dim; ++d) groups.back().push_back(at(h, t, d));
      }
      break;
    case Axis::Token: {
      const int64_t g = (spec.group <= 0 || spec.group >= dim) ? dim : spec.group;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t d0 = 0; d0 < dim; d0 += g) {
            groups.emplace_back();
            for (int64_t d = d0; d < std::min(dim, d0 + g); ++d) groups.back().push_back(at(h, t, d));
          }
      break;
    }
    case Axis::Channel: {
      const int64_t g = (spec.group <= 0 || spec.group >= tokens) ? tokens : spec.group;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t0 = 0; t0 < tokens; t0 += g)
          for (int64_t d = 0; d < dim; ++d) {
            groups.emplace_back();
            for (int64_t t = t0; t < std::min(tokens, t0 + g); ++t) groups.back().push_back(at(h, t, d));
          }
      break;
    }
  }
  return groups;
}

Params groupParams(const QuantSpec& spec, Range r) {
  Params p;
  const double a = std::max(std::fabs(r.lo), std::fabs(r.hi));
  switch (formatInfo(spec.format).levels) {
    case GroupedLevels::Integer:
      if (spec.symmetric) {
        const double qmax = std::pow(2.0, spec.bits - 1) - 1.0;
        p.scale = static_cast<float>(meta(a / qmax, spec));
      } else if (spec.zeroPacked) {
        // vLLM's int4_per_token_head: the plain range, an fp32 scale (floored by minscale=) and
        // z = clamp(rnd(−lo/s), 0, n) (docs/formats.md, "Engine rules").
        const double n = std::pow(2.0, spec.bits) - 1.0;
        p.scale = static_cast<float>((r.hi - r.lo) / n);
        if (spec.minScale > 0) p.scale = std::max(p.scale, static_cast<float>(spec.minScale));
        if (p.scale != 0.0f) p.intZero = static_cast<float>(std::clamp(std::round(-r.lo / p.scale), 0.0, n));
      } else if (spec.codesFp32) {
        // vLLM's TurboQuant values (triton_turboquant_store.py, _store_quantized_value, commit
        // 0135d081): s = fp32(fp32(max − min)/n), floored by minscale= (vLLM: 1e-8); the codes use
        // s and min in fp32, the reconstruction their meta() roundings (fp16 in the cache).
        const auto n = static_cast<float>(std::pow(2.0, spec.bits) - 1.0);
        const auto lo = static_cast<float>(r.lo), hi = static_cast<float>(r.hi);
        float s = (hi - lo) / n;
        if (spec.minScale > 0) s = s > static_cast<float>(spec.minScale) ? s : static_cast<float>(spec.minScale);
        p.rawScale = s;
        p.rawZero = lo;
        p.scale = static_cast<float>(meta(s, spec));
        p.zero = static_cast<float>(meta(lo, spec));
        return p;  // minscale= floored the fp32 scale: the stored one is meta() of it
      } else if (spec.zeroInt) {
        // The range is widened to hold 0, so that z is a code (QuaRot's ActQuantizer).
        const double n = std::pow(2.0, spec.bits) - 1.0;
        const double lo = std::min(r.lo, 0.0), hi = std::max(r.hi, 0.0);
        p.scale = static_cast<float>(meta((hi - lo) / n, spec));
        if (p.scale != 0.0f) p.intZero = static_cast<float>(std::clamp(std::round(-lo / p.scale), 0.0, n));
      } else if (spec.codesMeta) {
        // codes=meta: TurboMind's warp_stats takes min and max of the model-dtype values and
        // computes scale = (max − min)·fp32(1/n) in fp32, stored in the model dtype.
        const float lo = static_cast<float>(meta(r.lo, spec)), hi = static_cast<float>(meta(r.hi, spec));
        const float invN = static_cast<float>(1.0 / (std::pow(2.0, spec.bits) - 1.0));
        p.scale = static_cast<float>(meta((hi - lo) * invN, spec));
        p.zero = lo;
      } else {
        const double n = std::pow(2.0, spec.bits) - 1.0;
        p.scale = static_cast<float>(meta((r.hi - r.lo) / n, spec));
        p.zero = static_cast<float>(meta(r.lo, spec));
      }
      break;
    case GroupedLevels::E4m3:
      p.scale = spec.unitscale ? 1.0f : static_cast<float>(meta(a / (spec.divisor > 0 ? spec.divisor : 448.0), spec));
      break;
    case GroupedLevels::E5m2:
      p.scale = spec.unitscale ? 1.0f : static_cast<float>(meta(a / (spec.divisor > 0 ? spec.divisor : 57344.0), spec));
      break;
    case GroupedLevels::Nf4: p.scale = static_cast<float>(meta(a, spec)); break;
    case GroupedLevels::None: break;
  }
  // minscale=S floors the stored scale (docs/formats.md).
  if (spec.minScale > 0) p.scale = std::max(p.scale, static_cast<float>(spec.minScale));
  return p;
}

float quantizeValue(const QuantSpec& spec, Params p, float x) {
  const float s = p.scale;
  switch (formatInfo(spec.format).levels) {
    case GroupedLevels::Integer:
      if (spec.zeroPacked) {
        if (s == 0.0f) return 0.0f;
        const float n = static_cast<float>(std::pow(2.0, spec.bits) - 1.0);
        const float inv = 1.0f / s;
        const float y = x * inv + p.intZero;  // two fp32 roundings, as the kernel's
        const float q = std::clamp(std::round(y), 0.0f, n);
        return (q - p.intZero) * packedScale(s);
      }
      if (spec.codesFp32) {
        // q = clamp(int(fp32(fp32(x − min)/s) + 0.5)), truncated (the sum is ≥ 0.5, so floor);
        // x̂ = q·meta(s) + meta(min), where q·meta(s) is exact in fp32, so a fused multiply-add
        // (Triton's default) and a multiply then add agree.
        if (p.rawScale == 0.0f) return p.zero;
        const auto n = static_cast<float>(std::pow(2.0, spec.bits) - 1.0);
        const float y = (x - p.rawZero) / p.rawScale;
        const float t = y + 0.5f;
        const float q = std::clamp(std::trunc(t), 0.0f, n);
        return q * s + p.zero;
      }
      if (spec.codesMeta) {
        // codes=meta (docs/formats.md): LMDeploy TurboMind's ConvertKvCache<T, uint8_t/uint4_t>
        // (src/turbomind/kernels/attention/quantization.h) works in the model dtype T: inv =
        // T(fp32(1/s)), y = T(T(T(x) − m)·inv), the code the rounding mode of y, and the read-back
        // T(T(q·s) + m). Each T operation is one rounding of the exact result (double holds the
        // exact difference and product of two fp16/bf16 values).
        if (s == 0.0f) return p.zero;
        const auto t = [&](double v) { return static_cast<float>(meta(v, spec)); };
        const float inv = t(1.0f / s);
        const float y = t(static_cast<double>(t(static_cast<double>(t(x)) - p.zero)) * inv);
        const float r = spec.rounding == Rounding::Trunc ? std::trunc(y)
                        : spec.rounding == Rounding::Even ? std::nearbyint(y)
                                                          : std::round(y);
        const float q = std::clamp(r, 0.0f, static_cast<float>(std::pow(2.0, spec.bits) - 1.0));
        return t(static_cast<double>(t(static_cast<double>(q) * s)) + p.zero);
      }
      if (spec.rounding != Rounding::Away) {
        // round=trunc|even (docs/formats.md): y = fp32(x·fp32(1/s)) (asym: (x − m)·fp32(1/s)),
        // then the rounding mode and the clamp, as vLLM's and LMDeploy's kernels compute it.
        const bool sym = spec.symmetric;
        if (s == 0.0f) return sym ? 0.0f : p.zero;
        const float inv = 1.0f / s;
        const float y = sym ? x * inv : (x - p.zero) * inv;
        const float r = spec.rounding == Rounding::Trunc ? std::trunc(y) : std::nearbyint(y);
        const float top = static_cast<float>(sym ? std::pow(2.0, spec.bits - 1) - 1.0 : std::pow(2.0, spec.bits) - 1.0);
        const float q = std::clamp(r, sym ? -top : 0.0f, top);
        return sym ? q * s : q * s + p.zero;
      }
      if (spec.symmetric) {
        if (s == 0.0f) return 0.0f;
        const float qmax = static_cast<float>(std::pow(2.0, spec.bits - 1) - 1.0);
        const float q = std::clamp(std::round(x / s), -qmax, qmax);
        return q * s;
      } else if (spec.zeroInt) {
        if (s == 0.0f) return 0.0f;
        const float n = static_cast<float>(std::pow(2.0, spec.bits) - 1.0);
        const float q = std::clamp(std::round(x / s) + p.intZero, 0.0f, n);
        return (q - p.intZero) * s;
      } else {
        if (s == 0.0f) return p.zero;
        const float n = static_cast<float>(std::pow(2.0, spec.bits) - 1.0);
        const float q = std::clamp(std::round((x - p.zero) / s), 0.0f, n);
        return q * s + p.zero;
      }
    case GroupedLevels::E4m3: return s == 0.0f ? 0.0f : e4m3(x / s) * s;
    case GroupedLevels::E5m2: return s == 0.0f ? 0.0f : e5m2(x / s) * s;
    case GroupedLevels::Nf4: return s == 0.0f ? 0.0f : static_cast<float>(kNf4[nf4Index(x / s)]) * s;
    case GroupedLevels::None: break;
  }
  return x;
}

namespace {

double squaredError(const QuantSpec& spec, const std::vector<float>& values, Range r) {
  const Params p = groupParams(spec, r);
  double e = 0;
  for (float v : values) {
    const double d = static_cast<double>(quantizeValue(spec, p, v)) - v;
    e += d * d;
  }
  return e;
}

}  // namespace

Range clipRange(const QuantSpec& spec, const std::vector<float>& values) {
  const bool asym = isAsym(spec);
  const auto n = static_cast<int64_t>(values.size());
  if (n == 0) return {};
  const auto [mn, mx] = std::minmax_element(values.begin(), values.end());
  const double lo = *mn, hi = *mx;
  const double a = std::max(std::fabs(lo), std::fabs(hi));
  switch (spec.clip.kind) {
    case Clip::Kind::None: return asym ? Range{lo, hi} : Range{-a, a};
    case Clip::Kind::Percentile: {
      if (asym) {
        std::vector<float> v = values;
        std::sort(v.begin(), v.end());
        // k = floor((1-p)·n/2), with a 1e-9 allowance for binary (1-p) (docs/formats.md).
        int64_t k = static_cast<int64_t>(std::floor((1.0 - spec.clip.p) * static_cast<double>(n) / 2.0 + 1e-9));
        k = std::clamp<int64_t>(k, 0, (n - 1) / 2);
        return {v[static_cast<size_t>(k)], v[static_cast<size_t>(n - 1 - k)]};
      }
      std::vector<float> m(values.size());
      for (size_t i = 0; i < values.size(); ++i) m[i] = std::fabs(values[i]);
      std::sort(m.begin(), m.end());
      int64_t k = static_cast<int64_t>(std::floor((1.0 - spec.clip.p) * static_cast<double>(n) + 1e-9));
      k = std::clamp<int64_t>(k, 0, n - 1);
      const double clipped = m[static_cast<size_t>(n - 1 - k)];
      return {-clipped, clipped};
    }
    case Clip::Kind::Mse: {
      Range best = asym ? Range{lo, hi} : Range{-a, a};
      double bestError = std::numeric_limits<double>::infinity();
      for (int i = 0; i <= 10; ++i) {
        const double r = (20.0 - i) / 20.0;
        const Range c = asym ? Range{lo + (1.0 - r) * (hi - lo) / 2.0, hi - (1.0 - r) * (hi - lo) / 2.0}
                             : Range{-r * a, r * a};
        const double e = squaredError(spec, values, c);
        if (e < bestError) {
          bestError = e;
          best = c;
        }
      }
      return best;
    }
  }
  return {};
}

// ---- ggml blocks: packed and unpacked by core/quant/ggml_blocks.h -----------------------------

namespace {

constexpr int kQk = ggml::kQk;

/// One block quantized to ggml's packed layout and reconstructed from it, in place.
template <typename Block>
void roundTrip(float* x) {
  Block y{};
  ggml::quantizeBlock(x, y);
  ggml::dequantizeBlock(y, x);
}

void mxfp4(float* x) {
  double a = 0;
  for (int j = 0; j < kQk; ++j) a = std::max(a, std::fabs(static_cast<double>(x[j])));
  if (a == 0) {
    std::fill(x, x + kQk, 0.0f);
    return;
  }
  const int e = std::clamp(static_cast<int>(std::floor(std::log2(a))) - 2, -127, 127);
  const float scale = static_cast<float>(std::pow(2.0, e));
  for (int j = 0; j < kQk; ++j) x[j] = scale * e2m1(x[j] / scale);
}

void nvfp4(float* x, float g) {
  float a = 0;
  for (int j = 0; j < 16; ++j) a = std::max(a, std::fabs(x[j]));
  const float d = g == 0.0f ? 0.0f : e4m3(a / (6.0f * g));
  const float dg = d * g;
  for (int j = 0; j < 16; ++j) x[j] = (d == 0.0f || dg == 0.0f) ? 0.0f : dg * e2m1(x[j] / dg);
}

// SGLang kvfp4 (kvfp4_tensor.py FP4MXBlock16KVQuantizeUtil.batched_quantize), from the formula:
// e = ceil(log2(max(fp32(a/6), fp32(1e-10)))) with log2 in double, each element the nearest of
// the e2m1 levels times 2^e, a tie going to the larger magnitude.
void kvfp4(float* x) {
  float a = 0;
  for (int j = 0; j < 16; ++j) a = std::max(a, std::fabs(x[j]));
  const float y = std::max(a / 6.0f, 1e-10f);
  const int e = static_cast<int>(std::ceil(std::log2(static_cast<double>(y))));
  const double scale = std::pow(2.0, e);
  constexpr std::array<double, 8> kLevels{0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int j = 0; j < 16; ++j) {
    const double v = static_cast<double>(x[j]) / scale;
    const double av = std::fabs(v);
    double best = 0;
    for (double l : kLevels) {
      if (std::fabs(av - l) <= std::fabs(av - best)) best = l;  // <=: a tie takes the larger level
    }
    x[j] = static_cast<float>((v < 0 ? -best : best) * scale);
  }
}

}  // namespace

bool nvfp4FourOverSix(float* x, float g) {
  // vLLM csrc/libtorch_stable/nvfp4_kv_cache_kernels.cu (commit 0cd789b3),
  // cvt_warp_fp16_to_fp4_4over6: both candidate block scales, the squared reconstruction error of
  // each (a zero scale: the block's Σx²), max/4 only when its error is strictly smaller.
  float a = 0;
  for (int j = 0; j < 16; ++j) a = std::max(a, std::fabs(x[j]));
  float best[16];
  float bestError = 0;
  bool use4 = false;
  for (const float divisor : {6.0f, 4.0f}) {
    const float d = g == 0.0f ? 0.0f : e4m3(a / (divisor * g));
    const float dg = d * g;
    float out[16];
    float error = 0;
    for (int j = 0; j < 16; ++j) {
      out[j] = (d == 0.0f || dg == 0.0f) ? 0.0f : dg * e2m1(x[j] / dg);
      const float diff = out[j] - x[j];
      error += diff * diff;
    }
    if (divisor == 6.0f || error < bestError) {
      use4 = divisor == 4.0f;
      bestError = error;
      std::copy(out, out + 16, best);
    }
  }
  std::copy(best, best + 16, x);
  return use4;
}

void quantizeBlock(FormatId format, float* x, float g) {
  const FormatInfo& info = formatInfo(format);
  if (info.blockReference != nullptr) info.blockReference(x, g);
}

void q8_0Block(float* x, float /*g*/) { roundTrip<ggml::BlockQ8_0>(x); }
void q4_0Block(float* x, float /*g*/) { roundTrip<ggml::BlockQ4_0>(x); }
void q4_1Block(float* x, float /*g*/) { roundTrip<ggml::BlockQ4_1>(x); }
void q5_0Block(float* x, float /*g*/) { roundTrip<ggml::BlockQ5_0>(x); }
void q5_1Block(float* x, float /*g*/) { roundTrip<ggml::BlockQ5_1>(x); }
void iq4nlBlock(float* x, float /*g*/) { roundTrip<ggml::BlockIq4Nl>(x); }
void mxfp4Block(float* x, float /*g*/) { mxfp4(x); }
void nvfp4Block(float* x, float g) { nvfp4(x, g); }
void kvfp4Block(float* x, float /*g*/) { kvfp4(x); }

}  // namespace reference

Status quantizeFormatReference(Tensor3& x, const QuantSpec& spec) {
  KVS_RETURN_IF_ERROR(checkFormatSpec(x, spec));
  return formatInfo(spec.format).quantizeReference(x, spec);
}

namespace format_ops {

Status fp16Reference(Tensor3& x, const QuantSpec& /*spec*/) {
  for (float& v : x.data) v = reference::fp16(v);
  return Status::ok();
}

Status bf16Reference(Tensor3& x, const QuantSpec& /*spec*/) {
  for (float& v : x.data) v = reference::bf16(v);
  return Status::ok();
}

Status blocksReference(Tensor3& x, const QuantSpec& spec) {
  const FormatInfo& info = formatInfo(spec.format);
  float g = 0;
  if (info.tensorScale && spec.globalScale > 0) {
    g = static_cast<float>(spec.globalScale);  // gscale=S: the engine's per-layer scale
  } else if (info.tensorScale) {
    float a = 0;  // the layer tensor's max |x| (exact: a maximum of floats)
    for (float v : x.data) a = std::max(a, std::fabs(v));
    g = info.tensorScale(a);  // the row's rule (nvfp4: fp32(a/(448·6)), §2)
  }
  // Token rows in [head, channel] order, cut into blocks.
  std::vector<float> row(static_cast<size_t>(x.heads * x.dim));
  for (int64_t t = 0; t < x.tokens; ++t) {
    for (int64_t h = 0; h < x.heads; ++h)
      for (int64_t d = 0; d < x.dim; ++d) row[static_cast<size_t>(h * x.dim + d)] = x.at(h, t, d);
    for (size_t b = 0; b < row.size(); b += static_cast<size_t>(info.blockSize)) {
      if (spec.fourOverSix) {
        (void)reference::nvfp4FourOverSix(row.data() + b, g);
      } else {
        info.blockReference(row.data() + b, g);
      }
    }
    for (int64_t h = 0; h < x.heads; ++h)
      for (int64_t d = 0; d < x.dim; ++d) x.at(h, t, d) = row[static_cast<size_t>(h * x.dim + d)];
  }
  return Status::ok();
}

Status lmdeployReference(Tensor3& x, const QuantSpec& spec) {
  lmdeploy_tq::quantizeRowsReference(spec.format, x.data.data(), x.heads * x.tokens, static_cast<int>(x.dim), spec.bits,
                                     spec.scale);
  return Status::ok();
}

Status tqpReference(Tensor3& x, const QuantSpec& spec) {
  codebook::tqpRowsReference(x.data.data(), x.heads * x.tokens, static_cast<int>(x.dim), spec.bits, spec.scale,
                             spec.seed);
  return Status::ok();
}

// vLLM's TurboQuant keys have one implementation, read from vLLM: it is the reference too.
Status tqgReference(Tensor3& x, const QuantSpec& spec) {
  codebook::tqgRows(x.data.data(), x.heads * x.tokens, static_cast<int>(x.dim), spec.bits, spec.scale);
  return Status::ok();
}

Status tqReference(Tensor3& x, const QuantSpec& spec) {
  codebook::tqRowsReference(x.data.data(), x.heads * x.tokens, static_cast<int>(x.dim), spec.bits, spec.scale);
  return Status::ok();
}

Status nuqReference(Tensor3& x, const QuantSpec& spec) {
  codebook::quantizeNuqTensorReference(x, spec);
  return Status::ok();
}

Status hqqReference(Tensor3& x, const QuantSpec& spec) {
  (void)hqq::quantizeTensorReference(x.data.data(),
                                     hqq::Layout{static_cast<int64_t>(x.size()), spec.group, spec.axis != Axis::Token},
                                     spec.bits, spec.scale);
  return Status::ok();
}

Status groupedReference(Tensor3& x, const QuantSpec& spec) {
  for (const auto& group : reference::groupIndices(spec, x.heads, x.tokens, x.dim)) {
    std::vector<float> values;
    values.reserve(group.size());
    for (int64_t i : group) values.push_back(x.data[static_cast<size_t>(i)]);
    const reference::Params p = reference::groupParams(spec, reference::clipRange(spec, values));
    for (int64_t i : group) {
      float& v = x.data[static_cast<size_t>(i)];
      v = reference::quantizeValue(spec, p, v);
    }
  }
  return Status::ok();
}

Status unchanged(Tensor3& /*x*/, const QuantSpec& /*spec*/) { return Status::ok(); }

}  // namespace format_ops
}  // namespace kvscope
