// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: see tests/fuzz/fuzz_entries.h (fuzzLayerList), the --layers parser (core/command/layer_list.h).
#include "tests/fuzz/fuzz_entries.h"

KVSCOPE_FUZZ_TARGET(fuzzLayerList)
