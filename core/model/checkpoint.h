// SPDX-License-Identifier: GPL-3.0-or-later
// llama2.c float32 checkpoints (Karpathy's run.c format): header, weights, tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/modelfile/mapped_file.h"
#include "core/modelfile/weights.h"
#include "core/util/status.h"

namespace kvscope {

/// RMSNorm epsilon of llama2.c (run.c).
inline constexpr float kRmsNormEps = 1e-5f;
/// RoPE base of llama2.c.
inline constexpr double kLlamaRopeTheta = 10000.0;
/// BOS of llama2.c's tokenizer.
inline constexpr int kLlama2cBos = 1;

/// The seven int32 of a llama2.c header, validated.
struct ModelConfig {
  int dim = 0;         ///< width of the residual stream
  int hiddenDim = 0;   ///< width of the SwiGLU feed-forward layer
  int layers = 0;      ///< number of transformer blocks
  int heads = 0;       ///< query heads H
  int kvHeads = 0;     ///< key/value heads KVH (H is a multiple of it)
  int vocabSize = 0;   ///< always positive here; see sharedClassifier
  int seqLen = 0;      ///< longest sequence the model was trained for
  bool sharedClassifier = true;  ///< false when the file stored a negative vocab_size and its own wcls

  /// D, the width of one head.
  [[nodiscard]] int headDim() const { return heads > 0 ? dim / heads : 0; }
  /// KVH*D, one token row of the KV cache of one layer.
  [[nodiscard]] int kvDim() const { return kvHeads * headDim(); }
};

/// Read-only views of one layer's weights; matrices are row-major [out, in] as in run.c.
struct LayerWeights {
  const float* rmsAtt = nullptr;  ///< [dim]
  const float* wq = nullptr;      ///< [H*D, dim]
  const float* wk = nullptr;      ///< [KVH*D, dim]
  const float* wv = nullptr;      ///< [KVH*D, dim]
  const float* wo = nullptr;      ///< [dim, H*D]
  const float* rmsFfn = nullptr;  ///< [dim]
  const float* w1 = nullptr;      ///< [hidden, dim]
  const float* w2 = nullptr;      ///< [dim, hidden]
  const float* w3 = nullptr;      ///< [hidden, dim]
};

/// A loaded checkpoint: the file is memory-mapped read-only and the weights point into it. As a
/// WeightSource it names its weights as llama.cpp's convert-llama2c-to-ggml does (token_embd,
/// blk.N.attn_norm/attn_q/attn_k/attn_v/attn_output/ffn_norm/ffn_gate (w1)/ffn_down (w2)/
/// ffn_up (w3), output_norm, and output when the classifier is separate), all F32, [out, in].
class Checkpoint final : public WeightSource {
 public:
  /// Maps and validates `path`: the header's values, and the file's exact size for them.
  static Expected<std::shared_ptr<const Checkpoint>> load(const std::string& path);
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  [[nodiscard]] const ModelConfig& config() const { return config_; }
  [[nodiscard]] const std::string& path() const override { return path_; }
  /// [vocab, dim]
  [[nodiscard]] const float* tokenEmbedding() const { return tokenEmbedding_; }
  [[nodiscard]] const LayerWeights& layer(int l) const { return layers_[static_cast<size_t>(l)]; }
  /// [dim]
  [[nodiscard]] const float* rmsFinal() const { return rmsFinal_; }
  /// [vocab, dim]; the embedding table when shared.
  [[nodiscard]] const float* classifier() const { return classifier_; }

  // WeightSource
  [[nodiscard]] std::vector<std::string> weightNames() const override;
  [[nodiscard]] bool hasWeight(std::string_view name) const override;
  [[nodiscard]] Expected<WeightTensor> weight(std::string_view name) const override;

 private:
  Checkpoint() = default;
  std::string path_;
  ModelConfig config_;
  std::shared_ptr<const MappedFile> file_;  ///< the weights point into its mapping
  const float* tokenEmbedding_ = nullptr;
  std::vector<LayerWeights> layers_;
  const float* rmsFinal_ = nullptr;
  const float* classifier_ = nullptr;
};

/// Number of bytes a checkpoint with this header must have (header included); errors on overflow.
Expected<uint64_t> checkpointSize(const ModelConfig& config);

/// Validates the header values alone (positive, H divisible into D, H a multiple of KVH, even D).
Status validateConfig(const ModelConfig& config);

/// A llama2.c tokenizer file: int32 max_token_length, then per token float32 score, int32 length,
/// and that many bytes. Returns the token pieces; `vocabSize` is the model's.
Expected<std::vector<std::string>> loadTokenizer(const std::string& path, int vocabSize);

}  // namespace kvscope
