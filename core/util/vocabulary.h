// SPDX-License-Identifier: GPL-3.0-or-later
// Words every layer of core uses (docs/architecture.md, "Layers"): which tensor of a layer, and
// how RoPE pairs channels. They live here, at the bottom, so that quantization and attention can
// name them without depending on the dump reader.
#pragma once

namespace kvscope {

/// Which tensor of a layer.
enum class TensorKind { Key, Value, Query, KeyPreRope };

/// "key", "value", "query", "key_pre_rope": the dataset names of the format, used everywhere.
const char* tensorKindName(TensorKind kind);

/// RoPE pairing convention of the dump (`rope_style`).
enum class RopeStyle { Half, Interleaved };
const char* ropeStyleName(RopeStyle style);

}  // namespace kvscope
