// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/architecture.h"

#include <array>

namespace kvscope {
namespace {

constexpr std::array<std::string_view, 2> kLlamaHf{"LlamaForCausalLM", "MistralForCausalLM"};
constexpr std::array<std::string_view, 1> kQwen2Hf{"Qwen2ForCausalLM"};
constexpr std::array<std::string_view, 1> kQwen3Hf{"Qwen3ForCausalLM"};

// Conventions, each decided here:
// - llama: llama.cpp's LLM_ARCH_LLAMA uses LLAMA_ROPE_TYPE_NORM, RoPE on adjacent pairs (2i, 2i+1);
//   its HF converter permutes the rows of wq/wk so that adjacent pairs reproduce HF's half split,
//   and llama2.c checkpoints rotate adjacent pairs already (written unpermuted).
// - qwen2/qwen3: LLAMA_ROPE_TYPE_NEOX, half split (i, i + D/2), weights unpermuted.
// - Hugging Face checkpoints of every family rotate half split (`rotate_half`).
constexpr std::array<ArchitectureDescription, 3> kArchitectures{{
    {.name = "llama",
     .hfNames = kLlamaHf,
     .families = "Llama 2/3/3.x, Mistral, TinyLlama, SmolLM2, DeepSeek-R1-Distill-Llama",
     .ggufRope = RopeStyle::Interleaved,
     .qkvBias = BiasRule::Optional,
     .qkNorm = false},
    {.name = "qwen2",
     .hfNames = kQwen2Hf,
     .families = "Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen",
     .ggufRope = RopeStyle::Half,
     .qkvBias = BiasRule::Always,
     .qkNorm = false},
    {.name = "qwen3",
     .hfNames = kQwen3Hf,
     .families = "Qwen3 (dense)",
     .ggufRope = RopeStyle::Half,
     .qkvBias = BiasRule::Never,
     .qkNorm = true},
}};

struct Refusal {
  std::string_view name;
  std::string_view why;
};
// Families people run that differ from the three above in ways the one forward does not model.
constexpr std::array<Refusal, 12> kRefused{{
    {"gemma", "Gemma scales the embedding by sqrt(dim), uses (1 + w) RMSNorm weights and GeLU"},
    {"gemma2", "Gemma 2 soft-caps attention and logits and alternates sliding-window layers"},
    {"gemma3", "Gemma 3 alternates local sliding-window and global layers with two RoPE bases"},
    {"phi3", "Phi-3 stores q, k and v fused in one tensor and may use LongRoPE scaling"},
    {"qwen3moe", "Qwen3-MoE routes its feed-forward through experts"},
    {"qwen2moe", "Qwen2-MoE routes its feed-forward through experts"},
    {"mixtral", "Mixtral routes its feed-forward through experts"},
    {"deepseek2", "DeepSeek-V2/V3 use multi-head latent attention (a compressed KV cache)"},
    {"olmo2", "OLMo 2 normalises q and k over all heads and places its norms after attention"},
    {"falcon", "Falcon uses LayerNorm and parallel attention"},
    {"gptneox", "GPT-NeoX uses LayerNorm, partial RoPE and parallel attention"},
    {"mistral3", "Mistral 3 GGUF files carry a vision tower and YaRN-style scaling"},
}};

}  // namespace

bool isLayerRole(TensorRole role) {
  switch (role) {
    case TensorRole::TokenEmbedding:
    case TensorRole::OutputNorm:
    case TensorRole::Output:
    case TensorRole::RopeFrequencies:
      return false;
    case TensorRole::AttnNorm:
    case TensorRole::AttnQ:
    case TensorRole::AttnK:
    case TensorRole::AttnV:
    case TensorRole::AttnOutput:
    case TensorRole::AttnQBias:
    case TensorRole::AttnKBias:
    case TensorRole::AttnVBias:
    case TensorRole::AttnQNorm:
    case TensorRole::AttnKNorm:
    case TensorRole::FfnNorm:
    case TensorRole::FfnGate:
    case TensorRole::FfnUp:
    case TensorRole::FfnDown:
      return true;
  }
  return false;
}

std::string_view tensorRoleName(TensorRole role) {
  switch (role) {
    case TensorRole::TokenEmbedding: return "token_embd";
    case TensorRole::OutputNorm: return "output_norm";
    case TensorRole::Output: return "output";
    case TensorRole::RopeFrequencies: return "rope_freqs";
    case TensorRole::AttnNorm: return "attn_norm";
    case TensorRole::AttnQ: return "attn_q";
    case TensorRole::AttnK: return "attn_k";
    case TensorRole::AttnV: return "attn_v";
    case TensorRole::AttnOutput: return "attn_output";
    case TensorRole::AttnQBias: return "attn_q.bias";
    case TensorRole::AttnKBias: return "attn_k.bias";
    case TensorRole::AttnVBias: return "attn_v.bias";
    case TensorRole::AttnQNorm: return "attn_q_norm";
    case TensorRole::AttnKNorm: return "attn_k_norm";
    case TensorRole::FfnNorm: return "ffn_norm";
    case TensorRole::FfnGate: return "ffn_gate";
    case TensorRole::FfnUp: return "ffn_up";
    case TensorRole::FfnDown: return "ffn_down";
  }
  return "?";
}

std::string ggufTensorName(TensorRole role, int layer) {
  const std::string blk = "blk." + std::to_string(layer) + ".";
  switch (role) {
    case TensorRole::TokenEmbedding: return "token_embd.weight";
    case TensorRole::OutputNorm: return "output_norm.weight";
    case TensorRole::Output: return "output.weight";
    case TensorRole::RopeFrequencies: return "rope_freqs.weight";
    case TensorRole::AttnNorm: return blk + "attn_norm.weight";
    case TensorRole::AttnQ: return blk + "attn_q.weight";
    case TensorRole::AttnK: return blk + "attn_k.weight";
    case TensorRole::AttnV: return blk + "attn_v.weight";
    case TensorRole::AttnOutput: return blk + "attn_output.weight";
    case TensorRole::AttnQBias: return blk + "attn_q.bias";
    case TensorRole::AttnKBias: return blk + "attn_k.bias";
    case TensorRole::AttnVBias: return blk + "attn_v.bias";
    case TensorRole::AttnQNorm: return blk + "attn_q_norm.weight";
    case TensorRole::AttnKNorm: return blk + "attn_k_norm.weight";
    case TensorRole::FfnNorm: return blk + "ffn_norm.weight";
    case TensorRole::FfnGate: return blk + "ffn_gate.weight";
    case TensorRole::FfnUp: return blk + "ffn_up.weight";
    case TensorRole::FfnDown: return blk + "ffn_down.weight";
  }
  return {};
}

std::string hfTensorName(TensorRole role, int layer) {
  const std::string blk = "model.layers." + std::to_string(layer) + ".";
  switch (role) {
    case TensorRole::TokenEmbedding: return "model.embed_tokens.weight";
    case TensorRole::OutputNorm: return "model.norm.weight";
    case TensorRole::Output: return "lm_head.weight";
    case TensorRole::RopeFrequencies: return {};  // HF computes scaled frequencies from config.json
    case TensorRole::AttnNorm: return blk + "input_layernorm.weight";
    case TensorRole::AttnQ: return blk + "self_attn.q_proj.weight";
    case TensorRole::AttnK: return blk + "self_attn.k_proj.weight";
    case TensorRole::AttnV: return blk + "self_attn.v_proj.weight";
    case TensorRole::AttnOutput: return blk + "self_attn.o_proj.weight";
    case TensorRole::AttnQBias: return blk + "self_attn.q_proj.bias";
    case TensorRole::AttnKBias: return blk + "self_attn.k_proj.bias";
    case TensorRole::AttnVBias: return blk + "self_attn.v_proj.bias";
    case TensorRole::AttnQNorm: return blk + "self_attn.q_norm.weight";
    case TensorRole::AttnKNorm: return blk + "self_attn.k_norm.weight";
    case TensorRole::FfnNorm: return blk + "post_attention_layernorm.weight";
    case TensorRole::FfnGate: return blk + "mlp.gate_proj.weight";
    case TensorRole::FfnUp: return blk + "mlp.up_proj.weight";
    case TensorRole::FfnDown: return blk + "mlp.down_proj.weight";
  }
  return {};
}

std::span<const ArchitectureDescription> architectures() { return kArchitectures; }

const ArchitectureDescription* findArchitecture(std::string_view ggufName) {
  for (const ArchitectureDescription& a : kArchitectures) {
    if (a.name == ggufName) return &a;
  }
  return nullptr;
}

const ArchitectureDescription* findHfArchitecture(std::string_view hfName) {
  for (const ArchitectureDescription& a : kArchitectures) {
    for (std::string_view n : a.hfNames) {
      if (n == hfName) return &a;
    }
  }
  return nullptr;
}

std::string architectureList() {
  std::string out;
  for (const ArchitectureDescription& a : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += std::string(a.name) + " (" + std::string(a.families) + ")";
  }
  return out;
}

std::string_view refusedArchitectureReason(std::string_view name) {
  for (const Refusal& r : kRefused) {
    if (r.name == name) return r.why;
  }
  return {};
}

}  // namespace kvscope
