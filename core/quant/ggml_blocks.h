// SPDX-License-Identifier: GPL-3.0-or-later
// ggml's block layouts, packed as ggml packs them (ggml/src/ggml-common.h), with ggml's reference
// quantizers (`quantize_row_*_ref`) and dequantizers (`dequantize_row_*`, ggml/src/ggml-quants.c)
// for one block at a time. The one definition of each layout in kvscope: the KV-cache formats'
// references (reference.cpp), the model-file readers (core/modelfile) and the llama.cpp
// conformance checks all use these. Each function follows ggml's float32 arithmetic operation
// for operation, so results are bit-identical to ggml's scalar code.
#pragma once

#include <array>
#include <cstdint>

namespace kvscope::ggml {

/// Values per block of the 32-value types (ggml's QK4_0, QK4_1, QK5_0, QK5_1, QK8_0, QK4_NL).
inline constexpr int kQk = 32;
/// Values per super-block of the K-quants and iq4_xs (ggml's QK_K).
inline constexpr int kQkK = 256;

/// ggml's `kvalues_iq4nl`: the 16 non-linear levels of iq4_nl and iq4_xs.
inline constexpr std::array<int8_t, 16> kIq4nlValues{-127, -104, -83, -65, -49, -35, -22, -10,
                                                     1,    13,   25,  38,  53,  69,  89,  113};

// fp16 fields are IEEE binary16 bits (ggml_half). x̂ below is a value's reconstruction.

/// q8_0: x̂ = d·q, q int8. 8.5 bits per value.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQk];
};
/// q4_0: x̂ = d·(q − 8), q 4 bits (values j and j+16 share byte j). 4.5 bits per value.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQk / 2];
};
/// q4_1: x̂ = d·q + m, q 4 bits. 5 bits per value.
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[kQk / 2];
};
/// q5_0: x̂ = d·(q − 16), q 5 bits (fifth bits in qh). 5.5 bits per value.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};
/// q5_1: x̂ = d·q + m, q 5 bits. 6 bits per value.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};
/// iq4_nl: x̂ = d·kIq4nlValues[q], q 4 bits. 4.5 bits per value.
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[kQk / 2];
};
/// q2_K: 16 sub-blocks of 16, x̂ = d·sc·q − dmin·m (sc, m 4 bits each in scales[]), q 2 bits.
/// 2.625 bits per value.
struct BlockQ2K {
  uint8_t scales[kQkK / 16];
  uint8_t qs[kQkK / 4];
  uint16_t d, dmin;
};
/// q3_K: 16 sub-blocks of 16, x̂ = d·(sc − 32)·(q − 4·!hbit), sc 6 bits packed in 12 bytes,
/// q 2 low bits in qs and a high bit in hmask. 3.4375 bits per value.
struct BlockQ3K {
  uint8_t hmask[kQkK / 8];
  uint8_t qs[kQkK / 4];
  uint8_t scales[12];
  uint16_t d;
};
/// q4_K: 8 sub-blocks of 32, x̂ = d·sc·q − dmin·m (sc, m 6 bits packed in 12 bytes), q 4 bits.
/// 4.5 bits per value.
struct BlockQ4K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQkK / 2];
};
/// q5_K: as q4_K with a fifth bit per value in qh. 5.5 bits per value.
struct BlockQ5K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQkK / 8];
  uint8_t qs[kQkK / 2];
};
/// q6_K: 16 sub-blocks of 16, x̂ = d·sc·(q − 32), sc int8, q 6 bits (4 in ql, 2 in qh).
/// 6.5625 bits per value.
struct BlockQ6K {
  uint8_t ql[kQkK / 2];
  uint8_t qh[kQkK / 4];
  int8_t scales[kQkK / 16];
  uint16_t d;
};
/// iq4_xs: 8 sub-blocks of 32, x̂ = d·(ls − 32)·kIq4nlValues[q], ls 6 bits (4 in scalesL, 2 in
/// scalesH). 4.25 bits per value.
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scalesH;
  uint8_t scalesL[kQkK / 64];
  uint8_t qs[kQkK / 2];
};
static_assert(sizeof(BlockQ8_0) == 34, "q8_0: 8.5 bits per value");
static_assert(sizeof(BlockQ4_0) == 18, "q4_0: 4.5 bits per value");
static_assert(sizeof(BlockQ4_1) == 20, "q4_1: 5 bits per value");
static_assert(sizeof(BlockQ5_0) == 22, "q5_0: 5.5 bits per value");
static_assert(sizeof(BlockQ5_1) == 24, "q5_1: 6 bits per value");
static_assert(sizeof(BlockIq4Nl) == 18, "iq4_nl: 4.5 bits per value");
static_assert(sizeof(BlockQ2K) == 84, "q2_K: 2.625 bits per value");
static_assert(sizeof(BlockQ3K) == 110, "q3_K: 3.4375 bits per value");
static_assert(sizeof(BlockQ4K) == 144, "q4_K: 4.5 bits per value");
static_assert(sizeof(BlockQ5K) == 176, "q5_K: 5.5 bits per value");
static_assert(sizeof(BlockQ6K) == 210, "q6_K: 6.5625 bits per value");
static_assert(sizeof(BlockIq4Xs) == 136, "iq4_xs: 4.25 bits per value");

