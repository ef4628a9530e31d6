// SPDX-License-Identifier: GPL-3.0-or-later
// Words every layer of core uses (docs/architecture.md, "Layers"): which tensor of a layer, and
// how RoPE pairs channels. They live here, at the bottom, so that quantization and attention can
// name them without depending on the dump reader.
#pragma once

#include <vector>

namespace kvscope {

/// Which tensor of a layer.
enum class TensorKind { Key, Value, Query, KeyPreRope };

/// "key", "value", "query", "key_pre_rope": the dataset names of the format, used everywhere.
const char* tensorKindName(TensorKind kind);

/// RoPE pairing convention of the dump (`rope_style`).
enum class RopeStyle { Half, Interleaved };
const char* ropeStyleName(RopeStyle style);

/// RoPE as a dump describes it (`rope_theta`, `rope_style`, `rope_inv_freq`), for `prerope`.
struct RopeParams {
  double theta = 10000.0;
  RopeStyle style = RopeStyle::Half;
  /// Each pair's inverse frequency (angle = position · invFreq[i]) when the dump names them
  /// (`rope_inv_freq`: a model with scaled RoPE); empty: theta^(−2i/D).
  std::vector<double> invFreq;
};

}  // namespace kvscope
