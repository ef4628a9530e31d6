// SPDX-License-Identifier: GPL-3.0-or-later
// A KV cache stored the way an inference engine would store it under a quantization spec: each
// token's K and V enter the cache quantized as they arrive (docs/real-models.md, "How the
// quantized cache is stored"). The whole sequence is known when a layer runs, so each row's stored
// value and the first position that reads it are decided at once (StoredRows, core/model/forward.h):
// attention at position p reads row j quantized when since[j] ≤ p, exactly what a token-by-token
// engine holds at step p.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/model/forward.h"
#include "core/quant/plan.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"
#include "core/util/tensor.h"

namespace kvscope {

/// How a spec's scales can be known while tokens stream in: StreamingMode (core/quant/format_table.h).
/// "exact", "token-local", "channel-groups", "calibrated".
const char* streamingModeName(StreamingMode mode);
/// The mode a spec needs.
StreamingMode streamingModeFor(const QuantSpec& spec);
/// One sentence for reports: how the tensor under `spec` is stored during the replay.
std::string streamingDescription(const QuantSpec& spec);

/// Calibration data for the calibrated mode: the dump's full tensors of one layer.
struct CalibrationLayer {
  Tensor3 key;         ///< [KVH, T, D] post-RoPE keys
  Tensor3 keyPreRope;  ///< needed for prerope keys (0 heads when the dump has none)
  Tensor3 value;
};
/// Reads one layer's calibration tensors (e2e reads them from the dump when a spec needs them).
using CalibrationSource = std::function<Expected<CalibrationLayer>(int layer)>;

/// Decides, for each layer, the rows of K and V a quantized cache holds and when each enters it:
/// `sinks=S` rows never; `residual=R` rows once they leave the window of the R newest; `chunk=C`
/// when their chunk fills; channel groups once complete; token-local and calibrated rows as soon as
/// the rules above let them (docs/real-models.md).
class QuantizedCacheStore {
 public:
  /// `key`/`value`: one spec per layer (plans resolved). `querySpec` (may be empty per layer, or
  /// the vector empty): what the engine's attention does to Q before the scores.
  QuantizedCacheStore(int kvHeads, int headDim, std::vector<QuantSpec> key, std::vector<QuantSpec> value,
                      RopeParams rope, CalibrationSource calibration = {}, std::vector<std::string> querySpec = {});

  Status store(int layer, int tokens, const float* key, const float* keyPreRope, const float* value,
               StoredRows& storedKey, StoredRows& storedValue);
  /// Q [tokens, H·D] → the engine's conversion of it (no change without a query spec).
  Status transformQuery(int layer, int tokens, int heads, float* query) const;
  /// The store as the forward pass calls it.
  CacheStore asCacheStore(int heads);

 private:
  Status storeTensor(int layer, bool isKey, int tokens, const float* exact, const float* exactPreRope,
                     const CalibrationLayer* calibration, StoredRows& out) const;

  int kvHeads_, headDim_;
  std::vector<QuantSpec> key_, value_;
  RopeParams rope_;
  CalibrationSource calibration_;
  std::vector<std::string> querySpec_;
};

}  // namespace kvscope
