// SPDX-License-Identifier: GPL-3.0-or-later
// ggml's block layouts (core/quant/ggml_blocks.h) against values worked out by hand from ggml's
// code: ggml/src/ggml-quants.c, dequantize_row_q8_0 … dequantize_row_iq4_xs and
// quantize_row_q8_0_ref / quantize_row_q4_0_ref, with the structs of ggml/src/ggml-common.h.
// Each K-quant is also checked on random blocks against an element-by-element formula (where
// each value's bits live), written from the same code but indexed differently from ggml's loops.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "core/quant/ggml_blocks.h"
#include "core/quant/ggml_types.h"
#include "core/quant/reference.h"
#include "core/util/small_float.h"

namespace kvscope {
namespace {

using namespace ggml;  // NOLINT(google-build-using-namespace)

constexpr uint16_t kOne = 0x3C00, kHalf = 0x3800, kQuarter = 0x3400, kTwo = 0x4000, kMinusOne = 0xBC00;

template <typename Block>
std::vector<float> decode(const Block& b, int n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantizeBlock(b, y.data());
  return y;
}

TEST(GgmlHalf, EveryBitPatternMatchesTheReferenceConversion) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = halfToFloat(static_cast<uint16_t>(h));
    const float b = fp::fp16Value(static_cast<uint16_t>(h));
    ASSERT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b)) << std::hex << h;
  }
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(0xFC00)) && halfToFloat(0xFC00) < 0);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
}

TEST(GgmlDequantize, Q8_0) {
  BlockQ8_0 b{};
  b.d = kHalf;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j - 16);
  const auto y = decode(b, 32);  // y[j] = qs[j]·d
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[31], 7.5f);
}

TEST(GgmlDequantize, Q4_0) {
  BlockQ4_0 b{};
  b.d = kTwo;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(b, 32);  // y[j] = (lo − 8)·d, y[j+16] = (hi − 8)·d
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[15], 14.0f);
  EXPECT_EQ(y[16], 14.0f);
  EXPECT_EQ(y[31], -16.0f);
}

TEST(GgmlDequantize, Q4_1) {
  BlockQ4_1 b{};
  b.d = kOne;
  b.m = kMinusOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(b, 32);  // y = q·d + m
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[15], 14.0f);
  EXPECT_EQ(y[16], 14.0f);
  EXPECT_EQ(y[31], -1.0f);
}

TEST(GgmlDequantize, Q5_0) {
  BlockQ5_0 b{};
  b.d = kOne;
  const uint32_t qh = 0x0000AAAAu;  // bit j: fifth bit of value j; bit j+16: of value j+16
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = decode(b, 32);  // y = (q | fifth bit·16) − 16, times d
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[1], 1.0f);    // 1 | 16 = 17
  EXPECT_EQ(y[15], 15.0f);  // 15 | 16 = 31
  EXPECT_EQ(y[16], -16.0f);
  EXPECT_EQ(y[17], -15.0f);
  EXPECT_EQ(y[31], -1.0f);
}

TEST(GgmlDequantize, Q5_1) {
  BlockQ5_1 b{};
  b.d = kHalf;
  b.m = kOne;
  const uint32_t qh = 0xFFFF0000u;  // the upper 16 values have their fifth bit
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(b, 32);  // y = q·d + m
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[15], 8.5f);
  EXPECT_EQ(y[16], 16.5f);  // (15 | 16)·0.5 + 1
  EXPECT_EQ(y[31], 9.0f);   // (0 | 16)·0.5 + 1
}

TEST(GgmlDequantize, Iq4Nl) {
  BlockIq4Nl b{};
  b.d = kTwo;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(b, 32);  // y = d·kvalues_iq4nl[q]
  EXPECT_EQ(y[0], -254.0f);
  EXPECT_EQ(y[8], 2.0f);
  EXPECT_EQ(y[16], 226.0f);
  EXPECT_EQ(y[31], -254.0f);
}

