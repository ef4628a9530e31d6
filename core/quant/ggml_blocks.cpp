// SPDX-License-Identifier: GPL-3.0-or-later
// ggml's block layouts: reference quantizers and dequantizers, one block at a time. Written from
// ggml/src/ggml-quants.c (quantize_row_*_ref, dequantize_row_*) and ggml-common.h (the structs):
// the same float32 operations in the same order, so the results are ggml's bit for bit
// (the build uses -ffp-contract=off, as ggml's scalar code is compiled without fused multiply-add).
#include "core/quant/ggml_blocks.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/util/small_float.h"

namespace kvscope::ggml {
namespace {

/// ggml's C cast of a float to an 8-bit code, as x86 performs it: truncation to int32, then its
/// low byte. When a block's id = 1/d overflowed (a block of subnormal values), x·id is infinite or
/// NaN, which x86 converts to 0x80000000 (low byte 0) and C++ leaves undefined; said explicitly
/// here, as the kernels do (kernels_block.cpp, degenerateInverse).
int8_t ggmlCode(float v) {
  return std::fabs(v) < 2147483648.0f ? static_cast<int8_t>(static_cast<int32_t>(v)) : int8_t{0};
}

uint16_t toFp16(float f) { return fp::fp16Bits(f); }

// ggml's best_index_int8 as kvscope's references have always computed it: a binary search, then
// the nearer neighbour by "x - v[mu-1] < v[mu] - x".
int bestIndexInt8(int n, const int8_t* val, float x) {
  if (x <= val[0]) return 0;
  if (x >= val[n - 1]) return n - 1;
  int ml = 0, mu = n - 1;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/// Runs `fn(block, out)` over the n / values-per-block blocks packed at `bytes`; each block is
/// copied out first, since a file's blocks need not be aligned for the struct.
template <typename Block, int Values>
void dequantizeBlocks(const uint8_t* bytes, float* y, int64_t n) {
  const int64_t blocks = n / Values;
  for (int64_t i = 0; i < blocks; ++i) {
    Block b;
    std::memcpy(&b, bytes + i * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
    dequantizeBlock(b, y + i * Values);
  }
}

template <typename Block>
void quantizeBlocks(const float* x, uint8_t* bytes, int64_t n) {
  const int64_t blocks = n / kQk;
  for (int64_t i = 0; i < blocks; ++i) {
    Block b{};
    quantizeBlock(x + i * kQk, b);
    std::memcpy(bytes + i * static_cast<int64_t>(sizeof(Block)), &b, sizeof(Block));
  }
}

}  // namespace

float halfToFloat(uint16_t h) {
  // Selects are sign masks, not ?:, so that GCC vectorizes the loops that call this.
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  const uint32_t isSubnormal = 0u - static_cast<uint32_t>(em < 0x0400u);  // all ones for 0 and subnormals
  const uint32_t isSpecial = 0u - static_cast<uint32_t>(em >= 0x7c00u);   // all ones for inf and NaN
  // Normal numbers: the exponent rebiased by 127 − 15; infinities and NaN (exponent 31) by a
  // further 128 − 16 so that they land on exponent 255 with their mantissa bits kept.
  const uint32_t bits = (em << 13) + (112u << 23) + (isSpecial & (112u << 23));
  // Zero and subnormals: mantissa · 2^-24, exact in float.
  const uint32_t sub = std::bit_cast<uint32_t>(static_cast<float>(em) * 0x1p-24f);
  return std::bit_cast<float>(((sub & isSubnormal) | (bits & ~isSubnormal)) | sign);
}

// ---- quantize_row_*_ref, one block -----------------------------------------------------------

void quantizeBlock(const float* x, BlockQ8_0& y) {
  float amax = 0.0f;
  for (int j = 0; j < kQk; j++) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / ((1 << 7) - 1);
  const float id = d ? 1.0f / d : 0.0f;
  y.d = toFp16(d);
  for (int j = 0; j < kQk; ++j) y.qs[j] = ggmlCode(std::round(x[j] * id));
}

void quantizeBlock(const float* x, BlockQ4_0& y) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQk; j++) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8;
  const float id = d ? 1.0f / d : 0.0f;
  y.d = toFp16(d);
  for (int j = 0; j < kQk / 2; ++j) {
    const float x0 = x[j] * id;
    const float x1 = x[kQk / 2 + j] * id;
    const auto xi0 = static_cast<uint8_t>(std::min<int>(15, ggmlCode(x0 + 8.5f)));
    const auto xi1 = static_cast<uint8_t>(std::min<int>(15, ggmlCode(x1 + 8.5f)));
    y.qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
  }
}

void quantizeBlock(const float* x, BlockQ4_1& y) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < kQk; j++) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / ((1 << 4) - 1);
  const float id = d ? 1.0f / d : 0.0f;
  y.d = toFp16(d);
  y.m = toFp16(min);
  for (int j = 0; j < kQk / 2; ++j) {
    const float x0 = (x[j] - min) * id;
    const float x1 = (x[kQk / 2 + j] - min) * id;
    const auto xi0 = static_cast<uint8_t>(std::min<int>(15, ggmlCode(x0 + 0.5f)));
    const auto xi1 = static_cast<uint8_t>(std::min<int>(15, ggmlCode(x1 + 0.5f)));
    y.qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
  }
}

