// SPDX-License-Identifier: GPL-3.0-or-later
// Opening an untrusted dump without risking the window: libhdf5 1.10 can crash or hang on crafted
// files, so before the app opens a dump in its own process it asks `kvscope-cli info` (which
// itself probes in a child process) whether the file is safe to parse.
#pragma once

#include <optional>
#include <string>

#include "core/io/mapping.h"
#include "core/util/status.h"

namespace kvscope::ui {

/// The kvscope-cli used for probing: $KVSCOPE_CLI, else kvscope-cli beside the running
/// executable; empty when neither exists (then no probe is made).
std::string probeCliPath();

/// Runs `kvscope-cli info FILE [--mapping TMP]` and returns its refusal (exit 2, message from
/// its standard error) or a timeout as a Status; ok when the file parsed or no CLI is at hand.
/// Blocking: call it from a worker thread.
Status probeDumpInSubprocess(const std::string& file, const std::optional<Mapping>& mapping,
                             int timeoutMs = 40000);

}  // namespace kvscope::ui
