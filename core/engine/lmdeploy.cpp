// SPDX-License-Identifier: GPL-3.0-or-later
// LMDeploy: `--quant-policy` with `--backend turbomind|pytorch` and `--dtype`, as its two engines
// store the KV cache (TurboMind: src/turbomind/kernels/attention/quantization.h; PyTorch:
// lmdeploy/pytorch/kernels/cuda/fill_kv_cache.py; docs/engines.md names the lines and commit).
#include <array>

#include "core/engine/engine.h"
#include "core/engine/engine_words.h"

namespace kvscope {

namespace {

// lmdeploy/messages.py `QuantPolicy` (commit 1263d5cd): NONE 0, INT4 4, INT8 8, FP8 16,
// FP8_E5M2 17, TURBO_QUANT 42.
constexpr std::array<std::string_view, 6> kPolicies{"0", "4", "8", "16", "17", "42"};
constexpr std::array<std::string_view, 2> kBackends{"turbomind", "pytorch"};
constexpr std::array<std::string_view, 3> kDtypes{"auto", "float16", "bfloat16"};
constexpr std::array<std::string_view, 0> kNoSwitches{};

Status refuse(const std::string& message) { return Status::invalidArgument("lmdeploy: " + message); }

Expected<ResolvedKv> resolveLmdeploy(const EngineArgs& args, const KvShape&) {
  std::vector<std::string> positional;
  auto options = readDashOptions("lmdeploy", args.words, kNoSwitches, positional);
  if (!options) return options.status();
  std::string policy = "0", backend = "turbomind", dtype = "auto";
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
    ignored.push_back("ignored '" + p + "': it does not change what the KV cache stores");
  }
  const bool turbomind = backend == "turbomind";
  ResolvedKv r;
  if (policy == "16" || policy == "17") {
    if (turbomind) {
      return refuse("--quant-policy " + policy + " with the TurboMind backend: LMDeploy refuses it (\"invalid "
                    "quant_policy for TurboMind, FP8 quantization is not supported\")");
    }
    return refuse("--quant-policy " + policy + " (fp8 with a per-tensor scale, PyTorch engine): the scale's source "
                  "is not modelled yet; kvscope models --quant-policy 0, 4 and 8");
  }
  if (policy == "42") {
    if (turbomind) {
      return refuse("--quant-policy 42 (TurboQuant) exists only in the PyTorch engine (--backend pytorch)");
    }
    return refuse("--quant-policy 42 (TurboQuant: 4-bit keys with a residual sign bit, 2-bit values, Hadamard "
                  "rotation) needs the codebook formats of quantization.md §11, which this kvscope build does not "
                  "have; kvscope models --quant-policy 0, 4 and 8");
  }
  if (policy == "0") {
    r.key = r.value = "none";
    r.notes.push_back("--quant-policy 0: the cache holds the model's K and V in the model dtype (none)");
  } else {
    const std::string bits = policy;  // "4" or "8"
    const std::string meta = dtype == "float16" ? "fp16" : "bf16";
    if (dtype == "auto") {
      r.notes.push_back("--dtype auto: the metadata is stored in the model dtype, which the dump does not name; "
                        "kvscope assumes bf16 (give --dtype float16 for an fp16 model)");
    }
    if (turbomind) {
      r.key = r.value = "int" + bits + ",round=even,scale=" + meta;
      r.notes.push_back("TurboMind --quant-policy " + bits + ": asymmetric int" + bits +
                        " per token and kv head, scale (max − min)/" + (bits == "8" ? "255" : "15") +
                        " and zero = min stored in the model dtype, q = round-to-even((x − zero)·(1/scale)) "
                        "(warp_stats, quantize; cvt.rni); TurboMind does this arithmetic in the model dtype, kvscope "
                        "in fp32");
    } else {
      r.key = r.value = "int" + bits + ",scale=" + meta;
      r.notes.push_back("PyTorch engine --quant-policy " + bits + ": asymmetric int" + bits +
                        " per token and kv head (_quant_int" + bits +
                        "); equal in distribution only: LMDeploy rounds with the unrounded fp32 scale and a float "
                        "zero point −min/scale, then stores both in the model dtype, where kvscope rounds the scale "
                        "and min first");
    }
  }
  r.notes.insert(r.notes.end(), ignored.begin(), ignored.end());
  return r;
}

}  // namespace

extern const EngineDef kLmdeployEngine;
constinit const EngineDef kLmdeployEngine{
    "lmdeploy",
    {},
    "LMDeploy: --quant-policy 0|4|8, --backend turbomind|pytorch, --dtype auto|float16|bfloat16",
    resolveLmdeploy};

}  // namespace kvscope
