// SPDX-License-Identifier: GPL-3.0-or-later
// Engine strings: an inference engine's own command line, e.g.
// "LLAMA_ATTN_ROT_DISABLE=1 llama.cpp -ctk q4_0 -ctv q8_0" or "vllm@0.18 --kv-cache-dtype fp8", resolved
// for a dump's shape to the K and V specs that engine would store (docs/engines.md). One table of
// engines, one complete row per engine: its names, cache types, options and refusals, the
// releases it was read at, the options later releases removed, the plans its flags can express
// and how a plan becomes its flags. Each row lives in its own file (core/engine/<engine>.cpp).
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
  std::string name;                                      ///< the engine name as written, without @VERSION
  std::string version;                                   ///< "0.18" from "vllm@0.18"; empty = the newest read
  std::vector<std::string> words;                        ///< everything after the name

  /// Whether the release named (or, without one, the newest read) is `release` or later.
  [[nodiscard]] bool atLeast(std::string_view release) const;
};

/// Splits an engine string; errors for an empty string, an unclosed quote or a malformed @VERSION.
Expected<EngineArgs> splitEngineString(std::string_view text);

/// Compares release numbers "0.18" and "0.5.14" component by component (missing ones are 0):
/// negative, zero or positive.
int compareReleases(std::string_view a, std::string_view b);

/// What plans an engine's flags can express: which layers may differ.
enum class PlanShape {
  PerLayer,    ///< any spec on any layer, K and V apart (kvscope plans, quantization.md §12)
  Uniform,     ///< one spec for every layer, per side
  FirstLast,   ///< per side a base type, the first N and the last M layers overridden
  SkipLayers,  ///< one type for K and V together, some layers kept in the model dtype
};
/// "per-layer", "uniform", "first-last", "skip-layers".
const char* planShapeName(PlanShape shape);

/// One cache type an engine stores, as a plan search chooses it: its name on the engine's
/// command line and the canonical K and V specs it stores at a shape.
struct EngineType {
  std::string name;
  std::string key, value;
};

/// An engine's own flags for a plan, or why it cannot express it.
struct EngineFlags {
  std::string engine;      ///< the engine's canonical name
  bool expressible = false;
  std::string flags;       ///< the command-line words, when expressible
  std::string statement;   ///< for people: what the flags mean, or why there are none
};

/// A release (or commit) an engine's row was read at.
struct EngineRelease {
  std::string_view version;  ///< "0.26", or "main" for a commit between releases
  std::string_view date;     ///< "2026-07", as far as known
  std::string_view read;     ///< the files and commits read, or what the row takes from that release
};

/// An option or option value a release removed or renamed. `option` is a flag ("--calculate-kv-scales"),
/// a flag and its value ("--kv-cache-dtype fp4_e2m1") or a config pair ("backend=HQQ").
struct EngineChange {
  std::string_view option;
  std::string_view release;      ///< the first release without it
  std::string_view what;         ///< what changed, with the PR or commit
  std::string_view replacement;  ///< what to write instead
  /// true: refused from `release` on, also without @VERSION (the newest); false: a spelling the
  /// newest release refuses but kvscope accepts without @VERSION (the row's resolve says which
  /// releases spell it so), refused only when @VERSION names `release` or later.
  bool strict = true;
};

/// One option an engine string models, for listings.
struct ModelledOption {
  std::string_view name;     ///< "--kv-cache-dtype", "kv_cache_scheme=" (kvscope's own words are marked so)
  std::string_view meaning;  ///< its values and what they store
};

/// One engine: the complete row.
struct EngineDef {
  std::string_view name;                  ///< the canonical name, e.g. "llama.cpp"
  /// Other names it answers to (its binaries); empty entries are unused. A fixed array keeps the
  /// rows constant-initialized, so the table is ready before any other static initializer runs.
  std::array<std::string_view, 4> aliases;
  std::string_view summary;               ///< one line: the engine and what kvscope models of it
  std::span<const std::string_view> cacheTypes;  ///< the values of its cache-type option(s)
  std::span<const ModelledOption> options;         ///< the options modelled
  std::span<const std::string_view> refusals;    ///< what it refuses, in words
  std::span<const EngineRelease> releases;       ///< read at, newest first; releases.front() is the default
  std::span<const EngineChange> changes;         ///< options later releases removed or renamed
  /// Resolves the engine's flags for `shape` (headDim 0: unknown, the rule is given in the notes).
  /// Refuses flags and values the engine itself would refuse, naming them and what is accepted.
  Expected<ResolvedKv> (*resolve)(const EngineArgs& args, const KvShape& shape);
  PlanShape planShape = PlanShape::Uniform;  ///< the plans its flags express
  std::string_view planSummary;              ///< that shape in the engine's words
  /// The cache types a plan search chooses from at `shape` (nullptr: kvscope's candidates, no
  /// flags written); types the shape refuses are left out, named in `notes` when given. For
  /// PlanShape::SkipLayers the first type is what skipped layers keep.
  std::vector<EngineType> (*planTypes)(const KvShape& shape, std::vector<std::string>* notes) = nullptr;
  /// The engine's flags for a plan given as one canonical spec per layer and side (nullptr: none).
  EngineFlags (*planFlags)(const std::vector<std::string>& keys, const std::vector<std::string>& values,
                           const KvShape& shape) = nullptr;
};

/// Every engine, in the order listings show them.
std::span<const EngineDef* const> engineTable();
/// "llama.cpp, ik_llama.cpp, …": every engine's canonical name, for error messages.
std::string engineNameList();
/// The engine a name or alias denotes; nullptr when unknown.
const EngineDef* findEngine(std::string_view name);
/// The engines whose flags a plan search can write (planTypes set), in table order.
std::vector<const EngineDef*> planEngines();

/// Resolves an engine string for `shape`: the specs the engine stores and notes on each rule
/// applied and each flag ignored. Unknown engines are refused listing the known ones; options
/// the named release (or the newest read) removed are refused naming the release and the
/// replacement.
Expected<ResolvedKv> resolveEngine(std::string_view text, const KvShape& shape);

}  // namespace kvscope
