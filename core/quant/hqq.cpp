// SPDX-License-Identifier: GPL-3.0-or-later
// hqq<b>, read from mobiusml/hqq (commit e0b1d00e): hqq/core/quantize.py Quantizer.quantize
// (min/max per group, scale = (2^b − 1)/(max − min) with 1 for |max − min| ≤ 1e-4 and at most 2e4,
// zero = −min·scale), hqq/core/optimize.py optimize_weights_proximal_legacy and its step (fp16 on
// CUDA, lp_norm 0.7, beta 10, 20 rounds, stop when the mean error does not fall), shrink_lp_op,
// and Quantizer.dequantize ((W_q − zero)·scale in the compute dtype); bitpack.py for the storage.
#include "core/quant/hqq.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/quant/fp_types.h"

namespace kvscope::hqq {
namespace {

// One fp16 operation of torch on CUDA: the operands as float, the result rounded to fp16.
inline float h(float v) { return fp::roundFp16(v); }

// shrink_lp_op's magnitude for |d| = a, an fp16 value: max(h(a − h(0.1·h(a^(p−1)))), 0).
float shrinkMagnitude(float a) {
  if (!(a > 0.0f)) return 0.0f;  // |d| = 0: a^(p−1) = inf, and HQQ's clamp gives 0
  const auto invBeta = static_cast<float>(1.0 / kBeta);
  const auto power = static_cast<float>(kLpNorm - 1.0);
  const float t = h(invBeta * h(static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(power)))));
  return std::max(h(a - t), 0.0f);
}

// |d| is an fp16 value, so the shrink (with its pow) is a lookup by its 15 magnitude bits,
// tabulated once for the 31744 finite non-negative halves.
const std::vector<float>& shrinkTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(0x7c00);
    for (uint32_t b = 0; b < 0x7c00; ++b) t[b] = shrinkMagnitude(fp::fp16Value(static_cast<uint16_t>(b)));
    return t;
  }();
  return table;
}

// The fp16 magnitude bits of a ≥ 0 that is exactly an fp16 value (0x7c00 for infinity).
inline uint32_t halfBits(float a) {
  const uint32_t u = fp::bitsOf(a);
  const int e = static_cast<int>(u >> 23) - 127;
  if (e > 15) return 0x7c00u;
  if (e < -14) return static_cast<uint32_t>(std::ldexp(a, 24));  // subnormal or zero: a multiple of 2^-24
  return (static_cast<uint32_t>(e + 15) << 10) | ((u >> 13) & 0x3ffu);
}

struct GroupState {
  float scale = 0, zero = 0;  // fp16: HQQ's inverted scale and its zero
};

