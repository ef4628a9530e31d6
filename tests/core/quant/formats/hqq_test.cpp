// SPDX-License-Identifier: GPL-3.0-or-later
// hqq<b>: HQQ's quantizer as transformers' HQQ cache runs it (docs/formats.md "hqq"). Read from
// mobiusml/hqq, commit e0b1d00e:
//   hqq/core/quantize.py Quantizer.quantize (lines 76-180): W.reshape([group_size, -1]) for axis 0,
//     [-1, group_size] for axis 1; scale = max_v/(max − min) (1 where |max − min| ≤ 1e-4, ≤ 2e4),
//     zero = −min·scale; optimize_weights (= optimize_weights_proximal_legacy); meta scale = 1/scale;
//   hqq/core/optimize.py optimize_weights_proximal_legacy (lines 209-256) and its step (201-207):
//     fp16 on CUDA, lp_norm 0.7, beta 10 (never multiplied by kappa), 20 rounds, stop when the mean
//     |W_f − W_r| over the tensor is not lower, keeping that round's zero; shrink_lp_op (96-109);
//   Quantizer.dequantize (184-199) and to_inplace (202-216): meta cast to the compute dtype,
//     (W_q − zero)·scale in it;
// and huggingface/transformers src/transformers/cache_utils.py (commit 004999d9)
// HQQQuantizedLayer._quantize: quantize(tensor, axis, compute_dtype=keys.dtype, nbits, group_size).
// The vectors below were computed by emulating those torch operations one at a time (each fp16 op
// as float, rounded to fp16; torch.round half to even), independently of kvscope's code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/quant/formats.h"
#include "core/quant/hqq.h"
#include "core/quant/quantize.h"
#include "core/quant/reference.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

QuantSpec spec(const char* text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << (s.hasValue() ? "" : s.status().message());
  return *s;
}

std::vector<float> ramp64() {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = static_cast<float>(((i * 7) % 19) - 9) / 8.0f + static_cast<float>((i * 11) % 7) / 64.0f;
  return x;
}

// Axis 0, G = 4, n = 16: group j = x[j], x[4 + j], x[8 + j], x[12 + j]. Group 0 = {0.5, −7, 1.5, 6}:
// scale = 3/13 → fp16 0.23071289, zero = 7·scale → fp16 1.6152344. Round 1's error 0.37768555 <
// inf, round 2's 0.37841797 is not lower: HQQ stops with round 2's zero points. Stored (bf16):
// scale bf16(fp16(1/s)) = 4.34375, zero 1.6328125.
TEST(Hqq, Axis0HandVector) {
  const std::vector<float> x{0.5f, -1.25f, 3.0f, 10.0f, -7.0f, 0.1015625f, 2.203125f, -0.0301f,
                             1.5f, 4.25f,  -2.0f, 0.75f, 6.0f,  -3.5f,      0.25f,     -0.625f};
  const std::vector<float> want{1.59375f, -0.92578125f, 3.0f, 10.0625f, -7.09375f, -0.92578125f, 3.0f, -0.546875f,
                                1.59375f, 4.21875f, -1.9921875f, -0.546875f, 5.9375f, -3.5f, -0.32421875f, -0.546875f};
  std::vector<float> y = x;
  const hqq::Result r = hqq::quantizeTensor(y.data(), hqq::Layout{16, 4, true}, 2, MetaType::Bf16);
  EXPECT_EQ(r.iterations, 2);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0], 0.377685546875f);
  EXPECT_EQ(r.errors[1], 0.37841796875f);
  EXPECT_EQ(r.scale, (std::vector<float>{4.34375f, 2.578125f, 1.6640625f, 3.546875f}));
  EXPECT_EQ(r.zero, (std::vector<float>{1.6328125f, 1.359375f, 1.1953125f, 0.154296875f}));
  EXPECT_EQ(y, want);
  // The same through the format step, fast path and reference ([1, 1, 16] = the flattened tensor).
  Tensor3 t(1, 1, 16), u(1, 1, 16);
  t.data = u.data = x;
  ASSERT_TRUE(quantizeFormatInPlace(t, spec("hqq2,group=4,scale=bf16")).isOk());
  ASSERT_TRUE(quantizeFormatReference(u, spec("hqq2,group=4,scale=bf16")).isOk());
  EXPECT_EQ(t.data, want);
  EXPECT_EQ(u.data, want);
}

