// SPDX-License-Identifier: GPL-3.0-or-later
// vLLM: `--kv-cache-dtype` and the flags that choose its scales, as vLLM's own code stores them
// (vllm/config/cache.py `CacheDType`, the reshape-and-cache kernels; docs/engines.md names the
// files, functions and commits).
#include <algorithm>
#include <array>
#include <cstdlib>

#include "core/engine/engine.h"
#include "core/engine/engine_words.h"
#include "core/quant/plan.h"

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

/// One word of --kv-cache-dtype-skip-layers: a layer index or an attention type name.
struct SkipWord {
  std::string text;
  int layer = -1;  // the index, or -1 for "sliding_window"
};

struct VllmFlags {
  std::string dtype = "auto";  // --kv-cache-dtype defaults to auto
  bool skipGiven = false;
  std::vector<SkipWord> skip;        // --kv-cache-dtype-skip-layers, in the order written
  bool slidingGiven = false;
  std::vector<int> slidingLayers;    // sliding_window_layers=… (kvscope's word: the model's sliding-window layers)
  bool calculateScales = false;
  std::string scheme;          // kv_cache_scheme=tensor|attn_head (the checkpoint's, llm-compressor)
  std::string int8Rounding = "even";
  std::vector<std::string> notes;
};

constexpr std::string_view kSkipFlag = "--kv-cache-dtype-skip-layers";

/// "0,3" or "12": whole numbers written canonically (vLLM compares str(layer_idx) with each word).
Status parseLayerList(std::string_view what, std::string_view text, std::vector<std::string>& out) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (item.empty()) return refuse(std::string(what) + ": empty item in '" + std::string(text) + "'");
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return Status::ok();
}

/// A layer index as vLLM matches it: digits without a leading zero (str(int) never has one).
bool canonicalIndex(std::string_view s, int& layer) {
  if (s.empty() || s.size() > 6 || (s.size() > 1 && s[0] == '0')) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  layer = v;
  return true;
}

/// --kv-cache-dtype-skip-layers takes one or more words (argparse nargs="+": every following word
/// that is not an option, "=" pairs being kvscope's own words), each may hold a comma list. The
/// words are taken out of `words` so the generic reader sees the flag with its first value only.
Status takeSkipLayers(std::vector<std::string>& words, VllmFlags& f) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const bool inlineValue = w.rfind(std::string(kSkipFlag) + "=", 0) == 0;
    if (w != kSkipFlag && !inlineValue) {
      kept.push_back(w);
      continue;
    }
    f.skipGiven = true;
    std::vector<std::string> raw;
    if (inlineValue) {
      KVS_RETURN_IF_ERROR(parseLayerList(kSkipFlag, std::string_view(w).substr(kSkipFlag.size() + 1), raw));
    }
    while (i + 1 < words.size() && !words[i + 1].starts_with("-") && words[i + 1].find('=') == std::string::npos) {
      KVS_RETURN_IF_ERROR(parseLayerList(kSkipFlag, words[++i], raw));
    }
    if (raw.empty()) {
      return refuse(std::string(kSkipFlag) + " needs at least one value (layer indices such as 0 1 31, or "
                    "sliding_window)");
    }
    for (const std::string& r : raw) {
      SkipWord s{r, -1};
      if (r != "sliding_window" && !canonicalIndex(r, s.layer)) {
        return refuse(std::string(kSkipFlag) + " " + r + ": allowed are layer indices written as whole numbers "
                      "(0, 1, 31; vLLM compares them with str(layer_idx), so 01 would match no layer) and the "
                      "attention type sliding_window");
      }
      f.skip.push_back(s);
    }
  }
  words = std::move(kept);
  return Status::ok();
}

