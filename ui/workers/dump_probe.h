// SPDX-License-Identifier: GPL-3.0-or-later
// Opening an untrusted dump without risking the window: libhdf5 1.10 can crash or hang on crafted
// files, so before the app opens a dump in its own process it asks `kvscope-cli info` (which
// itself probes in a child process) whether the file is safe to parse.
#pragma once

#include <optional>
#include <string>

#include "core/io/dump.h"
#include "core/io/mapping.h"
#include "core/util/tensor.h"
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

/// Reads one layer tensor through `kvscope-cli read` (whose reads run in a crash-isolated helper),
/// so a file that crashes libhdf5 inside a data read gives an error instead of ending the window.
/// Blocking: call it from a worker thread. Errors name the file and the dataset.
Expected<Tensor3> readTensorInSubprocess(const std::string& cli, const std::string& file,
                                         const std::optional<Mapping>& mapping, int layer,
                                         TensorKind kind, int sequence, int timeoutMs = 120000);

/// The read delegate the window opens dumps with: every Dump::read goes through
/// readTensorInSubprocess. Empty (read in process) when no kvscope-cli is at hand or
/// KVSCOPE_ISOLATE_READS=0.
ReadDelegate isolatedReadDelegate(const std::string& file, const std::optional<Mapping>& mapping);

}  // namespace kvscope::ui
