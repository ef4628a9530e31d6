// SPDX-License-Identifier: GPL-3.0-or-later
// What the machine offers: memory available to this process.
#pragma once

#include <cstdint>

namespace kvscope {

/// MemAvailable from /proc/meminfo in bytes, or 0 when unknown.
int64_t memAvailableBytes();

}  // namespace kvscope
