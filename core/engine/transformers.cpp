// SPDX-License-Identifier: GPL-3.0-or-later
// Hugging Face transformers: `cache_implementation="quantized"` with its cache_config, as
// src/transformers/cache_utils.py (`QuantizedLayer`, `QuantoQuantizedLayer`) and optimum-quanto
// store it (docs/engines.md names the files, functions and commits).
#include <array>
#include <cerrno>
#include <cstdlib>

#include "core/engine/engine.h"
#include "core/engine/engine_words.h"

namespace kvscope {

namespace {

constexpr std::string_view kExample =
    "transformers cache_implementation=quantized backend=quanto nbits=4 q_group_size=64 residual_length=128";
constexpr std::array<std::string_view, 4> kImplementations{"dynamic", "static", "offloaded", "quantized"};
constexpr std::array<std::string_view, 2> kBackends{"quanto", "HQQ"};
/// More tokens than any model's context window: a residual this long never fills.
constexpr long kLongestContext = 1L << 20;

Status refuse(const std::string& message) { return Status::invalidArgument("transformers: " + message); }

std::optional<long> wholeNumber(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE) return std::nullopt;  // no silent clamp to LONG_MAX
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
      if (!isOneOf(v, kBackends)) return refuse(o.shown + ": QuantizedCache's backends are quanto and HQQ");
      backend = v;
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
    if (residual > kLongestContext) {
      // Issue 33: accepted as transformers accepts it, but said: nothing after the prompt is quantized.
      r.notes.push_back("residual_length=" + std::to_string(residual) + " is longer than any context (2^20 tokens): "
                        "a generation with this cache keeps every decode-time token in full precision and "
                        "quantizes only the prompt");
    }
    if (!dtypeGiven) {
      r.notes.push_back("no dtype= given: the scales are stored in the model dtype, assumed bfloat16 (give "
                        "dtype=float16 for an fp16 model)");
    }
    r.notes.insert(r.notes.end(), ignored.begin(), ignored.end());
  };
  if (backend == "HQQ") {
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

}  // namespace

extern const EngineDef kTransformersEngine;
constinit const EngineDef kTransformersEngine{
    "transformers",
    {"hf", "huggingface"},
    "Hugging Face transformers: cache_implementation=quantized|dynamic|static|offloaded, backend=quanto|HQQ, "
    "nbits=2|4 (quanto), 1|2|3|4|8 (HQQ), q_group_size=G, residual_length=R, axis_key=0|-1 (HQQ: 0|1), "
    "axis_value=0|-1 (HQQ: 0|1), dtype=float16|bfloat16",
    resolveTransformers};

}  // namespace kvscope
