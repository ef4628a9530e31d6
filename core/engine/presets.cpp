// SPDX-License-Identifier: GPL-3.0-or-later
// The preset table of quantization.md §9, each row read from its system's code (§10,
// docs/engines.md). Rows whose specs depend on the dump's shape carry a rule.
#include "core/engine/presets.h"

#include <array>
#include <string>

#include "core/engine/llamacpp.h"

namespace kvscope {

namespace {

Status needsHeadDim(std::string_view preset) {
  return Status::invalidArgument("preset " + std::string(preset) +
                                 " depends on the dump's head dim D; give a dump (or its shape)");
}

/// llama.cpp as it stores `type` today (rotation per src/llama-kv-cache.cpp), or with the
/// rotation off (LLAMA_ATTN_ROT_DISABLE=1, or builds before PR #21038).
Expected<ResolvedKv> llamacpp(std::string_view type, bool rotationDisabled, const KvShape& shape,
                              std::string_view preset) {
  if (shape.headDim <= 0) return needsHeadDim(preset);
  KVS_RETURN_IF_ERROR(llamacppCheckBlocks(type, type, shape.headDim, "preset " + std::string(preset)));
  const LlamacppTensor k = llamacppTensor(type, true, shape.headDim, rotationDisabled);
  const LlamacppTensor v = llamacppTensor(type, false, shape.headDim, rotationDisabled);
  return ResolvedKv{k.spec, v.spec, {k.note, v.note}};
}

// One function per row: a PresetRule is a plain function pointer, so the table stays constant.
#define KVSCOPE_LLAMACPP_RULES(type)                                                            \
  Expected<ResolvedKv> llamacpp_##type(const KvShape& s) {                                      \
    return llamacpp(#type, false, s, "llamacpp-" #type);                                        \
  }                                                                                             \
  Expected<ResolvedKv> llamacpp_##type##_norot(const KvShape& s) {                              \
    return llamacpp(#type, true, s, "llamacpp-" #type "-norot");                                \
  }
KVSCOPE_LLAMACPP_RULES(q8_0)
KVSCOPE_LLAMACPP_RULES(q4_0)
KVSCOPE_LLAMACPP_RULES(q4_1)
KVSCOPE_LLAMACPP_RULES(q5_0)
KVSCOPE_LLAMACPP_RULES(q5_1)
KVSCOPE_LLAMACPP_RULES(iq4_nl)
#undef KVSCOPE_LLAMACPP_RULES

/// QuaRot (fake_quant/rotation_utils.py, QKRotationWrapper): keys and values rotated by H_D per
/// head, which QuaRot asserts needs a power-of-two D, and quantized per head per token
/// (k_groupsize/v_groupsize = D) with ActQuantizer's integer zero point, clip ratio 1.0.
Expected<ResolvedKv> quarot4(const KvShape& s) {
  if (s.headDim <= 0) return needsHeadDim("quarot-4");
  const int d = s.headDim;
  if ((d & (d - 1)) != 0) {
    return Status::invalidArgument("preset quarot-4: D = " + std::to_string(d) +
                                   " is not a power of two; QuaRot rotates each head by H_D and asserts a "
                                   "power-of-two head dim (fake_quant/rotation_utils.py, QKRotationWrapper)");
  }
  const std::string spec = "int4,zero=int,rot=hadamard,axis=token,group=" + std::to_string(d);
  return ResolvedKv{spec, spec,
                    {"K and V: H_" + std::to_string(d) + " per head (D = " + std::to_string(d) +
                     " is a power of two), asymmetric int4 with an integer zero point per head and token "
                     "(groups of D = " + std::to_string(d) + "), clip ratio 1.0 (QuaRot's default)"}};
}

/// TurboQuant-MSE (§11 tq<b>): the randomized Hadamard rotation where D is a power of two, the
/// seeded random orthogonal matrix otherwise (the Hadamard transform needs D = 2^k).
Expected<ResolvedKv> turboquant(int bits, const KvShape& s, std::string_view preset) {
  if (s.headDim <= 0) return needsHeadDim(preset);
  const int d = s.headDim;
  const bool pow2 = (d & (d - 1)) == 0;
  const std::string spec = "tq" + std::to_string(bits) + (pow2 ? ",rot=rht" : ",rot=random");
  return ResolvedKv{spec, spec,
                    {pow2 ? "K and V: randomized Hadamard rotation (D = " + std::to_string(d) + " is a power of two)"
                          : "K and V: D = " + std::to_string(d) +
                                " is not a power of two, so the seeded random orthogonal rotation replaces the "
                                "randomized Hadamard one"}};
}
Expected<ResolvedKv> turboquant3(const KvShape& s) { return turboquant(3, s, "turboquant-3"); }
Expected<ResolvedKv> turboquant4(const KvShape& s) { return turboquant(4, s, "turboquant-4"); }

constexpr std::string_view kLlamacppKeyRule =
    "<type>,rot=hadamard:N when D % 64 = 0 (N the largest power of two dividing D); <type> otherwise";
constexpr std::string_view kLlamacppValueRule = "<type>,rot=hadamard:64 when D % 64 = 0; <type> otherwise";
constexpr std::string_view kNorotRule = "<type> (no rotation)";

// Each cache type gives two rows: as llama.cpp stores it today, and without the rotation.
#define KVSCOPE_LLAMACPP_ROWS(type)                                                                   \
  Preset{"llamacpp-" #type, kLlamacppKeyRule, kLlamacppValueRule,                                     \
         "llama.cpp cache type " #type " as llama.cpp stores it since PR #21038 (2026-04-01): ggml's " \
         "reference quantizer; when D % 64 = 0, Q and K rotated by the Hadamard matrix of the "       \
         "largest power of two dividing D and V by 64x64 blocks (src/llama-kv-cache.cpp)",            \
         llamacpp_##type},                                                                           \
  Preset {                                                                                            \
    "llamacpp-" #type "-norot", kNorotRule, kNorotRule,                                               \
        "llama.cpp cache type " #type " without rotation (LLAMA_ATTN_ROT_DISABLE=1, or builds "      \
        "before April 2026): ggml's reference quantizer, blocks of 32 as they are",                  \
        llamacpp_##type##_norot                                                                      \
  }

const std::array kPresets{
    Preset{"kivi-2", "int2,axis=channel,group=32,chunk=128", "int2,axis=token,group=32,residual=128",
           "KIVI 2-bit (models/llama_kivi.py): keys per channel and values per token in groups of 32, "
           "asymmetric; keys enter the quantized cache 128 at a time (the newest T mod 128 stay fp16), "
           "values keep the newest 128 in fp16"},
    Preset{"kivi-4", "int4,axis=channel,group=32,chunk=128", "int4,axis=token,group=32,residual=128",
           "KIVI 4-bit (models/llama_kivi.py): keys per channel and values per token in groups of 32, "
           "asymmetric; keys enter the quantized cache 128 at a time (the newest T mod 128 stay fp16), "
           "values keep the newest 128 in fp16"},
    Preset{"kvquant-4-1pct", "nuq4,prerope,axis=channel,outliers=0.01,sinks=1", "nuq4,axis=token,outliers=0.01",
           "KVQuant 4-bit with 1% dense-and-sparse outliers: pre-RoPE per-channel keys, per-token "
           "values, first token kept, on KVQuant-style non-uniform 4-bit codebooks (nuq4: one k-means "
           "codebook per layer tensor, fitted to the cache itself, without KVQuant's Fisher weights)"},
    Preset{"kvquant-3-1pct", "nuq3,prerope,axis=channel,outliers=0.01,sinks=1", "nuq3,axis=token,outliers=0.01",
           "KVQuant 3-bit with 1% dense-and-sparse outliers: pre-RoPE per-channel keys, per-token "
           "values, first token kept, on KVQuant-style non-uniform 3-bit codebooks (nuq3: one k-means "
           "codebook per layer tensor, fitted to the cache itself, without KVQuant's Fisher weights)"},
    Preset{"quarot-4", "int4,zero=int,rot=hadamard,axis=token,group=D (D a power of two)",
           "int4,zero=int,rot=hadamard,axis=token,group=D (D a power of two)",
           "QuaRot 4-bit (fake_quant/quant_utils.py ActQuantizer, fake_quant/rotation_utils.py): keys "
           "and values rotated by H_D per head, asymmetric int4 per head and token with an integer zero "
           "point, clip ratio 1.0",
           quarot4},
    Preset{"turboquant-3", "tq3,rot=rht (D a power of two; rot=random otherwise)",
           "tq3,rot=rht (D a power of two; rot=random otherwise)",
           "TurboQuant-MSE 3-bit: randomized-Hadamard-rotated keys and values, each coordinate of the "
           "unit vector on the 3-bit Lloyd-Max codebook of the sphere, one fp16 norm per vector",
           turboquant3},
    Preset{"turboquant-4", "tq4,rot=rht (D a power of two; rot=random otherwise)",
           "tq4,rot=rht (D a power of two; rot=random otherwise)",
           "TurboQuant-MSE 4-bit: randomized-Hadamard-rotated keys and values, each coordinate of the "
           "unit vector on the 4-bit Lloyd-Max codebook of the sphere, one fp16 norm per vector",
           turboquant4},
    KVSCOPE_LLAMACPP_ROWS(q8_0),
    KVSCOPE_LLAMACPP_ROWS(q4_0),
    KVSCOPE_LLAMACPP_ROWS(q4_1),
    KVSCOPE_LLAMACPP_ROWS(q5_0),
    KVSCOPE_LLAMACPP_ROWS(q5_1),
    KVSCOPE_LLAMACPP_ROWS(iq4_nl),
    Preset{"vllm-fp8", "fp8_e4m3", "fp8_e4m3",
           "vLLM fp8 KV cache (e4m3) with a per-tensor fp32 scale calibrated from the data"},
    Preset{"vllm-fp8-uncalibrated", "fp8_e4m3,unitscale", "fp8_e4m3,unitscale",
           "vLLM fp8 KV cache (e4m3) without calibration: scale 1, values cast directly"},
    // What --engine "lmdeploy --quant-policy 8|4 --backend turbomind --dtype float16" stores: one rule
    // for both (tests/core/engine/presets_test.cpp compares them).
    Preset{"lmdeploy-int8", "int8,round=even,codes=meta,scale=fp16", "int8,round=even,codes=meta,scale=fp16",
           "LMDeploy TurboMind int8 KV cache of an fp16 model (--quant-policy 8 --backend turbomind --dtype float16): "
           "asymmetric per token and kv head, fp16 scale and zero point, codes computed in fp16 and rounded half to "
           "even (src/turbomind/kernels/attention/quantization.h ConvertKvCache)"},
    Preset{"lmdeploy-int4", "int4,round=even,codes=meta,scale=fp16", "int4,round=even,codes=meta,scale=fp16",
           "LMDeploy TurboMind int4 KV cache of an fp16 model (--quant-policy 4 --backend turbomind --dtype float16): "
           "asymmetric per token and kv head, fp16 scale and zero point, codes computed in fp16 and rounded half to "
           "even (src/turbomind/kernels/attention/quantization.h ConvertKvCache)"},
    Preset{"nvfp4", "nvfp4", "nvfp4",
           "NVIDIA NVFP4: e2m1 in blocks of 16 with e4m3 block scales and an fp32 tensor scale"},
    Preset{"mxfp4", "mxfp4", "mxfp4", "OCP MXFP4: e2m1 in blocks of 32 with a shared power-of-two (E8M0) scale"},
};
#undef KVSCOPE_LLAMACPP_ROWS

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

Expected<ResolvedKv> resolvePreset(std::string_view name, const KvShape& shape) {
  const Preset* p = findPreset(name);
  if (p == nullptr) {
    std::string why = "unknown preset '";
    why.append(name);
    return Status::invalidArgument(why + "' (allowed presets: " + presetNameList() + ")");
  }
  if (p->rule != nullptr) return p->rule(shape);
  return ResolvedKv{std::string(p->keySpec), std::string(p->valueSpec), {}};
}

Expected<PresetSpecs> parseResolved(const ResolvedKv& resolved, std::string_view origin) {
  auto key = parseSpec(resolved.key);
  if (!key) return key.status().withContext(std::string(origin) + ", key");
  auto value = parseSpec(resolved.value);
  if (!value) return value.status().withContext(std::string(origin) + ", value");
  return PresetSpecs{*key, *value};
}

Expected<KvPlans> parseResolvedPlans(const ResolvedKv& resolved, std::string_view origin) {
  auto key = parsePlan(resolved.key);
  if (!key) return key.status().withContext(std::string(origin) + ", key");
  auto value = parsePlan(resolved.value);
  if (!value) return value.status().withContext(std::string(origin) + ", value");
  return KvPlans{*key, *value};
}

Expected<PresetSpecs> presetSpecs(std::string_view name, const KvShape& shape) {
  auto resolved = resolvePreset(name, shape);
  if (!resolved) return resolved.status();
  return parseResolved(*resolved, std::string("preset ").append(name));
}

}  // namespace kvscope
