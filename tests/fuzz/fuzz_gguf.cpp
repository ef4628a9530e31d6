// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: see tests/fuzz/fuzz_entries.h (fuzzGguf) and docs/reliability.md.
#include "tests/fuzz/fuzz_entries.h"

KVSCOPE_FUZZ_TARGET(fuzzGguf)