TEST(GgmlDequantize, Q2_K) {
  BlockQ2K b{};
  b.d = kOne;
  b.dmin = kHalf;
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<uint8_t>(i | ((15 - i) << 4));  // sc = i, m = 15 − i
  std::memset(b.qs, 0xE4, sizeof(b.qs));  // 0b11'10'01'00: shift 2j gives q = j
  const auto y = decode(b, 256);          // y = d·sc·q − dmin·m
  EXPECT_EQ(y[0], -7.5f);    // sub-block 0, q 0: 0 − 0.5·15
  EXPECT_EQ(y[16], -7.0f);   // sub-block 1 (bytes 16..31), q 0: 0 − 0.5·14
  EXPECT_EQ(y[32], -4.5f);   // sub-block 2, shift 2 (q 1): 2·1 − 0.5·13
  EXPECT_EQ(y[255], 45.0f);  // second 128, shift 6, bytes 16..31: sub-block 15, q 3: 15·3 − 0
}

TEST(GgmlDequantize, Q3_K) {
  BlockQ3K b{};
  b.d = kOne;
  // 6-bit scales s_i = 24 + i (sc − 32 = i − 8): low 4 bits of s_k and s_{k+8} in byte k, the
  // high 2 bits of s_i in byte 8 + i%4 at bit 2·(i/4).
  const uint8_t scales[12] = {0x08, 0x19, 0x2A, 0x3B, 0x4C, 0x5D, 0x6E, 0x7F, 0xA5, 0xA5, 0xA5, 0xA5};
  std::memcpy(b.scales, scales, 12);
  std::memset(b.qs, 0xE4, sizeof(b.qs));  // low 2 bits q = j at shift 2j
  for (int l = 0; l < 32; ++l) b.hmask[l] = l < 16 ? 0x0F : 0xF0;
  const auto y = decode(b, 256);  // y = d·(sc − 32)·(q − (hbit ? 0 : 4))
  EXPECT_EQ(y[0], 0.0f);      // scale −8, q 0, hmask[0] bit 0 set: 0
  EXPECT_EQ(y[16], 28.0f);    // scale −7, q 0, hmask[16] bit 0 clear: −7·(0 − 4)
  EXPECT_EQ(y[32], -6.0f);    // scale −6, q 1, hmask[0] bit 1 set: −6·1
  EXPECT_EQ(y[200], -8.0f);   // second 128, shift 4: scale 12 − 8 = 4, q 2, hmask[8] bit 6 clear: 4·(2 − 4)
  EXPECT_EQ(y[255], 21.0f);   // scale 15 − 8 = 7, q 3, hmask[31] bit 7 set: 7·3
}

// q4_K's and q5_K's packing (get_scale_min_k4): sc = {1, 2, 3, 4, 5, 6, 7, 20}, m = {0, …, 7};
// bytes 0-3 hold sc 0-3 (and in bits 6-7 the high bits of sc 4-7), bytes 4-7 hold m 0-3 (and the
// high bits of m 4-7), bytes 8-11 the low nibbles of sc 4-7 and m 4-7. sc 7 = 20 = 0b01'0100.
constexpr uint8_t kK4Scales[12] = {1, 2, 3, 4 | (1 << 6), 0, 1, 2, 3, 0x45, 0x56, 0x67, 0x74};

TEST(GgmlDequantize, ScaleMinK4UnpacksSixBits) {
  const uint8_t sc[8] = {1, 2, 3, 4, 5, 6, 7, 20};
  for (int j = 0; j < 8; ++j) {
    uint8_t s = 0, m = 0;
    scaleMinK4(j, kK4Scales, &s, &m);
    EXPECT_EQ(s, sc[j]) << j;
    EXPECT_EQ(m, j) << j;
  }
}

