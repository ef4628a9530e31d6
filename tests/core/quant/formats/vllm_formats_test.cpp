// SPDX-License-Identifier: GPL-3.0-or-later
// The formats and options vLLM's cache dtypes need (docs/formats.md): tqg<b> (TurboQuant-MSE
// keys with vLLM's codebook and norm correction), codes=fp32 (TurboQuant values) and 4over6
// (nvfp4_4over6). Vectors are worked out from vLLM's code, which each test cites; the expected
// floats were computed by hand-transcribing that code's float32 arithmetic (Python, struct-rounded
// to float32 after each operation) — they are not produced by kvscope.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "core/quant/codebook.h"
#include "core/quant/formats.h"
#include "core/quant/quantize.h"
#include "core/quant/reference.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

QuantSpec parsed(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << (s.hasValue() ? "" : s.status().message());
  return s.hasValue() ? *s : QuantSpec{};
}

std::vector<float> formatStep(const std::string& text, const std::vector<float>& in, bool reference = false) {
  Tensor3 x(1, 1, static_cast<int64_t>(in.size()));
  x.data = in;
  const QuantSpec spec = parsed(text);
  const Status s = reference ? quantizeFormatReference(x, spec) : quantizeFormatInPlace(x, spec);
  EXPECT_TRUE(s.isOk()) << text << ": " << s.message();
  return x.data;
}

std::string parseError(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_FALSE(s.hasValue()) << text;
  return s.hasValue() ? std::string{} : s.status().message();
}

// ---- the codebook -----------------------------------------------------------------------------

/// An independent float64 Lloyd–Max quantizer of N(0, σ²) with exact cell integrals (erf and
/// the density), iterated from the same start until no centroid moves by 1e-15.
std::vector<double> exactGaussianLloydMax(int dim, int bits) {
  const int n = 1 << bits;
  const double sigma = 1.0 / std::sqrt(static_cast<double>(dim));
  auto phi = [&](double x) { return std::exp(-x * x / (2 * sigma * sigma)) / (sigma * std::sqrt(2 * std::numbers::pi)); };
  auto cdf = [&](double x) { return 0.5 * std::erfc(-x / (sigma * std::sqrt(2.0))); };
  std::vector<double> c(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) c[static_cast<size_t>(i)] = -3.5 * sigma + 7 * sigma * (i + 0.5) / n;
  for (int it = 0; it < 100000; ++it) {
    std::vector<double> e{-INFINITY};
    for (int i = 0; i + 1 < n; ++i) e.push_back((c[static_cast<size_t>(i)] + c[static_cast<size_t>(i + 1)]) / 2);
    e.push_back(INFINITY);
    double moved = 0;
    for (int i = 0; i < n; ++i) {
      const double a = e[static_cast<size_t>(i)], b = e[static_cast<size_t>(i + 1)];
      const double mass = cdf(b) - cdf(a);
      const double moment = sigma * sigma * ((std::isinf(a) ? 0 : phi(a)) - (std::isinf(b) ? 0 : phi(b)));
      const double next = moment / mass;
      moved = std::max(moved, std::fabs(next - c[static_cast<size_t>(i)]));
      c[static_cast<size_t>(i)] = next;
    }
    if (moved < 1e-15) break;
  }
  return c;
}

