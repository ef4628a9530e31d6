// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: see tests/fuzz/fuzz_entries.h (fuzzEngine) and docs/engines.md.
#include "tests/fuzz/fuzz_entries.h"

KVSCOPE_FUZZ_TARGET(fuzzEngine)
