// SPDX-License-Identifier: GPL-3.0-or-later
// Plain scalar references of every format (quantization.md §2-4), written to mirror the spec's
// formulas rather than to be fast. quantizeFormatReference (formats.h) is built from these; the
// tests hold the fast path to them bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant/spec.h"

namespace kvscope::reference {

/// v rounded to nearest-even onto a binary format (mbits mantissa bits, smallest normal exponent
/// emin), computed in double with nearbyint; |v| > maxFinite saturates or becomes infinity.
float roundToFormat(float v, int mbits, int emin, double maxFinite, bool saturate);

/// fp16 / bf16 / e4m3 / e5m2 / e2m1 rounding, by roundToFormat.
float fp16(float v);
float bf16(float v);
float e4m3(float v);
float e5m2(float v);
float e2m1(float v);

/// Index of the NF4 code nearest v (ties: the lower index), by comparing distances in double.
int nf4Index(float v);

/// The element positions of every group of a grouped spec (int/fp8/nf4) on a [heads, tokens,
/// dim] tensor, each in the order the group's values are read (for §4 and describeGroup).
std::vector<std::vector<int64_t>> groupIndices(const QuantSpec& spec, int64_t heads, int64_t tokens,
                                               int64_t dim);

/// Clipped range (lo', hi') of a group's values (§4); max-abs formats return (-a', a').
struct Range {
  double lo = 0, hi = 0;
};
Range clipRange(const QuantSpec& spec, const std::vector<float>& values);

/// Scale and zero stored for a group with clipped range r (§2).
struct Params {
  float scale = 0, zero = 0;
  float intZero = 0;  ///< zero=int: the integer zero point z (0 … 2^b − 1)
  float rawScale = 0;  ///< codes=fp32: the fp32 scale the codes use (before meta), floored by minscale=
  float rawZero = 0;   ///< codes=fp32: the fp32 min the codes use (before meta)
};
Params groupParams(const QuantSpec& spec, Range r);
/// zero=packed: the scale the reconstruction uses, s with its 4 low mantissa bits cleared (they
/// hold the zero point in vLLM's int4 scale word).
float packedScale(float s);

/// Reconstruction of one value of a grouped format with the given parameters.
float quantizeValue(const QuantSpec& spec, Params p, float x);

/// The reconstruction of one block of a block format (`g`: nvfp4's tensor scale), in place:
/// the row's blockReference.
void quantizeBlock(FormatId format, float* x, float g);
/// Each block format's reference (format_table.cpp's rows point at these).
void q8_0Block(float* x, float g);
void q4_0Block(float* x, float g);
void q4_1Block(float* x, float g);
void q5_0Block(float* x, float g);
void q5_1Block(float* x, float g);
void iq4nlBlock(float* x, float g);
void mxfp4Block(float* x, float g);
void nvfp4Block(float* x, float g);
void kvfp4Block(float* x, float g);
/// nvfp4 with `4over6` (docs/formats.md, "Engine rules"): one block of 16 in place, the block
/// scale e4m3(a/(6g)) or e4m3(a/(4g)), whichever reconstructs with the smaller squared error
/// (max/6 on a tie). Returns true when max/4 was chosen.
bool nvfp4FourOverSix(float* x, float g);

}  // namespace kvscope::reference
