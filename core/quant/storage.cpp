// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/quant/storage.h"

#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/quantize.h"

namespace kvscope {

StorageCount storageFor(const QuantSpec& spec, int64_t kvHeads, int64_t tokens, int64_t headDim) {
  StorageCount s;
  s.elements = kvHeads * tokens * headDim;
  const int64_t quantTokens = quantizedTokens(spec, tokens).count;
  const int64_t kept = tokens - quantTokens;
  const int64_t quantized = kvHeads * quantTokens * headDim;
  s.keptBits = 16.0 * static_cast<double>(kvHeads * kept * headDim);
  s.outlierBits = 48.0 * static_cast<double>(kvHeads * outlierCount(spec.outliers, quantTokens * headDim));
  if (quantized == 0) return s;

  const FormatInfo& info = formatInfo(spec.format);
  s.payloadBits = info.payload != nullptr ? info.payload(spec, quantized)
                                          : (info.hasBits ? spec.bits : info.payloadBits) * static_cast<double>(quantized);
  const auto groups = static_cast<double>(groupCount(spec, kvHeads, quantTokens, headDim));
  // Per group or vector: its scales (norms, zero points) in the `scale=` type, none with
  // unitscale; asym int adds its min unless zero=packed keeps it inside the scale word.
  const double valueBits = spec.scale == MetaType::Fp32 ? 32.0 : 16.0;
  double perGroup = spec.unitscale ? 0.0 : info.scalesPerGroup;
  if (perGroup > 0 && info.asymMin && !spec.symmetric && !spec.zeroPacked) perGroup += 1.0;
  s.metadataBits = groups * perGroup * valueBits;
  // Per block and per layer tensor (block formats), and a codebook of 2^b entries per layer tensor (nuq).
  if (info.blockMetaBits > 0 || info.tensorMetaBits > 0) s.metadataBits += groups * info.blockMetaBits + info.tensorMetaBits;
  if (info.codebookEntryBits > 0) s.metadataBits += info.codebookEntryBits * static_cast<double>(1 << spec.bits);
  return s;
}

}  // namespace kvscope
