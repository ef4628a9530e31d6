// SPDX-License-Identifier: GPL-3.0-or-later
// `diagnose`'s options as the user writes them, turned into DiagnoseOptions (CLI and Python).
#pragma once

#include <string>

#include "core/diagnose/diagnose.h"
#include "core/io/dump.h"
#include "core/util/status.h"

namespace kvscope {

/// What `diagnose` was given (docs/diagnose.md).
struct DiagnoseRequest {
  std::string layers = "all";  ///< --layers
  int sequence = 0;            ///< --sequence
};

/// The DiagnoseOptions of `request` on a dump of `info`; errors name the flag.
Expected<DiagnoseOptions> diagnoseOptionsFor(const DiagnoseRequest& request, const DumpInfo& info);

}  // namespace kvscope
