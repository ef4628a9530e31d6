// SPDX-License-Identifier: GPL-3.0-or-later
// Storage of one layer tensor under a spec (quantization.md §5), computed from the format
// table's row alone: payload, metadata per group or block, per tensor, outliers and kept tokens.
#pragma once

#include <cstdint>

#include "core/quant/spec.h"

namespace kvscope {

/// Storage of one layer tensor under a spec (§5).
struct StorageCount {
  double payloadBits = 0;   ///< payload bits of quantized elements
  double metadataBits = 0;  ///< scales, mins, block and tensor metadata
  double outlierBits = 0;   ///< 48 per outlier
  double keptBits = 0;      ///< 16 per kept-token element
  int64_t elements = 0;     ///< KVH*T*D
  [[nodiscard]] double totalBits() const { return payloadBits + metadataBits + outlierBits + keptBits; }
  [[nodiscard]] double bitsPerElement() const { return elements ? totalBits() / static_cast<double>(elements) : 0; }
};

/// Storage of a layer tensor of shape [kvHeads, tokens, headDim] under `spec`; data-independent.
StorageCount storageFor(const QuantSpec& spec, int64_t kvHeads, int64_t tokens, int64_t headDim);

}  // namespace kvscope
