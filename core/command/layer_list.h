// SPDX-License-Identifier: GPL-3.0-or-later
// The `--layers` list every dump command takes ("all", or "0,2,5-7"), for the CLI and Python.
#pragma once

#include <string>
#include <vector>

#include "core/util/status.h"

namespace kvscope {

/// Parses a layer list "0,2,5-7" or "all" (empty = all) against `layers`; errors name --layers
/// and say what is allowed.
Expected<std::vector<int>> parseLayerList(const std::string& text, int layers);

}  // namespace kvscope
