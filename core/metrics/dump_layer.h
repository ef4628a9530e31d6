// SPDX-License-Identifier: GPL-3.0-or-later
// One dump layer read for attention measurements: K, V and (as asked) Q and pre-RoPE K, each
// checked finite, with the baseline AttentionInput over them. Shared by the sensitivity map,
// the budget search and diagnose, which all start every layer this way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/attention/attention.h"
#include "core/io/dump.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// What to read of one layer.
struct LayerReadRequest {
  int layer = 0;
  int sequence = 0;              ///< batch index
  bool query = true;             ///< read Q (the dump must have queries)
  bool preRope = false;          ///< read key_pre_rope (the dump must have it)
  std::string_view purpose;      ///< names the caller in errors: "<purpose> needs finite tensors"
};

/// The tensors of one layer. Not movable once input() was taken (it points into them).
struct AttentionLayer {
  Tensor3 key;                    ///< [KVH, T, D]
  Tensor3 value;                  ///< [KVH, T, D]
  std::optional<Tensor3> query;   ///< [H, Tq, D] when asked for
  std::optional<Tensor3> preRope; ///< [KVH, T, D] when asked for
  /// The original attention's input: Q, K, V, no reconstructions (query must have been read).
  [[nodiscard]] AttentionInput input(double softmaxScale, int lastQueries) const;
};

/// Invalid data naming `what` (e.g. "m.h5: layer 3: key"), the NaN/Inf counts and the first
/// position, ending "<purpose> needs finite tensors"; ok when every value is finite.
Status checkFinite(const Tensor3& tensor, const std::string& what, std::string_view purpose);

/// Reads the layer's K and V (and Q, pre-RoPE K as asked), checks each finite (errors name the
/// dump, layer and tensor) and returns them.
Expected<AttentionLayer> readLayerForAttention(const Dump& dump, const LayerReadRequest& request);

}  // namespace kvscope
