// SPDX-License-Identifier: GPL-3.0-or-later
// vLLM: `--kv-cache-dtype` and the flags that choose its scales, as vLLM's own code stores them
// (vllm/config/cache.py `CacheDType`, the reshape-and-cache kernels; docs/engines.md names the
// files, functions and commits).
#include <array>
#include <cstdlib>

#include "core/engine/engine.h"
#include "core/engine/engine_words.h"

namespace kvscope {

namespace {

// vllm/config/cache.py, `CacheDType` (commit 002f10e0), in its order.
constexpr std::array<std::string_view, 18> kVllmCacheDtypes{
    "auto",          "float16",           "bfloat16",           "fp8",
    "fp8_e4m3",      "fp8_e5m2",          "fp8_inc",            "fp8_ds_mla",
    "nvfp4_ds_mla",  "turboquant_k8v4",   "turboquant_4bit_nc", "turboquant_k3v4_nc",
    "turboquant_3bit_nc", "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head",
    "nvfp4",         "nvfp4_4over6"};

// Flags that take no value (vllm/engine/arg_utils.py: store_true options that touch the cache).
constexpr std::array<std::string_view, 2> kVllmSwitches{"--calculate-kv-scales", "--no-calculate-kv-scales"};

Status refuse(const std::string& message) { return Status::invalidArgument("vllm: " + message); }

bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

/// vllm/envs.py: K_SCALE_CONSTANT (default 200), V_SCALE_CONSTANT (default 100), read with int().
Expected<int> scaleConstant(const EngineArgs& args, std::string_view name, int fallback) {
  for (const auto& [n, v] : args.env) {
    if (n != name) continue;
    char* end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || end != v.c_str() + v.size() || x <= 0 || x > 1'000'000) {
      return refuse(std::string(name) + "=" + v + ": vLLM reads it with int(); kvscope needs a whole number > 0");
    }
    return static_cast<int>(x);
  }
  return fallback;
}

struct VllmFlags {
  std::string dtype = "auto";  // --kv-cache-dtype defaults to auto
  bool calculateScales = false;
  std::string scheme;          // kv_cache_scheme=tensor|attn_head (the checkpoint's, llm-compressor)
  std::string int8Rounding = "even";
  std::vector<std::string> notes;
};

Expected<VllmFlags> parseVllmFlags(const EngineArgs& args) {
  VllmFlags f;
  for (const auto& [name, value] : args.env) {
    if (name != "K_SCALE_CONSTANT" && name != "V_SCALE_CONSTANT") {
      f.notes.push_back("ignored " + name + "=" + value + ": it does not change what the KV cache stores");
    }
  }
  std::vector<std::string> positional;
  auto options = readDashOptions("vllm", args.words, kVllmSwitches, positional);
  if (!options) return options.status();
  for (const EngineOption& o : *options) {
    if (o.name == "--kv-cache-dtype") {
      if (!o.value) return refuse("--kv-cache-dtype needs a value (one of " + joinNames(kVllmCacheDtypes) + ")");
      if (!isOneOf(*o.value, kVllmCacheDtypes)) {
        return refuse("--kv-cache-dtype " + *o.value + " is not a cache dtype vLLM accepts (it accepts " +
                      joinNames(kVllmCacheDtypes) + ")");
      }
      f.dtype = *o.value;
    } else if (o.name == "--calculate-kv-scales") {
      f.calculateScales = true;
    } else if (o.name == "--no-calculate-kv-scales") {
      f.calculateScales = false;
    } else if (o.name == "--kv-cache-dtype-skip-layers") {
      // vllm/config/cache.py kv_cache_dtype_skip_layers: those layers keep the model dtype.
      return refuse(o.shown +
                    ": skipped layers keep the model dtype while the others are quantized, which needs a "
                    "per-layer plan (quantization.md §12); this kvscope build has no plans yet, so it cannot "
                    "model skipped layers (drop the flag to quantize every layer)");
    } else {
      f.notes.push_back("ignored " + o.shown + ": it does not change what the KV cache stores");
    }
  }
  // Positional words: "serve", the model, and kvscope's words for what the checkpoint holds.
  for (const std::string& p : positional) {
    if (p.rfind("kv_cache_scheme=", 0) == 0) {
      f.scheme = p.substr(16);
      if (f.scheme != "tensor" && f.scheme != "attn_head") {
        return refuse(p + ": llm-compressor's kv_cache_scheme strategies for attention are tensor and attn_head "
                          "(token, channel, group and block raise \"cannot be applied to attention\")");
      }
    } else if (p.rfind("int8_rounding=", 0) == 0) {
      f.int8Rounding = p.substr(14);
      if (f.int8Rounding != "even" && f.int8Rounding != "trunc") {
        return refuse(p + ": allowed int8_rounding=even (vLLM with PR #45361) or int8_rounding=trunc (before it)");
      }
    } else if (p.find('=') != std::string::npos) {
      return refuse("'" + p + "' is not a vLLM flag (kvscope's own words here: kv_cache_scheme=tensor|attn_head, "
                              "int8_rounding=even|trunc)");
    } else {
      f.notes.push_back("ignored '" + p + "': it does not change what the KV cache stores");
    }
  }
  if (!f.scheme.empty() && !f.dtype.starts_with("fp8")) {
    return refuse("kv_cache_scheme=" + f.scheme + " gives per-tensor fp8 scales, which only --kv-cache-dtype fp8, "
                  "fp8_e4m3 or fp8_e5m2 read (got " + f.dtype + ")");
  }
  return f;
}

Expected<ResolvedKv> resolveVllm(const EngineArgs& args, const KvShape& shape) {
  auto parsed = parseVllmFlags(args);
  if (!parsed) return parsed.status();
  VllmFlags& f = *parsed;
  ResolvedKv r;
  const std::string& t = f.dtype;
  auto both = [&](const std::string& spec) {
    r.key = spec;
    r.value = spec;
  };
  if (t == "fp8_inc" || t == "fp8_ds_mla" || t == "nvfp4_ds_mla") {
    return refuse("--kv-cache-dtype " + t + ": " +
                  (t == "fp8_inc" ? std::string("Intel Gaudi (HPU)") : std::string("DeepSeek MLA")) +
                  " cache layouts are not modelled (kvscope models auto, float16, bfloat16, fp8, fp8_e4m3, "
                  "fp8_e5m2, fp8_per_token_head, int8_per_token_head, int4_per_token_head, nvfp4)");
  }
  if (t.starts_with("turboquant_")) {
    return refuse("--kv-cache-dtype " + t +
                  ": TurboQuant needs the Gaussian Lloyd-Max codebook formats (tqg3/tqg4 with norm correction) and "
                  "per-layer plans for its unquantized first 2 and last 2 layers, which this kvscope build does "
                  "not have (docs/engines.md describes the rule)");
  }
  if (t == "nvfp4_4over6") {
    return refuse("--kv-cache-dtype nvfp4_4over6: the per-block choice between max/6 and max/4 scales "
                  "(PR #45187) has no kvscope rule yet; --kv-cache-dtype nvfp4 is modelled");
  }
  if (f.calculateScales && !t.starts_with("fp8")) {
    f.notes.push_back("ignored --calculate-kv-scales: only the per-tensor fp8 types read k_scale/v_scale");
  }
  if (t == "auto") {
    both("none");
    r.notes.push_back("auto: the cache holds the model's K and V in the model dtype; the dump holds those values, "
                      "so kvscope copies them (none)");
  } else if (t == "float16" || t == "bfloat16") {
    both(t == "float16" ? "fp16" : "bf16");
    r.notes.push_back(t + ": each element is stored in that dtype");
  } else if (t == "fp8" || t == "fp8_e4m3" || t == "fp8_e5m2") {
    const std::string fmt = t == "fp8_e5m2" ? "fp8_e5m2" : "fp8_e4m3";
    const std::string fmtNote = t == "fp8" ? "fp8 is fp8_e4m3 (config/cache.py); " : "";
    if (f.calculateScales) {
      auto kc = scaleConstant(args, "K_SCALE_CONSTANT", 200);
      if (!kc) return kc.status();
      auto vc = scaleConstant(args, "V_SCALE_CONSTANT", 100);
      if (!vc) return vc.status();
      r.key = fmt + ",div=" + std::to_string(*kc);
      r.value = fmt + ",div=" + std::to_string(*vc);
      r.notes.push_back(fmtNote + "--calculate-kv-scales: Attention.calc_kv_scales sets k_scale = max|k|/" +
                        std::to_string(*kc) + " and v_scale = max|v|/" + std::to_string(*vc) +
                        " (K_SCALE_CONSTANT, V_SCALE_CONSTANT) once, from the first batch it serves; kvscope "
                        "assumes that batch was the dump's tokens (one scale per layer tensor)");
      if (!f.scheme.empty()) {
        r.notes.push_back("kv_cache_scheme=" + f.scheme + ": the checkpoint's scales are replaced by the ones "
                          "--calculate-kv-scales computes (assumed)");
      }
    } else if (f.scheme == "tensor") {
      both(fmt);
      r.notes.push_back(fmtNote + "kv_cache_scheme=tensor: llm-compressor's minmax observer gives one scale per layer "
                        "tensor, s = max|x|/448 (calculate_qparams); kvscope assumes it calibrated on the dump's tokens "
                        "alone (one batch: no moving average)");
    } else if (f.scheme == "attn_head") {
      both(fmt + ",axis=head");
      r.notes.push_back(fmtNote + "kv_cache_scheme=attn_head: one scale per kv head, s = max|x|/448, calibrated on the "
                        "dump's tokens (assumed); vLLM needs a backend that accepts per-head scales (FlashAttention 3)");
    } else {
      both(fmt + ",unitscale");
      r.notes.push_back(fmtNote + "no checkpoint scales and no --calculate-kv-scales: set_default_quant_scales "
                        "leaves k_scale = v_scale = 1.0, so elements are cast to " + fmt + " as they are (saturating)");
    }
  } else if (t == "fp8_per_token_head") {
    both("fp8_e4m3,axis=token,minscale=1e-06");
    r.notes.push_back("fp8_per_token_head: one fp32 scale per token and kv head, s = max(max|x|/448, 1e-6), "
                      "elements x·(1/s) cast to e4m3 (_reshape_cache_per_token_head_kernel)");
  } else if (t == "int8_per_token_head") {
    const bool trunc = f.int8Rounding == "trunc";
    both(std::string("int8,sym,round=") + (trunc ? "trunc" : "even") + ",scale=fp32,minscale=1e-06");
    r.notes.push_back(std::string("int8_per_token_head: one fp32 scale per token and kv head, s = max(max|x|/127, 1e-6), "
                                  "q = clamp(") + (trunc ? "trunc" : "round-to-even") +
                      "(x·(1/s)), -128, 127)" +
                      (trunc ? " (the implicit float-to-int8 store of releases before PR #45361)"
                             : " (PR #45361; int8_rounding=trunc models the releases before it)"));
  } else if (t == "int4_per_token_head") {
    if (shape.headDim > 0 && !isPowerOfTwo(shape.headDim)) {
      // vllm/v1/attention/ops/triton_quant_kv/_hadamard.py: assert d & (d - 1) == 0.
      return refuse("--kv-cache-dtype int4_per_token_head: \"Requires power-of-2 dim, got " +
                    std::to_string(shape.headDim) +
                    "\" (vLLM's randomized Hadamard transform asserts a power-of-two head dim; D = " +
                    std::to_string(shape.headDim) + ")");
    }
    both("int4,zero=packed,rot=rht,scale=fp32,minscale=1e-06");
    r.notes.push_back("int4_per_token_head: keys and values rotated by sign flips and the Sylvester Hadamard matrix, "
                      "then asymmetric int4 per token and kv head, s = max((max − min)/15, 1e-6), the integer zero "
                      "point packed into the fp32 scale's 4 low mantissa bits (_reshape_cache_int4_kernel); the "
                      "quantizer is vLLM's bit for bit, the rotation only in distribution: vLLM's signs come from "
                      "torch's generator and it rounds the rotated vector to the model dtype (docs/engines.md)");
  } else if (t == "nvfp4") {
    if (shape.headDim > 0 && shape.headDim % 16 != 0) {
      return refuse("--kv-cache-dtype nvfp4: \"head_size must be divisible by 16 for NVFP4 KV cache\" (D = " +
                    std::to_string(shape.headDim) + ")");
    }
    both("nvfp4,gscale=1");
    r.notes.push_back("nvfp4: blocks of 16 channels with e4m3 block scales and global scale 1/k_scale, k_scale = 1.0 "
                      "without checkpoint scales (reshape_and_cache_nvfp4_kernel); kvscope cannot read a "
                      "checkpoint's k_scale and assumes 1");
  }
  r.notes.insert(r.notes.end(), f.notes.begin(), f.notes.end());
  return r;
}

}  // namespace

extern const EngineDef kVllmEngine;
constinit const EngineDef kVllmEngine{
    "vllm",
    {"vllm-serve"},
    "vLLM: --kv-cache-dtype auto|float16|bfloat16|fp8|fp8_e4m3|fp8_e5m2|fp8_per_token_head|int8_per_token_head|"
    "int4_per_token_head|nvfp4, --calculate-kv-scales (K_SCALE_CONSTANT, V_SCALE_CONSTANT), kv_cache_scheme=tensor|"
    "attn_head, int8_rounding=even|trunc",
    resolveVllm};

}  // namespace kvscope
