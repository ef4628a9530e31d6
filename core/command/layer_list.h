// SPDX-License-Identifier: GPL-3.0-or-later
// The `--layers` list every dump command takes ("all", or "0,2,5-7"): the one parser the CLI,
// Python, the fuzzer (tests/fuzz/fuzz_layers.cpp) and the tests call.
#pragma once

#include <string>
#include <vector>

#include "core/util/status.h"

namespace kvscope {

/// Parses a layer list "0,2,5-7" or "all" against `layers` into a set: sorted, each layer once,
/// every one below `layers` ("0,0,0" and "0-3,0-3" are the layers once each, so no work runs
/// twice); '' and empty items are refused. Errors name --layers and say what is allowed.
Expected<std::vector<int>> parseLayerList(const std::string& text, int layers);

}  // namespace kvscope
