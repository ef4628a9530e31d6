// SPDX-License-Identifier: GPL-3.0-or-later
// Named K/V settings that approximate published systems (quantization.md §9), in one table
// read by the CLI (`--preset`, `presets`), the GUI and the tests.
#pragma once

#include <span>
#include <string_view>
#include <utility>

#include "core/quant/spec.h"
#include "core/util/status.h"

namespace kvscope {

/// One row of the preset table.
struct Preset {
  std::string_view name;         ///< e.g. "kivi-2"
  std::string_view keySpec;      ///< spec string for keys, as §9 writes it
  std::string_view valueSpec;    ///< spec string for values
  std::string_view description;  ///< the system it approximates and how
};

/// All presets, in the order §9 lists them.
std::span<const Preset> presetTable();
/// Looks a preset up by name; nullptr when unknown.
const Preset* findPreset(std::string_view name);
/// "kivi-2, kivi-4, …": every preset name, for error messages.
std::string presetNameList();

/// A preset's parsed key and value specs.
struct PresetSpecs {
  QuantSpec key;
  QuantSpec value;
};
/// Parses a preset's specs; an unknown name is an error listing the known ones.
Expected<PresetSpecs> presetSpecs(std::string_view name);

}  // namespace kvscope