void quantizeBlock(const float* x, BlockQ5_0& y) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQk; j++) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -16;
  const float id = d ? 1.0f / d : 0.0f;
  y.d = toFp16(d);
  uint32_t qh = 0;
  for (int j = 0; j < kQk / 2; ++j) {
    const float x0 = x[j] * id;
    const float x1 = x[kQk / 2 + j] * id;
    const auto xi0 = static_cast<uint8_t>(std::min<int>(31, ggmlCode(x0 + 16.5f)));
    const auto xi1 = static_cast<uint8_t>(std::min<int>(31, ggmlCode(x1 + 16.5f)));
    y.qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + kQk / 2);
  }
  std::memcpy(y.qh, &qh, sizeof(qh));
}

void quantizeBlock(const float* x, BlockQ5_1& y) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < kQk; j++) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / ((1 << 5) - 1);
  const float id = d ? 1.0f / d : 0.0f;
  y.d = toFp16(d);
  y.m = toFp16(min);
  uint32_t qh = 0;
  for (int j = 0; j < kQk / 2; ++j) {
    const float x0 = (x[j] - min) * id;
    const float x1 = (x[kQk / 2 + j] - min) * id;
    const auto xi0 = static_cast<uint8_t>(ggmlCode(x0 + 0.5f));
    const auto xi1 = static_cast<uint8_t>(ggmlCode(x1 + 0.5f));
    y.qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + kQk / 2);
  }
  std::memcpy(y.qh, &qh, sizeof(qh));
}

