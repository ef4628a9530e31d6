// SPDX-License-Identifier: GPL-3.0-or-later
// Tiny models of each architecture, written by the tests themselves as GGUF files or Hugging Face
// folders (random weights), and an independent float64 forward pass written plainly from the
// architectures' equations (not from core/model), per family: what record's keys, values,
// queries and logits are checked against (docs/real-models.md, "Tests").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/quant/ggml_types.h"

namespace kvscope::test {

/// What to write.
struct TinyModelSpec {
  std::string arch = "llama";  ///< "llama", "qwen2", "qwen3"
  int dim = 64;
  int ffn = 96;
  int layers = 2;
  int heads = 4;
  int kvHeads = 2;
  int headDim = 0;             ///< 0: dim / heads; otherwise attention.key_length (qwen3 style)
  int vocab = 300;
  int context = 256;
  double rmsEps = 1e-6;
  double theta = 10000.0;
  bool tied = false;           ///< no output.weight / lm_head: the embedding is the classifier
  bool bias = false;           ///< q/k/v biases (qwen2 always has them)
  std::string ropeScaling = "none";  ///< "none", "linear", "llama3"
  double scalingFactor = 4.0;
  double lowFreqFactor = 1.0, highFreqFactor = 4.0;
  int originalContext = 64;
  GgmlType matrixType = GgmlType::F32;  ///< GGUF: the type of the projection matrices
  GgmlType embeddingType = GgmlType::F32;
  uint64_t seed = 1;
};

/// The weights as the file holds them, dequantized to double, by GGUF tensor name
/// ("blk.0.attn_q.weight" [out, in] row-major). HF files hold the same values in their own
/// layout (wq/wk rows permuted for llama, see writeTinyHf).
struct TinyWeights {
  std::map<std::string, std::vector<double>> tensors;
  std::vector<double> ropeFactors;  ///< GGUF llama3: rope_freqs.weight (empty otherwise)
  [[nodiscard]] const std::vector<double>& at(const std::string& name) const { return tensors.at(name); }
};

/// The tokenizer written with the model: `llama` (SentencePiece) pieces <unk>, <s>, </s>, 256
/// byte tokens, "▁" (259), "a"-"z" (260-285), "▁a"-"▁z" (286-311), then "▁t<i>" fillers; BOS 1.
std::vector<std::string> tinyVocabulary(int vocab);

/// Writes a GGUF model of `spec` (llama: RoPE on adjacent pairs, unpermuted; qwen2/3: half split).
/// Returns the weights as stored (after the types' rounding).
TinyWeights writeTinyGguf(const TinyModelSpec& spec, const std::string& path);

/// Writes a Hugging Face folder (config.json + safetensors of `dtype` F32/F16/BF16, in `shards`
/// files) of the same model. `weights`: the model to write (e.g. from writeTinyGguf); llama's wq/wk
/// rows are permuted for half-split RoPE as Hugging Face stores Llama (the inverse of
/// llama.cpp's converter), so both files compute the same function.
void writeTinyHf(const TinyModelSpec& spec, const TinyWeights& weights, const std::string& folder,
                 const std::string& dtype = "F32", int shards = 1);

/// The float64 forward pass of the same model over `tokens`.
struct ReferenceOutput {
  std::vector<std::vector<double>> logits;  ///< [T][vocab]
  /// Per layer [T][...]: q after q-norm and RoPE [H·D], k before and after RoPE, v [KVH·D].
  std::vector<std::vector<std::vector<double>>> query, keyPreRope, key, value;
};
/// `interleaved`: RoPE on adjacent pairs (GGUF llama) instead of half split. `llamaCpp`: as
/// llama.cpp's CPU backend multiplies by F16 and BF16 weights, the activations are rounded to
/// that type first (GGUF files; ggml-cpu's vec_dot_type).
ReferenceOutput referenceForward(const TinyModelSpec& spec, const TinyWeights& weights, const std::vector<int>& tokens,
                                 bool interleaved, bool llamaCpp = false);

/// Each RoPE pair's inverse frequency of `spec` (scaling applied), computed plainly in double.
std::vector<double> referenceInvFreq(const TinyModelSpec& spec);

}  // namespace kvscope::test
