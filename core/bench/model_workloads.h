// SPDX-License-Identifier: GPL-3.0-or-later
// The real-model benchmark behind `kvscope-cli bench --only record`: a Qwen2.5-0.5B-shaped GGUF
// written with random weights, recorded (the layer-at-a-time forward) and replayed by e2e with a
// q4_0 cache; optionally the same file's prompt processing in llama.cpp itself.
#pragma once

#include <cstdint>
#include <string>

#include "core/quant/ggml_types.h"
#include "core/util/status.h"

namespace kvscope::bench {

/// The model's shape (Qwen2.5-0.5B by default).
struct ModelShape {
  int layers = 24;
  int dim = 896;
  int heads = 14;
  int kvHeads = 2;
  int headDim = 64;
  int ffn = 4864;
  int vocab = 151936;
  /// Multiply-adds ×2 of one token through every layer's projections and feed-forward.
  [[nodiscard]] double layerGemmFlopsPerToken() const;
  /// float32 bytes of one layer's weights.
  [[nodiscard]] int64_t layerFloatBytes() const;
};

struct ModelFigures {
  ModelShape shape;
  GgmlType weights = GgmlType::Q8_0;
  int tokens = 0;
  int64_t fileBytes = 0;
  double generateSeconds = 0;   ///< writing the GGUF (setup, not judged)
  double recordSeconds = 0;     ///< Model::load + recordDump, wall clock
  double recordCpuSeconds = 0;
  int64_t recordPeakRssBytes = 0;  ///< the process's peak RSS during the record (from a reset)
  double e2eSeconds = 0;        ///< runE2e with q4_0 K and V
  double llamaCppSeconds = 0;   ///< llama.cpp's prompt processing of the same tokens (0: not run)
  std::string llamaCppNote;     ///< why it did not run, when it did not
};

/// Writes the model under `tempDir`, records `tokens` random tokens, replays them with a q4_0
/// cache, and (when `llamaCppDir` names tests/conformance with node-llama-cpp installed) times
/// llama.cpp on the same file; removes the files afterwards.
Expected<ModelFigures> benchModel(const ModelShape& shape, GgmlType weights, int tokens, const std::string& tempDir,
                                  const std::string& llamaCppDir, const Progress& progress = {});

}  // namespace kvscope::bench
