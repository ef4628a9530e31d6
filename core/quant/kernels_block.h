// SPDX-License-Identifier: GPL-3.0-or-later
// Fast block quantizers (quantization.md §2): mxfp4, nvfp4 and the ggml types. Each kernel
// replaces a run of blocks, in place, by their reconstruction. The ggml ones follow ggml's
// `quantize_row_*_ref` + `dequantize_row_*` operation for operation in float32, so results are
// bit-identical; reference.cpp holds the packed-struct versions they are tested against.
#pragma once

#include <array>
#include <cstdint>

#include "core/quant/format_table.h"
#include "core/quant/ggml_blocks.h"

namespace kvscope::kernels {

/// ggml's `kvalues_iq4nl`: the 16 non-linear levels of iq4_nl (core/quant/ggml_blocks.h).
using ggml::kIq4nlValues;

/// ggml's `best_index_int8`: index of the table value nearest x (ties: the upper one).
int iq4nlBestIndex(float x);

/// iq4_nl's codes of one 32-value block (ggml's reference search); returns the fp16 scale.
float iq4nlQuantize(const float* x, int* codes);

/// The effective scale of one block (mxfp4: 2^e; nvfp4: d·g; ggml: the fp16 d) and, for q4_1 /
/// q5_1, the fp16 min in *zero (0 otherwise): the row's blockScale.
float blockScale(FormatId format, const float* x, float g, float* zero);
/// Each block format's scale (format_table.cpp's rows point at these).
float mxfp4Scale(const float* x, float g, float* zero);
float nvfp4Scale(const float* x, float g, float* zero);
float kvfp4Scale(const float* x, float g, float* zero);
float q8_0Scale(const float* x, float g, float* zero);
float q4_0Scale(const float* x, float g, float* zero);
float q4_1Scale(const float* x, float g, float* zero);
float q5_0Scale(const float* x, float g, float* zero);
float q5_1Scale(const float* x, float g, float* zero);
float iq4nlScale(const float* x, float g, float* zero);
/// A code's value before the block scale: e2m1 (mxfp4, nvfp4, kvfp4) and iq4_nl's table.
float e2m1CodeValue(int code);
float iq4nlCodeValue(int code);

/// nvfp4's per-tensor scale g = fp32(a / (448·6)), a the tensor's max |x|.
float nvfp4GlobalScale(float maxAbs);
/// mxfp4's shared exponent of a block with max |x| = a > 0: floor(log2 a) - 2, clamped to E8M0.
int mxfp4Exponent(float maxAbs);
/// kvfp4's (SGLang's KVFP4) block exponent for max |x| = a: ceil(log2 y), y = max(fp32(a/6),
/// fp32(1e-10)), taken exactly from y's bits (so y a power of two gives its own exponent).
int kvfp4Exponent(float maxAbs);
/// v on the e2m1 levels ±{0, 0.5, 1, 1.5, 2, 3, 4, 6} by SGLang's bounds (0.25, 0.75, 1.25, 1.75,
/// 2.5, 3.5, 5): a value on a bound takes the level above it (ties away from zero); |v| > 6 gives 6;
/// a negative v that rounds to 0 gives −0.
float e2m1TiesAway(float v);

/// `blocks` consecutive blocks at x, each replaced in place by its reconstruction; `g` is nvfp4's
/// tensor scale (others ignore it).
using BlockKernel = void (*)(float* x, int64_t blocks, float g);
/// The fast block kernel of a block format (the row's blockKernel); nullptr for other formats
/// and for block formats that have none (their reference runs).
BlockKernel blockKernel(FormatId format);
/// Each block format's kernel (format_table.cpp's rows point at these).
void mxfp4Blocks(float* x, int64_t blocks, float g);
void nvfp4Blocks(float* x, int64_t blocks, float g);
void kvfp4Blocks(float* x, int64_t blocks, float g);
void q8_0Blocks(float* x, int64_t blocks, float g);
void q4_0Blocks(float* x, int64_t blocks, float g);
void q4_1Blocks(float* x, int64_t blocks, float g);
void q5_0Blocks(float* x, int64_t blocks, float g);
void q5_1Blocks(float* x, int64_t blocks, float g);
void iq4nlBlocks(float* x, int64_t blocks, float g);

/// The ggml block kernels (q8_0, q4_0, q4_1, q5_0, q5_1) reading `in` and writing `out` (distinct
/// or the same) and checking every value read on the way: false, with `out` partly written,
/// for a NaN or an infinity. Same results as BlockKernel on a copy.
using BlockFromKernel = bool (*)(const float* in, float* out, int64_t blocks);
/// The source-reading kernel of a ggml block format (the row's blockFromKernel); nullptr for
/// other formats.
BlockFromKernel blockFromKernel(FormatId format);
bool q8_0BlocksFrom(const float* in, float* out, int64_t blocks);
bool q4_0BlocksFrom(const float* in, float* out, int64_t blocks);
bool q4_1BlocksFrom(const float* in, float* out, int64_t blocks);
bool q5_0BlocksFrom(const float* in, float* out, int64_t blocks);
bool q5_1BlocksFrom(const float* in, float* out, int64_t blocks);

/// nvfp4's kernel reading `in` and writing `out` (distinct or the same), with the blocks' max |x|
/// from `maxima` (nvfp4BlockMaxima's for these blocks): its round trip has checked the input
/// and found the maxima in its range pass, so it neither copies nor reduces.
void nvfp4From(const float* in, float* out, int64_t blocks, float g, const float* maxima);
/// nvfp4's range pass: the max |x| of each of `blocks` blocks of 16 at x into maxima[], the
/// largest into *largest; true when a value is NaN or infinite (the maxima then mean nothing).
bool nvfp4BlockMaxima(const float* x, int64_t blocks, float* maxima, float* largest);

}  // namespace kvscope::kernels
