// SPDX-License-Identifier: GPL-3.0-or-later
// The sensitivity map: for every (layer, kv head), separately for K (key_only metrics) and V
// (value_only metrics), the attention damage of each candidate spec (docs/sensitivity.md). Laid
// out so a per-layer plan search can read, per layer, per side and per candidate, the damage
// and the bits without quantizing anything again.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/attention/attention.h"
#include "core/io/dump.h"
#include "core/search/search.h"
#include "core/util/status.h"

namespace kvscope {

/// The ladder `sensitivity` measures when no candidates are given: the specs users run, from
/// 8 bits down to 2 (engine cache types, per-token and KIVI-style per-channel integers).
std::vector<std::string> sensitivityCandidates();

/// What to map.
struct SensitivityOptions {
  std::vector<std::string> candidates;  ///< spec strings; empty = sensitivityCandidates()
  std::vector<int> layers;              ///< layers to map, ascending; empty = all
  bool keys = true;                     ///< map K (key_only)
  bool values = true;                   ///< map V (value_only)
  int sequence = 0;                     ///< batch index
  int lastQueries = 0;                  ///< 0 = all queries, N = the last N
};

/// One candidate for one side.
struct SensitivityCandidate {
  std::string spec;            ///< canonical spec string
  std::string skipped;         ///< non-empty: not applicable to this dump or side, and why
  double bitsPerElement = 0;   ///< §5 at the dump's shape
};

/// The map of one side (K or V).
struct SensitivitySide {
  bool mapped = false;                          ///< false when the side was not asked for
  std::vector<SensitivityCandidate> candidates; ///< in the order given, duplicates removed
  /// Damage per (layer index, kv head, candidate), flat: see at(). The case is key_only for K
  /// and value_only for V; skipped candidates keep AttentionMetrics' defaults.
  std::vector<AttentionMetrics> damage;
  int kvHeads = 0;  ///< the dump's KVH (the map's middle extent)

  /// The damage of candidate `c` at (layer index `li`, kv head `g`).
  [[nodiscard]] const AttentionMetrics& at(size_t li, int g, size_t c) const {
    return damage[(li * static_cast<size_t>(kvHeads) + static_cast<size_t>(g)) * candidates.size() + c];
  }
  /// §8's summary over the kv heads of layer index `li` for candidate `c` (means; *_max max).
  [[nodiscard]] AttentionMetrics layerSummary(size_t li, size_t c) const;
};

/// Everything a sensitivity run produced.
struct SensitivityMap {
  DumpInfo dump;                   ///< the dump's metadata
  std::vector<int> layers;         ///< mapped layers (the map's first extent)
  int sequence = 0;                ///< batch index
  int lastQueries = 0;             ///< as requested (0 = all)
  SensitivitySide key;             ///< K, key_only
  SensitivitySide value;           ///< V, value_only
  std::vector<std::string> notes;  ///< for people (e.g. a baseline that was too large)
};

/// Maps a dump. Each layer is read once, its original attention computed once, and each
/// candidate quantized once per layer and side. Needs queries; refuses non-finite tensors.
/// Cancels via `progress`.
Expected<SensitivityMap> sensitivityMap(const Dump& dump, const SensitivityOptions& options,
                                        const Progress& progress = {});

/// The map as JSON (`kvscope_sensitivity: 1`, fields in docs/sensitivity.md): every metric of
/// every cell, so a consumer can rank by any field.
std::string sensitivityToJson(const SensitivityMap& map);
/// One CSV row per (side, layer, kv head, candidate) with every metric.
std::string sensitivityToCsv(const SensitivityMap& map);
/// A readable grid per side: layers × kv heads of `field` at each candidate.
std::string sensitivityToText(const SensitivityMap& map, AttentionField field);

}  // namespace kvscope