// Axis 1 (consecutive groups of 16), 2 bits, n = 64: twelve rounds, the last two with the same
// fp16 error (0.16906738), so the twelfth is "not lower" and ends the loop.
TEST(Hqq, Axis1TwelveRoundsHandVector) {
  std::vector<float> y = ramp64();
  const hqq::Result r = hqq::quantizeTensor(y.data(), hqq::Layout{64, 16, false}, 2, MetaType::Bf16);
  const std::vector<float> errors{0.176513671875f, 0.176025390625f, 0.1749267578125f, 0.1741943359375f,
                                  0.17236328125f,  0.1708984375f,   0.17041015625f,   0.1702880859375f,
                                  0.170166015625f, 0.16943359375f,  0.1690673828125f, 0.1690673828125f};
  EXPECT_EQ(r.errors, errors);
  EXPECT_EQ(r.iterations, 12);
  EXPECT_EQ(r.scale, (std::vector<float>{0.76953125f, 0.734375f, 0.734375f, 0.71875f}));
  EXPECT_EQ(r.zero, (std::vector<float>{1.2890625f, 1.390625f, 1.625f, 1.65625f}));
  const std::vector<float> want{
      -0.9921875f, -0.22265625f, 0.546875f, -0.9921875f, -0.22265625f, 1.3203125f, -0.22265625f, 0.546875f,
      1.3203125f, -0.22265625f, 0.546875f, -0.9921875f, -0.22265625f, 0.546875f, -0.9921875f, 0.546875f,
      1.1796875f, -0.287109375f, 0.447265625f, -1.0234375f, -0.287109375f, 0.447265625f, -1.0234375f, -0.287109375f,
      1.1796875f, -0.287109375f, 0.447265625f, 1.1796875f, -0.287109375f, 0.447265625f, -1.0234375f, -0.287109375f,
      1.0078125f, -0.458984375f, 0.275390625f, 1.0078125f, -0.458984375f, 0.275390625f, -1.1953125f, -0.458984375f,
      1.0078125f, -1.1953125f, 0.275390625f, 1.0078125f, -0.458984375f, 0.275390625f, 1.0078125f, -0.458984375f,
      0.2470703125f, -1.1875f, 0.2470703125f, 0.96484375f, -0.47265625f, 0.2470703125f, 0.96484375f, -0.47265625f,
      0.2470703125f, -1.1875f, -0.47265625f, 0.96484375f, -1.1875f, 0.2470703125f, 0.96484375f, -0.47265625f};
  EXPECT_EQ(y, want);
}

// The iterations in float64 (no fp16 rounding anywhere): the same rule, an independent reference.
struct F64Result {
  std::vector<double> x;
  int rounds = 0;
};
F64Result float64Hqq(const std::vector<float>& in, int64_t g, bool axis0, int bits) {
  const hqq::Layout L{static_cast<int64_t>(in.size()), g, axis0};
  const double maxV = (1 << bits) - 1;
  std::vector<double> s(static_cast<size_t>(L.groups())), z(s.size());
  for (int64_t j = 0; j < L.groups(); ++j) {
    double lo = 1e300, hi = -1e300;
    for (int64_t k = 0; k < g; ++k) {
      lo = std::min(lo, static_cast<double>(in[static_cast<size_t>(L.at(j, k))]));
      hi = std::max(hi, static_cast<double>(in[static_cast<size_t>(L.at(j, k))]));
    }
    s[static_cast<size_t>(j)] = std::min(std::fabs(hi - lo) <= 1e-4 ? 1.0 : maxV / (hi - lo), 2e4);
    z[static_cast<size_t>(j)] = -lo * s[static_cast<size_t>(j)];
  }
  F64Result out;
  double best = 1e300;
  for (int it = 0; it < 20; ++it) {
    double err = 0;
    for (int64_t j = 0; j < L.groups(); ++j) {
      double zs = 0;
      for (int64_t k = 0; k < g; ++k) {
        const double w = in[static_cast<size_t>(L.at(j, k))];
        const double q = std::clamp(std::nearbyint(w * s[static_cast<size_t>(j)] + z[static_cast<size_t>(j)]), 0.0, maxV);
        const double d = w - (q - z[static_cast<size_t>(j)]) / s[static_cast<size_t>(j)];
        err += std::fabs(d);
        const double a = std::fabs(d);
        const double e = a > 0 ? std::copysign(std::max(a - 0.1 * std::pow(a, -0.3), 0.0), d) : 0.0;
        zs += q - (w - e) * s[static_cast<size_t>(j)];
      }
      z[static_cast<size_t>(j)] = zs / static_cast<double>(g);
    }
    out.rounds = it + 1;
    err /= static_cast<double>(in.size());
    if (err < best) best = err;
    else break;
  }
  out.x.resize(in.size());
  for (int64_t j = 0; j < L.groups(); ++j) {
    for (int64_t k = 0; k < g; ++k) {
      const auto i = static_cast<size_t>(L.at(j, k));
      const double q = std::clamp(std::nearbyint(in[i] * s[static_cast<size_t>(j)] + z[static_cast<size_t>(j)]), 0.0, maxV);
      out.x[i] = (q - z[static_cast<size_t>(j)]) / s[static_cast<size_t>(j)];
    }
  }
  return out;
}