Expected<VllmFlags> parseVllmFlags(const EngineArgs& args) {
  VllmFlags f;
  std::vector<std::string> words = args.words;
  KVS_RETURN_IF_ERROR(takeSkipLayers(words, f));
  for (const auto& [name, value] : args.env) {
    if (name != "K_SCALE_CONSTANT" && name != "V_SCALE_CONSTANT") {
      f.notes.push_back("ignored " + name + "=" + value + ": it does not change what the KV cache stores");
    }
  }
  std::vector<std::string> positional;
  auto options = readDashOptions("vllm", words, kVllmSwitches, positional);
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
    } else if (p.rfind("sliding_window_layers=", 0) == 0) {
      f.slidingGiven = true;
      std::vector<std::string> raw;
      KVS_RETURN_IF_ERROR(parseLayerList("sliding_window_layers=", std::string_view(p).substr(22), raw));
      for (const std::string& r : raw) {
        int layer = 0;
        if (!canonicalIndex(r, layer)) {
          return refuse(p + ": allowed are layer indices written as whole numbers, e.g. sliding_window_layers=0,2,4");
        }
        f.slidingLayers.push_back(layer);
      }
    } else if (p.find('=') != std::string::npos) {
      return refuse("'" + p + "' is not a vLLM flag (kvscope's own words here: kv_cache_scheme=tensor|attn_head, "
                              "int8_rounding=even|trunc, sliding_window_layers=LIST)");
    } else {
      f.notes.push_back("ignored '" + p + "': it does not change what the KV cache stores");
    }
  }
  if (f.slidingGiven && !std::any_of(f.skip.begin(), f.skip.end(), [](const SkipWord& s) { return s.layer < 0; })) {
    return refuse("sliding_window_layers= names the layers --kv-cache-dtype-skip-layers sliding_window skips; "
                  "without that word it changes nothing (allowed: --kv-cache-dtype-skip-layers sliding_window "
                  "sliding_window_layers=0,2,4)");
  }
  if (!f.scheme.empty() && f.dtype == "fp8_e5m2") {
    // vllm/model_executor/layers/attention/attention.py, Attention.__init__ (_init_kv_cache_quant):
    // a checkpoint with a kv_cache_scheme holds e4m3 scales, and e5m2 is refused.
    return refuse("--kv-cache-dtype fp8_e5m2 with kv_cache_scheme=" + f.scheme + ": vLLM refuses it (\"fp8_e5m2 "
                  "kv-cache is not supported with fp8 checkpoints\", Attention.__init__); a checkpoint's kv_cache_scheme "
                  "holds e4m3 scales (allowed: auto, fp8 or fp8_e4m3 with kv_cache_scheme=)");
  }
  if (!f.scheme.empty() && f.dtype == "auto") {
    // The same place: with a kv_cache_scheme in the checkpoint, auto becomes fp8 (e4m3).
    f.dtype = "fp8";
    f.notes.push_back("--kv-cache-dtype auto with kv_cache_scheme=" + f.scheme + ": vLLM stores fp8 (e4m3) with the "
                      "checkpoint's scales (Attention.__init__ turns auto into fp8 for a checkpoint with a "
                      "kv_cache_scheme)");
  }
  return f;
}

/// "0-1+5+30-31": sorted layer indices as a plan's LAYERS expression, runs joined.
std::string layerExpression(std::vector<int> layers) {
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += "+";
    out += std::to_string(layers[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(layers[j]);
    }
    i = j + 1;
  }
  return out;
}

/// TurboQuant's boundary protection (vllm/model_executor/layers/quantization/turboquant/config.py,
/// commit 1471680b, `get_boundary_skip_layers`): n = min(2, L // 2), the first n and last n layers.
std::vector<int> turboquantBoundary(int layers) {
  std::vector<int> out;
  const int n = std::min(2, layers / 2);
  for (int i = 0; i < n; ++i) out.push_back(i);
  for (int i = layers - n; i < layers; ++i) out.push_back(i);
  return out;
}

