// SPDX-License-Identifier: GPL-3.0-or-later
// Engine strings: an inference engine's own command line, e.g.
// "LLAMA_ATTN_ROT_DISABLE=1 llama.cpp -ctk q4_0 -ctv q8_0", resolved for a dump's shape to the
// K and V specs that engine would store (docs/engines.md). One table of engines; each engine
// lives in its own file (core/engine/<engine>.cpp) and adds one row.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/engine/presets.h"
#include "core/util/status.h"

namespace kvscope {

/// An engine string split into words (shell-like: whitespace separates, '…' and "…" quote).
struct EngineArgs {
  std::vector<std::pair<std::string, std::string>> env;  ///< NAME=VALUE words before the engine name
  std::string name;                                      ///< the engine name as written
  std::vector<std::string> words;                        ///< everything after the name
};

/// Splits an engine string; errors for an empty string or an unclosed quote.
Expected<EngineArgs> splitEngineString(std::string_view text);

/// One engine: its names and what its flags store.
struct EngineDef {
  std::string_view name;                  ///< the canonical name, e.g. "llama.cpp"
  /// Other names it answers to (its binaries); empty entries are unused. A fixed array keeps the
  /// rows constant-initialized, so the table is ready before any other static initializer runs.
  std::array<std::string_view, 4> aliases;
  std::string_view summary;               ///< the flags it models, for listings
  /// Resolves the engine's flags for `shape` (headDim 0: unknown, the rule is given in the notes).
  /// Refuses flags and values the engine itself would refuse, naming them and what is accepted.
  Expected<ResolvedKv> (*resolve)(const EngineArgs& args, const KvShape& shape);
};

/// Every engine, in the order listings show them.
std::span<const EngineDef* const> engineTable();
/// "llama.cpp": every engine's canonical name, for error messages.
std::string engineNameList();
/// The engine a name or alias denotes; nullptr when unknown.
const EngineDef* findEngine(std::string_view name);

/// Resolves an engine string for `shape`: the specs the engine stores and notes on each rule
/// applied and each flag ignored. Unknown engines are refused listing the known ones.
Expected<ResolvedKv> resolveEngine(std::string_view text, const KvShape& shape);

}  // namespace kvscope