TEST(Hqq, AgreesWithAFloat64ReferenceOfTheIterations) {
  // A smooth tensor of 8 heads × 32 tokens × 64 channels; fp16 iterations and fp32 metadata against
  // exact arithmetic: the reconstruction error agrees to 3 %, and almost every element takes the
  // same level (the ones that differ sit within fp16 rounding of a decision boundary).
  std::vector<float> x(8 * 32 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 2.0 + std::cos(0.011 * static_cast<double>(i)));
  for (bool axis0 : {true, false}) {
    for (int bits : {2, 4}) {
      std::vector<float> y = x;
      (void)hqq::quantizeTensor(y.data(), hqq::Layout{static_cast<int64_t>(x.size()), 64, axis0}, bits, MetaType::Fp32);
      const F64Result ref = float64Hqq(x, 64, axis0, bits);
      double e16 = 0, e64 = 0;
      size_t far = 0;
      const double step = 4.0 / ((1 << bits) - 1);
      for (size_t i = 0; i < x.size(); ++i) {
        e16 += std::fabs(y[i] - x[i]);
        e64 += std::fabs(ref.x[i] - x[i]);
        far += std::fabs(y[i] - ref.x[i]) > 0.5 * step ? 1 : 0;
      }
      EXPECT_NEAR(e16 / e64, 1.0, 0.03) << "axis0 " << axis0 << " bits " << bits;
      EXPECT_LT(static_cast<double>(far) / static_cast<double>(x.size()), 0.02) << "axis0 " << axis0 << " bits " << bits;
      EXPECT_GE(ref.rounds, 1);
    }
  }
}

TEST(Hqq, ConstantGroupsAndTheSmallRangeRule) {
  // |max − min| ≤ 1e-4: scale 1, zero = −min; every value of a constant group comes back to within
  // a rounding of itself (q = round(x + zero) = 0, x̂ = −zero), never NaN.
  std::vector<float> y(32, 0.25f);
  (void)hqq::quantizeTensor(y.data(), hqq::Layout{32, 8, false}, 4, MetaType::Bf16);
  for (float v : y) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_NEAR(v, 0.25f, 0.01f);
  }
}

TEST(Hqq, SpecsStorageAndRefusals) {
  EXPECT_EQ(toString(spec("hqq4")), "hqq4");
  EXPECT_EQ(spec("hqq4").axis, Axis::Tensor);
  EXPECT_EQ(spec("hqq4").group, 64);
  EXPECT_EQ(toString(spec("hqq3,axis=token,group=32,scale=bf16")), "hqq3,axis=token,group=32,scale=bf16");
  EXPECT_FALSE(parseSpec("hqq9").hasValue());
  EXPECT_DOUBLE_EQ(storageFor(spec("hqq6"), 1, 4, 64).payloadBits, 4 * 64 * 8.0);  // 8bit_u8 packing
  EXPECT_FALSE(parseSpec("hqq4,axis=channel").hasValue());
  EXPECT_FALSE(parseSpec("hqq4,clip=0.9").hasValue());
  // n must be a multiple of G (HQQ asserts it).
  Tensor3 t(1, 3, 10);
  EXPECT_FALSE(quantizeFormatInPlace(t, spec("hqq4")).isOk());
  // Storage, 8 heads × 100 tokens × 128 channels, G = 64, bf16 metadata: 4 bits + 2·16 bits per 64
  // values; 3 bits on axis 0 packs each column's 64 codes into 7 int32 (pack_3bit_32 pads rows to
  // 70): 224 bits per 64 values.
  const StorageCount s4 = storageFor(spec("hqq4,scale=bf16"), 8, 100, 128);
  EXPECT_DOUBLE_EQ(s4.totalBits() / 8 / 100, 8 * 128 * 4 / 8 + 8 * 128 / 64 * 4);  // 576 bytes per token
  const StorageCount s3 = storageFor(spec("hqq3,scale=bf16"), 8, 100, 128);
  EXPECT_DOUBLE_EQ(s3.payloadBits, 8.0 * 100 * 128 / 64 * 224);
  // Axis 1: rows = n/G = 1600 groups, a multiple of 10: 3.2 bits per value.
  const StorageCount s3t = storageFor(spec("hqq3,axis=token,scale=bf16"), 8, 100, 128);
  EXPECT_DOUBLE_EQ(s3t.payloadBits, 8.0 * 100 * 128 * 3.2);
}

}  // namespace
}  // namespace kvscope