/// The layers kept in the model dtype (`none`) as a plan suffix ";LAYERS:none" on both tensors:
/// --kv-cache-dtype-skip-layers (vllm/model_executor/layers/attention/attention.py, commit
/// 0014ca6b, Attention.__init__: a layer whose index is listed, or that has a sliding window when
/// "sliding_window" is listed, gets kv_cache_dtype = "auto") and TurboQuant's boundary layers.
Status applySkips(ResolvedKv& r, const VllmFlags& f, const KvShape& shape, const std::vector<int>& boundary,
                  bool boundaryUnknown) {
  std::vector<int> layers;
  std::vector<std::string> listed;
  for (const SkipWord& s : f.skip) {
    if (s.layer >= 0) {
      layers.push_back(s.layer);
      listed.push_back(s.text);
      continue;
    }
    if (!f.slidingGiven) {
      return refuse(std::string(kSkipFlag) + " sliding_window: vLLM skips every layer that has a sliding window "
                    "(its own or the model's), and a dump does not record which layers those are; name them with "
                    "kvscope's word sliding_window_layers=0,2,4 (the model config's layer_types) or list their "
                    "indices instead (allowed: layer indices, or sliding_window with sliding_window_layers=LIST)");
    }
    layers.insert(layers.end(), f.slidingLayers.begin(), f.slidingLayers.end());
    listed.push_back("sliding_window (layers " + layerExpression(f.slidingLayers) + ")");
  }
  if (shape.layers > 0) {
    for (int l : layers) {
      if (l >= shape.layers) {
        return refuse(std::string(kSkipFlag) + ": layer " + std::to_string(l) + " does not exist: the dump has " +
                      std::to_string(shape.layers) + " layers (allowed: 0 … " + std::to_string(shape.layers - 1) +
                      "; vLLM itself would skip nothing for it)");
      }
    }
  }
  if (f.skipGiven && r.key == "none" && r.value == "none") {
    r.notes.push_back("ignored " + std::string(kSkipFlag) + ": with this cache dtype every layer already keeps "
                      "the model dtype");
    return Status::ok();
  }
  const size_t userCount = layers.size();
  layers.insert(layers.end(), boundary.begin(), boundary.end());
  std::string expr = layerExpression(layers);
  if (boundaryUnknown) expr = expr.empty() ? "first2+last2" : expr + "+first2+last2";
  if (expr.empty()) return Status::ok();
  r.key += ";" + expr + ":none";
  r.value += ";" + expr + ":none";
  if (userCount > 0) {
    std::string words;
    for (const std::string& w : listed) words += (words.empty() ? "" : ", ") + w;
    r.notes.push_back(std::string(kSkipFlag) + " " + words + ": those layers keep the model dtype (kv_cache_dtype "
                      "\"auto\"): a plan part LAYERS:none on K and V");
  }
  return Status::ok();
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
                  "fp8_e5m2, fp8_per_token_head, int8_per_token_head, int4_per_token_head, nvfp4, nvfp4_4over6, "
                  "turboquant_k8v4, turboquant_4bit_nc, turboquant_k3v4_nc, turboquant_3bit_nc)");
  }
  std::vector<int> boundary;
  bool boundaryUnknown = false;
  if (t.starts_with("turboquant_")) {
    // vllm/model_executor/layers/quantization/turboquant/config.py (commit 1471680b), TQ_PRESETS.
    const bool fp8Keys = t == "turboquant_k8v4";
    const int keyBits = t == "turboquant_4bit_nc" ? 4 : 3;
    const int valueBits = t == "turboquant_3bit_nc" ? 3 : 4;
    const int d = shape.headDim;
    if (!fp8Keys && d > 0 && !isPowerOfTwo(d)) {
      // backends/turboquant_attn.py _build_hadamard_cached doubles a Sylvester matrix until it
      // reaches D: for other D the rotation GEMM has the wrong shape.
      return refuse("--kv-cache-dtype " + t + ": the keys are rotated by the Sylvester Hadamard matrix, which "
                    "exists for power-of-two head dims only (D = " + std::to_string(d) +
                    "; turboquant_k8v4, whose fp8 keys are not rotated, works with any even D)");
    }
    if (d > 0 && (d % (valueBits == 3 ? 8 : 2)) != 0) {
      return refuse("--kv-cache-dtype " + t + ": " + std::to_string(valueBits) + "-bit values are packed " +
                    (valueBits == 3 ? "8 to 3 bytes, so D must be a multiple of 8" : "two to a byte, so D must be even") +
                    " (D = " + std::to_string(d) + ")");
    }
    const std::string value = "int" + std::to_string(valueBits) + ",codes=fp32,minscale=1e-08";
    r.key = fp8Keys ? "fp8_e4m3,unitscale" : "tqg" + std::to_string(keyBits) + ",rot=hadamard";
    r.value = value;
    r.notes.push_back(
        t + (fp8Keys ? std::string(": keys cast to fp8 e4m3 as they are, no scale (_tq_fused_store_fp8; Hopper's "
                                   "e4nv — on Ampere and Ada vLLM stores e4b15, which kvscope does not model)")
                     : ": keys as vLLM's TurboQuant-MSE (tqg" + std::to_string(keyBits) +
                           "): k/(‖k‖ + 1e-8) rotated by the normalized Sylvester Hadamard matrix (no signs), each "
                           "coordinate on vLLM's " + std::to_string(keyBits) +
                           "-bit Lloyd-Max codebook of N(0, 1/D) (a value on a midpoint takes the upper centroid), "
                           "norm correction (the codes renormalized to unit norm) and the norm stored as fp16"));
    r.notes.push_back("values: asymmetric int" + std::to_string(valueBits) +
                      " per token and kv head, s = max((max − min)/" + std::to_string((1 << valueBits) - 1) +
                      ", 1e-8), codes floor((x − min)/s + 0.5) from the fp32 s and min, both stored as fp16 "
                      "(codes=fp32; _store_quantized_value)");
    if (shape.layers > 0) {
      boundary = turboquantBoundary(shape.layers);
    } else {
      boundaryUnknown = true;
    }
    r.notes.push_back(
        "the first and last min(2, L/2) layers keep the model dtype (get_boundary_skip_layers, added to "
        "--kv-cache-dtype-skip-layers)" +
        (shape.layers > 0 ? ": layers " + (boundary.empty() ? std::string("none") : layerExpression(boundary)) +
                                " of " + std::to_string(shape.layers)
                          : std::string(": first2+last2 for 4 or more layers")) +
        "; kvscope assumes a dense model (vLLM disables this protection for hybrid attention + Mamba models)");
    if (f.calculateScales) f.notes.push_back("ignored --calculate-kv-scales: TurboQuant stores no k_scale/v_scale");
    if (!f.scheme.empty()) f.notes.push_back("ignored kv_cache_scheme=" + f.scheme + ": TurboQuant reads no k_scale/v_scale");
  }
  if (t == "nvfp4_4over6") {
    if (shape.headDim > 0 && shape.headDim % 16 != 0) {
      return refuse("--kv-cache-dtype nvfp4_4over6: \"head_size must be divisible by 16 for NVFP4 KV cache\" (D = " +
                    std::to_string(shape.headDim) + ")");
    }
    if (f.scheme == "attn_head") {
      return refuse("--kv-cache-dtype nvfp4_4over6 with kv_cache_scheme=attn_head: the nvfp4 cache reads one global "
                    "scale per layer (allowed: kv_cache_scheme=tensor)");
    }
    both(f.scheme.empty() ? "nvfp4,gscale=1,4over6" : "nvfp4,4over6");
    r.notes.push_back("nvfp4_4over6: the nvfp4 layout, and per block of 16 the e4m3 block scale of max/6 or of "
                      "max/4, whichever reconstructs with the smaller squared error (max/6 on a tie; "
                      "cvt_warp_fp16_to_fp4_4over6); global scale 1/k_scale, " +
                      std::string(f.scheme.empty() ? "k_scale = 1.0 without checkpoint scales"
                                                   : "k_scale from the checkpoint (kv_cache_scheme=" + f.scheme +
                                                         "): amax/(6·448) per layer tensor, calibrated on the dump's "
                                                         "tokens (assumed)"));
  }
  if (f.calculateScales && !t.starts_with("fp8") && !t.starts_with("turboquant_")) {
    f.notes.push_back("ignored --calculate-kv-scales: only the per-tensor fp8 types read k_scale/v_scale");
  }
  const bool perTensor = t == "fp8" || t == "fp8_e4m3" || t == "fp8_e5m2" || t == "nvfp4" || t == "nvfp4_4over6";
  if (!f.scheme.empty() && !perTensor && !t.starts_with("turboquant_")) {
    // vllm/model_executor/layers/quantization/kv_cache.py, process_weights_after_loading: the
    // per-token-head caches compute their own scales and an unquantized cache forces 1.0.
    f.notes.push_back("ignored kv_cache_scheme=" + f.scheme + ": --kv-cache-dtype " + t + " reads no checkpoint "
                      "k_scale/v_scale (process_weights_after_loading sets them to 1.0)");
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
    if (f.scheme.empty()) {
      both("nvfp4,gscale=1");
      r.notes.push_back("nvfp4: blocks of 16 channels with e4m3 block scales and global scale 1/k_scale, k_scale = "
                        "1.0 without checkpoint scales (reshape_and_cache_nvfp4_kernel); give kv_cache_scheme=tensor "
                        "for a checkpoint with calibrated NVFP4 KV scales");
    } else {
      both("nvfp4");
      r.notes.push_back("nvfp4 with kv_cache_scheme=" + f.scheme + ": the checkpoint's k_scale = amax/(6·448) per "
                        "layer tensor, and reshape_and_cache_nvfp4_kernel's global scale 1/k_scale puts each block's "
                        "e4m3 scale on amax/2688: the contract's nvfp4, calibrated on the dump's tokens (assumed)");
      if (f.scheme == "attn_head") {
        return refuse("--kv-cache-dtype nvfp4 with kv_cache_scheme=attn_head: the nvfp4 cache reads one global "
                      "scale per layer (allowed: kv_cache_scheme=tensor)");
      }
    }
  }
  KVS_RETURN_IF_ERROR(applySkips(r, f, shape, boundary, boundaryUnknown));
  r.notes.insert(r.notes.end(), f.notes.begin(), f.notes.end());
  return r;
}

