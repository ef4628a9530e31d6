// SPDX-License-Identifier: GPL-3.0-or-later
// The one table of formats (quantization.md §2), read by the parser, the storage accounting,
// the presets, the GUI's format list and the tests.
#pragma once

#include <span>
#include <string_view>

namespace kvscope {

/// Every format of §2. `Int` covers int1..int8 (bits and sym in QuantSpec).
enum class FormatId {
  Int, Fp8E4M3, Fp8E5M2, Nf4, Mxfp4, Nvfp4,
  Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Iq4Nl,
  Fp16, Bf16, None,
  Tq, Tqp, Nuq,
  Tqg,
  Kvfp4, Lmtq, Lmqjl, Hqq, Fp32,
};

/// How a format groups values.
enum class FormatKind {
  Integer,    ///< int<b>: grouped by axis/group, asym or sym
  Float8,     ///< fp8_*: grouped by axis/group, max-abs scale
  Codebook,   ///< nf4: grouped by axis/group, max-abs scale
  Block,      ///< fixed blocks along the token row (mxfp4, nvfp4, kvfp4, ggml types)
  Elementwise,///< fp16, bf16, fp32, none: no scales
  Vector,     ///< tq<b>, tqp<b>, tqg<b>, lmtq<b>, lmqjl<b>: per vector (one token of one head), its norm and a codebook over the rotated, normalized coordinates (§11)
  NonUniform, ///< nuq<b>: grouped by axis/group with a max-abs scale, on one k-means codebook per layer tensor (§11)
  Optimized,  ///< hqq<b>: asymmetric groups of the flattened layer tensor whose zero points HQQ's optimizer fits (whole tensor at once)
};

/// One row of the format table.
struct FormatInfo {
  FormatId id;
  std::string_view name;        ///< spec name ("int" for the integer family)
  FormatKind kind;
  int blockSize;                ///< values per block along the token row; 0 = not a block format
  double payloadBits;           ///< bits per quantized value, metadata excluded (int: per `bits`)
  int blockMetaBits;            ///< metadata bits per block (block formats), 0 otherwise
  int tensorMetaBits;           ///< metadata bits per layer tensor (nvfp4: 32), 0 otherwise
  bool hasBits;                 ///< takes a bit width (int1..int8, tq1..tq8, tqp2..tqp8, nuq2..nuq8, lmtq2..3, lmqjl3..4)
  bool grouped;                 ///< accepts axis=/group=/clip=/scale=
  std::string_view metadata;    ///< human description of the metadata stored
  std::string_view reference;   ///< the reference quantizer it reproduces
  std::string_view description; ///< one line for lists and tooltips
  int minBits = 1;              ///< smallest bit width (formats with hasBits)
  int maxBits = 8;              ///< largest bit width (formats with hasBits)
};

/// All rows, in the order the GUI lists them.
std::span<const FormatInfo> formatTable();
/// The row of a format.
const FormatInfo& formatInfo(FormatId id);
/// Looks a format up by spec name (for `int<b>`, pass "int"); nullptr when unknown.
const FormatInfo* findFormat(std::string_view name);

}  // namespace kvscope
