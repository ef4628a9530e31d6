// SPDX-License-Identifier: GPL-3.0-or-later
// Lists an HDF5 file's datasets with shapes, so a person can map a non-canonical file's
// tensors to K, V, Q and pre-RoPE K (the GUI's mapping dialog).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/util/status.h"

namespace kvscope {

/// One dataset of a file.
struct DatasetEntry {
  std::string path;            ///< absolute, e.g. "/past_key_values/key"
  std::vector<int64_t> shape;  ///< dimensions (empty for a scalar)
  std::string dtype;           ///< "float16", "float32", "int64", "string", … ("other" when unknown)
};

/// What a file holds, as far as mapping needs to know.
struct DatasetTree {
  bool canonical = false;              ///< the root has a `kvdump_version` attribute
  std::vector<DatasetEntry> datasets;  ///< in HDF5's name order, at most `maxEntries`
  bool truncated = false;              ///< more datasets exist than were listed
};

/// Lists the datasets of `path` (hard links only; external links are not followed).
Expected<DatasetTree> listDatasets(const std::string& path, size_t maxEntries = 10000);

}  // namespace kvscope