TEST(GgmlDequantize, Q4_K) {
  BlockQ4K b{};
  b.d = kHalf;
  b.dmin = kOne;
  std::memcpy(b.scales, kK4Scales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i & 0xF) | ((15 - (i & 0xF)) << 4));
  const auto y = decode(b, 256);  // per 64: 32 low nibbles (sub-block 2g), 32 high (2g + 1); y = d·sc·q − dmin·m
  EXPECT_EQ(y[0], 0.0f);      // sc 1, m 0, q 0
  EXPECT_EQ(y[5], 2.5f);      // q 5: 0.5·1·5
  EXPECT_EQ(y[32], 14.0f);    // sub-block 1 (sc 2, m 1), high nibble of byte 0 = 15: 0.5·2·15 − 1
  EXPECT_EQ(y[224], 143.0f);  // sub-block 7 (sc 20, m 7), high nibble of byte 96 = 15: 0.5·20·15 − 7
  EXPECT_EQ(y[255], -7.0f);   // high nibble of byte 127 = 0: −7
}

TEST(GgmlDequantize, Q5_K) {
  BlockQ5K b{};
  b.d = kHalf;
  b.dmin = kOne;
  std::memcpy(b.scales, kK4Scales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i & 0xF) | ((15 - (i & 0xF)) << 4));
  // qh[l] bit 2g: +16 for value l of sub-block 2g; bit 2g+1: for sub-block 2g + 1.
  for (int l = 0; l < 32; ++l) b.qh[l] = l % 2 == 0 ? 0x55 : 0xAA;
  const auto y = decode(b, 256);
  EXPECT_EQ(y[0], 8.0f);    // q 0 + 16: 0.5·1·16
  EXPECT_EQ(y[1], 0.5f);    // l odd: no fifth bit in sub-block 0: 0.5·1·1
  EXPECT_EQ(y[32], 14.0f);  // sub-block 1, l 0 (bit 1 of 0x55 clear): 0.5·2·15 − 1
  EXPECT_EQ(y[33], 29.0f);  // sub-block 1, l 1 (bit 1 of 0xAA set): 0.5·2·(14 + 16) − 1
}

TEST(GgmlDequantize, Q6_K) {
  BlockQ6K b{};
  b.d = kQuarter;
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<int8_t>(i - 8);
  std::memset(b.ql, 0x21, sizeof(b.ql));  // low nibble 1, high nibble 2
  std::memset(b.qh, 0xE4, sizeof(b.qh));  // quarter k of each 128 gets high bits k
  // q = (nibble | high·16) − 32: quarter 0: 1 − 32, 1: 17 − 32, 2: 34 − 32, 3: 50 − 32.
  const auto y = decode(b, 256);  // y = d·sc·q
  EXPECT_EQ(y[0], 62.0f);     // sc −8: 0.25·−8·−31
  EXPECT_EQ(y[16], 54.25f);   // l 16 uses sc[1] = −7
  EXPECT_EQ(y[32], 22.5f);    // quarter 1: sc[2] = −6, q −15
  EXPECT_EQ(y[200], 2.0f);    // second 128, quarter 2, l 8: sc[8 + 4] = 4, q 2
  EXPECT_EQ(y[255], 31.5f);   // second 128, quarter 3, l 31: sc[8 + 1 + 6] = 7, q 18
}

TEST(GgmlDequantize, Iq4Xs) {
  BlockIq4Xs b{};
  b.d = kOne;
  // ls_ib = 29 + ib (ls − 32 = ib − 3): low 4 bits in scalesL[ib/2] (nibble ib%2), high 2 bits in
  // scalesH at bit 2·ib (1 for ib 0-2, 2 for ib 3-7).
  const uint8_t low[4] = {0xED, 0x0F, 0x21, 0x43};
  std::memcpy(b.scalesL, low, 4);
  b.scalesH = 0xAA95;
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i & 0xF) | ((15 - (i & 0xF)) << 4));
  const auto y = decode(b, 256);  // y = d·(ls − 32)·kvalues_iq4nl[q]
  EXPECT_EQ(y[0], 381.0f);    // −3·−127
  EXPECT_EQ(y[16], -339.0f);  // −3·113
  EXPECT_EQ(y[32], 254.0f);   // block 1: −2·−127
  EXPECT_EQ(y[255], -508.0f); // block 7: 4·−127
}