template <bool Reference>
Result run(float* x, const Layout& L, int bits, MetaType compute) {
  const int64_t groups = L.groups(), G = L.group;
  const auto maxV = static_cast<float>((1 << bits) - 1);
  std::vector<GroupState> st(static_cast<size_t>(groups));
  std::vector<float> wf(static_cast<size_t>(L.n));  // W_f = tensor.to(fp16), in group order
  // Quantizer.quantize: float32 min/max, scale = max_v/denom, zero = −min·scale; then fp16.
  for (int64_t g = 0; g < groups; ++g) {
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (int64_t k = 0; k < G; ++k) {
      const float v = x[L.at(g, k)];
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      wf[static_cast<size_t>(g * G + k)] = h(v);
    }
    const float denom = hi - lo;
    float scale = std::fabs(denom) <= 1e-4f ? 1.0f : maxV / denom;
    scale = std::min(scale, 2e4f);
    const float zero = -lo * scale;
    st[static_cast<size_t>(g)] = {h(scale), h(zero)};
  }
  // optimize_weights_proximal_legacy: beta stays 10 (the legacy step never multiplies it by kappa).
  const std::vector<float>& shrink = shrinkTable();
  Result res;
  float best = std::numeric_limits<float>::infinity();
  std::vector<double> errSum(static_cast<size_t>(groups));
  for (int it = 0; it < kIterations; ++it) {
#pragma omp parallel for schedule(static) if (!Reference && L.n > 65536)
    for (int64_t g = 0; g < groups; ++g) {
      GroupState& s = st[static_cast<size_t>(g)];
      const float* w = wf.data() + g * G;
      double err = 0, zsum = 0;
      for (int64_t k = 0; k < G; ++k) {
        const float q = std::clamp(std::nearbyint(h(h(w[k] * s.scale) + s.zero)), 0.0f, maxV);  // torch.round: half to even
        const float r = h(h(q - s.zero) / s.scale);
        const float d = h(w[k] - r);
        err += std::fabs(d);
        // shrink_lp_op: |d| − (1/beta)·|d|^(p−1), floored at 0, with d's sign; |d| = 0 gives 0.
        const float a = std::fabs(d);
        float e = 0.0f;
        if constexpr (Reference) {
          e = shrinkMagnitude(a);  // computed, not looked up
        } else {
          const uint32_t b = halfBits(a);
          e = b < 0x7c00u ? shrink[b] : shrinkMagnitude(a);
        }
        e = d < 0 ? -e : e;
        // zero = mean(W_q − (W_f − W_e)·scale)
        zsum += h(q - h(h(w[k] - e) * s.scale));
      }
      errSum[static_cast<size_t>(g)] = err;
      s.zero = h(static_cast<float>(zsum / static_cast<double>(G)));
    }
    double total = 0;
    for (double e : errSum) total += e;
    const float current = h(static_cast<float>(total / static_cast<double>(L.n)));  // fp16 mean, then .float()
    res.errors.push_back(current);
    res.iterations = it + 1;
    if (current < best) {
      best = current;
    } else {
      break;  // the zero point of this round is kept, as HQQ keeps it
    }
  }
  // W_q = round(tensor·scale + zero) in float32; meta scale = 1/scale (fp16), then the compute dtype.
  res.scale.resize(static_cast<size_t>(groups));
  res.zero.resize(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    const GroupState& s = st[static_cast<size_t>(g)];
    const float sm = fp::metaRound(h(1.0f / s.scale), compute);
    const float zm = fp::metaRound(s.zero, compute);
    res.scale[static_cast<size_t>(g)] = sm;
    res.zero[static_cast<size_t>(g)] = zm;
    for (int64_t k = 0; k < G; ++k) {
      float& v = x[L.at(g, k)];
      const float q = std::clamp(std::nearbyint(v * s.scale + s.zero), 0.0f, maxV);
      v = fp::metaRound(fp::metaRound(q - zm, compute) * sm, compute);  // (W_r − zero)·scale in the compute dtype
    }
  }
  return res;
}

}  // namespace

bool validBits(int bits) { return bits >= 1 && bits <= 8; }

Result quantizeTensor(float* x, const Layout& layout, int bits, MetaType compute) {
  return run<false>(x, layout, bits, compute);
}

Result quantizeTensorReference(float* x, const Layout& layout, int bits, MetaType compute) {
  return run<true>(x, layout, bits, compute);
}

double payloadBits(const Layout& layout, int bits) {
  // The packed dimension is dim 0 of the [G, n/G] (axis 0) or [n/G, G] (axis 1) view.
  const auto n = static_cast<double>(layout.n);
  if (bits >= 5) return n * 8;  // 8bit_u8: one byte per code (HQQ packs 5 and 6 bits that way)
  if (bits != 3) return n * bits;
  const int64_t rows = layout.axis0 ? layout.group : layout.groups();
  const int64_t cols = layout.axis0 ? layout.groups() : layout.group;
  const int64_t words = (rows + 9) / 10;  // pack_3bit_32: 10 values per int32, rows padded to 10·ceil(rows/10)
  return static_cast<double>(words) * static_cast<double>(cols) * 32.0;
}

}  // namespace kvscope::hqq
