// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli record`: run a model (GGUF, Hugging Face or llama2.c) on a token sequence and write
// its keys, values and queries as a KV dump, one layer at a time (docs/real-models.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/util/status.h"

namespace kvscope {

/// How to generate the recorded sequence.
struct RecordOptions {
  std::vector<int> tokens;   ///< the input sequence, exactly as recorded (BOS already decided)
  int steps = 0;             ///< positions in the dump; more than tokens.size() samples the rest
  uint64_t seed = 0;         ///< seed of the sampler
  double temperature = 0.0;  ///< 0 = greedy (the lowest index wins a tie)
  bool logits = false;       ///< store /logits [T, vocab] (large: T × vocab × 4 bytes)
};

/// What `record` wrote.
struct RecordSummary {
  std::vector<int> tokens;  ///< the sequence in the dump
  int sampled = 0;          ///< how many of them were sampled
};

/// The input sequence from the command line's forms, for `model`:
/// `tokens` (exactly those ids), or `text` (tokenized with the model's tokenizer, BOS as the model
/// says), or, when both are absent, BOS alone followed by `promptTokens` (llama2.c's
/// `--prompt-tokens`: a leading BOS there is not repeated).
struct RecordInput {
  std::optional<std::vector<int>> tokens;
  std::optional<std::string> text;
  std::vector<int> promptTokens;
};
Expected<std::vector<int>> recordInputTokens(const Model& model, const RecordInput& input);

/// Positions in the dump for an input of `inputTokens` tokens: `requested` when given (at least the
/// input's length, else an error naming `flag`), otherwise the input alone, or, with no input
/// (BOS only, `noInput`), 256 or the model's context if smaller. The one rule of the CLI, the GUI
/// and Python.
Expected<int> recordSteps(const Model& model, size_t inputTokens, std::optional<int> requested, bool noInput,
                          const std::string& flag = "--steps");

/// Runs the model over the input, samples up to `steps` positions, then writes the dump to
/// `path` atomically (keys after RoPE, key_pre_rope, values, queries, tokens, token text,
/// optionally logits; `rope_inv_freq` and the model's attributes). Progress per layer.
Expected<RecordSummary> recordDump(const std::shared_ptr<const Model>& model, const RecordOptions& options,
                                   const std::string& path, const Progress& progress = {});

/// Parses "1,403,29" into token ids; errors name the bad item.
Expected<std::vector<int>> parseTokenList(const std::string& text);

/// A small deterministic generator (splitmix64), identical on every platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  /// The next 64 random bits.
  uint64_t next();
  /// Uniform in [0, 1) with 53 bits.
  double uniform();

 private:
  uint64_t state_;
};

/// Picks the next token: argmax (lowest index on ties) when temperature is 0, otherwise a draw
/// from softmax(logits / temperature) computed in double.
int sampleToken(const std::vector<float>& logits, double temperature, SplitMix64& rng);

}  // namespace kvscope
