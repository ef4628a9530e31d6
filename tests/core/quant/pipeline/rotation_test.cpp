// SPDX-License-Identifier: GPL-3.0-or-later
// The contract's generator and rotations (quantization.md §1 step 3), chunked kept tokens
// (§1 step 2) and the integer zero point (§2), against hand-worked vectors and float64 algebra.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "core/quant/quantize.h"
#include "core/quant/rng.h"
#include "core/quant/rotation.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

QuantSpec spec(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << s.status().message();
  return s.hasValue() ? *s : QuantSpec{};
}

TEST(Generator, SplitMix64MatchesItsPublishedSeedZeroOutputs) {
  // The first outputs of Vigna's splitmix64.c from state 0.
  SplitMix64 g(0);
  EXPECT_EQ(g.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(g.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(g.next(), 0x06C45D188009454Full);
}

TEST(Generator, BoxMullerPairsFollowTheContractsFormula) {
  const double u1 = static_cast<double>(0xE220A8397B1DCDAFull >> 11) * std::ldexp(1.0, -53);
  const double u2 = static_cast<double>(0x6E789E6AA1B965F4ull >> 11) * std::ldexp(1.0, -53);
  const double r = std::sqrt(-2.0 * std::log(1.0 - u1));
  NormalStream n(0);
  EXPECT_DOUBLE_EQ(n.next(), r * std::cos(2.0 * std::numbers::pi * u2));
  EXPECT_DOUBLE_EQ(n.next(), r * std::sin(2.0 * std::numbers::pi * u2));
  const std::vector<double> m = normalMatrix(0, 1, 2);
  EXPECT_DOUBLE_EQ(m[0], r * std::cos(2.0 * std::numbers::pi * u2));
}

TEST(Generator, NormalDrawsHaveUnitVariance) {
  NormalStream n(12345);
  double sum = 0, sq = 0;
  const int count = 200000;
  for (int i = 0; i < count; ++i) {
    const double v = n.next();
    sum += v;
    sq += v * v;
  }
  EXPECT_NEAR(sum / count, 0.0, 0.01);
  EXPECT_NEAR(sq / count, 1.0, 0.01);
}

TEST(Rotation, RhtSignsAreTheTopBitsOfTheDraws) {
  const std::vector<float> s = rhtSigns(0, 3);
  // 0xE2…: top bit set → −1; 0x6E…: clear → +1; 0x06…: clear → +1.
  EXPECT_EQ(s, (std::vector<float>{-1.0f, 1.0f, 1.0f}));
}

TEST(Rotation, HadamardBlocksOfFourOnEightChannelsByHand) {
  // H4 = ½[[1,1,1,1],[1,−1,1,−1],[1,1,−1,−1],[1,−1,−1,1]]; [1,2,3,4]·H4 = [5,−1,−2,0] and
  // [1,0,0,0]·H4 = [½,½,½,½].
  std::vector<float> x{1, 2, 3, 4, 1, 0, 0, 0};
  const QuantSpec s = spec("int4,rot=hadamard:4");
  rotateRows(s, x.data(), 1, 8);
  const std::vector<float> want{5, -1, -2, 0, 0.5f, 0.5f, 0.5f, 0.5f};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(x[i], want[i]) << i;
  unrotateRows(s, x.data(), 1, 8);
  const std::vector<float> back{1, 2, 3, 4, 1, 0, 0, 0};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], back[i], 1e-6) << i;
}

TEST(Rotation, FourByFourHadamardOfTheIdentityIsH4) {
  // Rows e_0 … e_3 rotate to the rows of H4.
  std::vector<float> x(16, 0.0f);
  for (int i = 0; i < 4; ++i) x[static_cast<size_t>(5 * i)] = 1.0f;
  rotateRows(spec("int4,rot=hadamard:4"), x.data(), 4, 4);
  const float h[16] = {1, 1, 1, 1, 1, -1, 1, -1, 1, 1, -1, -1, 1, -1, -1, 1};
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(x[static_cast<size_t>(i)], 0.5f * h[i]) << i;
}

