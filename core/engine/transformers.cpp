// SPDX-License-Identifier: GPL-3.0-or-later
// Hugging Face transformers: `cache_implementation="quantized"` with its cache_config, as
// src/transformers/cache_utils.py (`QuantizedLayer`, `QuantoQuantizedLayer`) and optimum-quanto
// store it (docs/engines.md names the files, functions and commits).
#include <array>
#include <cstdlib>

#include "core/engine/engine.h"
#include "core/engine/engine_words.h"

namespace kvscope {

namespace {

constexpr std::string_view kExample =
    "transformers cache_implementation=quantized backend=quanto nbits=4 q_group_size=64 residual_length=128";
constexpr std::array<std::string_view, 4> kImplementations{"dynamic", "static", "offloaded", "quantized"};
// QuantizedCache's backends: "quanto" and "hqq" since the cache refactor (4.56, cache_utils.py
// QuantizedCache.__init__ at 004999d9); "quanto" and "HQQ" before it (QuantizedCacheConfig).
constexpr std::array<std::string_view, 3> kBackends{"quanto", "hqq", "HQQ"};
constexpr std::string_view kHqqLowerSince = "4.56";

Status refuse(const std::string& message) { return Status::invalidArgument("transformers: " + message); }

std::optional<long> wholeNumber(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

Expected<ResolvedKv> resolveTransformers(const EngineArgs& args, const KvShape& shape) {
  auto pairs = readConfigPairs("transformers", args.words, kExample);
  if (!pairs) return pairs.status();
  // QuantizedCacheConfig's defaults (cache_utils.py QuantizedLayer).
  std::string implementation = "dynamic", backend = "quanto", dtype = "bfloat16";
  long nbits = 4, groupSize = 64, residual = 128, axisKey = 0, axisValue = 0;
  bool dtypeGiven = false;
  ResolvedKv r;
  std::vector<std::string> ignored;
  for (const EngineOption& o : *pairs) {
    const std::string& v = *o.value;
    auto number = [&](long& into) -> Status {
      const auto n = wholeNumber(v);
      if (!n) return refuse(o.shown + ": " + o.name + " takes a whole number");
      into = *n;
      return Status::ok();
    };
    if (o.name == "cache_implementation") {
      if (!isOneOf(v, kImplementations)) {
        return refuse(o.shown + ": kvscope models cache_implementation " + joinNames(kImplementations) +
                      " (the sliding-window and hybrid caches evict tokens, which a dump cannot show)");
      }
      implementation = v;
    } else if (o.name == "backend") {
      if (!isOneOf(v, kBackends)) {
        return refuse(o.shown + ": QuantizedCache's backends are quanto and hqq (spelled HQQ before transformers " +
                      std::string(kHqqLowerSince) + ")");
      }
      if (v == "hqq" && !args.atLeast(kHqqLowerSince)) {
        return refuse(o.shown + ": transformers@" + args.version + " spells it backend=HQQ (QuantizedCacheConfig; "
                      "backend=hqq is the spelling from " + std::string(kHqqLowerSince) + " on)");
      }
      if (v == "HQQ") {
        ignored.push_back("backend=HQQ: the spelling of transformers before " + std::string(kHqqLowerSince) + "; " +
                          std::string(kHqqLowerSince) + " and later spell it hqq (QuantizedCache.__init__ raises "
                          "\"Unknown quantization backend `HQQ`\"); both mean HQQ");
      }
      backend = v == "HQQ" ? "hqq" : v;
    } else if (o.name == "nbits") {
      KVS_RETURN_IF_ERROR(number(nbits));
    } else if (o.name == "q_group_size") {
      KVS_RETURN_IF_ERROR(number(groupSize));
    } else if (o.name == "residual_length") {
      KVS_RETURN_IF_ERROR(number(residual));
    } else if (o.name == "axis_key") {
      KVS_RETURN_IF_ERROR(number(axisKey));
    } else if (o.name == "axis_value") {
      KVS_RETURN_IF_ERROR(number(axisValue));
    } else if (o.name == "dtype" || o.name == "torch_dtype") {
      if (v != "float16" && v != "bfloat16") {
        return refuse(o.shown + ": the model dtype is float16 or bfloat16 (the cache's scales are stored in it)");
      }
      dtype = v;
      dtypeGiven = true;
    } else {
      ignored.push_back("ignored " + o.shown + ": it does not change what the KV cache stores");
    }
  }
  if (implementation != "quantized") {
    r.key = r.value = "none";
    r.notes.push_back("cache_implementation=" + implementation +
                      ": the cache holds the model's K and V in the model dtype (none)");
    r.notes.insert(r.notes.end(), ignored.begin(), ignored.end());
    return r;
  }
  if (groupSize <= 0 || groupSize > 1'000'000) {
    return refuse("q_group_size must be a whole number from 1 to 1000000 (got " + std::to_string(groupSize) + ")");
  }
  if (residual < 0) return refuse("residual_length must be ≥ 0 (got " + std::to_string(residual) + ")");
  const std::string meta = dtype == "float16" ? "fp16" : "bf16";
  const std::string g = std::to_string(groupSize);
  auto prefillNotes = [&]() {
    r.notes.push_back("the prefill: QuantizedLayer.update quantizes the whole prompt at its first call and keeps no "
                      "residual, so residual_length=" + std::to_string(residual) +
                      " never protects prompt tokens; every dump token is quantized (the residual holds only "
                      "decode-time tokens, up to residual_length − 1 of them in full precision; transformers#35185 "
                      "reports Qwen2.5-7B scoring 0/120 with this)");
    r.notes.push_back("the prompt's own forward pass attends to the exact K/V; kvscope's metrics describe attention "
                      "over the cache from the first decode step on");
    if (!dtypeGiven) {
      r.notes.push_back("no dtype= given: the scales are stored in the model dtype, assumed bfloat16 (give "
                        "dtype=float16 for an fp16 model)");
    }
    r.notes.insert(r.notes.end(), ignored.begin(), ignored.end());
  };
  if (backend == "hqq") {
    // cache_utils.py HQQQuantizedLayer.__init__ (commit 004999d9): HQQ's own checks, in its words.
    if (nbits != 1 && nbits != 2 && nbits != 3 && nbits != 4 && nbits != 8) {
      return refuse("\"`nbits` for `HQQ` backend has to be one of [`1`, `2`, `3`, `4`, `8`] but got " +
                    std::to_string(nbits) + "\"");
    }
    if (axisKey != 0 && axisKey != 1) {
      return refuse("\"`axis_key` for `HQQ` backend has to be one of [`0`, `1`] but got " + std::to_string(axisKey) + "\"");
    }
    if (axisValue != 0 && axisValue != 1) {
      return refuse("\"`axis_value` for `HQQ` backend has to be one of [`0`, `1`] but got " + std::to_string(axisValue) +
                    "\"");
    }
    auto hqqSpec = [&](long axis) {
      return "hqq" + std::to_string(nbits) + (axis == 1 ? ",axis=token" : "") +
             (groupSize != 64 ? ",group=" + g : "") + ",scale=" + meta;
    };
    r.key = hqqSpec(axisKey);
    r.value = hqqSpec(axisValue);
    r.notes.push_back("HQQ int" + std::to_string(nbits) + " (HQQQuantizedLayer._quantize → Quantizer.quantize with "
                      "optimize=True, compute_dtype = the model dtype): groups of " + g +
                      (axisKey == 0 ? " values n/" + g + " apart in the flattened [heads, tokens, D] layer tensor "
                                      "(key axis 0: across heads and tokens)"
                                    : " consecutive values (key axis 1)") +
                      ", scale (2^b − 1)/(max − min) and zero −min·scale, then 20 rounds at most of HQQ's proximal "
                      "zero-point optimizer in fp16 (lp 0.7, beta 10; it stops when the mean error over the whole "
                      "tensor does not fall) → hqq (docs/formats.md)");
    r.notes.push_back("HQQ's groups and its stop rule span the whole layer tensor: the result depends on how many tokens "
                      "were quantized together (the whole prompt, here the whole dump); the layer tensor must hold a "
                      "multiple of q_group_size values");
    prefillNotes();
    return r;
  }
  // cache_utils.py QuantoQuantizedLayer.__init__: the checks quanto's layer makes.
  if (nbits != 2 && nbits != 4) {
    return refuse("\"`nbits` for `quanto` backend has to be one of [`2`, `4`] but got " + std::to_string(nbits) + "\"");
  }
  if (axisKey != 0 && axisKey != -1) {
    return refuse("\"`axis_key` for `quanto` backend has to be one of [`0`, `-1`] but got " + std::to_string(axisKey) + "\"");
  }
  if (axisValue != 0 && axisValue != -1) {
    return refuse("\"`axis_value` for `quanto` backend has to be one of [`0`, `-1`] but got " + std::to_string(axisValue) +
                  "\"");
  }
  if (shape.headDim > 0 && (axisKey == 0 || axisValue == 0) && shape.headDim % groupSize != 0) {
    return refuse("q_group_size=" + g + " with axis 0: quanto groups " + g +
                  " consecutive values of the flattened [heads, tokens, D] tensor, which for D = " +
                  std::to_string(shape.headDim) +
                  " straddle tokens; kvscope models axis-0 groups when D is a multiple of q_group_size");
  }
  auto spec = [&](long axis) {
    return "int" + std::to_string(nbits) + "," + (axis == -1 ? "axis=channel," : "") + "group=" + g +
           ",round=even,scale=" + meta;
  };
  // Canonical order puts round= before axis=; parseResolved prints the canonical form.
  r.key = spec(axisKey);
  r.value = spec(axisValue);
  r.notes.push_back("quanto int" + std::to_string(nbits) + ": asymmetric groups of " + g +
                    (axisKey == 0 ? " channels of one token (key axis 0)" : " tokens of one channel (key axis -1)") +
                    ", scale (max − min)/" + std::to_string((1 << nbits) - 1) +
                    " and shift −min in the model dtype, q = round-half-even((x + shift)/scale) (MaxOptimizer, "
                    "quantize_affine); quanto computes in the model dtype, kvscope in fp32");
  if (axisKey == -1 || axisValue == -1) {
    r.notes.push_back("axis -1: quanto's channel groups run over " + g +
                      " consecutive rows of the flattened [heads·tokens] tensor, which match kvscope's per-head runs "
                      "only when the token count is a multiple of " + g);
  }
  prefillNotes();
  return r;
}

constexpr std::array<ModelledOption, 8> kOptions{{
    {"cache_implementation=", "quantized|dynamic|static|offloaded (dynamic by default; only quantized changes what is "
                              "stored)"},
    {"backend=", "quanto|hqq (HQQ before transformers 4.56; both accepted without @VERSION)"},
    {"nbits=", "quanto 2, 4; HQQ 1, 2, 3, 4, 8"},
    {"q_group_size=", "the group size (64 by default)"},
    {"residual_length=", "the decode-time residual (128 by default): protects no prompt token"},
    {"axis_key=, axis_value=", "quanto 0, −1; HQQ 0, 1"},
    {"dtype=", "float16|bfloat16: the model dtype the scales are stored in (bfloat16 assumed)"},
    {"other pairs", "ignored with a note"},
}};
constexpr std::array<std::string_view, 6> kRefusals{
    "a cache_implementation other than quantized, dynamic, static, offloaded (sliding-window and hybrid caches evict "
    "tokens)",
    "a backend other than quanto, hqq, HQQ; hqq with @VERSION before 4.56, HQQ with @VERSION 4.56 or later",
    "nbits and axes the backend refuses, in its own words",
    "quanto axis-0 groups that straddle tokens (D not a multiple of q_group_size)",
    "q_group_size outside 1 … 1000000, a negative residual_length",
    "a word that is not a name=value pair"};
constexpr std::array<EngineRelease, 3> kReleases{{
    {"main", "2025-10",
     "huggingface/transformers src/transformers/cache_utils.py 004999d9 (QuantizedCache(backend='quanto'|'hqq'), "
     "HQQQuantizedLayer) and 67dd5524 (QuantizedLayer, QuantoQuantizedLayer); mobiusml/hqq e0b1d00e; "
     "huggingface/optimum-quanto e33f8202"},
    {"4.56", "2025-08", "the cache refactor: QuantizedCache(backend=…) takes quanto or hqq, HQQQuantizedCache and "
                        "QuantoQuantizedCache deprecated (removal announced for 4.59)"},
    {"4.42", "2024-06", "QuantizedCacheConfig(backend='quanto'|'HQQ'), the spelling of the releases before 4.56"},
}};
constexpr std::array<EngineChange, 1> kChanges{{
    {"backend=HQQ", "4.56", "renamed backend=hqq by the cache refactor (QuantizedCache.__init__ raises \"Unknown "
                            "quantization backend `HQQ`\")",
     "write backend=hqq", false},
}};

}  // namespace

extern const EngineDef kTransformersEngine;
constinit const EngineDef kTransformersEngine{
    "transformers",
    {"hf", "huggingface"},
    "Hugging Face transformers: cache_implementation=quantized with the quanto or HQQ backend",
    kImplementations,
    kOptions,
    kRefusals,
    kReleases,
    kChanges,
    resolveTransformers,
    PlanShape::Uniform,
    "one cache configuration for K and V on every layer (flags are not written)"};

}  // namespace kvscope
