// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: see tests/fuzz/fuzz_entries.h (fuzzEngineWords), the engine-string splitter (core/engine/engine.h, splitEngineString).
#include "tests/fuzz/fuzz_entries.h"

KVSCOPE_FUZZ_TARGET(fuzzEngineWords)