// centroids.py (commit 06d0369d) solve_lloyd_max (lines 31–74): trapezoids of 200 panels,
// outer edges ±10.5σ, tol 1e-10, max_iter 200. Its centroids are close to the exact Gaussian Lloyd–Max (Max 1960:
// ±0.2451, ±0.7560, ±1.3440, ±2.1520 for 3 bits, in units of σ = 1/√D) but not equal: the
// 200-panel trapezoids of the wide outer cells move them by up to 1.7e-3 σ. kvscope reproduces
// vLLM's values, which the transcription of solve_lloyd_max gives as these float32 numbers.
TEST(TqgCodebook, IsVllmsSolveNotTheExactOne) {
  const codebook::GaussianCodebook& b3 = codebook::gaussianCodebook(128, 3);
  const std::vector<float> vllm3{-0.19006584584712982f, -0.11872146278619766f, -0.06679026037454605f,
                                 -0.02165369503200054f, 0.02165369503200054f,  0.06679026037454605f,
                                 0.11872146278619766f,  0.19006584584712982f};
  EXPECT_EQ(b3.levels, vllm3);
  EXPECT_EQ(b3.iterations, 138);
  const std::vector<double> exact = exactGaussianLloydMax(128, 3);
  const double sqrtD = std::sqrt(128.0);
  const double max3[4] = {0.2451, 0.7560, 1.3440, 2.1520};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(exact[static_cast<size_t>(4 + i)] * sqrtD, max3[i], 1e-4) << i;  // the test's own solve is Max's
    EXPECT_NEAR(b3.levels[static_cast<size_t>(4 + i)] * sqrtD, max3[i], 2e-3) << i;  // vLLM's is close
  }
  EXPECT_GT(std::fabs(b3.levels[7] * sqrtD - exact[7] * sqrtD), 1e-3);  // … and not equal
  // 4 bits: vLLM stops at max_iter = 200 before the tolerance is reached.
  const codebook::GaussianCodebook& b4 = codebook::gaussianCodebook(128, 4);
  EXPECT_EQ(b4.iterations, 200);
  EXPECT_EQ(b4.levels.front(), -0.2413817048072815f);
  EXPECT_EQ(b4.levels[8], 0.011351509019732475f);
  const std::vector<double> exact4 = exactGaussianLloydMax(128, 4);
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(b4.levels[i], exact4[i], 3e-3 / sqrtD) << i;
  // The midpoints are float32 means of neighbouring float32 levels; the middle one is 0.
  for (size_t i = 0; i + 1 < b3.levels.size(); ++i) EXPECT_EQ(b3.midpoints[i], (b3.levels[i] + b3.levels[i + 1]) / 2.0f);
  EXPECT_EQ(b3.midpoints[3], 0.0f);
  const codebook::GaussianCodebook& d4 = codebook::gaussianCodebook(4, 2);
  EXPECT_EQ(d4.levels, (std::vector<float>{-0.7547792792320251f, -0.22628596425056458f, 0.22628596425056458f,
                                           0.7547792792320251f}));
}

// triton_turboquant_store.py (commit 0135d081) _tq_fused_store_mse: lo = where(y >= mid, mid + 1,
// lo) — a coordinate exactly on a midpoint takes the upper centroid.
TEST(TqgCodebook, MidpointTiesGoUp) {
  const codebook::GaussianCodebook& b = codebook::gaussianCodebook(128, 3);
  for (size_t k = 0; k < b.midpoints.size(); ++k) {
    const float m = b.midpoints[k];
    EXPECT_EQ(codebook::gaussianCode(b, m), static_cast<int>(k + 1)) << k;
    EXPECT_EQ(codebook::gaussianCode(b, std::nextafter(m, -1.0f)), static_cast<int>(k)) << k;
  }
  EXPECT_EQ(codebook::gaussianCode(b, -1.0f), 0);
  EXPECT_EQ(codebook::gaussianCode(b, 1.0f), 7);
}

// ---- tqg keys ---------------------------------------------------------------------------------

// The format step on a rotated vector y = [3, 4, 0, 0] (D = 4, 2 bits, levels ±0.22629, ±0.75478,
// midpoints −0.49053, 0, 0.49053): n = 5, u = [0.6, 0.8, 0, 0] → codes [3, 3, 2, 2] (0 is on the
// middle midpoint: upper); Σc² = 2·0.75478² + 2·0.22629² = 1.24181, ĉ = c/1.11437; the norm
// 5 is exact in fp16: ŷ = 5·ĉ = [3.38661, 3.38661, 1.01532, 1.01532].
TEST(Tqg, FormatStepHandVector) {
  const std::vector<float> expected{3.3866097927093506f, 3.3866097927093506f, 1.0153197050094604f, 1.0153197050094604f};
  EXPECT_EQ(formatStep("tqg2", {3, 4, 0, 0}), expected);
  EXPECT_EQ(formatStep("tqg2", {3, 4, 0, 0}, true), expected);
}

