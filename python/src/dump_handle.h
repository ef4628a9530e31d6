// SPDX-License-Identifier: GPL-3.0-or-later
// The native object behind kvscope.Dump: one open dump (and its reader process), shared by
// every call on it and by the threads of a Dask worker.
#pragma once

#include <memory>

#include "core/io/dump.h"

namespace kvscope::python {

/// An open dump.
struct DumpHandle {
  std::shared_ptr<const Dump> dump;
};

}  // namespace kvscope::python