TEST(GgmlDequantize, FloatRows) {
  const uint16_t f16[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00};
  float y[5];
  dequantizeRowF16(reinterpret_cast<const uint8_t*>(f16), y, 5);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(y[4]));
  // bf16 is the top half of a float32 (ggml_compute_bf16_to_fp32).
  const uint16_t bf16[] = {0x3F80, 0xC040, 0x0001};
  dequantizeRowBf16(reinterpret_cast<const uint8_t*>(bf16), y, 3);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  EXPECT_EQ(y[2], std::ldexp(1.0f, -133));
}

TEST(GgmlDequantize, RowsReadUnalignedBlocks) {
  // A file's blocks may sit at any address: the row functions copy each block out.
  BlockQ8_0 b{};
  b.d = kHalf;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j);
  std::vector<uint8_t> buffer(sizeof(b) + 1);
  std::memcpy(buffer.data() + 1, &b, sizeof(b));
  float y[32];
  dequantizeRowQ8_0(buffer.data() + 1, y, 32);
  EXPECT_EQ(y[31], 15.5f);
}

// ---- every value of random blocks, by where its bits live ------------------------------------

std::vector<uint8_t> randomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(gen());
  return out;
}

template <typename Block>
Block randomBlock(uint32_t seed, std::initializer_list<size_t> halfFields) {
  auto bytes = randomBytes(sizeof(Block), seed);
  std::mt19937 gen(seed + 1);
  for (size_t f : halfFields) {  // finite scales
    const uint16_t h = fp::fp16Bits(std::ldexp(1.0f + static_cast<float>(gen() % 1024) / 1024.0f, -static_cast<int>(gen() % 8)));
    std::memcpy(bytes.data() + f, &h, 2);
  }
  Block b;
  std::memcpy(&b, bytes.data(), sizeof(Block));
  return b;
}

TEST(GgmlDequantize, Q2_KEveryValue) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto b = randomBlock<BlockQ2K>(seed, {80, 82});
    const auto y = decode(b, 256);
    const float d = fp::fp16Value(b.d), dmin = fp::fp16Value(b.dmin);
    for (int e = 0; e < 256; ++e) {
      const int n = e / 128, j = (e % 128) / 32, half = (e % 32) / 16, l = e % 16;
      const uint8_t sc = b.scales[n * 8 + j * 2 + half];
      const int q = (b.qs[32 * n + 16 * half + l] >> (2 * j)) & 3;
      ASSERT_EQ(y[e], d * static_cast<float>(sc & 0xF) * static_cast<float>(q) - dmin * static_cast<float>(sc >> 4)) << e;
    }
  }
}

TEST(GgmlDequantize, Q3_KEveryValue) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto b = randomBlock<BlockQ3K>(seed, {108});
    const auto y = decode(b, 256);
    const float d = fp::fp16Value(b.d);
    for (int e = 0; e < 256; ++e) {
      const int n = e / 128, j = (e % 128) / 32, half = (e % 32) / 16, l = e % 16 + 16 * half;
      const int i = n * 8 + j * 2 + half;  // the scale's index
      const int low4 = i < 8 ? b.scales[i] & 0xF : b.scales[i - 8] >> 4;
      const int high2 = (b.scales[8 + i % 4] >> (2 * (i / 4))) & 3;
      const int q = (b.qs[32 * n + l] >> (2 * j)) & 3;
      const bool hbit = (b.hmask[l] >> (4 * n + j)) & 1;
      const float expected = d * static_cast<float>((low4 | (high2 << 4)) - 32) * static_cast<float>(q - (hbit ? 0 : 4));
      ASSERT_EQ(y[e], expected) << e;
    }
  }
}