// The full key path (turboquant_attn.py _build_hadamard_cached: H_4/2, Sylvester order, no
// signs): k = [1, 2, 3, 4] → y = H k/2 = [5, −1, −2, 0], n = √30 = 5.4772258 (fp16 5.4765625),
// codes [3, 1, 1, 2], ŷ = 5.4765625·ĉ = [4.86034, −1.45715, −1.45715, 1.45715], and the
// reconstruction H ŷ/2 = [1.70159, 1.70159, 1.70159, 4.61589].
TEST(Tqg, FullKeyPathHandVector) {
  Tensor3 k(1, 1, 4);
  k.data = {1, 2, 3, 4};
  QuantInput in;
  in.tensor = &k;
  auto out = quantizeTensor(in, parsed("tqg2,rot=hadamard"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  const std::vector<float> expected{1.701594352722168f, 1.701594352722168f, 1.701594352722168f, 4.615893363952637f};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(out->reconstruction.data[i], expected[i], 2e-6f) << i;
  // Storage: 2 bits per element and one fp16 norm per vector (config.py key_packed_size).
  EXPECT_DOUBLE_EQ(out->storage.totalBits(), 4 * 2 + 16);
  EXPECT_DOUBLE_EQ(storageFor(parsed("tqg3"), 8, 100, 128).totalBits(), 8.0 * 100 * (128 * 3 + 16));
}

// Norm correction (triton_turboquant_decode.py, commit 055e47c2, NORM_CORRECTION): ĉ is c over
// √(Σc² + 1e-16), so the reconstruction's norm is the stored norm and its direction is the codes'.
TEST(Tqg, NormCorrectionInvariants) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  double worst = 0;  // how far the plain codes' norm is from 1: what the correction fixes
  for (int bits : {3, 4}) {
    const codebook::GaussianCodebook& book = codebook::gaussianCodebook(64, bits);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> y(64);
      for (float& v : y) v = normal(rng);
      double n2 = 0;
      for (float v : y) n2 += static_cast<double>(v) * v;
      const auto n = static_cast<float>(std::sqrt(n2));
      std::vector<float> yHat = formatStep("tqg" + std::to_string(bits), y);
      double h2 = 0, dot = 0, c2 = 0;
      for (size_t j = 0; j < 64; ++j) {
        const float c = book.levels[static_cast<size_t>(codebook::gaussianCode(book, y[j] / (n + 1e-8f)))];
        h2 += static_cast<double>(yHat[j]) * yHat[j];
        dot += static_cast<double>(yHat[j]) * c;
        c2 += static_cast<double>(c) * c;
      }
      const double stored = std::ldexp(std::nearbyint(std::ldexp(n, 10 - std::ilogb(n))), std::ilogb(n) - 10);
      EXPECT_NEAR(std::sqrt(h2), stored, 1e-5 * stored) << bits << " " << trial;          // ‖ŷ‖ = fp16(‖y‖)
      EXPECT_NEAR(dot / std::sqrt(h2 * c2), 1.0, 1e-6) << bits << " " << trial;         // ŷ ∥ c
      worst = std::max(worst, std::fabs(std::sqrt(c2) - 1.0));
    }
  }
  EXPECT_GT(worst, 1e-2);  // the codes alone are not unit norm
  // A zero vector stays zero (u = 0/(0 + 1e-8) = 0, the stored norm is 0).
  EXPECT_EQ(formatStep("tqg3", std::vector<float>(8, 0.0f)), std::vector<float>(8, 0.0f));
}

