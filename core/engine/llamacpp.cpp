// SPDX-License-Identifier: GPL-3.0-or-later
// llama.cpp: its cache types and rotation rule, and its command line as an engine string.
// Read from ggml-org/llama.cpp (docs/engines.md names the files, functions and commit).
#include "core/engine/llamacpp.h"

#include <array>
#include <cctype>
#include <cstdlib>
#include <optional>

#include "core/engine/engine.h"

namespace kvscope {

namespace {

// common/arg.cpp, `kv_cache_types`, in its order (the order llama.cpp's own help lists them).
constexpr std::array<std::string_view, 9> kCacheTypes{"f32",  "f16",    "bf16", "q8_0", "q4_0",
                                                     "q4_1", "iq4_nl", "q5_0", "q5_1"};

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
    // "-ctk=q4_0" as "--cache-type-k=q4_0": both spellings are read (issue 33: the short one was
    // ignored, so every figure was fp16), and both get the note below.
    if (flag.rfind("-", 0) == 0) {
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
        // common/arg.cpp, common_params_parse_ex: argv[i] is looked up whole, so llama.cpp itself
        // stops at "error: invalid argument: -ctk=q4_0"; its value is the next word.
        f.notes.push_back(w[i] + ": read as " + flag + " " + value + "; llama.cpp itself refuses the '=' spelling "
                          "(\"error: invalid argument: " + w[i] + "\"), write " + flag + " " + value + " on its command line");
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
  if (shape.headDim <= 0) {
    // No dump yet: the flags are valid; what they store depends on D.
    r.key = flags->typeK;
    r.value = flags->typeV;
    r.notes.push_back("the rotation depends on the dump's head dim D (quantized types with D % 64 = 0 are rotated)");
    return r;
  }
  const LlamacppTensor k = llamacppTensor(flags->typeK, true, shape.headDim, flags->rotationDisabled);
  const LlamacppTensor v = llamacppTensor(flags->typeV, false, shape.headDim, flags->rotationDisabled);
  r.key = k.spec;
  r.value = v.spec;
  r.notes.insert(r.notes.begin(), {k.note, v.note});
  return r;
}

}  // namespace

extern const EngineDef kLlamacppEngine;
constinit const EngineDef kLlamacppEngine{
    "llama.cpp",
    {"llama-server", "llama-cli"},
    "llama.cpp (llama-server, llama-cli): -ctk/--cache-type-k, -ctv/--cache-type-v, -fa/--flash-attn, "
    "LLAMA_ATTN_ROT_DISABLE=1",
    resolveLlamacpp};

}  // namespace kvscope
