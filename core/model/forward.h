// SPDX-License-Identifier: GPL-3.0-or-later
// The one forward pass of every architecture (core/model/architecture.h): the whole sequence goes
// through one layer at a time — the layer's weights dequantized once into float32, projections and
// the feed-forward as GEMMs over all positions, causal attention per head — for one or several
// streams in lockstep (e2e runs the exact cache and each quantized cache side by side, so each
// layer's weights are dequantized once for all of them). Memory: the model's mapping, one layer in
// float32 and O(T·width) activations per stream (docs/real-models.md, "The forward pass").
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "core/model/model.h"
#include "core/util/status.h"

namespace kvscope {

/// What a matrix multiply does to its activations before the products. llama.cpp's CPU backend
/// converts them to the weight type's dot-product type (ggml-cpu's vec_dot_type): f16 for F16
/// weights, bf16 for BF16 ones; kvscope does the same for GGUF files so that it computes what
/// llama.cpp computes (docs/real-models.md, "The forward pass"). Quantized weights keep float32
/// activations (llama.cpp's q8 activations are not emulated).
enum class ActivationRounding { None, Fp16, Bf16 };

/// One layer's weights in float32, row-major [out, in] (vectors: their values).
struct LayerWeightsF32 {
  std::vector<float> attnNorm, wqkv, bqkv, qNorm, kNorm, wo, ffnNorm, wGateUp, wDown;
  /// The activations' rounding for q/k/v (one rule: the fused product is split when they differ,
  /// see qkvSplit), the output, gate/up and down projections.
  ActivationRounding qkvRound[3] = {}, woRound{}, gateUpRound{}, downRound{};
  [[nodiscard]] size_t bytes() const;
};

/// The rounding llama.cpp applies to the activations of a matmul with `model`'s weight of `role`.
ActivationRounding activationRounding(const Model& model, TensorRole role, int layer = 0);

/// Dequantizes layer `layer` of `model` (wq, wk, wv stacked into one [qDim + 2·kvDim, dim] matrix).
Status loadLayerWeights(const Model& model, int layer, LayerWeightsF32& out);

/// Where attention reads key row j for the query at position p: the exact row, or `stored` once
/// the cache holds row j quantized (since[j] ≤ p). since[j] = kNever: never quantized.
struct StoredRows {
  static constexpr int kNever = std::numeric_limits<int>::max();
  std::vector<float> rows;  ///< [T, KVH·D] the rows as stored (post-RoPE for keys)
  std::vector<int> since;   ///< [T] the first query position that reads row j from `rows`
  /// True when every query reads every visible row from `rows` (since[j] ≤ j for all j).
  [[nodiscard]] bool everyVisibleRowStored() const;
};

/// The figures of one layer's attention for one stream that reads a stored cache, against the
/// same stream's exact rows with the same query (e2e's per-layer table).
struct AttentionFigures {
  double klSum = 0, klMax = 0, top1 = 0, outputRelErrorSum = 0;
  int64_t count = 0;  ///< (position, head) pairs
};

/// The state of one sequence through the layers: its hidden states and its cache.
struct Stream {
  std::vector<float> hidden;   ///< [n, dim] the current chunk's residual stream
  std::vector<std::vector<float>> keys, values;  ///< per layer [tokens so far, kvDim] exact rows (post-RoPE)
};

/// What a layer hands to an observer (record writes it to the dump).
struct LayerTensors {
  int layer = 0;
  int first = 0;   ///< position of the first row
  int count = 0;   ///< rows
  const float* query = nullptr;       ///< [count, H·D] after q-norm and RoPE
  const float* keyPreRope = nullptr;  ///< [count, KVH·D]
  const float* key = nullptr;         ///< [count, KVH·D] after RoPE
  const float* value = nullptr;       ///< [count, KVH·D]
};

/// How a quantized stream's cache is stored at one layer: decides `StoredRows` from the exact rows.
/// Arguments: layer, the exact post-RoPE keys, the pre-RoPE keys and the values [T, kvDim]; outputs
/// the stored keys and values. The query transform (an engine's conversion of Q before the scores)
/// rewrites the queries [T, H·D] in place; it may be empty.
struct CacheStore {
  std::function<Status(int layer, int tokens, const float* key, const float* keyPreRope, const float* value,
                       StoredRows& storedKey, StoredRows& storedValue)>
      store;
  std::function<Status(int layer, int tokens, float* query)> transformQuery;
};

/// A pass of the forward over one or more streams in lockstep.
class Forward {
 public:
  explicit Forward(std::shared_ptr<const Model> model);

  [[nodiscard]] const Model& model() const { return *model_; }

  /// Keeps up to `bytes` of dequantized layer weights between calls (decoding one token at a time
  /// would otherwise dequantize every layer for every token). 0 (the default): none kept.
  void setWeightCacheBytes(size_t bytes) { cacheBudget_ = bytes; }

  /// Runs `tokens` at positions [stream's length, + n) through every layer of an exact-cache
  /// stream, appending to its cache. `observe` sees each layer's tensors (may be empty).
  Status run(Stream& stream, std::span<const int> tokens,
             const std::function<Status(const LayerTensors&)>& observe = {}, const Progress& progress = {});

  /// One pass of the whole sequence for several streams side by side, each layer dequantized
  /// once: `stores[i]` null is an exact cache; otherwise the stream reads its cache as the store
  /// decides and `figures[i]` (size layers) gets that layer's attention against its exact rows.
  /// `afterLayer(layer)` runs after every stream finished the layer (hidden states comparable).
  /// `observe(stream, tensors)` sees each stream's layer inputs (may be empty).
  Status runLockstep(std::span<Stream*> streams, std::span<const CacheStore* const> stores, std::span<const int> tokens,
                     std::vector<std::vector<AttentionFigures>>& figures,
                     const std::function<Status(size_t stream, const LayerTensors&)>& observe = {},
                     const std::function<Status(int layer)>& afterLayer = {}, const Progress& progress = {});

  /// The final RMSNorm of a stream's hidden states [n, dim] (what the classifier reads).
  Status finalNorm(const Stream& stream, std::vector<float>& out) const;

  /// Logits of classifier rows [firstVocab, firstVocab + count) for `rows` normed hidden states:
  /// out [rows, count]. `weights` is scratch the caller keeps between calls ([count, dim]).
  Status logitsBlock(const float* normed, int rows, int firstVocab, int count, std::vector<float>& weights,
                     float* out) const;
  /// The same with the classifier rows logitsBlock left in `weights` ([count, dim]).
  Status logitsWith(const float* normed, int rows, int count, const std::vector<float>& weights, float* out) const;

 private:
  Status layerWeights(int layer, const LayerWeightsF32*& out);

  std::shared_ptr<const Model> model_;
  size_t cacheBudget_ = 0;
  std::vector<std::unique_ptr<LayerWeightsF32>> cache_;  ///< kept layers (null: not kept)
  LayerWeightsF32 scratch_;
};

/// RMSNorm of each of `rows` rows of width n: w ⊙ x / sqrt(mean(x²) + eps), in ggml's arithmetic
/// (float squares summed in double, a float mean and epsilon), so llama.cpp gets the same bits.
void rmsNormRows(const float* x, const float* weight, int rows, int n, double eps, float* out);

/// Rotates pairs of each head of `rows` rows of `heads`·D values at positions first, first+1, …
/// by position·invFreq[i] (angles and products in double, as core/quant/rope.cpp does, so a
/// pre-RoPE key rotated there equals the key rotated here bit for bit).
void applyModelRope(float* rows, int count, int heads, int headDim, int firstPosition, const ModelRope& rope);

}  // namespace kvscope
