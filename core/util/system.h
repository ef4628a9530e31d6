// SPDX-License-Identifier: GPL-3.0-or-later
// What the machine offers: memory available to this process.
#pragma once

#include <cstdint>

namespace kvscope {

/// MemAvailable from /proc/meminfo in bytes, or 0 when unknown.
int64_t memAvailableBytes();
/// What this process may still allocate: MemAvailable, or less under an address-space limit
/// (`ulimit -v`), which fails allocations long before the machine runs out; 0 when unknown.
int64_t availableMemoryBytes();

}  // namespace kvscope