TEST(Rotation, EveryKindIsOrthonormalAndMatchesItsMatrix) {
  for (const char* text : {"int4,rot=hadamard", "int4,rot=hadamard:8", "int4,rot=rht", "int4,rot=rht,seed=9",
                           "int4,rot=random", "int4,rot=random,seed=4"}) {
    const QuantSpec s = spec(text);
    const int64_t d = 32;
    const std::vector<double> r = rotationMatrix(s, d);
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < d; ++k) dot += r[size_t(i * d + k)] * r[size_t(j * d + k)];
        EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-12) << text;
      }
    // rotateRows(x) = x·R in float64 to float noise, and unrotateRows inverts it.
    std::vector<float> x(static_cast<size_t>(3 * d));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)) * 3.0);
    std::vector<float> y = x;
    rotateRows(s, y.data(), 3, d);
    for (int64_t row = 0; row < 3; ++row)
      for (int64_t j = 0; j < d; ++j) {
        double want = 0;
        for (int64_t k = 0; k < d; ++k) want += x[size_t(row * d + k)] * r[size_t(k * d + j)];
        EXPECT_NEAR(y[size_t(row * d + j)], want, 1e-5) << text;
      }
    unrotateRows(s, y.data(), 3, d);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-5) << text;
  }
}

TEST(Rotation, RandomMatrixIsTheSignFixedQOfTheSeededGaussian) {
  // R = Q·diag(sign(diag(U))) for G = Q·U: then Rᵀ·G is upper triangular with a positive diagonal.
  const int64_t d = 6;
  const std::vector<double> r = rotationMatrix(spec("int4,rot=random,seed=5"), d);
  const std::vector<double> g = normalMatrix(5, d, d);
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) {
      double u = 0;
      for (int64_t k = 0; k < d; ++k) u += r[size_t(k * d + i)] * g[size_t(k * d + j)];
      if (i > j) {
        EXPECT_NEAR(u, 0.0, 1e-12);
      } else if (i == j) {
        EXPECT_GT(u, 0.0);
      }
    }
  EXPECT_NE(rotationMatrix(spec("int4,rot=random,seed=6"), d), r);
}

TEST(Rotation, CostCountsMultiplyAddsPerVector) {
  EXPECT_DOUBLE_EQ(rotationCost(spec("int4,rot=hadamard"), 128), 128.0 * 7);
  EXPECT_DOUBLE_EQ(rotationCost(spec("int4,rot=hadamard:64"), 128), 128.0 * 6);
  EXPECT_DOUBLE_EQ(rotationCost(spec("int4,rot=random"), 96), 96.0 * 96);
  EXPECT_DOUBLE_EQ(rotationCost(spec("int4"), 128), 0.0);
}

TEST(RotationSpec, ParsesPrintsAndChecksAgainstTheHeadDim) {
  EXPECT_EQ(toString(spec("int4,seed=3,rot=rht")), "int4,rot=rht,seed=3");
  EXPECT_EQ(toString(spec("q4_0,rot=hadamard:64")), "q4_0,rot=hadamard:64");
  EXPECT_EQ(toString(spec("int4,rot=random,seed=0")), "int4,rot=random");
  auto fail = [](const char* text) {
    auto s = parseSpec(text);
    EXPECT_FALSE(s.hasValue()) << text;
    return s.hasValue() ? std::string() : s.status().message();
  };
  EXPECT_NE(fail("int4,seed=3").find("rot=rht or rot=random"), std::string::npos);
  EXPECT_NE(fail("int4,rot=rht:4").find("only rot=hadamard takes a block size"), std::string::npos);
  EXPECT_NE(fail("int4,rot=hadamard:1").find("not a block size"), std::string::npos);
  EXPECT_NE(fail("int4,rot=spin").find("allowed: rot=hadamard"), std::string::npos);
  const Status bad = validateSpec(spec("int4,rot=hadamard:48"), SpecContext{true, 8, 128, true});
  EXPECT_NE(bad.message().find("48 is not a power of two dividing 128"), std::string::npos) << bad.message();
  EXPECT_TRUE(validateSpec(spec("int4,rot=hadamard:64"), SpecContext{true, 8, 192, true}).isOk());
  const Status rht = validateSpec(spec("int4,rot=rht"), SpecContext{true, 8, 96, true});
  EXPECT_NE(rht.message().find("D = 96"), std::string::npos) << rht.message();
  EXPECT_TRUE(validateSpec(spec("int4,rot=random"), SpecContext{true, 8, 96, true}).isOk());
}