TEST(GgmlDequantize, Q4_KAndQ5_KEveryValue) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto b4 = randomBlock<BlockQ4K>(seed, {0, 2});
    const auto b5 = randomBlock<BlockQ5K>(seed, {0, 2});
    const auto y4 = decode(b4, 256);
    const auto y5 = decode(b5, 256);
    for (int e = 0; e < 256; ++e) {
      const int g = e / 64, hi = (e % 64) / 32, l = e % 32, sub = 2 * g + hi;
      for (int five = 0; five < 2; ++five) {
        const uint8_t* scales = five ? b5.scales : b4.scales;
        // sub-block j's 6-bit scale and min, spelled out for j < 4 and j >= 4
        const int sc = sub < 4 ? scales[sub] & 63 : (scales[sub + 4] & 0xF) | ((scales[sub - 4] >> 6) << 4);
        const int m = sub < 4 ? scales[sub + 4] & 63 : (scales[sub + 4] >> 4) | ((scales[sub] >> 6) << 4);
        const uint8_t byte = five ? b5.qs[32 * g + l] : b4.qs[32 * g + l];
        int q = hi ? byte >> 4 : byte & 0xF;
        if (five && ((b5.qh[l] >> sub) & 1)) q += 16;
        const float d = fp::fp16Value(five ? b5.d : b4.d), dmin = fp::fp16Value(five ? b5.dmin : b4.dmin);
        const float expected = d * static_cast<float>(sc) * static_cast<float>(q) - dmin * static_cast<float>(m);
        ASSERT_EQ((five ? y5 : y4)[e], expected) << e << (five ? " q5_K" : " q4_K");
      }
    }
  }
}

TEST(GgmlDequantize, Q6_KEveryValue) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto b = randomBlock<BlockQ6K>(seed, {208});
    const auto y = decode(b, 256);
    const float d = fp::fp16Value(b.d);
    for (int e = 0; e < 256; ++e) {
      const int n = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t byte = b.ql[64 * n + l + (k % 2) * 32];
      const int low = k < 2 ? byte & 0xF : byte >> 4;
      const int high = (b.qh[32 * n + l] >> (2 * k)) & 3;
      const int sc = b.scales[8 * n + l / 16 + 2 * k];
      ASSERT_EQ(y[e], d * static_cast<float>(sc) * static_cast<float>((low | (high << 4)) - 32)) << e;
    }
  }
}

TEST(GgmlDequantize, Iq4XsEveryValue) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto b = randomBlock<BlockIq4Xs>(seed, {0});
    const auto y = decode(b, 256);
    const float d = fp::fp16Value(b.d);
    for (int e = 0; e < 256; ++e) {
      const int ib = e / 32, j = e % 16, hi = (e % 32) / 16;
      const int ls = ((b.scalesL[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scalesH >> (2 * ib)) & 3) << 4);
      const uint8_t byte = b.qs[16 * ib + j];
      const int q = hi ? byte >> 4 : byte & 0xF;
      ASSERT_EQ(y[e], d * static_cast<float>(ls - 32) * static_cast<float>(kIq4nlValues[static_cast<size_t>(q)])) << e;
    }
  }
}

// ---- quantize_row_*_ref --------------------------------------------------------------------

TEST(GgmlQuantize, Q8_0ByHand) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) * 0.25f;
  BlockQ8_0 b{};
  quantizeBlock(x, b);
  // amax = 4, d = 4/127 → fp16 0x2808 (0.031494…); q = roundf(x·(1/d)), 1/d = 31.75
  EXPECT_EQ(b.d, 0x2808);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], -119);  // −3.75·31.75 = −119.06
  EXPECT_EQ(b.qs[16], 0);
  EXPECT_EQ(b.qs[31], 119);
}

TEST(GgmlQuantize, Q4_0ByHand) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  BlockQ4_0 b{};
  quantizeBlock(x, b);
  // The signed max is −16: d = −16/−8 = 2, id = 0.5; code = min(15, (int8)(x·id + 8.5)).
  EXPECT_EQ(b.d, kTwo);
  EXPECT_EQ(b.qs[0], 0x80);   // x[0] = −16 → 0, x[16] = 0 → 8
  EXPECT_EQ(b.qs[15], 0xF8);  // x[15] = −1 → 8, x[31] = 15 → min(15, 16)
}

