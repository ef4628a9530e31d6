// SPDX-License-Identifier: GPL-3.0-or-later
// lmtq / lmqjl: LMDeploy's TurboQuant cache (--quant-policy 42, docs/formats.md "lmtq and lmqjl").
// Read from InternLM/lmdeploy, commit 1263d5cd:
//   lmdeploy/pytorch/kernels/cuda/turbo_quant.py get_lloyd_max_codebook (σ = 1 tables times 1/√D);
//   fill_kv_cache.py _fill_page_quant_turbo_qjl4 (lines 326-428: mse_norm = sqrt(Σx² + 1e-8),
//   u = x/mse_norm, idx = Σ(u > b_i), r = u − c[idx], qjl bit = (r >= 0), qjl_norm =
//   sqrt(Σr² + 1e-8)/sqrt(D)) and _fill_page_quant_turbo_int2 (lines 431-513: the same with the
//   2-bit table, norm only); flatten_kv_cache.py (lines 355-383: k = mse_norm·(c + qjl_norm·(2·bit − 1)),
//   v = c·norm, cast to the model dtype).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "core/quant/formats.h"
#include "core/quant/fp_types.h"
#include "core/quant/lmdeploy_tq.h"
#include "core/quant/quantize.h"
#include "core/quant/reference.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

QuantSpec spec(const char* text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text;
  return *s;
}

std::vector<float> run(const QuantSpec& s, const std::vector<float>& x, bool reference = false) {
  Tensor3 t(1, 1, static_cast<int64_t>(x.size()));
  t.data = x;
  EXPECT_TRUE((reference ? quantizeFormatReference(t, s) : quantizeFormatInPlace(t, s)).isOk());
  return t.data;
}

// The Gaussian N(0, 1) Lloyd–Max quantizer in float64, iterated to a fixed point (the tables'
// construction, run here independently of LMDeploy's numbers).
std::vector<double> gaussianLloydMax(int bits) {
  const int k = 1 << bits;
  auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  auto pdf = [](double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi); };
  std::vector<double> c(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) c[static_cast<size_t>(i)] = -3.0 + (i + 0.5) * 6.0 / k;
  for (int it = 0; it < 20000; ++it) {
    std::vector<double> next(c.size());
    for (int i = 0; i < k; ++i) {
      const double lo = i == 0 ? -40.0 : 0.5 * (c[static_cast<size_t>(i - 1)] + c[static_cast<size_t>(i)]);
      const double hi = i == k - 1 ? 40.0 : 0.5 * (c[static_cast<size_t>(i)] + c[static_cast<size_t>(i + 1)]);
      next[static_cast<size_t>(i)] = (pdf(lo) - pdf(hi)) / (cdf(hi) - cdf(lo));
    }
    c = next;
  }
  return c;
}

TEST(LmdeployTables, AreTheConvergedGaussianLloydMaxQuantizers) {
  for (int bits : {2, 3}) {
    const std::vector<double> c = gaussianLloydMax(bits);
    const auto& table = lmdeploy_tq::centroidsAtUnitSigma(bits);
    const auto& bounds = lmdeploy_tq::boundariesAtUnitSigma(bits);
    ASSERT_EQ(table.size(), c.size());
    ASSERT_EQ(bounds.size(), c.size() - 1);
    for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(table[i], c[i], 1e-6) << bits << " bits, centroid " << i;
    for (size_t i = 0; i + 1 < c.size(); ++i) {
      EXPECT_NEAR(bounds[i], 0.5 * (c[i] + c[i + 1]), 1e-6) << bits << " bits, boundary " << i;
    }
  }
  // Max (1960): ±0.4528, ±1.510 (2 bits); ±0.2451, ±0.7560, ±1.344, ±2.152 (3 bits).
  EXPECT_NEAR(lmdeploy_tq::centroidsAtUnitSigma(3)[7], 2.152, 5e-4);
  EXPECT_NEAR(lmdeploy_tq::centroidsAtUnitSigma(2)[2], 0.4528, 5e-5);
}

// Worked by hand from the kernels above, D = 4 (σ = 1/2), fp32 metadata, a rotated vector
// y = [0.6, −0.2, 0.1, 0.7]: n = sqrt(0.9 + 1e-8) = 0.9486833; u = [0.632456, −0.210819,
// 0.105409, 0.737865]. 3-bit boundaries·σ = [−0.87396, −0.52498, −0.25027, 0, 0.25027, 0.52498,
// 0.87396] → codes [6, 3, 4, 6] → c = [0.671955, −0.122547, 0.122547, 0.671955]; r = [−0.039499,
// −0.088272, −0.017138, 0.065911] → signs [−, −, −, +]; γ = sqrt(0.0139901 + 1e-8)/2 = 0.059140;
// k̂ = n·(c + γ·s) = [0.5813676, −0.1723630, 0.0601538, 0.6935767].
TEST(Lmqjl, KeyHandVector) {
  const std::vector<float> y{0.6f, -0.2f, 0.1f, 0.7f};
  const std::vector<float> want{0.5813676f, -0.1723630f, 0.0601538f, 0.6935767f};
  const QuantSpec s = spec("lmqjl4,scale=fp32");
  const auto fast = run(s, y), ref = run(s, y, true);
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(fast[i], want[i], 1e-6) << i;
    EXPECT_EQ(fast[i], ref[i]) << i;
  }
}