/// The float of IEEE binary16 bits (exact; GGML_FP16_TO_FP32), branch-free so loops vectorize.
float halfToFloat(uint16_t h);

/// ggml's `quantize_row_*_ref` for one block of kQk values.
void quantizeBlock(const float* x, BlockQ8_0& y);
void quantizeBlock(const float* x, BlockQ4_0& y);
void quantizeBlock(const float* x, BlockQ4_1& y);
void quantizeBlock(const float* x, BlockQ5_0& y);
void quantizeBlock(const float* x, BlockQ5_1& y);
/// `quantize_row_iq4_nl_ref`: quantize_row_iq4_nl_impl with super_block_size = block_size = 32,
/// no importance weights and ntry = -1.
void quantizeBlock(const float* x, BlockIq4Nl& y);

/// ggml's `dequantize_row_*` for one block (kQk or kQkK values into y).
void dequantizeBlock(const BlockQ8_0& b, float* y);
void dequantizeBlock(const BlockQ4_0& b, float* y);
void dequantizeBlock(const BlockQ4_1& b, float* y);
void dequantizeBlock(const BlockQ5_0& b, float* y);
void dequantizeBlock(const BlockQ5_1& b, float* y);
void dequantizeBlock(const BlockIq4Nl& b, float* y);
void dequantizeBlock(const BlockQ2K& b, float* y);
void dequantizeBlock(const BlockQ3K& b, float* y);
void dequantizeBlock(const BlockQ4K& b, float* y);
void dequantizeBlock(const BlockQ5K& b, float* y);
void dequantizeBlock(const BlockQ6K& b, float* y);
void dequantizeBlock(const BlockIq4Xs& b, float* y);

/// q4_K's and q5_K's 6-bit scale and min of sub-block j (0..7) from the packed 12 bytes
/// (ggml's get_scale_min_k4).
void scaleMinK4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m);

/// n values (a multiple of the block size) from packed blocks at `blocks` (any alignment), as
/// ggml's dequantize_row_* / to_float. One function per ggml type kvscope reads.
void dequantizeRowF32(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowF16(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowBf16(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ8_0(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ4_0(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ4_1(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ5_0(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ5_1(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowIq4Nl(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ2K(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ3K(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ4K(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ5K(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowQ6K(const uint8_t* blocks, float* y, int64_t n);
void dequantizeRowIq4Xs(const uint8_t* blocks, float* y, int64_t n);

/// n values (a multiple of the block size) encoded into packed blocks at `blocks`, as ggml's
/// from_float_ref: F32 as is, F16 and BF16 rounded to nearest even (GGML_FP32_TO_FP16,
/// GGML_FP32_TO_BF16), the block types by quantizeBlock.
void quantizeRowF32(const float* x, uint8_t* blocks, int64_t n);
void quantizeRowF16(const float* x, uint8_t* blocks, int64_t n);
void quantizeRowBf16(const float* x, uint8_t* blocks, int64_t n);
void quantizeRowQ8_0(const float* x, uint8_t* blocks, int64_t n);
void quantizeRowQ4_0(const float* x, uint8_t* blocks, int64_t n);
void quantizeRowQ4_1(const float* x, uint8_t* blocks, int64_t n);
void quantizeRowQ5_0(const float* x, uint8_t* blocks, int64_t n);
void quantizeRowQ5_1(const float* x, uint8_t* blocks, int64_t n);
void quantizeRowIq4Nl(const float* x, uint8_t* blocks, int64_t n);

}  // namespace kvscope::ggml
