// SPDX-License-Identifier: GPL-3.0-or-later
// Where the window's dumps are parsed: in a reader process (core/io/isolated_reader.h), so that a
// file that crashes or hangs libhdf5 gives an error instead of ending the window.
#pragma once

#include <string>

#include "core/io/dump.h"

namespace kvscope::ui {

/// The kvscope-cli that serves the window's reads: $KVSCOPE_CLI, else kvscope-cli beside the
/// running executable; empty when neither exists.
std::string readerCliPath();

/// The isolation the window opens dumps with: through readerCliPath(); in-process when there is
/// no kvscope-cli at hand or KVSCOPE_ISOLATE_READS=0.
IsolationOptions readerIsolation();

}  // namespace kvscope::ui
