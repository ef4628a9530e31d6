// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli record`: run a llama2.c model and keep everything a KV dump holds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/io/dump.h"
#include "core/model/checkpoint.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// BOS of llama2.c's tokenizer.
inline constexpr int kBosToken = 1;

/// How to generate the recorded sequence.
struct RecordOptions {
  int steps = 256;                 ///< positions in the dump, BOS included (≤ seq_len)
  uint64_t seed = 0;               ///< seed of the sampler
  double temperature = 0.0;        ///< 0 = greedy
  std::vector<int> promptTokens;   ///< forced after BOS (a leading BOS here is not repeated)
  std::string tokenizerPath;       ///< llama2.c tokenizer.bin for token_text; empty = none
};

/// One layer of a recording, in dump layout.
struct LayerRecording {
  Tensor3 key;         ///< [KVH, T, D] after RoPE
  Tensor3 keyPreRope;  ///< [KVH, T, D]; empty (0 heads) when the source had none
  Tensor3 value;       ///< [KVH, T, D]
  Tensor3 query;       ///< [H, T, D] after RoPE; empty when the source had none
};

/// A sequence with its attention state: what `record` writes and what `e2e` reads back.
struct Recording {
  std::string model;                   ///< shown name (the checkpoint's file stem)
  std::string modelPath;               ///< absolute path of the checkpoint
  std::vector<int> tokens;             ///< [T], tokens[0] = BOS
  std::vector<std::string> tokenText;  ///< [T] or empty
  int vocabSize = 0;
  std::vector<LayerRecording> layers;
  std::vector<float> logits;           ///< [T, vocab] row-major; empty when the source had none
  double ropeTheta = 10000.0;
  RopeStyle ropeStyle = RopeStyle::Interleaved;

  [[nodiscard]] int tokenCount() const { return static_cast<int>(tokens.size()); }
};

/// Runs the model autoregressively: BOS, the prompt, then sampled tokens, `options.steps` in all.
Expected<Recording> recordSequence(const std::shared_ptr<const Checkpoint>& model,
                                   const RecordOptions& options, const Progress& progress = {});

/// Writes a recording as a canonical dump (via DumpWriter, atomically).
Status writeRecording(const std::string& path, const Recording& recording, const Progress& progress = {});

/// Reads what e2e needs back from a dump: tokens (required), key/value/key_pre_rope per layer,
/// and /logits when present. Queries are not read.
Expected<Recording> readRecording(const Dump& dump, const Progress& progress = {});

/// Parses "1,403,29" into token ids; errors name the bad item.
Expected<std::vector<int>> parseTokenList(const std::string& text);

}  // namespace kvscope