TEST(ChunkSpec, KeepsTheUnfilledChunkByHand) {
  // T = 10, S = 1: R = 4 quantizes [1, 9) and keeps token 9 ((10 − 1) mod 4 = 1); R = 3 keeps none.
  const QuantizedTokens a = quantizedTokens(spec("int4,sinks=1,chunk=4"), 10);
  EXPECT_EQ(a.first, 1);
  EXPECT_EQ(a.count, 8);
  const QuantizedTokens b = quantizedTokens(spec("int4,sinks=1,chunk=3"), 10);
  EXPECT_EQ(b.count, 9);
  // residual=4 would keep the last four instead.
  EXPECT_EQ(quantizedTokens(spec("int4,sinks=1,residual=4"), 10).count, 5);
  // A chunk longer than the tokens quantizes nothing.
  EXPECT_EQ(quantizedTokens(spec("int4,chunk=128"), 100).count, 0);
  auto both = parseSpec("int2,residual=128,chunk=128");
  ASSERT_FALSE(both.hasValue());
  EXPECT_NE(both.status().message().find("choose one"), std::string::npos);
  EXPECT_EQ(toString(spec("int2,axis=channel,group=32,chunk=128")), "int2,chunk=128,axis=channel,group=32");
}

TEST(ChunkSpec, FourTokensByFourChannelsByHand) {
  // int2 per token on 4×4 with chunk=3: tokens 0-2 quantized, token 3 exact. Row 0 = [0,1,2,3]:
  // s = meta(3/3) = 1, m = 0, exact; row 1 = [0,0.5,1,4]: s = 4/3 → fp16 1.3330078125, q =
  // rnd(x/s) = 0,0,1,3 → 0, 0, 1.3330078, 3.9990234.
  Tensor3 x(1, 4, 4);
  const float rows[4][4] = {{0, 1, 2, 3}, {0, 0.5f, 1, 4}, {1, 1, 1, 1}, {0.1f, 0.2f, 0.3f, 9.7f}};
  for (int t = 0; t < 4; ++t)
    for (int c = 0; c < 4; ++c) x.at(0, t, c) = rows[t][c];
  auto out = quantizeTensor(QuantInput{&x, nullptr, {}}, spec("int2,chunk=3"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  const Tensor3& y = out->reconstruction;
  for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(y.at(0, 0, c), rows[0][c]);
  EXPECT_FLOAT_EQ(y.at(0, 1, 0), 0.0f);
  EXPECT_FLOAT_EQ(y.at(0, 1, 1), 0.0f);
  EXPECT_FLOAT_EQ(y.at(0, 1, 2), 1.3330078125f);
  EXPECT_FLOAT_EQ(y.at(0, 1, 3), 3.0f * 1.3330078125f);
  for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(y.at(0, 2, c), 1.0f);  // s = 0 gives m
  for (int c = 0; c < 4; ++c) EXPECT_EQ(y.at(0, 3, c), rows[3][c]);   // the unfilled chunk
  // Storage: 3 tokens × 4 × 2 bits + 3 groups × (scale + min) × 16 + 4 kept × 16.
  EXPECT_DOUBLE_EQ(out->storage.totalBits(), 24.0 + 96.0 + 64.0);
}

TEST(ZeroInt, IntegerZeroPointByHand) {
  // int2 (n = 3) per token. [1,2,3,4]: the range widens to [0, 4], s = fp16(4/3) = 1.3330078125,
  // z = rnd(0/s) = 0, q = rnd(x/s) = 1, 2, 2, 3 → q·s. The float-min grid (asym) stores them exactly.
  // [−0.5, 0.25, 1, 0]: s = 0.5, z = rnd(0.5/0.5) = 1, q = rnd(x/s) + z = 0, 2, 3, 1 → −0.5, 0.5, 1, 0.
  Tensor3 x(1, 2, 4);
  const float rows[2][4] = {{1, 2, 3, 4}, {-0.5f, 0.25f, 1, 0}};
  for (int t = 0; t < 2; ++t)
    for (int c = 0; c < 4; ++c) x.at(0, t, c) = rows[t][c];
  auto out = quantizeTensor(QuantInput{&x, nullptr, {}}, spec("int2,zero=int"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  const float s = 1.3330078125f;
  const float want[2][4] = {{s, 2 * s, 2 * s, 3 * s}, {-0.5f, 0.5f, 1.0f, 0.0f}};
  for (int t = 0; t < 2; ++t)
    for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(out->reconstruction.at(0, t, c), want[t][c]) << t << "," << c;
  auto asym = quantizeTensor(QuantInput{&x, nullptr, {}}, spec("int2"));
  ASSERT_TRUE(asym.hasValue());
  for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(asym->reconstruction.at(0, 0, c), rows[0][c]);
  // Metadata as asym: scale and zero point per group.
  EXPECT_DOUBLE_EQ(out->storage.metadataBits, asym->storage.metadataBits);
}

TEST(ZeroInt, EightChannelsWithARotationOfFourByHand) {
  // int2,zero=int,rot=hadamard:4 on [1,2,3,4,1,0,0,0]: rotated [5,−1,−2,0,½,½,½,½]; range [−2, 5],
  // s = fp16(7/3) = 2.333984375, z = rnd(2/s) = 1; q − z = rnd(x/s) = 2, 0, −1, 0, 0, 0, 0, 0; the
  // levels (q − z)·s = 4.66796875, 0, −2.333984375, 0, 0, …; rotated back by H4 blockwise.
  Tensor3 x(1, 1, 8);
  const float in[8] = {1, 2, 3, 4, 1, 0, 0, 0};
  for (int c = 0; c < 8; ++c) x.at(0, 0, c) = in[c];
  auto out = quantizeTensor(QuantInput{&x, nullptr, {}}, spec("int2,zero=int,rot=hadamard:4"));
  ASSERT_TRUE(out.hasValue()) << out.status().message();
  const double s = 2.333984375;
  const double q[4] = {2 * s, 0, -s, 0};
  const double h[4][4] = {{1, 1, 1, 1}, {1, -1, 1, -1}, {1, 1, -1, -1}, {1, -1, -1, 1}};
  for (int j = 0; j < 4; ++j) {
    double back = 0;
    for (int k = 0; k < 4; ++k) back += q[k] * h[j][k] * 0.5;  // x·H4ᵀ = x·H4
    EXPECT_NEAR(out->reconstruction.at(0, 0, j), back, 1e-6) << j;
    EXPECT_NEAR(out->reconstruction.at(0, 0, 4 + j), 0.0, 1e-6) << j;
  }
}

TEST(ZeroInt, ParserRules) {
  EXPECT_EQ(toString(spec("int4,rot=hadamard,zero=int,group=128")), "int4,zero=int,rot=hadamard,group=128");
  EXPECT_EQ(toString(spec("int4,zero=float")), "int4");
  EXPECT_FALSE(parseSpec("int4,sym,zero=int").hasValue());
  EXPECT_FALSE(parseSpec("q4_0,zero=int").hasValue());
  EXPECT_FALSE(parseSpec("int4,zero=half").hasValue());
}


// Issue 33: `search` on a dump with D = 100000 aborted with std::bad_alloc, and D = 20000 grew to
// 9.4 GB without answering SIGTERM: rot=random (and the tq formats' rotation when D is not a
// power of two) draws a D×D matrix. Refused by checkRotation before anything is allocated.
TEST(RotationSpec, RandomRotationsAreBoundedByTheHeadDim) {
  auto spec = [](const std::string& text) { return *parseSpec(text); };
  // 2048: core/quant/spec.cpp, kMaxRandomRotationDim.
  EXPECT_TRUE(checkRotation(spec("int4,rot=random"), 2048).isOk());
  const Status wide = checkRotation(spec("int4,rot=random"), 100000);
  ASSERT_FALSE(wide.isOk());
  EXPECT_NE(wide.message().find("rot=random at D = 100000 would draw a 100000×100000 orthogonal matrix (74.5 GiB"),
            std::string::npos)
      << wide.message();
  EXPECT_NE(wide.message().find("up to D = 2048"), std::string::npos);
  // tq4 rotates by rot=random when D is not a power of two, and by Hadamard when it is.
  const Status tq = checkRotation(spec("tq4"), 20000);
  ASSERT_FALSE(tq.isOk());
  EXPECT_NE(tq.message().find("tq formats rotate by rot=random when D is not a power of two"), std::string::npos)
      << tq.message();
  EXPECT_TRUE(checkRotation(spec("tq4"), 16384).isOk()) << "a power of two: Hadamard, no matrix";
  EXPECT_TRUE(checkRotation(spec("int4"), 100000).isOk()) << "no rotation, no limit";
  // tqp's QJL projection is a D×D Gaussian matrix at any D, a power of two or not.
  const Status qjl = checkRotation(spec("tqp4"), 16384);
  ASSERT_FALSE(qjl.isOk());
  EXPECT_NE(qjl.message().find("tqp's QJL projection at D = 16384 is a 16384×16384 matrix (2 GiB"), std::string::npos)
      << qjl.message();
  EXPECT_TRUE(checkRotation(spec("tqp4"), 2048).isOk());
}

}  // namespace
}  // namespace kvscope
