// SPDX-License-Identifier: GPL-3.0-or-later
// Model architectures as data (after llama.cpp's llm_arch tables): what a family's layers hold
// and how its RoPE pairs channels. One forward pass (core/model/forward.h) reads these; a new
// family is a new row, not a copied forward (docs/real-models.md, "Architectures").
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/vocabulary.h"

namespace kvscope {

/// Every weight a decoder layer stack may hold. Per-layer roles are looked up with a layer index.
enum class TensorRole {
  TokenEmbedding,  ///< [vocab, dim]
  OutputNorm,      ///< [dim]
  Output,          ///< [vocab, dim]; absent when the embedding is the classifier
  RopeFrequencies, ///< [headDim/2] llama.cpp's `rope_freqs.weight`: divisors of each pair's frequency (Llama 3 scaling)
  AttnNorm,        ///< [dim]
  AttnQ,           ///< [H·headDim, dim]
  AttnK,           ///< [KVH·headDim, dim]
  AttnV,           ///< [KVH·headDim, dim]
  AttnOutput,      ///< [dim, H·headDim]
  AttnQBias,       ///< [H·headDim]
  AttnKBias,       ///< [KVH·headDim]
  AttnVBias,       ///< [KVH·headDim]
  AttnQNorm,       ///< [headDim] per-head RMSNorm weight of q (qwen3)
  AttnKNorm,       ///< [headDim] per-head RMSNorm weight of k (qwen3)
  FfnNorm,         ///< [dim]
  FfnGate,         ///< [ffn, dim]
  FfnUp,           ///< [ffn, dim]
  FfnDown,         ///< [dim, ffn]
};

/// Whether a role is per layer.
bool isLayerRole(TensorRole role);
/// The role's name in messages ("attn_q").
std::string_view tensorRoleName(TensorRole role);
/// GGUF's name of the tensor (ggml's naming: "blk.3.attn_q.weight", "token_embd.weight").
std::string ggufTensorName(TensorRole role, int layer);
/// Hugging Face's name of the tensor ("model.layers.3.self_attn.q_proj.weight").
std::string hfTensorName(TensorRole role, int layer);

/// How a description treats the optional q/k/v biases.
enum class BiasRule {
  Never,     ///< a bias tensor in the file is refused (the family has none)
  Optional,  ///< read when present (Llama with `attention_bias`)
  Always,    ///< required (qwen2)
};

/// One model family.
struct ArchitectureDescription {
  std::string_view name;                       ///< GGUF `general.architecture` and the name kvscope shows
  std::span<const std::string_view> hfNames;   ///< Hugging Face `architectures` entries read as this family
  std::string_view families;                   ///< the models users know it from, for messages and docs
  RopeStyle ggufRope = RopeStyle::Interleaved; ///< RoPE pairing of this family's GGUF files (llama.cpp's rope type)
  BiasRule qkvBias = BiasRule::Never;
  bool qkNorm = false;                         ///< per-head RMSNorm of q and k before RoPE (model epsilon)
};

/// Every family kvscope runs, in the order docs list them.
std::span<const ArchitectureDescription> architectures();
/// By GGUF name; nullptr when unknown.
const ArchitectureDescription* findArchitecture(std::string_view ggufName);
/// By a Hugging Face `architectures` entry; nullptr when unknown.
const ArchitectureDescription* findHfArchitecture(std::string_view hfName);
/// "llama (Llama 2/3, …), qwen2 (…), qwen3 (…)" for refusals.
std::string architectureList();

/// Why a family kvscope recognises but does not run is refused ("" when it is not one of them):
/// e.g. gemma's scaled embeddings and soft-capping, phi3's fused qkv.
std::string_view refusedArchitectureReason(std::string_view name);

}  // namespace kvscope