void quantizeBlock(const float* x, BlockIq4Nl& y) {
  uint8_t codes[kQk] = {};
  float weight[kQk];
  for (int j = 0; j < kQk; ++j) weight[j] = x[j] * x[j];
  float amax = 0, max = 0;
  for (int j = 0; j < kQk; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  float scale = 0;
  if (!(amax < 1e-15f)) {
    float d = max / kIq4nlValues[0];  // ntry <= 0: the largest value maps to -127
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kQk; ++j) {
      const float al = id * x[j];
      const int l = bestIndexInt8(16, kIq4nlValues.data(), al);
      codes[j] = static_cast<uint8_t>(l);
      const float q = kIq4nlValues[static_cast<size_t>(l)];
      const float w = weight[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    scale = d;  // the itry loop runs from 1 to -1: no iterations
  }
  y.d = toFp16(scale);
  for (int j = 0; j < 16; ++j) y.qs[j] = static_cast<uint8_t>(codes[j] | (codes[16 + j] << 4));
}

// ---- dequantize_row_*, one block -------------------------------------------------------------

void dequantizeBlock(const BlockQ8_0& b, float* y) {
  const float d = halfToFloat(b.d);
  for (int j = 0; j < kQk; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

void dequantizeBlock(const BlockQ4_0& b, float* y) {
  const float d = halfToFloat(b.d);
  for (int j = 0; j < kQk / 2; ++j) {
    y[j] = static_cast<float>((b.qs[j] & 0x0F) - 8) * d;
    y[j + kQk / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
  }
}

void dequantizeBlock(const BlockQ4_1& b, float* y) {
  const float d = halfToFloat(b.d), m = halfToFloat(b.m);
  for (int j = 0; j < kQk / 2; ++j) {
    y[j] = static_cast<float>(b.qs[j] & 0x0F) * d + m;
    y[j + kQk / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
  }
}

void dequantizeBlock(const BlockQ5_0& b, float* y) {
  const float d = halfToFloat(b.d);
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (int j = 0; j < kQk / 2; ++j) {
    const auto xh0 = static_cast<uint8_t>(((qh >> (j + 0)) << 4) & 0x10);
    const auto xh1 = static_cast<uint8_t>(((qh >> (j + 12))) & 0x10);
    const int32_t x0 = ((b.qs[j] & 0x0F) | xh0) - 16;
    const int32_t x1 = ((b.qs[j] >> 4) | xh1) - 16;
    y[j] = static_cast<float>(x0) * d;
    y[j + kQk / 2] = static_cast<float>(x1) * d;
  }
}

void dequantizeBlock(const BlockQ5_1& b, float* y) {
  const float d = halfToFloat(b.d), m = halfToFloat(b.m);
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (int j = 0; j < kQk / 2; ++j) {
    const auto xh0 = static_cast<uint8_t>(((qh >> (j + 0)) << 4) & 0x10);
    const auto xh1 = static_cast<uint8_t>(((qh >> (j + 12))) & 0x10);
    const int x0 = (b.qs[j] & 0x0F) | xh0;
    const int x1 = (b.qs[j] >> 4) | xh1;
    y[j] = static_cast<float>(x0) * d + m;
    y[j + kQk / 2] = static_cast<float>(x1) * d + m;
  }
}

void dequantizeBlock(const BlockIq4Nl& b, float* y) {
  const float d = halfToFloat(b.d);
  for (int j = 0; j < kQk / 2; ++j) {
    y[j] = d * static_cast<float>(kIq4nlValues[b.qs[j] & 0xfu]);
    y[j + kQk / 2] = d * static_cast<float>(kIq4nlValues[b.qs[j] >> 4]);
  }
}

void dequantizeBlock(const BlockQ2K& b, float* y) {
  const float d = halfToFloat(b.d), min = halfToFloat(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int n = 0; n < kQkK; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      // Two sub-blocks of 16 per shift: bytes q[0..15] and q[16..31] of this 32-byte group.
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = b.scales[is++];
        const float dl = d * static_cast<float>(sc & 0xF), ml = min * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
      }
      shift += 2;
    }
    q += 32;
  }
}

void dequantizeBlock(const BlockQ3K& b, float* y) {
  // The 16 6-bit scales: low 4 bits in bytes 0-7 (two per byte), high 2 bits in bytes 8-11.
  constexpr uint32_t kMask1 = 0x03030303, kMask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, b.scales, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kMask2) | (((tmp >> 4) & kMask1) << 4);
  aux[3] = ((aux[1] >> 4) & kMask2) | (((tmp >> 6) & kMask1) << 4);
  aux[0] = (aux[0] & kMask2) | (((tmp >> 0) & kMask1) << 4);
  aux[1] = (aux[1] & kMask2) | (((tmp >> 2) & kMask1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, sizeof(scales));

  const float dAll = halfToFloat(b.d);
  const uint8_t* q = b.qs;
  uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < kQkK; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const float dl = dAll * static_cast<float>(scales[is++] - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int low = (q[l] >> shift) & 3;
          *y++ = dl * static_cast<float>(low - ((b.hmask[l] & m) ? 0 : 4));
        }
      }
      shift += 2;
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

void scaleMinK4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j - 0] >> 6) << 4));
  }
}

