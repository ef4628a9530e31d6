// SPDX-License-Identifier: GPL-3.0-or-later
// Step 5 of the pipeline (quantization.md §2-4): a format with its grouping and clipping,
// applied in place to the tokens that are quantized. Scalar references live beside fast paths
// (core/quant/reference.h) and tests check they agree.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant/spec.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// Replaces every value of `x` by its reconstruction under `spec`'s format, grouping and clipping.
/// `x` holds only the quantized tokens [S, T-R) (already rotated and with outliers zeroed), so
/// channel groups count from its token 0. Returns an error for a block format whose row
/// (heads*dim) does not divide into blocks. Uses all cores for large tensors.
Status quantizeFormatInPlace(Tensor3& x, const QuantSpec& spec);
/// The same with `row`'s behaviour (formatInfo(spec.format) for quantizeFormatInPlace): its fast
/// kernel, or its reference where it has none or the spec needs the reference. For tests that
/// check what a row without a fast kernel does.
Status quantizeFormatWith(const FormatInfo& row, Tensor3& x, const QuantSpec& spec);

/// How step 5 of `spec` splits for a one-pass pipeline on a tensor of `tokens` quantized tokens:
/// the number of consecutive token rows of one head that form an independent piece (1 for
/// per-token groups, element-wise formats, block formats whose blocks stay inside a head's row,
/// and axis=tensor groups without clipping once formatTensorContext is known; the channel run G
/// for axis=channel), or 0 when step 5 needs the whole tensor at once (axis=head, clipped
/// axis=tensor groups, blocks that straddle heads).
int64_t formatPieceRows(const QuantSpec& spec, int64_t tokens, int64_t dim);

/// What every piece needs to know about the whole tensor, from the min and max over all quantized
/// values: nvfp4's tensor scale g, or the parameters of the one group of an axis=tensor spec.
struct TensorContext {
  float nvfp4Scale = 0.0f;
  float scale = 0.0f;  ///< axis=tensor: the group's s
  float zero = 0.0f;   ///< axis=tensor: the group's m (int asym)
};
/// Whether step 5 needs the min and max over all quantized values first (nvfp4, and axis=tensor
/// groups without clipping).
bool formatNeedsTensorRange(const QuantSpec& spec);
/// The context step 5 uses, from that min and max.
TensorContext formatTensorContext(const QuantSpec& spec, float lo, float hi);
/// Step 5 on one piece: `rows` consecutive token rows (of `dim` values) of one head, starting on a
/// piece boundary counted from the first quantized token; `rows` is a multiple of
/// formatPieceRows except for the head's last piece. Gives exactly what quantizeFormatInPlace
/// gives those rows. `context` is formatTensorContext's value (ignored where not needed).
void quantizeFormatPiece(float* base, int64_t rows, int64_t dim, const QuantSpec& spec,
                         const TensorContext& context);
/// Whether quantizeFormatPieceFrom serves `spec`: per-token groups and channel runs without
/// clipping.
bool formatPieceReadsSource(const QuantSpec& spec);
/// quantizeFormatPiece of `rows` rows read from `in` and written to `out` (distinct buffers or
/// the same), for a spec formatPieceReadsSource accepts; every value read is checked on the way.
/// Returns false, with `out` partly written, when one of them is NaN or infinite.
bool quantizeFormatPieceFrom(const float* in, float* out, int64_t rows, int64_t dim, const QuantSpec& spec);

/// The same, computed by the plain scalar reference (for tests and as documentation).
Status quantizeFormatReference(Tensor3& x, const QuantSpec& spec);

/// Checks what step 5 needs of `spec` on x's shape: int bits 1..8 (sym: 2..8), a block format's
/// row heads*dim divisible by its block size, 0 < clip p <= 1. The message says what is wrong.
Status checkFormatSpec(const Tensor3& x, const QuantSpec& spec);
/// The same checks for a tensor of `heads` heads of `dim` channels.
Status checkFormatSpec(const QuantSpec& spec, int64_t heads, int64_t dim);

/// Number of scale groups (int/fp8/nf4) or blocks (block formats) `spec` makes on a tensor of
/// this shape, for storage accounting. Elementwise formats: 0.
int64_t groupCount(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim);

/// What the GUI's histogram draws for one group: its members' range and the grid of levels.
struct GroupDetail {
  int64_t size = 0;          ///< number of values in the group
  double lo = 0, hi = 0;     ///< min and max of the group's values (before clipping)
  double clipLo = 0, clipHi = 0;  ///< the range after clipping
  double scale = 0;          ///< the stored scale (meta-rounded); block formats: effective scale
  double zero = 0;           ///< asym min m, 0 otherwise
  std::vector<double> levels;  ///< every representable value of the group, ascending
  int codesUsed = 0;         ///< distinct codes the group's values map to
  int codesTotal = 0;        ///< 2^bits (or the codebook size)
};

/// The group that contains element (head, token, channel) of `x` (quantized tokens only).
Expected<GroupDetail> describeGroup(const Tensor3& x, const QuantSpec& spec, int64_t head,
                                    int64_t token, int64_t channel);

}  // namespace kvscope
