// SPDX-License-Identifier: GPL-3.0-or-later
// A quantization setting (quantization.md §1-4) as data, and its canonical spec string.
#pragma once

#include <string>
#include <string_view>

#include "core/quant/format_table.h"
#include "core/util/status.h"

namespace kvscope {

/// Granularity of scales for int / fp8 / nf4 (§3).
enum class Axis { Tensor, Head, Token, Channel };
/// "tensor", "head", "token", "channel".
const char* axisName(Axis axis);

/// Type metadata (scales, mins) is stored in (§5): 16, 16 or 32 bits each.
enum class MetaType { Fp16, Bf16, Fp32 };
/// "fp16", "bf16", "fp32".
const char* metaTypeName(MetaType type);

/// Clipping (§4).
struct Clip {
  enum class Kind { None, Percentile, Mse };
  Kind kind = Kind::None;
  double p = 1.0;  ///< for Percentile, 0 < p <= 1
  bool operator==(const Clip&) const = default;
};

/// One tensor's quantization setting, e.g. parsed from "int4,axis=channel,group=32".
/// Defaults of the fields depend on the format (§3); parseSpec fills them in.
struct QuantSpec {
  FormatId format = FormatId::None;
  int bits = 16;            ///< payload bits of `int<b>`; for other formats the table's value
  bool symmetric = false;   ///< `sym` (int only)
  Axis axis = Axis::Token;  ///< grouping axis (int, fp8, nf4)
  int group = 0;            ///< `group=G`; 0 = the whole axis (one run)
  Clip clip;
  double outliers = 0.0;    ///< `outliers=f`, dense-and-sparse fraction per kv head
  int sinks = 0;            ///< `sinks=S`
  int residual = 0;         ///< `residual=R`
  bool hadamard = false;    ///< `rot=hadamard`
  bool prerope = false;     ///< `prerope` (keys only)
  MetaType scale = MetaType::Fp16;  ///< `scale=`
  bool unitscale = false;   ///< `unitscale` (fp8 only)

  bool operator==(const QuantSpec&) const = default;
};

/// What a spec is checked against beyond its own syntax.
struct SpecContext {
  bool isKey = true;
  int kvHeads = 0;        ///< 0 = unknown (skip shape checks)
  int headDim = 0;        ///< 0 = unknown
  bool hasKeyPreRope = true;
};

/// Parses a spec string and fills in the format's defaults. Errors say what is wrong and what
/// is allowed. Does not check shape-dependent rules: see validateSpec.
Expected<QuantSpec> parseSpec(std::string_view text);
/// Checks the rules that depend on the tensor (prerope on values or without key_pre_rope,
/// rot=hadamard with D not a power of two, block formats whose row KVH*D does not divide).
Status validateSpec(const QuantSpec& spec, const SpecContext& context);
/// The canonical spec string: the format first, then every option that differs from the
/// format's default, in the order of §1 (see docs/spec-strings.md).
std::string toString(const QuantSpec& spec);
/// The default spec of a format (as parseSpec("<name>") returns it).
QuantSpec defaultSpec(FormatId format, int bits = 0);

}  // namespace kvscope
