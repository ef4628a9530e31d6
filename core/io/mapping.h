// SPDX-License-Identifier: GPL-3.0-or-later
// Mapping files: how to read K, V, Q and pre-RoPE K out of a file that is not a canonical dump.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/util/status.h"

namespace kvscope {

/// Where one tensor lives in a non-canonical file.
struct TensorMapping {
  /// Dataset path. Contains `{layer}` when each layer has its own dataset; otherwise the dataset
  /// is stacked and `axes` names a `layer` axis.
  std::string path;
  /// Axis order of the dataset, names from {layer, batch, head, token, dim}, e.g.
  /// "layer,batch,head,token,dim". `head`, `token`, `dim` are required; `layer` iff stacked.
  std::vector<std::string> axes;
};

/// A mapping file's content (JSON; see docs/mapping.md).
struct Mapping {
  TensorMapping key;
  TensorMapping value;
  std::optional<TensorMapping> query;
  std::optional<TensorMapping> keyPreRope;
  std::optional<int> layers;  ///< needed only when per-layer paths cannot be enumerated
  std::string model;
  std::optional<double> ropeTheta;
  std::optional<std::string> ropeStyle;
  std::optional<double> softmaxScale;
  /// Where the mapping came from (a file name), used in error messages; not serialized.
  std::string origin;
};

/// Parses mapping JSON text; `origin` (a file name) prefixes error messages.
Expected<Mapping> parseMapping(const std::string& jsonText, const std::string& origin);
/// Reads and parses a mapping file.
Expected<Mapping> loadMapping(const std::string& path);
/// Checks axes and paths (names, duplicates, `layer` iff no `{layer}`); `origin` prefixes errors.
Status validateMapping(const Mapping& mapping, const std::string& origin);
/// Serializes a mapping to JSON text (the GUI saves mappings for the CLI).
std::string mappingToJson(const Mapping& mapping);

}  // namespace kvscope
