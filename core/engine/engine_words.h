// SPDX-License-Identifier: GPL-3.0-or-later
// Reading an engine string's words the two ways the engines of issue 20 take options:
// argparse-style flags ("--kv-cache-dtype fp8", "--kv-cache-dtype=fp8", vLLM, SGLang, LMDeploy)
// and config-style name=value pairs ("kv_cache_dtype=fp8", TensorRT-LLM's and transformers'
// configuration objects). Shared by core/engine/{vllm,sglang,lmdeploy,transformers,trtllm}.cpp.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/status.h"

namespace kvscope {

/// One option as written.
struct EngineOption {
  std::string name;                  ///< "--kv-cache-dtype" or "kv_cache_dtype"
  std::optional<std::string> value;  ///< absent for a switch
  std::string shown;                 ///< how it was written, for notes and errors
};

/// argparse-style words: "--name value" and "--name=value"; names in `switches` take no value
/// (a following word is not theirs); a flag's value is the next word unless that word starts
/// with "--". Words that are not flags are returned in `positional`. `engine` prefixes errors.
Expected<std::vector<EngineOption>> readDashOptions(std::string_view engine, const std::vector<std::string>& words,
                                                    std::span<const std::string_view> switches,
                                                    std::vector<std::string>& positional);

/// Config-style words "name=value"; a word without '=' is refused naming `example`.
Expected<std::vector<EngineOption>> readConfigPairs(std::string_view engine, const std::vector<std::string>& words,
                                                    std::string_view example);

/// "a, b, c" from a list of names.
std::string joinNames(std::span<const std::string_view> names);

/// True when `name` is in `names`.
bool isOneOf(std::string_view name, std::span<const std::string_view> names);

}  // namespace kvscope
