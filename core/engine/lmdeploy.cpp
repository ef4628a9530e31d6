// SPDX-License-Identifier: GPL-3.0-or-later
// LMDeploy: `--quant-policy` with `--backend turbomind|pytorch` and `--dtype`, as its two engines
// store the KV cache (TurboMind: src/turbomind/kernels/attention/quantization.h; PyTorch:
// lmdeploy/pytorch/kernels/cuda/fill_kv_cache.py; docs/engines.md names the lines and commit).
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

Status refuse(const std::string& message) { return Status::invalidArgument("lmdeploy: " + message); }

Expected<ResolvedKv> resolveLmdeploy(const EngineArgs& args, const KvShape& shape) {
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
  const std::string meta = dtype == "float16" ? "fp16" : "bf16";
  if (dtype == "auto" && policy != "0") {
    r.notes.push_back("--dtype auto: the metadata is stored in the model dtype, which the dump does not name; "
                      "kvscope assumes bf16 (give --dtype float16 for an fp16 model)");
  }
  if (policy == "42") {
    if (turbomind) {
      return refuse("--quant-policy 42 (TurboQuant) exists only in the PyTorch engine (--backend pytorch)");
    }
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
    r.notes.insert(r.notes.end(), ignored.begin(), ignored.end());
    return r;
  }
  if (policy == "0") {
    r.key = r.value = "none";
    r.notes.push_back("--quant-policy 0: the cache holds the model's K and V in the model dtype (none)");
  } else {
    const std::string bits = policy;  // "4" or "8"
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
    "LMDeploy: --quant-policy 0|4|8|42 (or none|int4|int8|turbo_quant), --backend turbomind|pytorch, "
    "--dtype auto|float16|bfloat16",
    resolveLmdeploy};

}  // namespace kvscope
