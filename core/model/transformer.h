// SPDX-License-Identifier: GPL-3.0-or-later
// The Llama forward pass of llama2.c's run.c on the CPU, one token at a time, with a KV cache
// whose storage is a policy: exact (the model as trained) or quantized (core/model/e2e.h).
#pragma once

#include <memory>
#include <vector>

#include "core/model/checkpoint.h"
#include "core/util/status.h"

namespace kvscope {

/// RMSNorm epsilon of llama2.c.
inline constexpr float kRmsNormEps = 1e-5f;
/// RoPE base of llama2.c.
inline constexpr double kLlamaRopeTheta = 10000.0;

/// One layer's KV cache during a run. Rows are tokens; a row is KVH*D values in [head, channel]
/// order, as an engine's cache row holds them.
struct LayerCache {
  int kvDim = 0;
  std::vector<float> exactKey;         ///< [seqLen, kvDim] keys after RoPE, as computed
  std::vector<float> exactKeyPreRope;  ///< [seqLen, kvDim] the same keys before RoPE
  std::vector<float> exactValue;       ///< [seqLen, kvDim] values as computed
  std::vector<float> key;              ///< [seqLen, kvDim] keys as stored: what attention reads
  std::vector<float> value;            ///< [seqLen, kvDim] values as stored

  float* row(std::vector<float>& v, int position) { return v.data() + static_cast<size_t>(position) * kvDim; }
  [[nodiscard]] const float* row(const std::vector<float>& v, int position) const {
    return v.data() + static_cast<size_t>(position) * kvDim;
  }
};

/// Decides what the KV cache stores. After the forward pass wrote token `position`'s exact rows of
/// a layer, store() must leave stored rows [0, position] as attention should read them; it may
/// rewrite older rows (a channel group that just completed, a token leaving the residual window).
class KvStore {
 public:
  virtual ~KvStore() = default;
  /// Fills the stored rows of `layer` for a cache that now holds tokens [0, position].
  virtual Status store(int layer, int position, LayerCache& cache) = 0;
};

/// Stores every row exactly: the model as trained.
class ExactKvStore final : public KvStore {
 public:
  Status store(int layer, int position, LayerCache& cache) override;
};

/// The forward pass. Not thread-safe; one instance per sequence.
class Transformer {
 public:
  /// `store` decides the cache's storage (nullptr = exact); it must outlive the Transformer.
  explicit Transformer(std::shared_ptr<const Checkpoint> model, KvStore* store = nullptr);

  /// Runs token `token` at `position` (0, 1, 2, … in order; position < seq_len) and leaves the
  /// next-token logits in logits().
  Status step(int token, int position);

  [[nodiscard]] const ModelConfig& config() const { return model_->config(); }
  /// Next-token logits of the last step [vocab].
  [[nodiscard]] const std::vector<float>& logits() const { return logits_; }
  /// Post-RoPE query of `layer` at the last step [H*D], head-major.
  [[nodiscard]] const std::vector<float>& query(int layer) const { return queries_[static_cast<size_t>(layer)]; }
  /// The residual stream after `layer` at the last step [dim].
  [[nodiscard]] const std::vector<float>& hidden(int layer) const { return hidden_[static_cast<size_t>(layer)]; }
  /// One layer's cache.
  [[nodiscard]] const LayerCache& cache(int layer) const { return caches_[static_cast<size_t>(layer)]; }

 private:
  std::shared_ptr<const Checkpoint> model_;
  KvStore* store_;
  ExactKvStore exact_;
  int nextPosition_ = 0;
  std::vector<LayerCache> caches_;
  std::vector<std::vector<float>> queries_;
  std::vector<std::vector<float>> hidden_;
  std::vector<float> logits_;
};

/// Rotates pairs (2i, 2i+1) of each head of `row` (heads*headDim values) by position·theta^(-2i/D),
/// as llama2.c does; angles in double precision.
void ropeInterleaved(float* row, int heads, int headDim, int position, double theta = kLlamaRopeTheta);

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