TEST(GgmlQuantize, BlockRoundTripIsTheFormatReference) {
  // reference.cpp's q8_0/q4_0/… blocks are quantize then dequantize through these structs.
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 50; ++trial) {
    float x[32];
    for (float& v : x) v = normal(gen);
    float a[32], b[32];
    std::copy(x, x + 32, a);
    reference::q5_1Block(a, 0);
    BlockQ5_1 blk{};
    quantizeBlock(x, blk);
    dequantizeBlock(blk, b);
    for (int j = 0; j < 32; ++j) ASSERT_EQ(std::bit_cast<uint32_t>(a[j]), std::bit_cast<uint32_t>(b[j]));
  }
}

// ---- the type table ----------------------------------------------------------------------------

TEST(GgmlTypes, IdsNamesAndSizesAreGgmls) {
  // ggml.h enum ggml_type and ggml.c type_traits.
  struct Row {
    uint32_t id;
    const char* name;
    int64_t block, size;
  };
  const Row rows[] = {{0, "f32", 1, 4},       {1, "f16", 1, 2},       {2, "q4_0", 32, 18},   {3, "q4_1", 32, 20},
                      {6, "q5_0", 32, 22},    {7, "q5_1", 32, 24},    {8, "q8_0", 32, 34},   {10, "q2_K", 256, 84},
                      {11, "q3_K", 256, 110}, {12, "q4_K", 256, 144}, {13, "q5_K", 256, 176}, {14, "q6_K", 256, 210},
                      {20, "iq4_nl", 32, 18}, {23, "iq4_xs", 256, 136}, {30, "bf16", 1, 2}};
  for (const Row& r : rows) {
    const GgmlTypeInfo* t = ggmlTypeInfo(r.id);
    ASSERT_NE(t, nullptr) << r.name;
    EXPECT_STREQ(t->name, r.name);
    EXPECT_EQ(t->blockSize, r.block) << r.name;
    EXPECT_EQ(t->typeSize, r.size) << r.name;
    EXPECT_NE(t->dequantize, nullptr) << r.name << " is readable";
    EXPECT_EQ(ggmlTypeByName(r.name), t);
  }
  EXPECT_EQ(ggmlTypeByName("Q4_K"), ggmlTypeInfo(12));
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u}) EXPECT_EQ(ggmlTypeInfo(removed), nullptr) << removed;
  EXPECT_EQ(ggmlTypeLabel(12), "q4_K (12)");
  EXPECT_EQ(ggmlTypeLabel(41), "unknown type 41");
}

TEST(GgmlTypes, EveryRowIsConsistent) {
  for (const GgmlTypeInfo& t : ggmlTypes()) {
    EXPECT_EQ(ggmlTypeInfo(static_cast<uint32_t>(t.type)), &t) << t.name;
    EXPECT_GT(t.typeSize, 0) << t.name;
    if (t.format) {
      EXPECT_EQ(formatInfo(*t.format).id, *t.format);
    }
    if (t.quantize != nullptr) {
      // Encoding then decoding a block of each encodable type reproduces its KV format's
      // reference reconstruction (the same layout, one implementation).
      std::vector<float> x(static_cast<size_t>(t.blockSize == 1 ? 32 : t.blockSize));
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.7f) * 3.0f;
      std::vector<uint8_t> bytes(static_cast<size_t>(*ggmlBytes(t.type, x.size())));
      t.quantize(x.data(), bytes.data(), static_cast<int64_t>(x.size()));
      std::vector<float> y(x.size());
      t.dequantize(bytes.data(), y.data(), static_cast<int64_t>(x.size()));
      std::vector<float> ref = x;
      if (t.blockSize > 1) {
        reference::quantizeBlock(*t.format, ref.data(), 0.0f);
      } else if (t.type == GgmlType::F16) {
        for (float& v : ref) v = reference::fp16(v);
      } else if (t.type == GgmlType::Bf16) {
        for (float& v : ref) v = reference::bf16(v);
      }
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], ref[i]) << t.name << " " << i;
    }
  }
  EXPECT_FALSE(ggmlBytes(GgmlType::Q4_K, 100));
  EXPECT_EQ(*ggmlBytes(GgmlType::Q4_K, 512), 288u);
}

}  // namespace
}  // namespace kvscope
