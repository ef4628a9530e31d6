// SPDX-License-Identifier: GPL-3.0-or-later
// One K/V setting as a user writes it: `--key PLAN --value PLAN`, `--preset NAME` or `--engine
// "ENGINE FLAGS"`, exactly one way. The CLI's commands and the GUI's launch (setting A, and
// setting B under the --compare-* flags) read it through these functions, so they accept the same
// things and say the same thing, in the flag names the user typed, when they refuse one.
#pragma once

#include <string>
#include <string_view>

#include "core/engine/presets.h"
#include "core/util/status.h"

namespace kvscope {

/// What the user gave; empty strings are flags not given.
struct SettingText {
  std::string key, value, preset, engine;
};

/// The flag names messages use: the plain ones, or the GUI's --compare-key and so on for B.
struct SettingFlags {
  std::string_view key = "--key", value = "--value", preset = "--preset", engine = "--engine";
};

enum class SettingWay { None, Plans, Preset, Engine };

/// The way a SettingText gives the setting, checked as far as it can be without a dump.
struct CheckedSetting {
  SettingWay way = SettingWay::None;
  KvPlans plans;  ///< the parsed --key/--value plans, for SettingWay::Plans
};

/// Checks `text` before a dump is open: at most one way, both halves of --key/--value, each plan
/// parsed, a preset name known, an engine string's flags accepted (resolved for an unknown
/// shape). Nothing given is SettingWay::None, not an error.
Expected<CheckedSetting> checkSetting(const SettingText& text, const SettingFlags& flags = {});

/// A setting resolved for a dump's shape.
struct ResolvedSetting {
  KvPlans plans;       ///< a plain spec is a one-part plan (quantization.md §12)
  ResolvedKv strings;  ///< the spec strings and notes as the preset or engine gave them; strings.query: what the engine rounds Q to
  std::string label;   ///< the preset name or engine string; empty for --key/--value
};

/// Resolves `text` for `shape` (presets and engines depend on it), every string parsed as a plan;
/// errors name the flag and what is allowed. Nothing given is an error listing the ways.
Expected<ResolvedSetting> resolveSetting(const SettingText& text, const KvShape& shape,
                                         const SettingFlags& flags = {});

}  // namespace kvscope
