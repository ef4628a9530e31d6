// SPDX-License-Identifier: GPL-3.0-or-later
// `eval`'s options as the user writes them (the CLI's flags, Python's keywords), turned into
// EvalOptions for a dump: one place for both, so they accept the same strings and refuse them
// with the same messages.
#pragma once

#include <string>

#include "core/engine/setting.h"
#include "core/io/dump.h"
#include "core/report/eval.h"
#include "core/util/status.h"

namespace kvscope {

/// What `eval` was given; the strings are the flags' (docs/report.md).
struct EvalRequest {
  SettingText setting;                ///< --key/--value, --preset or --engine
  std::string layers = "all";         ///< --layers
  int sequence = 0;                   ///< --sequence
  std::string queries = "all";        ///< --queries: all or last:N
  std::string nonfinite = "refuse";   ///< --nonfinite: refuse or skip-heads
};

/// The EvalOptions of `request` on a dump of `info`, with `resolved` its setting resolved for the
/// dump's shape (resolveSetting). Errors name the flag and what is allowed.
Expected<EvalOptions> evalOptionsFor(const EvalRequest& request, const DumpInfo& info,
                                     const ResolvedSetting& resolved);

/// The shape presets and engines resolve for.
KvShape kvShapeOf(const DumpInfo& info);

}  // namespace kvscope
