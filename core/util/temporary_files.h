// SPDX-License-Identifier: GPL-3.0-or-later
// Temporary files in flight: every path temporaryPathFor (core/util/atomic_file.h) hands out is
// registered until it is renamed into place or removed, so that a process ended by a signal whose
// work did not stop in time leaves none behind (app/cli/main.cpp).
#pragma once

#include <string>

namespace kvscope {

/// The temporary file was renamed into place or removed: no longer one to clean up.
void forgetTemporaryFile(const std::string& path);
/// Removes every temporary file in flight. Any thread may call it, a signal handler may not.
void removeTemporaryFiles();

}  // namespace kvscope
