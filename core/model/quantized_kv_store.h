// SPDX-License-Identifier: GPL-3.0-or-later
// A KV cache stored the way an inference engine would store it under a quantization spec:
// each token's K and V enter the cache quantized as they arrive (docs/real-models.md).
#pragma once

#include <string>
#include <vector>

#include "core/model/transformer.h"
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

/// Calibration data for the calibrated mode: the dump's full tensors of every layer.
struct CalibrationLayer {
  const Tensor3* key = nullptr;         ///< [KVH, T, D] post-RoPE keys
  const Tensor3* keyPreRope = nullptr;  ///< needed for prerope keys
  const Tensor3* value = nullptr;
};

/// Stores K and V rows quantized under two plans, each layer under its own spec (§12). Sinks
/// stay exact; residual=R keeps the R newest tokens exact at each step and quantizes a token
/// when it leaves the window.
class QuantizedKvStore final : public KvStore {
 public:
  /// `calibration` (one entry per layer) must outlive the store when a spec is calibrated.
  /// Plans are resolved for config.layers (ranges beyond it cover nothing: validate first).
  QuantizedKvStore(const ModelConfig& config, const Plan& key, const Plan& value, RopeParams rope,
                   std::vector<CalibrationLayer> calibration = {});

  Status store(int layer, int position, LayerCache& cache) override;

 private:
  struct TensorState {
    std::vector<float> rows;  ///< [seqLen, kvDim] quantized rows (post-RoPE for keys)
    int done = 0;             ///< tokens [sinks, sinks + done) are quantized
  };
  Status advance(int layer, int position, bool isKey, LayerCache& cache, TensorState& state);
  Status quantizeRows(int layer, bool isKey, int first, int count, const LayerCache& cache, float* out);

  ModelConfig config_;
  std::vector<QuantSpec> key_, value_;  ///< one spec per layer
  RopeParams rope_;
  std::vector<CalibrationLayer> calibration_;
  std::vector<TensorState> keyState_, valueState_;
};

}  // namespace kvscope
