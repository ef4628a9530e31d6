// SPDX-License-Identifier: GPL-3.0-or-later
// SGLang: `--kv-cache-dtype` and `--quantization-param-path`, as SGLang's memory pool stores
// them (python/sglang/srt/mem_cache/memory_pool.py `MHATokenToKVPool.set_kv_buffer`;
// docs/engines.md names the files and versions).
#include <array>

#include "core/engine/engine.h"
#include "core/engine/engine_words.h"

namespace kvscope {

namespace {

// python/sglang/srt/server_args.py (commit 001067ff) `ServerArgs.kv_cache_dtype` choices. SGLang
// releases before fp4_mx_block16 and nvfp4 existed accept the first six; releases after 0.5.14
// refuse fp4_e2m1 (kChanges).
constexpr std::array<std::string_view, 9> kSglangCacheDtypes{"auto",     "fp8_e5m2", "fp8_e4m3",
                                                             "bf16",     "bfloat16", "fp4_e2m1",
                                                             "fp4_mx_block16", "nvfp4", "mxfp8"};
constexpr std::array<std::string_view, 0> kNoSwitches{};

Status refuse(const std::string& message) { return Status::invalidArgument("sglang: " + message); }

Expected<ResolvedKv> resolveSglang(const EngineArgs& args, const KvShape& shape) {
  std::vector<std::string> positional;
  // --int8-kv-cache is refused before anything reads a value for it.
  for (const std::string& w : args.words) {
    if (w == "--int8-kv-cache" || w.rfind("--int8-kv-cache=", 0) == 0) {
      return refuse("--int8-kv-cache is not an SGLang flag (server_args.py has no int8 KV cache option; it exists "
                    "only in an unmerged proposal); SGLang's KV cache types are --kv-cache-dtype " +
                    joinNames(kSglangCacheDtypes));
    }
  }
  auto options = readDashOptions("sglang", args.words, kNoSwitches, positional);
  if (!options) return options.status();
  std::string dtype = "auto";
  std::string paramPath;
  std::string recipe;  // --fp4-kv-cache-recipe (releases up to 0.5.14)
  std::string scheme;  // kvscope's kv_cache_scheme=: the checkpoint holds calibrated k_scale/v_scale
  ResolvedKv r;
  std::vector<std::string> ignored;
  for (const auto& [name, value] : args.env) {
    ignored.push_back("ignored " + name + "=" + value + ": it does not change what the KV cache stores");
  }
  for (const EngineOption& o : *options) {
    if (o.name == "--kv-cache-dtype") {
      if (!o.value) return refuse("--kv-cache-dtype needs a value (one of " + joinNames(kSglangCacheDtypes) + ")");
      if (!isOneOf(*o.value, kSglangCacheDtypes)) {
        return refuse("--kv-cache-dtype " + *o.value + " is not a cache dtype SGLang accepts (it accepts " +
                      joinNames(kSglangCacheDtypes) + ")");
      }
      dtype = *o.value;
    } else if (o.name == "--fp4-kv-cache-recipe") {
      // fp4_kv_cache_quant_method.py (mid-2026), FP4_KV_CACHE_QUANT_REGISTRY: nvfp4, mxfp4 and the
      // older name blockfp4 of the block-16 recipe.
      if (!o.value || (*o.value != "nvfp4" && *o.value != "mxfp4" && *o.value != "blockfp4")) {
        return refuse(o.shown + ": SGLang's FP4 KV recipes are nvfp4 and mxfp4 (blockfp4, the older name of mxfp4)");
      }
      recipe = *o.value == "blockfp4" ? "mxfp4" : *o.value;
    } else if (o.name == "--quantization-param-path") {
      if (!o.value) return refuse("--quantization-param-path needs a file (a JSON of per-layer KV scaling factors)");
      paramPath = *o.value;
    } else {
      ignored.push_back("ignored " + o.shown + ": it does not change what the KV cache stores");
    }
  }
  for (const std::string& p : positional) {
    if (p.rfind("kv_cache_scheme=", 0) == 0) {
      scheme = p.substr(16);
      if (scheme != "tensor") {
        return refuse(p + ": kvscope's word for a checkpoint with calibrated per-layer KV scales is "
                          "kv_cache_scheme=tensor");
      }
      continue;
    }
    ignored.push_back("ignored '" + p + "': it does not change what the KV cache stores");
  }
  if (!recipe.empty() && dtype != "fp4_e2m1") {
    ignored.push_back("ignored --fp4-kv-cache-recipe " + recipe + ": it chooses the recipe of --kv-cache-dtype "
                      "fp4_e2m1 only");
  }
  if (dtype == "fp4_e2m1") {
    // Up to 0.5.14 fp4_e2m1 took its recipe from --fp4-kv-cache-recipe, mxfp4 (the block-16
    // recipe, later named fp4_mx_block16) by default; later releases refuse fp4_e2m1 (the engine
    // row's changes).
    dtype = recipe == "nvfp4" ? "nvfp4" : "fp4_mx_block16";
    r.notes.push_back("--kv-cache-dtype fp4_e2m1 with the recipe " + std::string(recipe.empty() ? "mxfp4 (the default)" : recipe) +
                      " (--fp4-kv-cache-recipe): what --kv-cache-dtype " + dtype + " stores in later releases");
  }
  if (!scheme.empty() && dtype != "nvfp4") {
    ignored.push_back("ignored kv_cache_scheme=" + scheme + ": only the nvfp4 cache reads the checkpoint's scales "
                      "this way (fp8 takes them from --quantization-param-path)");
  }
  if (dtype == "auto") {
    r.key = r.value = "none";
    r.notes.push_back("auto: the cache holds the model's K and V in the model dtype; the dump holds those values, so "
                      "kvscope copies them (none)");
  } else if (dtype == "bf16" || dtype == "bfloat16") {
    r.key = r.value = "bf16";
    r.notes.push_back(dtype + ": each element is stored as bf16");
  } else if (dtype == "fp4_mx_block16") {
    if (!paramPath.empty()) {
      return refuse("--kv-cache-dtype " + dtype + " with --quantization-param-path: MHATokenToKVPoolFP4.set_kv_buffer "
                    "divides K and V by the file's per-layer k_scale/v_scale before the block quantizer, which moves "
                    "every block's power-of-two grid by that factor; kvscope cannot read the file and does not guess "
                    "that scale. kvscope models " + dtype + " without --quantization-param-path (scale 1), and "
                    "fp8_e4m3/fp8_e5m2 with it");
    }
    r.key = r.value = "kvfp4";
    r.notes.push_back(dtype + ": MHATokenToKVPoolFP4 with FP4MXBlock16KVQuantizeUtil (kvfp4_tensor.py): blocks of 16 "
                      "values of the token row [heads, D], one uint8 exponent per block, e = ceil(log2(max(a/6, "
                      "1e-10))), elements e2m1 with ties away from zero (the bounds 0.25, 0.75, …, 5 go up) → kvfp4");
    r.notes.push_back("no --quantization-param-path: k_scale and v_scale are None, so nothing is divided before the "
                      "block quantizer");
  } else if (dtype == "nvfp4") {
    // NVFP4KVCacheMethod: blocks of 16 along D (k_scale_buffer [.., head_dim // 16]), e4m3 block
    // scales and a per-layer global scale from the checkpoint's k_scale/v_scale, 1.0 without one
    // (load_scales_from_model); a calibrated k_scale is amax/(6·448).
    if (shape.headDim > 0 && shape.headDim % 16 != 0) {
      return refuse("--kv-cache-dtype nvfp4 with D = " + std::to_string(shape.headDim) + ": the NVFP4 cache stores one "
                    "e4m3 scale per 16 channels of a head (head_dim // 16), so D must be a multiple of 16");
    }
    if (!paramPath.empty()) {
      ignored.push_back("ignored --quantization-param-path " + paramPath + ": the nvfp4 cache takes its global scales "
                        "from the checkpoint (load_scales_from_model); give kv_cache_scheme=tensor for a checkpoint "
                        "with calibrated scales");
    }
    r.key = r.value = scheme.empty() ? "nvfp4,gscale=1" : "nvfp4";
    r.notes.push_back(scheme.empty()
                          ? "nvfp4: e2m1 in blocks of 16 with e4m3 block scales; without checkpoint scales the "
                            "global scale is 1.0 (NVFP4KVCacheMethod.load_scales_from_model) → nvfp4,gscale=1"
                          : "nvfp4 with kv_cache_scheme=tensor: the checkpoint's k_scale = amax/(6·448) per layer "
                            "tensor, calibrated on the dump's tokens (assumed) → the contract's nvfp4");
  } else if (dtype == "mxfp8") {
    return refuse("--kv-cache-dtype mxfp8 (the FA4 backend's MXFP8 cache) was not read from SGLang's code; kvscope "
                  "models auto, bf16, bfloat16, fp8_e4m3, fp8_e5m2, nvfp4 and fp4_mx_block16 (fp4_e2m1 with "
                  "sglang@0.5.14 and earlier)");
  } else {
    const std::string fmt = dtype;  // fp8_e4m3 or fp8_e5m2
    if (paramPath.empty()) {
      r.key = r.value = fmt + ",unitscale";
      r.notes.push_back(dtype + " without --quantization-param-path: k_scale and v_scale are None, so set_kv_buffer "
                        "casts the elements as they are (scale 1.0)");
    } else {
      r.key = r.value = fmt;
      r.notes.push_back(dtype + " with --quantization-param-path " + paramPath +
                        ": kvscope cannot read that file; it assumes the per-layer scales were max|x|/Fmax over the "
                        "dump's tokens (one scale per layer tensor)");
    }
    r.notes.push_back(std::string("SGLang casts with torch's .to(") +
                      (fmt == "fp8_e4m3" ? "float8_e4m3fn), which gives NaN for |x/s| ≥ 464"
                                         : "float8_e5m2), which gives ±inf beyond 57344") +
                      " where kvscope saturates, and divides in the model dtype first (a double rounding at e4m3 ties)");
  }
  r.notes.insert(r.notes.end(), ignored.begin(), ignored.end());
  return r;
}

constexpr std::array<ModelledOption, 5> kOptions{{
    {"--kv-cache-dtype", "auto|bf16|bfloat16|fp8_e4m3|fp8_e5m2|nvfp4|fp4_mx_block16 (also =X); fp4_e2m1 up to "
                         "sglang@0.5.14"},
    {"--fp4-kv-cache-recipe", "nvfp4|mxfp4 (blockfp4): the recipe of fp4_e2m1, up to sglang@0.5.14 (mxfp4 by default)"},
    {"--quantization-param-path", "a JSON of per-layer fp8 k/v scales (kvscope assumes max|x|/Fmax over the dump)"},
    {"kv_cache_scheme=tensor", "kvscope's word: the checkpoint holds calibrated per-layer NVFP4 k_scale/v_scale"},
    {"other flags", "ignored with a note"},
}};
constexpr std::array<std::string_view, 7> kRefusals{
    "a --kv-cache-dtype not among server_args.py's choices",
    "fp4_e2m1 after 0.5.14 (\"--kv-cache-dtype=fp4_e2m1 no longer auto-selects an FP4 KV recipe\")",
    "--fp4-kv-cache-recipe after 0.5.14, or a recipe other than nvfp4, mxfp4, blockfp4",
    "nvfp4 with D not a multiple of 16",
    "fp4_mx_block16 (fp4_e2m1) with --quantization-param-path (the file's scale moves every block's grid)",
    "mxfp8 (not read)",
    "--int8-kv-cache (not an SGLang flag)"};
constexpr std::array<EngineRelease, 2> kReleases{{
    {"main", "2026-late",
     "sgl-project/sglang: the KV cache quantization methods module (resolve_kv_cache_quant, NVFP4KVCacheMethod, "
     "FP4MXBlock16KVCacheMethod), python/sglang/srt/server_args.py 001067ff, mem_cache/memory_pool.py "
     "(MHATokenToKVPool.set_kv_buffer), layers/quantization/kvfp4_tensor.py 0dae407b"},
    {"0.5.14", "2026-06",
     "mid-2026: --kv-cache-dtype fp4_e2m1 with --fp4-kv-cache-recipe nvfp4|mxfp4 "
     "(fp4_kv_cache_quant_method.py FP4_KV_CACHE_QUANT_REGISTRY, get_fp4_kv_cache_quant_method); the newest release "
     "kvscope takes to have it (the release that dropped it was not read)"},
}};
constexpr std::array<EngineChange, 2> kChanges{{
    {"--kv-cache-dtype fp4_e2m1", "0.5.15",
     "SGLang refuses it (\"--kv-cache-dtype=fp4_e2m1 no longer auto-selects an FP4 KV recipe\", resolve_kv_cache_quant)",
     "write --kv-cache-dtype nvfp4 or --kv-cache-dtype fp4_mx_block16 (the recipes nvfp4 and mxfp4)"},
    {"--fp4-kv-cache-recipe", "0.5.15", "removed with fp4_e2m1: the recipe is the --kv-cache-dtype",
     "write --kv-cache-dtype nvfp4 or --kv-cache-dtype fp4_mx_block16"},
}};

}  // namespace

extern const EngineDef kSglangEngine;
constinit const EngineDef kSglangEngine{
    "sglang",
    {"sglang.launch_server"},
    "SGLang: --kv-cache-dtype with fp8 (scale 1 or a scale file), NVFP4 and the block-16 FP4 recipe",
    kSglangCacheDtypes,
    kOptions,
    kRefusals,
    kReleases,
    kChanges,
    resolveSglang,
    PlanShape::Uniform,
    "one --kv-cache-dtype for K and V on every layer (flags are not written)"};

}  // namespace kvscope