// Values, 2-bit: boundaries·σ = [−0.4908, 0, 0.4908] → codes [3, 1, 2, 3]; v̂ = n·c =
// 0.9486833·[0.7552088, −0.2263904, 0.2263904, 0.7552088].
TEST(Lmtq, ValueHandVector) {
  const std::vector<float> y{0.6f, -0.2f, 0.1f, 0.7f};
  const auto v = run(spec("lmtq2,scale=fp32"), y);
  const std::vector<double> want{0.7164540, -0.2147728, 0.2147728, 0.7164540};
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(v[i], want[i], 1e-6) << i;
}

// The same rules in float64 (the reference of the iterations is the kernel's formula with
// every product exact); the float kernel agrees to float rounding, and the code of every
// coordinate away from a boundary is the same.
std::vector<double> float64Lmqjl(const std::vector<float>& y, int bits, bool qjl) {
  const auto d = static_cast<double>(y.size());
  const auto& cs = lmdeploy_tq::centroidsAtUnitSigma(qjl ? bits - 1 : bits);
  const auto& bs = lmdeploy_tq::boundariesAtUnitSigma(qjl ? bits - 1 : bits);
  double ss = 0;
  for (float v : y) ss += static_cast<double>(v) * v;
  const double n = std::sqrt(ss + 1e-8), sigma = 1.0 / std::sqrt(d);
  std::vector<double> c(y.size()), r(y.size());
  double rr = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double u = y[i] / n;
    int k = 0;
    for (float b : bs) k += u > b * sigma ? 1 : 0;
    c[i] = cs[static_cast<size_t>(k)] * sigma;
    r[i] = u - c[i];
    rr += r[i] * r[i];
  }
  const double gamma = std::sqrt(rr + 1e-8) / std::sqrt(d);
  std::vector<double> out(y.size());
  for (size_t i = 0; i < y.size(); ++i) out[i] = n * (c[i] + (qjl ? gamma * (r[i] >= 0 ? 1 : -1) : 0.0));
  return out;
}

TEST(Lmqjl, MatchesAFloat64ReferenceOnRandomVectors) {
  std::mt19937 rng(20261202);
  std::normal_distribution<float> g(0.0f, 0.3f);
  for (const char* text : {"lmqjl4,scale=fp32", "lmqjl3,scale=fp32", "lmtq2,scale=fp32", "lmtq3,scale=fp32"}) {
    const QuantSpec s = spec(text);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> y(128);
      for (float& v : y) v = g(rng);
      const auto fast = run(s, y), ref = run(s, y, true);
      const auto want = float64Lmqjl(y, s.bits, s.format == FormatId::Lmqjl);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(fast[i], ref[i]) << text;
        EXPECT_NEAR(fast[i], want[i], 1e-5) << text << " trial " << trial << " coordinate " << i;
      }
    }
  }
}

TEST(Lmqjl, InvariantsOfTheSignCorrection) {
  // With bf16 metadata: the reconstruction is the model dtype's (bf16 values), each coordinate moves
  // off its lmtq3 level by exactly ±n·γ, and the correction lowers the error of almost every vector.
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  int better = 0;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> y(64);
    for (float& v : y) v = g(rng);
    const auto k = run(spec("lmqjl4,scale=bf16"), y);
    const auto m = run(spec("lmtq3,scale=bf16"), y);
    double ek = 0, em = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_EQ(k[i], fp::roundBf16(k[i]));
      ek += (k[i] - fp::roundBf16(y[i])) * (k[i] - fp::roundBf16(y[i]));
      em += (m[i] - fp::roundBf16(y[i])) * (m[i] - fp::roundBf16(y[i]));
    }
    better += ek < em ? 1 : 0;
  }
  EXPECT_GE(better, 95);
}

TEST(LmdeployFormats, SpecRules) {
  EXPECT_EQ(toString(spec("lmqjl4")), "lmqjl4");
  EXPECT_EQ(toString(spec("lmtq2,scale=bf16")), "lmtq2,scale=bf16");
  EXPECT_FALSE(parseSpec("lmtq4").hasValue());   // LMDeploy's tables used here: 2 and 3 bits
  EXPECT_FALSE(parseSpec("lmqjl2").hasValue());
  EXPECT_FALSE(parseSpec("lmtq2,rot=rht").hasValue());
  EXPECT_FALSE(parseSpec("lmtq2,seed=3").hasValue());
  EXPECT_TRUE(parseSpec("lmtq2,rot=hadamard").hasValue());
  EXPECT_FALSE(checkRotation(spec("lmqjl4"), 96).isOk());
  EXPECT_TRUE(checkRotation(spec("lmqjl4"), 128).isOk());
  // Storage: cache_engine.py — K packed to D/2 bytes + [mse_norm, qjl_norm]; V to D/4 bytes + norm,
  // in the model dtype: 64 + 4 and 32 + 2 bytes per token and head at D = 128.
  EXPECT_DOUBLE_EQ(storageFor(spec("lmqjl4,scale=bf16"), 1, 10, 128).totalBits() / 8 / 10, 68.0);
  EXPECT_DOUBLE_EQ(storageFor(spec("lmtq2,scale=bf16"), 1, 10, 128).totalBits() / 8 / 10, 34.0);
}

}  // namespace
}  // namespace kvscope
