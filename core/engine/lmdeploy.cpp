// SPDX-License-Identifier: GPL-3.0-or-later
// LMDeploy: `--quant-policy` with `--backend turbomind|pytorch` and `--dtype`, as its two engines
// store the KV cache (TurboMind: src/turbomind/kernels/attention/quantization.h; PyTorch:
// lmdeploy/pytorch/kernels/cuda/fill_kv_cache.py), and which engine LMDeploy picks when
// `--backend` is not given (lmdeploy/archs.py autoget_backend, lmdeploy/turbomind/
// supported_models.py is_supported); docs/engines.md names the lines and commits.
#include <array>
#include <cctype>

#include "core/engine/engine.h"
#include "core/engine/engine_words.h"

namespace kvscope {

namespace {

// lmdeploy/messages.py `QuantPolicy` (commit 1263d5cd): NONE 0, INT4 4, INT8 8, FP8 16,
// FP8_E5M2 17, TURBO_QUANT 42.
constexpr std::array<std::string_view, 6> kPolicies{"0", "4", "8", "16", "17", "42"};
// lmdeploy/cli/utils.py ArgumentHelper.quant_policy: the enum names, lower case, and fp8_e4m3.
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kPolicyNames{
    {{"none", "0"}, {"int4", "4"}, {"int8", "8"}, {"fp8", "16"}, {"fp8_e4m3", "16"}, {"fp8_e5m2", "17"},
     {"turbo_quant", "42"}}};
constexpr std::array<std::string_view, 2> kBackends{"turbomind", "pytorch"};
constexpr std::array<std::string_view, 3> kDtypes{"auto", "float16", "bfloat16"};
constexpr std::array<std::string_view, 0> kNoSwitches{};
// lmdeploy/turbomind/supported_models.py (commit 008d8e5b) SUPPORTED_ARCHS.
constexpr auto kTurbomindArchs = std::to_array<std::string_view>({
    "BaiChuanForCausalLM", "BaichuanForCausalLM", "InternLMForCausalLM", "InternLM2ForCausalLM",
    "LlamaForCausalLM", "QWenLMHeadModel", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "MistralForCausalLM",
    "LlavaLlamaForCausalLM", "LlavaMistralForCausalLM", "LlavaForConditionalGeneration",
    "InternLMXComposer2ForCausalLM", "InternVLChatModel", "MultiModalityCausalLM", "DeepseekV2ForCausalLM",
    "MiniCPMV", "MGMLlamaForCausalLM", "MiniGeminiLlamaForCausalLM", "ChatGLMModel",
    "ChatGLMForConditionalGeneration", "MixtralForCausalLM", "MolmoForCausalLM"});

Status refuse(const std::string& message) { return Status::invalidArgument("lmdeploy: " + message); }

bool isTurbomindArch(std::string_view arch) { return !arch.empty() && isOneOf(arch, kTurbomindArchs); }

/// What one backend stores for a policy. `meta` is the model dtype's metadata type.
Expected<ResolvedKv> stored(bool turbomind, const std::string& policy, const std::string& meta, const KvShape& shape) {
  ResolvedKv r;
  if (policy == "0") {
    r.key = r.value = "none";
    r.notes.push_back("--quant-policy 0: the cache holds the model's K and V in the model dtype (none)");
    return r;
  }
  if (turbomind) {
    if (policy == "16" || policy == "17") {
      return refuse("--quant-policy " + policy + " with the TurboMind backend: LMDeploy refuses it (\"invalid "
                    "quant_policy for TurboMind, FP8 quantization is not supported\", TurbomindEngineConfig)");
    }
    // TurboMind reads the policy as a bit mask (quant_policy & QuantPolicy::kCacheKVInt8, & …Int4):
    // 42 = 0b101010 has the int8 bit.
    const std::string bits = policy == "4" ? "4" : "8";
    r.key = r.value = "int" + bits + ",round=even,codes=meta,scale=" + meta;
    if (policy == "42") {
      r.notes.push_back("TurboMind --quant-policy 42: TurboMind reads the policy as a bit mask and 42 & 8 is set: the "
                        "int8 path (TurboQuant exists in the PyTorch engine only)");
    }
    r.notes.push_back("TurboMind int" + bits + ": asymmetric per token and kv head, scale (max − min)/" +
                      (bits == "8" ? "255" : "15") + " and zero = min stored in the model dtype (warp_stats); "
                      "ConvertKvCache computes inv_scale = T(1/scale) and (x − zero)·inv_scale in the model dtype T, "
                      "rounds half to even and saturates (cvt.rni.sat), and reads back T(T(q·scale) + zero) → "
                      "codes=meta");
    return r;
  }
  if (policy == "16" || policy == "17") {
    const std::string fmt = policy == "16" ? "fp8_e4m3" : "fp8_e5m2";
    r.key = r.value = fmt + ",unitscale";
    r.notes.push_back("PyTorch engine --quant-policy " + policy + ": the cache is " + fmt + " with the fixed scale "
                      "1.0 (fill_kv_cache: elements cast as they are, saturating) → " + fmt + ",unitscale");
    return r;
  }
  if (policy == "42") {
    if (shape.headDim > 0 && (shape.headDim & (shape.headDim - 1)) != 0) {
      return refuse("--quant-policy 42 with D = " + std::to_string(shape.headDim) + ": LMDeploy refuses it "
                    "(\"TurboQuant K requires power-of-2 raw dim, got " + std::to_string(shape.headDim) + "\")");
    }
    r.key = "lmqjl4,scale=" + meta;
    r.value = "lmtq2,scale=" + meta;
    r.notes.push_back("PyTorch engine --quant-policy 42 (TurboQuant): K and V rotated by the normalized Hadamard "
                      "matrix without signs (hadamard_rotate) and cast back to the model dtype; keys lmqjl4 "
                      "(_fill_page_quant_turbo_qjl4: 3-bit Gaussian Lloyd-Max code of k/‖k‖ plus the sign of each "
                      "coordinate's residual, scaled by ‖r‖/√D), values lmtq2 (_fill_page_quant_turbo_int2); norms "
                      "stored in the model dtype; attention runs in the rotated space");
    r.notes.push_back("bit for bit given the rotated vector: nothing is drawn at random; the rotation's and the "
                      "norms' float sums can differ from LMDeploy's kernels in the last bit");
    return r;
  }
  r.key = r.value = "int" + policy + ",scale=" + meta;
  r.notes.push_back("PyTorch engine --quant-policy " + policy + ": asymmetric int" + policy +
                    " per token and kv head (_quant_int" + policy +
                    "); equal in distribution only: LMDeploy rounds with the unrounded fp32 scale and a float "
                    "zero point −min/scale, then stores both in the model dtype, where kvscope rounds the scale "
                    "and min first");
  return r;
}

Expected<ResolvedKv> resolveLmdeploy(const EngineArgs& args, const KvShape& shape) {
  std::vector<std::string> positional;
  auto options = readDashOptions("lmdeploy", args.words, kNoSwitches, positional);
  if (!options) return options.status();
  std::string policy = "0", backend, dtype = "auto", arch;
  std::vector<std::string> ignored;
  for (const auto& [name, value] : args.env) {
    ignored.push_back("ignored " + name + "=" + value + ": it does not change what the KV cache stores");
  }
  for (const EngineOption& o : *options) {
    auto pick = [&](std::string& into, std::span<const std::string_view> allowed) -> Status {
      if (!o.value || !isOneOf(*o.value, allowed)) {
        return refuse(o.shown + ": LMDeploy accepts " + o.name + " " + joinNames(allowed));
      }
      into = *o.value;
      return Status::ok();
    };
    if (o.name == "--quant-policy") {
      if (o.value) {
        std::string lower = *o.value;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string chosen = isOneOf(*o.value, kPolicies) ? *o.value : "";
        for (const auto& [name, number] : kPolicyNames) {
          if (lower == name) chosen = number;
        }
        if (chosen.empty()) {
          return refuse(o.shown + ": LMDeploy accepts --quant-policy " + joinNames(kPolicies) +
                        " or none, int4, int8, fp8, fp8_e4m3, fp8_e5m2, turbo_quant");
        }
        policy = chosen;
        continue;
      }
      KVS_RETURN_IF_ERROR(pick(policy, kPolicies));
    } else if (o.name == "--backend") {
      KVS_RETURN_IF_ERROR(pick(backend, kBackends));
    } else if (o.name == "--dtype") {
      KVS_RETURN_IF_ERROR(pick(dtype, kDtypes));
    } else {
      ignored.push_back("ignored " + o.shown + ": it does not change what the KV cache stores");
    }
  }
  for (const std::string& p : positional) {
    if (p.rfind("architecture=", 0) == 0) {
      arch = p.substr(13);
      if (arch.empty()) return refuse("architecture= needs the model's architecture (config.json's architectures[0])");
      continue;
    }
    ignored.push_back("ignored '" + p + "': it does not change what the KV cache stores");
  }
  const std::string meta = dtype == "float16" ? "fp16" : "bf16";
  std::vector<std::string> notes;
  if (dtype == "auto" && policy != "0" && policy != "16" && policy != "17") {
    notes.push_back("--dtype auto: the metadata is stored in the model dtype, which the dump does not name; "
                    "kvscope assumes bf16 (give --dtype float16 for an fp16 model)");
  }
  if (backend.empty()) {
    // lmdeploy/archs.py autoget_backend: TurboMind when is_supported(model) (the architecture in
    // SUPPORTED_ARCHS and, for Llama and Qwen2, head dim 64 or 128), else the PyTorch engine.
    const std::string from = !arch.empty() ? "architecture=" + arch
                             : isTurbomindArch(shape.model) ? "the dump's model " + shape.model
                                                            : std::string();
    const std::string a = !arch.empty() ? arch : isTurbomindArch(shape.model) ? shape.model : std::string();
    if (!a.empty()) {
      const bool headDimChecked = a == "LlamaForCausalLM" || a == "Qwen2ForCausalLM";
      const bool supported = isTurbomindArch(a) &&
                             (!headDimChecked || shape.headDim <= 0 || shape.headDim == 64 || shape.headDim == 128);
      backend = supported ? "turbomind" : "pytorch";
      notes.push_back("no --backend: LMDeploy picks " + std::string(supported ? "TurboMind" : "the PyTorch engine") +
                      " for " + from +
                      (supported ? " (in TurboMind's SUPPORTED_ARCHS" +
                                       std::string(headDimChecked ? ", head dim 64 or 128" : "") + "; autoget_backend)"
                                 : std::string(isTurbomindArch(a) ? " (head dim not 64 or 128, is_supported)"
                                                                  : " (not in TurboMind's SUPPORTED_ARCHS)") +
                                       "; autoget_backend)"));
    } else {
      auto tm = stored(true, policy, meta, shape);
      auto pt = stored(false, policy, meta, shape);
      if (tm && pt && tm->key == pt->key && tm->value == pt->value) {
        backend = "turbomind";
      } else {
        auto what = [](const Expected<ResolvedKv>& r) {
          return r ? "stores K " + r->key + ", V " + r->value : "refuses it (" + r.status().message() + ")";
        };
        return refuse("--quant-policy " + policy + " without --backend: LMDeploy picks TurboMind for an architecture "
                      "in TurboMind's SUPPORTED_ARCHS (Llama and Qwen2 with head dim 64 or 128) and the PyTorch "
                      "engine otherwise (autoget_backend), and the dump does not name its architecture. TurboMind " +
                      what(tm) + "; the PyTorch engine " + what(pt) +
                      ". Give --backend turbomind|pytorch, or architecture=NAME (config.json's architectures[0])");
      }
    }
  } else if (!arch.empty()) {
    ignored.push_back("ignored architecture=" + arch + ": --backend " + backend + " decides the engine");
  }
  auto r = stored(backend == "turbomind", policy, meta, shape);
  if (!r) return r;
  r->notes.insert(r->notes.begin(), notes.begin(), notes.end());
  r->notes.insert(r->notes.end(), ignored.begin(), ignored.end());
  return r;
}

constexpr std::array<ModelledOption, 5> kOptions{{
    {"--quant-policy", "0|4|8|16|17|42 (or none, int4, int8, fp8, fp8_e4m3, fp8_e5m2, turbo_quant, any case)"},
    {"--backend", "turbomind|pytorch; without it LMDeploy picks by architecture (autoget_backend)"},
    {"--dtype", "auto|float16|bfloat16: the model dtype the metadata (and TurboMind's arithmetic) uses; auto is "
                "taken as bfloat16"},
    {"architecture=NAME", "kvscope's word: config.json's architectures[0], which decides the backend without "
                          "--backend (the dump's model attribute is used when it names one)"},
    {"other flags", "ignored with a note"},
}};
constexpr std::array<std::string_view, 5> kRefusals{
    "a --quant-policy, --backend or --dtype LMDeploy does not accept",
    "--quant-policy 16, 17 with TurboMind (\"invalid quant_policy for TurboMind, FP8 quantization is not supported\")",
    "--quant-policy 42 on the PyTorch engine with D not a power of two (\"TurboQuant K requires power-of-2 raw dim\")",
    "a policy whose two backends store differently, without --backend or an architecture (the message says what each "
    "stores)",
    "architecture= without a name"};
constexpr std::array<EngineRelease, 1> kReleases{{
    {"main", "2026",
     "InternLM/lmdeploy 1263d5cd (messages.py QuantPolicy, TurbomindEngineConfig; pytorch/kernels/cuda/"
     "fill_kv_cache.py, flatten_kv_cache.py, turbo_quant.py), src/turbomind/kernels/attention/quantization.h "
     "(warp_stats, ConvertKvCache<T, uint8_t/uint4_t>), turbomind/supported_models.py 008d8e5b (SUPPORTED_ARCHS, "
     "is_supported), archs.py autoget_backend"},
}};

}  // namespace

extern const EngineDef kLmdeployEngine;
constinit const EngineDef kLmdeployEngine{
    "lmdeploy",
    {},
    "LMDeploy: --quant-policy on TurboMind (int4/int8 in the model dtype) or the PyTorch engine (int4/int8, fp8, "
    "TurboQuant)",
    kPolicies,
    kOptions,
    kRefusals,
    kReleases,
    {},
    resolveLmdeploy,
    PlanShape::Uniform,
    "one --quant-policy for K and V on every layer (flags are not written)"};

}  // namespace kvscope