TEST(Tqg, SpecRules) {
  EXPECT_EQ(toString(parsed("tqg3")), "tqg3");
  EXPECT_EQ(toString(parsed("tqg4,rot=hadamard,scale=fp32")), "tqg4,rot=hadamard,scale=fp32");
  EXPECT_NE(parseError("tqg3,rot=none").find("always rotate"), std::string::npos);
  EXPECT_NE(parseError("tqg9").find("tqg1 … tqg8"), std::string::npos);
}

// ---- codes=fp32: TurboQuant values --------------------------------------------------------------

// triton_turboquant_store.py (commit 0135d081) _store_quantized_value: s = (max − min)/n in
// fp32, s = s if s > 1e-8 else 1e-8, q = clamp(int((x − min)/s + 0.5), 0, n), s and min stored
// as fp16; triton_turboquant_decode.py: x̂ = q·s16 + min16.
TEST(CodesFp32, HandVectors) {
  // s = 1: 0.49999997 + 0.5 = 1 − 2⁻²⁵ rounds (to even) to 1.0 in fp32, so q = 1 where the
  // contract's rnd gives 0; 6.5 + 0.5 = 7 (half up).
  for (bool ref : {false, true}) {
    EXPECT_EQ(formatStep("int4,codes=fp32,minscale=1e-08", {0, 0.49999997f, 15, 6.5f}, ref),
              (std::vector<float>{0, 1, 15, 7}));
    // Codes from the fp32 s = 1/15 = 0.06666667, reconstruction with fp16(s) = 0.066650390625:
    // 0.5/s = 7.4999995 → q = 7 → 0.466552734375 (the contract, dividing by fp16(s), gives
    // 7.5018 → 8); 1/s → 15 → 0.999755859375; 0.25/s = 3.75 → 4 → 0.2666015625.
    EXPECT_EQ(formatStep("int4,codes=fp32,minscale=1e-08", {0, 0.5f, 1, 0.25f}, ref),
              (std::vector<float>{0, 0.466552734375f, 0.999755859375f, 0.2666015625f}));
    // A min that fp16 does not hold: 0.1 → 0.0999755859375, s = 0.08 → fp16 0.08001708984375.
    EXPECT_EQ(formatStep("int4,codes=fp32,minscale=1e-08", {0.1f, 0.7f, 1.3f, 0.45f}, ref),
              (std::vector<float>{0.0999755859375f, 0.66009521484375f, 1.30023193359375f, 0.4200439453125f}));
    // A constant vector: s floors at 1e-8 (fp16 0), every q = 0, x̂ = fp16(min).
    EXPECT_EQ(formatStep("int4,codes=fp32,minscale=1e-08", {2, 2, 2, 2}, ref), (std::vector<float>(4, 2.0f)));
    // 3 bits (turboquant_3bit_nc): s = 3.5/7 = 0.5; 1.3/0.5 + 0.5 = 3.1 → 3 → 0.5; 2.1 → 4.7 → 4 → 1.0.
    EXPECT_EQ(formatStep("int3,codes=fp32,minscale=1e-08", {-1, 0.3f, 2.5f, 1.1f}, ref),
              (std::vector<float>{-1, 0.5f, 2.5f, 1.0f}));
  }
  EXPECT_EQ(formatStep("int4", {0, 0.5f, 1, 0.25f})[1], 0.533203125f);  // the contract's grid, for contrast
}

