// SPDX-License-Identifier: GPL-3.0-or-later
// `sensitivity`'s options as the user writes them, turned into SensitivityOptions for a dump
// (the CLI and Python share it).
#pragma once

#include <string>
#include <vector>

#include "core/io/dump.h"
#include "core/sensitivity/sensitivity.h"
#include "core/util/status.h"

namespace kvscope {

/// What `sensitivity` was given; the strings are the flags' (docs/sensitivity.md).
struct SensitivityRequest {
  std::string candidates = "default";  ///< --candidates: default, search, a file, or SPEC;SPEC;…
  std::string side = "both";           ///< --side: key, value or both
  std::string layers = "all";          ///< --layers
  std::string queries = "all";         ///< --queries
  int sequence = 0;                    ///< --sequence
};

/// The candidate specs of --candidates for a dump of `info`.
Expected<std::vector<std::string>> sensitivityCandidateList(const std::string& text, const DumpInfo& info);

/// The SensitivityOptions of `request` on a dump of `info`; errors name the flag.
Expected<SensitivityOptions> sensitivityOptionsFor(const SensitivityRequest& request, const DumpInfo& info);

}  // namespace kvscope
