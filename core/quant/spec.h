// SPDX-License-Identifier: GPL-3.0-or-later
// A quantization setting (quantization.md §1-4) as data, and its canonical spec string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/quant/format_table.h"
#include "core/util/status.h"

namespace kvscope {

/// Granularity of scales for int / fp8 / nf4 (§3): Axis, in format_table.h.
/// "tensor", "head", "token", "channel".
const char* axisName(Axis axis);

/// Type metadata (scales, mins) is stored in (§5): MetaType, in format_table.h.
/// "fp16", "bf16", "fp32".
const char* metaTypeName(MetaType type);

/// Rotation of step 3 (§1): none, the normalized Hadamard matrix (whole D, or blocks of
/// `rotationBlock`), the randomized Hadamard diag(σ)·H_D, or a seeded random orthogonal matrix.
enum class Rotation { None, Hadamard, Rht, Random };
/// "none", "hadamard", "rht", "random".
const char* rotationName(Rotation rotation);

/// How an integer quantizer rounds its codes (`round=`, docs/formats.md): half away from zero
/// (the contract's rnd), toward zero, or half to even; the last two multiply by the fp32
/// reciprocal of the scale, as the engines that use them do.
enum class Rounding { Away, Trunc, Even };
/// "away", "trunc", "even".
const char* roundingName(Rounding rounding);

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
  int residual = 0;         ///< `residual=R` (a sliding window)
  int chunk = 0;            ///< `chunk=R` (a flushing window, KIVI's key cache)
  Rotation rotation = Rotation::None;  ///< `rot=`
  int rotationBlock = 0;    ///< `rot=hadamard:N`: N; 0 = the whole head dim
  uint64_t seed = 0;        ///< `seed=N` for rot=rht|random
  bool zeroInt = false;     ///< `zero=int` (int asym only): integer zero point
  bool zeroPacked = false;  ///< `zero=packed` (int1 … int4 asym, scale=fp32): vLLM's zero point in the scale word
  bool prerope = false;     ///< `prerope` (keys only)
  MetaType scale = MetaType::Fp16;  ///< `scale=`
  bool unitscale = false;   ///< `unitscale` (fp8 only)
  Rounding rounding = Rounding::Away;  ///< `round=` (int only, not with zero=int)
  double divisor = 0.0;     ///< `div=N` (fp8 only): s = meta(a/N); 0 = the format's Fmax
  double minScale = 0.0;    ///< `minscale=S` (int, fp8): s = max(s, S); 0 = no floor
  double globalScale = 0.0; ///< `gscale=S` (nvfp4 only): g = S; 0 = fp32(a/2688)
  bool codesFp32 = false;   ///< `codes=fp32` (int asym): codes from the unrounded fp32 scale and min (vLLM TurboQuant values)
  bool codesMeta = false;   ///< `codes=meta` (int asym): codes and reconstruction in the metadata type (LMDeploy TurboMind)
  bool fourOverSix = false; ///< `4over6` (nvfp4 only): per block the scale max/6 or max/4 with the smaller squared error

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
/// Checks a spec's rotation against head dim D: rot=hadamard and rot=rht need D a power of two,
/// rot=hadamard:N needs N to divide D. The message says what is allowed.
Status checkRotation(const QuantSpec& spec, int64_t headDim);
/// The canonical spec string: the format first, then every option that differs from the
/// format's default, in the order of §1 (see docs/spec-strings.md).
std::string toString(const QuantSpec& spec);
/// The tokens step 2 quantizes: [first, first + count) of a tensor of `tokens` tokens (sinks
/// kept before, a residual or chunk remainder kept after).
struct QuantizedTokens {
  int64_t first = 0;
  int64_t count = 0;
  [[nodiscard]] int64_t kept(int64_t tokens) const { return tokens - count; }
};
/// The quantized tokens of `spec` on a tensor of `tokens` tokens (§1 step 2).
QuantizedTokens quantizedTokens(const QuantSpec& spec, int64_t tokens);
/// Whether the format step runs the scalar reference (core/quant/reference.h) rather than the
/// vectorized kernels: the integer zero point and the engines' rounding modes have no kernel.
inline bool usesReferenceQuantizer(const QuantSpec& spec) {
  return spec.zeroInt || spec.zeroPacked || spec.rounding != Rounding::Away || spec.codesFp32 ||
         spec.codesMeta || spec.fourOverSix;
}
/// Whether `spec`'s format is a vector quantizer of §11 (tq, tqp, and vLLM's tqg): per token vector, always rotated.
inline bool isVectorFormat(const QuantSpec& spec) { return formatInfo(spec.format).alwaysRotates; }
/// Whether step 3 rotates: a rotation is given, or the format always rotates (tq, tqp).
inline bool rotates(const QuantSpec& spec) { return spec.rotation != Rotation::None || isVectorFormat(spec); }
/// The rotation step 3 applies on head dim D: spec.rotation, or for tq and tqp without one their
/// default (§11): rot=hadamard when D is a power of two, rot=random otherwise.
Rotation effectiveRotation(const QuantSpec& spec, int64_t headDim);

/// The default spec of a format (as parseSpec("<name>") returns it).
QuantSpec defaultSpec(FormatId format, int bits = 0);

}  // namespace kvscope
