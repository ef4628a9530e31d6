// SPDX-License-Identifier: GPL-3.0-or-later
// TensorRT-LLM: `kv_cache_dtype` (KvCacheConfig) with the KV scales a ModelOpt checkpoint
// exports (TensorRT-Model-Optimizer modelopt/torch/export/quant_utils.py and
// modelopt/torch/quantization/config.py; docs/engines.md names the lines and commit).
#include <array>
#include <cctype>

#include "core/engine/engine.h"
#include "core/engine/engine_words.h"

namespace kvscope {

namespace {

constexpr std::string_view kExample = "trtllm kv_cache_dtype=fp8";
constexpr std::array<std::string_view, 3> kDtypes{"auto", "fp8", "nvfp4"};

Status refuse(const std::string& message) { return Status::invalidArgument("trtllm: " + message); }

Expected<ResolvedKv> resolveTrtllm(const EngineArgs& args, const KvShape& shape) {
  // Config-style pairs; "--kv_cache_dtype fp8" (a script flag) is read as kv_cache_dtype=fp8.
  std::vector<std::string> words;
  for (size_t i = 0; i < args.words.size(); ++i) {
    std::string w = args.words[i];
    if (w.rfind("--", 0) == 0) {
      w = w.substr(2);
      if (w.find('=') == std::string::npos && i + 1 < args.words.size()) w += "=" + args.words[++i];
    }
    words.push_back(w);
  }
  auto pairs = readConfigPairs("trtllm", words, kExample);
  if (!pairs) return pairs.status();
  std::string dtype = "auto";
  std::string from;
  std::string backend = "pytorch";  // trtllm-serve --backend / LLM(backend=…): the PyTorch flow by default
  ResolvedKv r;
  std::vector<std::string> ignored;
  for (const auto& [name, value] : args.env) {
    ignored.push_back("ignored " + name + "=" + value + ": it does not change what the KV cache stores");
  }
  for (const EngineOption& o : *pairs) {
    if (o.name == "kv_cache_dtype" || o.name == "kv_cache_qformat" || o.name == "kv_cache_config.dtype" ||
        o.name == "kv_cache_quant_algo") {
      // kv_cache_qformat is ModelOpt's (examples/llm_ptq hf_ptq.py), kv_cache_config.dtype the
      // LLM API's KvCacheConfig field, kv_cache_quant_algo the checkpoint's quant config (FP8,
      // NVFP4); they name the same choices.
      std::string v = *o.value;
      for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (v == "none" && o.name != "kv_cache_dtype") v = "auto";
      if (!isOneOf(v, kDtypes)) {
        return refuse(o.shown + ": kvscope models " + o.name + " " + joinNames(kDtypes) +
                      (v == "int8" ? " (the int8 KV cache's per-tensor scale is not modelled)" : ""));
      }
      if (!from.empty() && v != dtype) {
        return refuse(o.shown + " contradicts " + from + " (the checkpoint's KV format is the cache's dtype)");
      }
      dtype = v;
      from = o.shown;
    } else if (o.name == "backend") {
      if (*o.value != "pytorch" && *o.value != "tensorrt") {
        return refuse(o.shown + ": kvscope models backend=pytorch (the default) and backend=tensorrt (engines built "
                      "from a ModelOpt checkpoint)");
      }
      backend = *o.value;
    } else {
      ignored.push_back("ignored " + o.shown + ": it does not change what the KV cache stores");
    }
  }
  if (dtype == "auto") {
    r.key = r.value = "none";
    r.notes.push_back("auto: the cache holds the model's K and V in the model dtype (none)");
  } else if (dtype == "fp8" && backend == "pytorch") {
    // tensorrt_llm/_torch/attention_backend/trtllm.py, TrtllmAttention: an fp8 cache gets
    // kv_cache_scaling_factor = 1; the checkpoint's scales are passed for FP4 caches only.
    r.key = r.value = "fp8_e4m3,unitscale";
    r.notes.push_back("fp8 (PyTorch backend): TrtllmAttention uses kv_cache_scaling_factor = 1 for an fp8 cache, "
                      "whatever the checkpoint exports: elements cast to e4m3 as they are, saturating at ±448 "
                      "(backend=tensorrt: the ModelOpt scale max(amax/448, 1))");
  } else if (dtype == "fp8") {
    r.key = r.value = "fp8_e4m3,minscale=1";
    r.notes.push_back("fp8 (backend=tensorrt): ModelOpt's FP8_KV_CFG calibrates one max per layer tensor and exports "
                      "k_scale = max(amax/448, 1) (postprocess_state_dict clamps it at 1), which the engine loads; "
                      "kvscope assumes the calibration data was the dump's tokens");
  } else {
    if (shape.headDim > 0 && shape.headDim % 16 != 0) {
      return refuse("kv_cache_dtype=nvfp4 quantizes blocks of 16 channels, but D = " + std::to_string(shape.headDim) +
                    " is not a multiple of 16");
    }
    r.key = r.value = "nvfp4";
    r.notes.push_back("nvfp4: e2m1 in blocks of 16 channels with e4m3 block scales and a per-layer global scale "
                      "amax/(6·448) from ModelOpt's max calibration (NVFP4_KV_CFG); kvscope assumes the calibration "
                      "data was the dump's tokens");
  }
  r.notes.insert(r.notes.end(), ignored.begin(), ignored.end());
  return r;
}

constexpr std::array<ModelledOption, 4> kOptions{{
    {"kv_cache_dtype=", "auto|fp8|nvfp4 (also --kv_cache_dtype fp8, kv_cache_config.dtype=, kv_cache_quant_algo=FP8|"
                        "NVFP4 and ModelOpt's kv_cache_qformat=)"},
    {"backend=", "pytorch (the default: fp8 with scale 1) or tensorrt (fp8 with the ModelOpt scale); also --backend X"},
    {"other pairs", "ignored with a note"},
    {"nvfp4", "the checkpoint's per-layer global scale amax/(6·448), calibrated on the dump's tokens (assumed)"},
}};
constexpr std::array<std::string_view, 4> kRefusals{
    "a KV dtype other than auto, fp8, nvfp4 (int8's per-tensor scale is not modelled)",
    "two KV dtype words that disagree",
    "nvfp4 with D not a multiple of 16",
    "a backend other than pytorch, tensorrt"};
constexpr std::array<EngineRelease, 1> kReleases{{
    {"main", "2026",
     "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/attention_backend/trtllm.py TrtllmAttention (kv_cache_scaling_factor = "
     "1 for fp8 caches; from the issue's description of the late-2026 code); NVIDIA/TensorRT-Model-Optimizer "
     "5a4242fa (config.py FP8_KV_CFG, NVFP4_KV_CFG; export/quant_utils.py postprocess_state_dict)"},
}};

}  // namespace

extern const EngineDef kTrtllmEngine;
constinit const EngineDef kTrtllmEngine{
    "trtllm",
    {"tensorrt-llm", "trtllm-serve"},
    "TensorRT-LLM: kv_cache_dtype fp8 (scale 1 on the PyTorch backend) and nvfp4",
    kDtypes,
    kOptions,
    kRefusals,
    kReleases,
    {},
    resolveTrtllm,
    PlanShape::Uniform,
    "one kv_cache_dtype for K and V on every layer (flags are not written)"};

}  // namespace kvscope