std::string joinInts(const std::vector<int>& v, const char* sep) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
  return out;
}

/// The --kv-cache-dtype values a plan chooses from, resolved for the shape; "auto" (the model
/// dtype, what --kv-cache-dtype-skip-layers keeps) first. Dtypes the shape refuses are left out.
std::vector<EngineType> planTypes(const KvShape& shape, std::vector<std::string>* notes) {
  static constexpr std::string_view kDtypes[] = {
      "auto", "fp8", "fp8_e5m2", "fp8_per_token_head", "int8_per_token_head", "int4_per_token_head",
      "nvfp4", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc"};
  std::vector<EngineType> out;
  std::string leftOut;
  for (std::string_view d : kDtypes) {
    auto args = splitEngineString("vllm --kv-cache-dtype " + std::string(d));
    auto r = args ? resolveVllm(*args, shape) : Expected<ResolvedKv>(args.status());
    if (!r) {
      leftOut += (leftOut.empty() ? "" : ", ") + std::string(d);
      continue;
    }
    auto kp = parsePlan(r->key);
    auto vp = parsePlan(r->value);
    if (!kp || !vp || !isUniform(*kp) || !isUniform(*vp)) continue;
    out.push_back({std::string(d), toString(kp->base), toString(vp->base)});
  }
  if (notes && !leftOut.empty()) {
    notes->push_back("vLLM dtypes kvscope cannot model at this shape, left out: " + leftOut +
                     " (--engine \"vllm --kv-cache-dtype X\" --explain says why)");
  }
  return out;
}

/// One --kv-cache-dtype for K and V, some layers kept in the model dtype.
EngineFlags planFlags(const std::vector<std::string>& ks, const std::vector<std::string>& vs, const KvShape& shape) {
  EngineFlags f;
  f.engine = "vllm";
  const int L = static_cast<int>(ks.size());
  const std::vector<EngineType> types = planTypes(shape, nullptr);
  const EngineType* skip = nullptr;
  for (const EngineType& t : types) {
    if (t.name == "auto") skip = &t;
  }
  for (const EngineType& t : types) {
    if (!skip || t.name == "auto") continue;
    std::vector<int> skipped;
    bool ok = true;
    for (int l = 0; l < L && ok; ++l) {
      const auto i = static_cast<size_t>(l);
      if (ks[i] == t.key && vs[i] == t.value) continue;
      if (ks[i] == skip->key && vs[i] == skip->value) skipped.push_back(l);
      else ok = false;
    }
    if (!ok || static_cast<int>(skipped.size()) == L) continue;
    f.expressible = true;
    f.flags = "vllm serve MODEL --kv-cache-dtype " + t.name;
    if (!skipped.empty()) f.flags += " --kv-cache-dtype-skip-layers " + joinInts(skipped, " ");
    f.statement = skipped.empty() ? "every layer " + t.name
                                  : "layers " + joinInts(skipped, ",") + " keep the model dtype, the others " + t.name;
    return f;
  }
  if (skip && std::all_of(ks.begin(), ks.end(), [&](const std::string& x) { return x == skip->key; }) &&
      std::all_of(vs.begin(), vs.end(), [&](const std::string& x) { return x == skip->value; })) {
    f.expressible = true;
    f.flags = "vllm serve MODEL --kv-cache-dtype auto";
    f.statement = "every layer in the model dtype";
  } else {
    f.statement = "vLLM stores one --kv-cache-dtype for K and V on every layer but those of "
                  "--kv-cache-dtype-skip-layers (model dtype); this plan is not of that form";
  }
  return f;
}

constexpr std::array<ModelledOption, 8> kOptions{{
    {"--kv-cache-dtype", "the cache dtype (auto by default; also --kv-cache-dtype=X): what each stores is the vLLM "
                         "section of docs/engines.md"},
    {"--kv-cache-dtype-skip-layers", "N… | sliding_window: those layers keep the model dtype (a plan part LAYERS:none)"},
    {"--calculate-kv-scales", "vLLM before 0.26 only (vllm@0.25 and earlier): per-tensor fp8 scales max|x|/200 (K) and "
                              "/100 (V) from the first batch; K_SCALE_CONSTANT, V_SCALE_CONSTANT change them"},
    {"kv_cache_scheme=tensor|attn_head", "kvscope's word for a checkpoint with an llm-compressor kv_cache_scheme: "
                                         "per-tensor (per-head) scales; auto becomes fp8; nvfp4 reads amax/(6·448)"},
    {"int8_rounding=even|trunc", "kvscope's word: int8_per_token_head as after PR #45361 (even) or before it (trunc)"},
    {"sliding_window_layers=LIST", "kvscope's word: the layers --kv-cache-dtype-skip-layers sliding_window skips"},
    {"K_SCALE_CONSTANT, V_SCALE_CONSTANT", "environment, with --calculate-kv-scales (vllm@0.25 and earlier)"},
    {"other flags", "serve, the model, --max-model-len, …: ignored with a note"},
}};
constexpr std::array<std::string_view, 9> kRefusals{
    "a --kv-cache-dtype not in CacheDType; fp8_inc (Gaudi), fp8_ds_mla and nvfp4_ds_mla (MLA layouts), not modelled",
    "--calculate-kv-scales from 0.26 on (removed by PR #49389)",
    "fp8_e5m2 with a kv_cache_scheme checkpoint (\"fp8_e5m2 kv-cache is not supported with fp8 checkpoints\")",
    "nvfp4, nvfp4_4over6 with D not a multiple of 16 (\"head_size must be divisible by 16 for NVFP4 KV cache\")",
    "int4_per_token_head with D not a power of two (\"Requires power-of-2 dim, got D\")",
    "turboquant_4bit_nc, _k3v4_nc, _3bit_nc with D not a power of two; 4-bit values with an odd D, 3-bit values with "
    "D not a multiple of 8",
    "--kv-cache-dtype-skip-layers with a layer the dump does not have, or with sliding_window but no "
    "sliding_window_layers=",
    "kv_cache_scheme= other than tensor or attn_head; attn_head with nvfp4",
    "K_SCALE_CONSTANT, V_SCALE_CONSTANT that are not whole numbers > 0"};
constexpr std::array<EngineRelease, 3> kReleases{{
    {"main", "2026-08",
     "vllm-project/vllm vllm/config/cache.py 002f10e0 (CacheDType; no calculate_kv_scales), "
     "vllm/model_executor/layers/attention/attention.py 0014ca6b, triton_reshape_and_cache_flash.py 027e07f2, "
     "_per_token_head_kernel.py 8940d7db, int4_per_token_head.py 055e47c2, nvfp4_kv_cache_kernels.cu 5a5fc068 and "
     "0cd789b3, turboquant/config.py 1471680b, turboquant_attn.py and triton_turboquant_store.py 0135d081"},
    {"0.26", "2026-07", "the first release after PR #49389 (merged 2026-07-22), which removed --calculate-kv-scales: "
                        "fp8 scales come from the checkpoint, else 1.0 (the release is inferred from the dates)"},
    {"0.18", "2026-03", "--calculate-kv-scales deprecated by PR #37201 (2026-03-16) and still there: "
                        "Attention.calc_kv_scales, k_scale = max|k|/K_SCALE_CONSTANT (200), v_scale = max|v|/"
                        "V_SCALE_CONSTANT (100), vllm/envs.py"},
}};
constexpr std::array<EngineChange, 2> kChanges{{
    {"--calculate-kv-scales", "0.26", "removed by PR #49389 (merged 2026-07-22)",
     "fp8 scales come from the checkpoint (kvscope's word kv_cache_scheme=tensor or attn_head), else 1.0 (write "
     "nothing)"},
    {"--no-calculate-kv-scales", "0.26", "removed by PR #49389 (merged 2026-07-22)",
     "fp8 scales come from the checkpoint (kv_cache_scheme=), else 1.0: drop the flag"},
}};

}  // namespace

extern const EngineDef kVllmEngine;
constinit const EngineDef kVllmEngine{
    "vllm",
    {"vllm-serve"},
    "vLLM: --kv-cache-dtype with per-tensor, per-token-head, NVFP4 and TurboQuant caches, skipped layers and the "
    "checkpoint's scales",
    kVllmCacheDtypes,
    kOptions,
    kRefusals,
    kReleases,
    kChanges,
    resolveVllm,
    PlanShape::SkipLayers,
    "one --kv-cache-dtype for K and V, some layers kept in the model dtype (--kv-cache-dtype-skip-layers)",
    planTypes,
    planFlags};

}  // namespace kvscope