TEST(CodesFp32, SpecRules) {
  EXPECT_EQ(toString(parsed("int4,minscale=1e-8,codes=fp32")), "int4,codes=fp32,minscale=1e-08");
  EXPECT_EQ(toString(parsed("int4,codes=stored")), "int4");
  EXPECT_EQ(parsed(toString(parsed("int3,codes=fp32,minscale=1e-08"))), parsed("int3,codes=fp32,minscale=1e-08"));
  EXPECT_NE(parseError("int4,sym,codes=fp32").find("does not apply with sym"), std::string::npos);
  EXPECT_NE(parseError("int4,codes=fp32,round=even").find("round="), std::string::npos);
  EXPECT_NE(parseError("fp8_e4m3,codes=fp32").find("int1 … int8"), std::string::npos);
  EXPECT_NE(parseError("int4,codes=fp16").find("codes=fp32, codes=meta or codes=stored"), std::string::npos);
  // Storage is the contract's asym: b bits and two fp16 values per group (config.py
  // value_packed_size: ceil(D·b/8) + 4 bytes).
  EXPECT_DOUBLE_EQ(storageFor(parsed("int4,codes=fp32"), 1, 1, 128).totalBits(), 8.0 * (64 + 4));
}

// ---- 4over6 ----------------------------------------------------------------------------------

std::vector<float> block16(std::vector<float> head) {
  head.resize(16, 0.0f);
  return head;
}

// csrc/libtorch_stable/nvfp4_kv_cache_kernels.cu (commit 0cd789b3) cvt_warp_fp16_to_fp4_4over6:
// SF6 = e4m3(g·a/6), SF4 = e4m3(g·a/4); errors Σ(e2m1(x/SF)·SF − x)²; use4 = err4 < err6.
TEST(FourOverSix, EachBranchAndTheTie) {
  for (bool ref : {false, true}) {
    // max/6 wins: a = 6, SF6 = 1 holds the block exactly (err 0); SF4 = 1.5 gives 4.5, 2.25, 0.75 …
    const std::vector<float> six = block16({6, 4, 3, 2, 1.5f, 1, 0.5f});
    EXPECT_EQ(formatStep("nvfp4,gscale=1,4over6", six, ref), six);
    // max/4 wins: a = 4, SF4 = 1 holds it exactly; SF6 = e4m3(0.667) = 0.6875 gives 4 → 4.125.
    const std::vector<float> four = block16({4, 3, 2, 1.5f, 1, 0.5f});
    EXPECT_EQ(formatStep("nvfp4,gscale=1,4over6", four, ref), four);
    EXPECT_NE(formatStep("nvfp4,gscale=1", four, ref), four);  // plain nvfp4 does not
    // A tie: [1.5, 0.875]: SF6 = 0.25 → 0.875/0.25 = 3.5 → 4 (ties to even) → 1.0, error 0.125²;
    // SF4 = 0.375 → 2.33 → 2 → 0.75, error 0.125². Equal errors keep max/6: [1.5, 1.0].
    EXPECT_EQ(formatStep("nvfp4,gscale=1,4over6", block16({1.5f, 0.875f}), ref), block16({1.5f, 1.0f}));
    EXPECT_EQ(formatStep("nvfp4,gscale=1,4over6", block16({}), ref), block16({}));
  }
  std::vector<float> b = block16({4, 3, 2, 1.5f, 1, 0.5f});
  EXPECT_TRUE(reference::nvfp4FourOverSix(b.data(), 1.0f));
  b = block16({1.5f, 0.875f});
  EXPECT_FALSE(reference::nvfp4FourOverSix(b.data(), 1.0f));
}

TEST(FourOverSix, SpecRules) {
  EXPECT_EQ(toString(parsed("nvfp4,4over6,gscale=1")), "nvfp4,gscale=1,4over6");
  EXPECT_NE(parseError("mxfp4,4over6").find("nvfp4 only"), std::string::npos);
  EXPECT_NE(parseError("nvfp4,4over6=1").find("takes no value"), std::string::npos);
  // The same storage as nvfp4: the choice changes only the block scale's value.
  EXPECT_DOUBLE_EQ(storageFor(parsed("nvfp4,4over6"), 2, 10, 64).totalBits(),
                   storageFor(parsed("nvfp4"), 2, 10, 64).totalBits());
}

}  // namespace
}  // namespace kvscope
