// SPDX-License-Identifier: GPL-3.0-or-later
// The preset table of quantization.md §9.
#include "core/quant/presets.h"

#include <array>
#include <string>

namespace kvscope {

namespace {

constexpr std::array kPresets{
    Preset{"kivi-2", "int2,axis=channel,group=32,residual=128", "int2,axis=token,group=32,residual=128",
           "KIVI 2-bit: keys per channel and values per token in groups of 32, asymmetric, the last "
           "128 tokens kept in fp16 (KIVI's residual)"},
    Preset{"kivi-4", "int4,axis=channel,group=32,residual=128", "int4,axis=token,group=32,residual=128",
           "KIVI 4-bit: keys per channel and values per token in groups of 32, asymmetric, the last "
           "128 tokens kept in fp16"},
    Preset{"kvquant-4-1pct", "nuq4,prerope,axis=channel,outliers=0.01,sinks=1", "nuq4,axis=token,outliers=0.01",
           "KVQuant 4-bit with 1% dense-and-sparse outliers: pre-RoPE per-channel keys, per-token "
           "values, first token kept, on KVQuant-style non-uniform 4-bit codebooks (nuq4: one k-means "
           "codebook per layer tensor, fitted to the cache itself, without KVQuant's Fisher weights)"},
    Preset{"kvquant-3-1pct", "nuq3,prerope,axis=channel,outliers=0.01,sinks=1", "nuq3,axis=token,outliers=0.01",
           "KVQuant 3-bit with 1% dense-and-sparse outliers: pre-RoPE per-channel keys, per-token "
           "values, first token kept, on KVQuant-style non-uniform 3-bit codebooks (nuq3: one k-means "
           "codebook per layer tensor, fitted to the cache itself, without KVQuant's Fisher weights)"},
    Preset{"quarot-4", "int4,rot=hadamard,axis=token,group=128", "int4,rot=hadamard,axis=token,group=128",
           "QuaRot 4-bit: Hadamard-rotated keys and values, asymmetric int4 per token in groups of 128"},
    Preset{"turboquant-3", "tq3,rot=rht", "tq3,rot=rht",
           "TurboQuant-MSE 3-bit: randomized-Hadamard-rotated keys and values, each coordinate of the "
           "unit vector on the 3-bit Lloyd-Max codebook of the sphere, one fp16 norm per vector"},
    Preset{"turboquant-4", "tq4,rot=rht", "tq4,rot=rht",
           "TurboQuant-MSE 4-bit: randomized-Hadamard-rotated keys and values, each coordinate of the "
           "unit vector on the 4-bit Lloyd-Max codebook of the sphere, one fp16 norm per vector"},
    Preset{"llamacpp-q8_0", "q8_0", "q8_0", "llama.cpp cache type q8_0 (ggml's reference quantizer)"},
    Preset{"llamacpp-q4_0", "q4_0", "q4_0", "llama.cpp cache type q4_0 (ggml's reference quantizer)"},
    Preset{"llamacpp-q4_1", "q4_1", "q4_1", "llama.cpp cache type q4_1 (ggml's reference quantizer)"},
    Preset{"llamacpp-q5_0", "q5_0", "q5_0", "llama.cpp cache type q5_0 (ggml's reference quantizer)"},
    Preset{"llamacpp-q5_1", "q5_1", "q5_1", "llama.cpp cache type q5_1 (ggml's reference quantizer)"},
    Preset{"llamacpp-iq4_nl", "iq4_nl", "iq4_nl", "llama.cpp cache type iq4_nl (ggml's reference quantizer)"},
    Preset{"vllm-fp8", "fp8_e4m3", "fp8_e4m3",
           "vLLM fp8 KV cache (e4m3) with a per-tensor fp32 scale calibrated from the data"},
    Preset{"vllm-fp8-uncalibrated", "fp8_e4m3,unitscale", "fp8_e4m3,unitscale",
           "vLLM fp8 KV cache (e4m3) without calibration: scale 1, values cast directly"},
    Preset{"lmdeploy-int8", "int8,axis=token", "int8,axis=token",
           "LMDeploy int8 KV cache: asymmetric per token (per head), fp16 scale and zero point"},
    Preset{"lmdeploy-int4", "int4,axis=token", "int4,axis=token",
           "LMDeploy int4 KV cache: asymmetric per token (per head), fp16 scale and zero point"},
    Preset{"nvfp4", "nvfp4", "nvfp4",
           "NVIDIA NVFP4: e2m1 in blocks of 16 with e4m3 block scales and an fp32 tensor scale"},
    Preset{"mxfp4", "mxfp4", "mxfp4", "OCP MXFP4: e2m1 in blocks of 32 with a shared power-of-two (E8M0) scale"},
};

}  // namespace

std::span<const Preset> presetTable() { return kPresets; }

const Preset* findPreset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string presetNameList() {
  std::string out;
  for (const Preset& p : kPresets) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

Expected<PresetSpecs> presetSpecs(std::string_view name) {
  const Preset* p = findPreset(name);
  if (p == nullptr) {
    std::string why = "unknown preset '";
    why.append(name);
    return Status::invalidArgument(why + "' (allowed presets: " + presetNameList() + ")");
  }
  auto key = parseSpec(p->keySpec);
  if (!key) return key.status().withContext(std::string("preset ").append(p->name));
  auto value = parseSpec(p->valueSpec);
  if (!value) return value.status().withContext(std::string("preset ").append(p->name));
  return PresetSpecs{*key, *value};
}

}  // namespace kvscope
