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
// releases before fp4_mx_block16 and nvfp4 existed accept the first six.
constexpr std::array<std::string_view, 9> kSglangCacheDtypes{"auto",     "fp8_e5m2", "fp8_e4m3",
                                                             "bf16",     "bfloat16", "fp4_e2m1",
                                                             "fp4_mx_block16", "nvfp4", "mxfp8"};
constexpr std::array<std::string_view, 0> kNoSwitches{};

Status refuse(const std::string& message) { return Status::invalidArgument("sglang: " + message); }

Expected<ResolvedKv> resolveSglang(const EngineArgs& args, const KvShape&) {
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
    } else if (o.name == "--quantization-param-path") {
      if (!o.value) return refuse("--quantization-param-path needs a file (a JSON of per-layer KV scaling factors)");
      paramPath = *o.value;
    } else {
      ignored.push_back("ignored " + o.shown + ": it does not change what the KV cache stores");
    }
  }
  for (const std::string& p : positional) {
    ignored.push_back("ignored '" + p + "': it does not change what the KV cache stores");
  }
  if (dtype == "auto") {
    r.key = r.value = "none";
    r.notes.push_back("auto: the cache holds the model's K and V in the model dtype; the dump holds those values, so "
                      "kvscope copies them (none)");
  } else if (dtype == "bf16" || dtype == "bfloat16") {
    r.key = r.value = "bf16";
    r.notes.push_back(dtype + ": each element is stored as bf16");
  } else if (dtype == "fp4_e2m1" || dtype == "fp4_mx_block16") {
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
  } else if (dtype == "nvfp4" || dtype == "mxfp8") {
    return refuse("--kv-cache-dtype " + dtype + (dtype == "nvfp4" ? " (flashinfer's nvfp4_kv_quantize with a per-layer "
                                                                    "global scale from the checkpoint)"
                                                                  : " (the FA4 backend's MXFP8 cache)") +
                  " was not read from SGLang's code; kvscope models auto, bf16, bfloat16, fp8_e4m3, fp8_e5m2, "
                  "fp4_e2m1 and fp4_mx_block16");
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

}  // namespace

extern const EngineDef kSglangEngine;
constinit const EngineDef kSglangEngine{
    "sglang",
    {"sglang.launch_server"},
    "SGLang: --kv-cache-dtype auto|bf16|bfloat16|fp8_e4m3|fp8_e5m2|fp4_e2m1|fp4_mx_block16, "
    "--quantization-param-path",
    resolveSglang};

}  // namespace kvscope
