// SPDX-License-Identifier: GPL-3.0-or-later
// --layers: the one parser of layer lists every command uses (eval, search, sensitivity,
// outliers, diagnose), kept apart from the CLI's main so the fuzzer (tests/fuzz/fuzz_layers.cpp)
// and the tests can call it.
#pragma once

#include <string>
#include <vector>

#include "core/util/status.h"

namespace kvscope::cli {

/// Parses a layer list "0,2,5-7" or "all" against `layers` into a set: sorted, each layer once,
/// every one below `layers` ("0,0,0" and "0-3,0-3" are the layers once each, so no work runs
/// twice); '' and empty items are refused. Errors name --layers and say what is allowed.
Expected<std::vector<int>> parseLayerList(const std::string& text, int layers);

}  // namespace kvscope::cli