void dequantizeBlock(const BlockQ4K& b, float* y) {
  const float d = halfToFloat(b.d), min = halfToFloat(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int j = 0; j < kQkK; j += 64) {
    uint8_t sc, m;
    scaleMinK4(is + 0, b.scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = min * static_cast<float>(m);
    scaleMinK4(is + 1, b.scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = min * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
    is += 2;
  }
}

void dequantizeBlock(const BlockQ5K& b, float* y) {
  const float d = halfToFloat(b.d), min = halfToFloat(b.dmin);
  const uint8_t* ql = b.qs;
  int is = 0;
  unsigned u1 = 1, u2 = 2;
  for (int j = 0; j < kQkK; j += 64) {
    uint8_t sc, m;
    scaleMinK4(is + 0, b.scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = min * static_cast<float>(m);
    scaleMinK4(is + 1, b.scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = min * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((b.qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l)
      *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    is += 2;
    u1 <<= 2;
    u2 <<= 2;
  }
}

void dequantizeBlock(const BlockQ6K& b, float* y) {
  // ggml's loop computes the four quarters of each 128 values in one pass over l; here one
  // quarter at a time (contiguous writes, so it vectorizes), with the same value for each y.
  const float d = halfToFloat(b.d);
  for (int n = 0; n < kQkK / 128; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    const int8_t* sc = b.scales + 8 * n;
    float* yq = y + 128 * n;
    for (int k = 0; k < 4; ++k) {
      const uint8_t* low = ql + 32 * (k & 1);  // quarters 0, 2: ql[l]; 1, 3: ql[l + 32]
      const int nibble = 4 * (k >> 1);         // quarters 0, 1: low nibble; 2, 3: high
      for (int half = 0; half < 2; ++half) {
        const float s = static_cast<float>(sc[half + 2 * k]);  // is = l / 16
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int q = (((low[l] >> nibble) & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
          // d·sc·q evaluated left to right, as ggml's `d * sc[is] * q1`.
          yq[32 * k + l] = d * s * static_cast<float>(q);
        }
      }
    }
  }
}

void dequantizeBlock(const BlockIq4Xs& b, float* y) {
  const float d = halfToFloat(b.d);
  const uint8_t* qs = b.qs;
  for (int ib = 0; ib < kQkK / 32; ++ib) {
    const int ls = ((b.scalesL[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b.scalesH >> 2 * ib) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j + 0] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xfu]);
      y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
    }
    y += 32;
    qs += 16;
  }
}

// ---- rows of packed blocks -------------------------------------------------------------------

void dequantizeRowF32(const uint8_t* blocks, float* y, int64_t n) {
  std::memcpy(y, blocks, static_cast<size_t>(n) * sizeof(float));
}

void dequantizeRowF16(const uint8_t* blocks, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, blocks + 2 * i, sizeof(h));
    y[i] = halfToFloat(h);
  }
}

void dequantizeRowBf16(const uint8_t* blocks, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, blocks + 2 * i, sizeof(h));
    y[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
  }
}

void dequantizeRowQ8_0(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ8_0, kQk>(b, y, n); }
void dequantizeRowQ4_0(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ4_0, kQk>(b, y, n); }
void dequantizeRowQ4_1(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ4_1, kQk>(b, y, n); }
void dequantizeRowQ5_0(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ5_0, kQk>(b, y, n); }
void dequantizeRowQ5_1(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ5_1, kQk>(b, y, n); }
void dequantizeRowIq4Nl(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockIq4Nl, kQk>(b, y, n); }
void dequantizeRowQ2K(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ2K, kQkK>(b, y, n); }
void dequantizeRowQ3K(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ3K, kQkK>(b, y, n); }
void dequantizeRowQ4K(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ4K, kQkK>(b, y, n); }
void dequantizeRowQ5K(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ5K, kQkK>(b, y, n); }
void dequantizeRowQ6K(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockQ6K, kQkK>(b, y, n); }
void dequantizeRowIq4Xs(const uint8_t* b, float* y, int64_t n) { dequantizeBlocks<BlockIq4Xs, kQkK>(b, y, n); }

void quantizeRowF32(const float* x, uint8_t* blocks, int64_t n) {
  std::memcpy(blocks, x, static_cast<size_t>(n) * sizeof(float));
}

void quantizeRowF16(const float* x, uint8_t* blocks, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp::fp16Bits(x[i]);
    std::memcpy(blocks + 2 * i, &h, sizeof(h));
  }
}

void quantizeRowBf16(const float* x, uint8_t* blocks, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp::bf16Bits(x[i]);
    std::memcpy(blocks + 2 * i, &h, sizeof(h));
  }
}

void quantizeRowQ8_0(const float* x, uint8_t* b, int64_t n) { quantizeBlocks<BlockQ8_0>(x, b, n); }
void quantizeRowQ4_0(const float* x, uint8_t* b, int64_t n) { quantizeBlocks<BlockQ4_0>(x, b, n); }
void quantizeRowQ4_1(const float* x, uint8_t* b, int64_t n) { quantizeBlocks<BlockQ4_1>(x, b, n); }
void quantizeRowQ5_0(const float* x, uint8_t* b, int64_t n) { quantizeBlocks<BlockQ5_0>(x, b, n); }
void quantizeRowQ5_1(const float* x, uint8_t* b, int64_t n) { quantizeBlocks<BlockQ5_1>(x, b, n); }
void quantizeRowIq4Nl(const float* x, uint8_t* b, int64_t n) { quantizeBlocks<BlockIq4Nl>(x, b, n); }

}  // namespace kvscope::ggml
