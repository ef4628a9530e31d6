// SPDX-License-Identifier: GPL-3.0-or-later
// llama.cpp: its cache types and rotation rule, and its command line as an engine string.
// Read from ggml-org/llama.cpp (docs/engines.md names the files, functions and commit).
#include "core/engine/llamacpp.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <optional>

#include "core/engine/engine.h"
#include "core/quant/spec.h"

namespace kvscope {

// common/arg.cpp, `kv_cache_types`, in its order (the order llama.cpp's own help lists them).
constinit const std::array<std::string_view, 9> kLlamacppCacheTypes{"f32",  "f16",    "bf16", "q8_0", "q4_0",
                                                                    "q4_1", "iq4_nl", "q5_0", "q5_1"};

namespace {

constexpr const std::array<std::string_view, 9>& kCacheTypes = kLlamacppCacheTypes;

/// The largest power of two dividing d (d > 0): what build_input_k_rot's doubling loop finds.
int largestPowerOfTwoDividing(int d) { return d & -d; }

}  // namespace

std::span<const std::string_view> llamacppCacheTypes() { return kCacheTypes; }

std::string llamacppCacheTypeList() {
  std::string out;
  for (std::string_view t : kCacheTypes) {
    if (!out.empty()) out += ", ";
    out += t;
  }
  return out;
}

bool isLlamacppCacheType(std::string_view type) {
  for (std::string_view t : kCacheTypes) {
    if (t == type) return true;
  }
  return false;
}

bool isLlamacppQuantized(std::string_view type) {
  return isLlamacppCacheType(type) && type != "f32" && type != "f16" && type != "bf16";
}

LlamacppTensor llamacppTensor(std::string_view type, bool isKey, int headDim, bool rotationDisabled) {
  const std::string side = isKey ? "K" : "V";
  const std::string t(type);
  const std::string d = std::to_string(headDim);
  // The unquantized types map to kvscope's exact formats: f32 holds the dump's values as they
  // are (fp32: 4 bytes each, as llama.cpp allocates them), f16 and bf16 round each element.
  if (!isLlamacppQuantized(type)) {
    const std::string spec = type == "f32" ? "fp32" : type == "bf16" ? "bf16" : "fp16";
    return {spec, side + ": " + t + " is not a quantized type: stored as " + spec + ", not rotated"};
  }
  if (rotationDisabled) {
    return {t, side + ": rotation off (LLAMA_ATTN_ROT_DISABLE=1, or a build before PR #21038): " + t +
                   " blocks as they are"};
  }
  if (headDim % 64 != 0) {
    return {t, side + ": D = " + d + " is not a multiple of 64: llama.cpp does not rotate"};
  }
  // Keys: the largest power of two dividing D (build_input_k_rot); values: 64 (build_input_v_rot).
  const int n = isKey ? largestPowerOfTwoDividing(headDim) : 64;
  const std::string ns = std::to_string(n);
  std::string why = side + ": " + t + " is quantized and D = " + d + " is a multiple of 64: llama.cpp rotates ";
  why += isKey ? "Q and K by H_" + ns + " (the largest power of two dividing D)"
               : "V by H_" + ns + " blocks (always 64 for values) and rotates the attention output back";
  return {t + ",rot=hadamard:" + ns, why};
}

int llamacppBlockSize(std::string_view type) { return isLlamacppQuantized(type) ? 32 : 1; }

Status llamacppCheckBlocks(std::string_view typeK, std::string_view typeV, int headDim, std::string_view who) {
  if (headDim <= 0) return Status::ok();
  // src/llama-context.cpp (001d906a), llama_init_from_model: with flash attention not disabled,
  // each layer's head dim must be a multiple of the K (and V) type's ggml_blck_size. With -fa off
  // the check is skipped, but a head's K row then holds no whole block either.
  for (const bool isKey : {true, false}) {
    const std::string_view type = isKey ? typeK : typeV;
    const int block = llamacppBlockSize(type);
    if (headDim % block == 0) continue;
    const std::string side = isKey ? "K" : "V";
    const std::string d = std::to_string(headDim);
    return Status::invalidArgument(
        std::string(who) + ": " + (isKey ? "-ctk " : "-ctv ") + std::string(type) + " with D = " + d +
        ": llama.cpp refuses it (\"" + side + " cache type " + std::string(type) + " with block size " +
        std::to_string(block) + " does not divide n_embd_head_" + (isKey ? "k" : "v") + "=" + d +
        "\", src/llama-context.cpp llama_init_from_model): a quantized cache type needs D to be a multiple of " +
        std::to_string(block) + " (allowed at D = " + d + ": f32, f16, bf16)");
  }
  return Status::ok();
}

std::string llamacppQuerySpec(std::string_view typeK, bool flashAttention, std::string& note) {
  // ggml/src/ggml-cpu/ggml-cpu.c (ggml-org/ggml d99724f2), type_traits_cpu[]: vec_dot_type is Q8_0
  // for q8_0, q4_0, q5_0 and iq4_nl, Q8_1 for q4_1 and q5_1, F16 for f16, BF16 for bf16, F32 for
  // f32. ops.cpp ggml_compute_forward_flash_attn_ext_f16_one_chunk converts each Q row with
  // type_traits_cpu[k_vec_dot_type].from_float before kq_vec_dot; ggml_compute_forward_mul_mat
  // converts src1 (Q) to src0's (K's) vec_dot_type the same way when flash attention is off.
  const std::string t(typeK);
  const std::string when = flashAttention ? "the CPU flash-attention kernel (ggml_compute_forward_flash_attn_ext_f16)"
                                          : "the CPU matrix multiply K·Q (ggml_compute_forward_mul_mat)";
  if (t == "q8_0" || t == "q4_0" || t == "q5_0" || t == "iq4_nl") {
    note = "Q: " + when + " quantizes each query to K's dot-product type q8_0 (blocks of 32, after the rotation K "
           "gets) before the scores";
    return "q8_0";
  }
  if (t == "q4_1" || t == "q5_1") {
    note = "Q: " + when + " quantizes each query to K's dot-product type q8_1 before the scores; kvscope has no q8_1 "
           "and uses q8_0, whose scale and codes q8_1's are (quantize_row_q8_1_ref: the same d = max|x|/127 as fp16 "
           "and the same roundf codes); q8_1 adds s = fp16(d·Σq) with the fp32 d, which the dot product uses for "
           "K's minimum term (m·s) where q8_0 values give m·Σ fp16(d)·q: equal up to that fp16 rounding";
    return "q8_0";
  }
  if (t == "bf16") {
    note = "Q: " + when + " rounds each query to bf16 (K's dot-product type) before the scores";
    return "bf16";
  }
  if (t == "f16" || (t == "f32" && flashAttention)) {
    note = t == "f32" ? "Q: with flash attention llama.cpp casts an f32 cache to f16 inside attention "
                        "(src/llama-graph.cpp build_attn_mha) and the kernel rounds each query to f16; K and V are "
                        "read as f16 too, which kvscope's fp32 spec does not model"
                      : "Q: " + when + " rounds each query to f16 (K's dot-product type) before the scores; "
                        "prompt batches of 64 or more rows with f16 K and V take the tiled kernel "
                        "(ggml_compute_forward_flash_attn_ext_tiled), which keeps Q in f32";
    return "fp16";
  }
  note = "Q: an f32 cache without flash attention: the scores use Q as it is (vec_dot_type f32)";
  return "";
}

std::vector<EngineType> llamacppPlanTypes(const KvShape& shape, bool rotationDisabled, std::vector<std::string>* notes) {
  std::vector<EngineType> out;
  std::string leftOut;
  auto canonical = [](const std::string& spec) {
    auto s = parseSpec(spec);
    return s ? toString(*s) : spec;
  };
  for (std::string_view t : llamacppCacheTypes()) {
    if (t == "f32") continue;
    if (shape.headDim > 0 && shape.headDim % llamacppBlockSize(t) != 0) {
      leftOut += (leftOut.empty() ? "" : ", ") + std::string(t);
      continue;
    }
    out.push_back({std::string(t), canonical(llamacppTensor(t, true, shape.headDim, rotationDisabled).spec),
                   canonical(llamacppTensor(t, false, shape.headDim, rotationDisabled).spec)});
  }
  if (notes != nullptr && !leftOut.empty()) {
    notes->push_back("cache types the head dim D = " + std::to_string(shape.headDim) + " refuses, left out: " + leftOut +
                     " (block size 32 does not divide D)");
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The `llama.cpp` engine string: llama-server / llama-cli flags as common/arg.cpp parses them.

namespace {

enum class FlashAttn { Auto, On, Off };

std::optional<FlashAttn> parseFlashAttn(std::string_view v) {
  // common/arg.cpp, -fa/--flash-attn: on|enabled|1, off|disabled|0, auto|-1.
  if (v == "on" || v == "enabled" || v == "1") return FlashAttn::On;
  if (v == "off" || v == "disabled" || v == "0") return FlashAttn::Off;
  if (v == "auto" || v == "-1") return FlashAttn::Auto;
  return std::nullopt;
}

bool looksLikeNumber(std::string_view s) {
  if (s.empty()) return false;
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  bool digit = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      digit = true;
    } else if (c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+') {
      return false;
    }
  }
  return digit;
}

/// atoi as llama.cpp applies it to LLAMA_ATTN_ROT_DISABLE; nullopt when the text is not an integer
/// (atoi would read it as 0, which a user writing "true" would not expect: refused instead).
std::optional<long> integerValue(std::string_view s) {
  if (s.empty()) return std::nullopt;
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t j = i; j < s.size(); ++j) {
    if (std::isdigit(static_cast<unsigned char>(s[j])) == 0) return std::nullopt;
  }
  return std::strtol(std::string(s).c_str(), nullptr, 10);
}

Status refuse(std::string message) { return Status::invalidArgument("llama.cpp: " + std::move(message)); }

/// `given` is how the user wrote it: "--cache-type-k q3_K" or "LLAMA_ARG_CACHE_TYPE_K=q3_K".
Status badCacheType(const std::string& given) {
  return refuse(given + " is not a KV cache type llama.cpp accepts (it accepts " + llamacppCacheTypeList() + ")");
}

struct LlamacppFlags {
  std::string typeK = "f16";  // common/common.h: cache_type_k / cache_type_v default to f16
  std::string typeV = "f16";
  FlashAttn flashAttn = FlashAttn::Auto;
  bool rotationDisabled = false;
  std::vector<std::string> notes;
};

Expected<LlamacppFlags> parseLlamacppFlags(const EngineArgs& args) {
  LlamacppFlags f;
  bool fromFlagK = false, fromFlagV = false, fromFlagFa = false;
  // Environment first: llama.cpp reads LLAMA_ARG_* only for options the command line leaves unset.
  for (const auto& [name, value] : args.env) {
    if (name == "LLAMA_ATTN_ROT_DISABLE") {
      const auto v = integerValue(value);
      if (!v) {
        return refuse("LLAMA_ATTN_ROT_DISABLE=" + value +
                      ": llama.cpp reads it with atoi, so only an integer means anything (1 disables the "
                      "rotation, 0 keeps it)");
      }
      f.rotationDisabled = *v != 0;
    } else if (name == "LLAMA_ARG_CACHE_TYPE_K" || name == "LLAMA_ARG_CACHE_TYPE_V") {
      const bool k = name == "LLAMA_ARG_CACHE_TYPE_K";
      if (!isLlamacppCacheType(value)) return badCacheType(name + "=" + value);
      (k ? f.typeK : f.typeV) = value;
    } else if (name == "LLAMA_ARG_FLASH_ATTN") {
      const auto fa = parseFlashAttn(value);
      if (!fa) return refuse(name + "=" + value + ": llama.cpp accepts on, off or auto (also enabled, disabled, 1, 0, -1)");
      f.flashAttn = *fa;
    } else {
      f.notes.push_back("ignored " + name + "=" + value + ": it does not change what the KV cache stores");
    }
  }
  const std::vector<std::string>& w = args.words;
  for (size_t i = 0; i < w.size(); ++i) {
    std::string flag = w[i];
    std::optional<std::string> inlineValue;
    if (flag.rfind("--", 0) == 0) {
      const auto eq = flag.find('=');
      if (eq != std::string::npos) {
        inlineValue = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
      }
    }
    const bool isK = flag == "-ctk" || flag == "--cache-type-k";
    const bool isV = flag == "-ctv" || flag == "--cache-type-v";
    const bool isFa = flag == "-fa" || flag == "--flash-attn";
    if (isK || isV || isFa) {
      std::string value;
      if (inlineValue) {
        value = *inlineValue;
      } else if (i + 1 < w.size()) {
        value = w[++i];
      } else {
        return refuse(flag + " needs a value (" +
                      (isFa ? std::string("on, off or auto") : "one of " + llamacppCacheTypeList()) + ")");
      }
      if (isFa) {
        const auto fa = parseFlashAttn(value);
        if (!fa) {
          return refuse(flag + " " + value +
                        ": llama.cpp accepts on, off or auto (also enabled, disabled, 1, 0, -1)");
        }
        if (fromFlagFa) f.notes.push_back(flag + " given twice: the last one counts, as in llama.cpp");
        f.flashAttn = *fa;
        fromFlagFa = true;
        continue;
      }
      if (!isLlamacppCacheType(value)) return badCacheType(flag + " " + value);
      bool& seen = isK ? fromFlagK : fromFlagV;
      if (seen) f.notes.push_back(flag + " given twice: the last one counts, as in llama.cpp");
      seen = true;
      (isK ? f.typeK : f.typeV) = value;
      continue;
    }
    if (flag.empty() || flag[0] != '-' || looksLikeNumber(flag)) {
      return refuse("'" + w[i] + "' is not a flag (engine strings look like \"llama.cpp -ctk q4_0 -ctv q8_0\")");
    }
    // Any other flag (model, context size, offload, threads, sampling, …) changes where or how
    // fast the cache is used, not what it stores. Its value, if it has one, is the next word
    // that is not itself a flag.
    std::string shown = w[i];
    if (!inlineValue && i + 1 < w.size() && (w[i + 1].empty() || w[i + 1][0] != '-' || looksLikeNumber(w[i + 1]))) {
      shown += " " + w[++i];
    }
    f.notes.push_back("ignored " + shown + ": it does not change what the KV cache stores");
  }
  if (f.flashAttn == FlashAttn::Off && isLlamacppQuantized(f.typeV)) {
    // src/llama-context.cpp, llama_init_from_model: a quantized V cache needs flash attention.
    return refuse("--cache-type-v " + f.typeV +
                  " with flash attention off: llama.cpp refuses a quantized V cache without flash attention "
                  "(\"quantized V cache requires flash_attn to be enabled\"); use -fa on or auto");
  }
  if (f.flashAttn == FlashAttn::Auto && isLlamacppQuantized(f.typeV)) {
    f.notes.push_back("flash attention is auto: llama.cpp turns it on for a quantized V cache");
  }
  return f;
}

Expected<ResolvedKv> resolveLlamacpp(const EngineArgs& args, const KvShape& shape) {
  auto flags = parseLlamacppFlags(args);
  if (!flags) return flags.status();
  ResolvedKv r;
  r.notes = flags->notes;
  std::string queryNote;
  r.query = llamacppQuerySpec(flags->typeK, flags->flashAttn != FlashAttn::Off, queryNote);
  if (!r.query.empty()) queryNote += " (e2e applies it; eval keeps Q exact)";
  if (shape.headDim <= 0) {
    // No dump yet: the flags are valid; what they store depends on D.
    r.key = flags->typeK;
    r.value = flags->typeV;
    r.notes.push_back("the rotation depends on the dump's head dim D (quantized types with D % 64 = 0 are rotated)");
    r.notes.push_back(queryNote);
    return r;
  }
  KVS_RETURN_IF_ERROR(llamacppCheckBlocks(flags->typeK, flags->typeV, shape.headDim, "llama.cpp"));
  const LlamacppTensor k = llamacppTensor(flags->typeK, true, shape.headDim, flags->rotationDisabled);
  const LlamacppTensor v = llamacppTensor(flags->typeV, false, shape.headDim, flags->rotationDisabled);
  r.key = k.spec;
  r.value = v.spec;
  // Q is rotated as K is (llm_graph_context::build_attn) before the kernel converts it, so the
  // conversion happens in the rotated basis: the query spec carries K's rotation.
  if (const auto rot = k.spec.find(",rot="); !r.query.empty() && rot != std::string::npos) r.query += k.spec.substr(rot);
  r.notes.insert(r.notes.begin(), {k.note, v.note});
  r.notes.push_back(queryNote);
  return r;
}

std::vector<EngineType> planTypes(const KvShape& shape, std::vector<std::string>* notes) {
  return llamacppPlanTypes(shape, false, notes);
}

/// One -ctk and one -ctv for every layer; the unrotated types with LLAMA_ATTN_ROT_DISABLE=1.
EngineFlags planFlags(const std::vector<std::string>& ks, const std::vector<std::string>& vs, const KvShape& shape) {
  EngineFlags f;
  f.engine = "llama.cpp";
  const bool uniform = !ks.empty() && std::all_of(ks.begin(), ks.end(), [&](const std::string& s) { return s == ks.front(); }) &&
                       std::all_of(vs.begin(), vs.end(), [&](const std::string& s) { return s == vs.front(); });
  if (!uniform) {
    f.statement = "llama.cpp has no per-layer cache types (one -ctk and one -ctv for every layer); "
                  "search with --engine llama.cpp for the best uniform setting";
    return f;
  }
  for (bool norot : {false, true}) {
    std::string tk, tv;
    for (const EngineType& t : llamacppPlanTypes(shape, norot, nullptr)) {
      if (tk.empty() && t.key == ks.front()) tk = t.name;
      if (tv.empty() && t.value == vs.front()) tv = t.name;
    }
    if (!tk.empty() && !tv.empty()) {
      f.expressible = true;
      f.flags = std::string(norot ? "LLAMA_ATTN_ROT_DISABLE=1 " : "") + "llama.cpp -ctk " + tk + " -ctv " + tv;
      f.statement = "every layer: K " + tk + ", V " + tv;
      return f;
    }
  }
  f.statement = "K " + ks.front() + " / V " + vs.front() + " is not a pair of llama.cpp cache types at this head dim";
  return f;
}

constexpr std::array<ModelledOption, 5> kOptions{{
    {"-ctk, --cache-type-k", "the K cache type (f16 by default); also --cache-type-k=TYPE and LLAMA_ARG_CACHE_TYPE_K"},
    {"-ctv, --cache-type-v", "the V cache type (f16 by default); also --cache-type-v=TYPE and LLAMA_ARG_CACHE_TYPE_V"},
    {"-fa, --flash-attn", "on|off|auto (also enabled, disabled, 1, 0, -1; LLAMA_ARG_FLASH_ATTN): a quantized V needs "
                          "it; it decides what the CPU attention rounds Q to"},
    {"LLAMA_ATTN_ROT_DISABLE", "environment: a non-zero integer turns the Hadamard rotation of quantized caches off"},
    {"other flags", "-m, -c, -ngl, threads, sampling, …: ignored with a note (they do not change what the cache stores)"},
}};
constexpr std::array<std::string_view, 4> kRefusals{
    "a cache type not in kv_cache_types (\"… is not a KV cache type llama.cpp accepts\")",
    "a quantized -ctv with -fa off (\"quantized V cache requires flash_attn to be enabled\")",
    "a quantized K or V type whose block size 32 does not divide D (\"K cache type q8_0 with block size 32 does "
    "not divide n_embd_head_k=8\")",
    "LLAMA_ATTN_ROT_DISABLE that is not an integer (llama.cpp reads it with atoi)"};
constexpr std::array<EngineRelease, 1> kReleases{{
    {"main", "2026-09",
     "ggml-org/llama.cpp src/llama-kv-cache.cpp after PR #21038 (744c0c73), common/arg.cpp, src/llama-context.cpp "
     "llama_init_from_model (001d906a), src/llama-graph.cpp build_attn_mha; ggml-org/ggml d99724f2 "
     "src/ggml-cpu/ops.cpp, ggml-cpu.c, ggml-quants.c; confirmed on the build node-llama-cpp 3.21.1 bundles "
     "(2026-09-12)"},
}};

}  // namespace

extern const EngineDef kLlamacppEngine;
constinit const EngineDef kLlamacppEngine{
    "llama.cpp",
    {"llama-server", "llama-cli"},
    "llama.cpp (llama-server, llama-cli): ggml cache types, rotated by Hadamard matrices when quantized and D % 64 = 0",
    kCacheTypes,
    kOptions,
    kRefusals,
    kReleases,
    {},
    resolveLlamacpp,
    PlanShape::Uniform,
    "one -ctk and one -ctv for every layer",
    planTypes,
    planFlags};

}  // namespace kvscope
