// SPDX-License-Identifier: GPL-3.0-or-later
// hqq<b>: HQQ's quantizer (mobiusml/hqq hqq/core/quantize.py Quantizer.quantize with optimize=True,
// hqq/core/optimize.py optimize_weights_proximal_legacy) as Hugging Face transformers' quantized
// cache calls it (backend=HQQ). docs/formats.md "hqq" states the rule; the format works on a whole
// layer tensor because both its grouping (axis 0) and the optimizer's stop rule span the tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant/spec.h"

namespace kvscope::hqq {

/// The bit widths the format takes: 1 … 8 (transformers' HQQ cache allows 1, 2, 3, 4, 8; HQQ's
/// Quantizer also 5 and 6, stored a byte per code).
bool validBits(int bits);

/// HQQ's proximal optimizer parameters (optimize_weights_proximal_legacy's defaults).
inline constexpr double kLpNorm = 0.7;
inline constexpr double kBeta = 10.0;
inline constexpr int kIterations = 20;

/// What one layer tensor's quantization stored and how the optimizer ran.
struct Result {
  std::vector<float> scale;  ///< per group: the stored scale 1/s (HQQ's meta["scale"]), in the compute dtype
  std::vector<float> zero;   ///< per group: the stored zero point, in the compute dtype
  int iterations = 0;        ///< optimizer rounds run (the last one's error was not lower, or 20)
  std::vector<float> errors; ///< the mean |W_f − W_r| of each round, as HQQ compares them (fp16)
};

/// Groups of a flattened tensor of n values: axis 0 (spec axis=tensor): the tensor viewed as
/// [G, n/G], group j = values j, j + n/G, j + 2n/G, …; axis 1 (spec axis=token): G consecutive values.
struct Layout {
  int64_t n = 0;
  int64_t group = 64;
  bool axis0 = true;
  [[nodiscard]] int64_t groups() const { return n / group; }
  /// Index in the flat tensor of value k of group g.
  [[nodiscard]] int64_t at(int64_t g, int64_t k) const { return axis0 ? k * (n / group) + g : g * group + k; }
};

/// hqq<bits> on the n values at x (a layer tensor, [heads, tokens, D] order), in place; `compute`
/// is the model dtype the metadata is stored and the dequantization computed in.
Result quantizeTensor(float* x, const Layout& layout, int bits, MetaType compute);
/// The same one group at a time in a plain loop (the tests' second path).
Result quantizeTensorReference(float* x, const Layout& layout, int bits, MetaType compute);

/// Storage bits of the codes of one layer tensor (HQQ's bit packing: 3-bit packs 10 values per
/// int32 along the packed dimension, padded to a multiple of 10).
double payloadBits(const Layout& layout, int bits);

}  // namespace kvscope::hqq
