// SPDX-License-Identifier: GPL-3.0-or-later
// The one table of formats (quantization.md §2), read by the parser, the storage accounting,
// the presets, the GUI's format list and the tests.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

struct QuantSpec;

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

/// Granularity of scales for grouped formats (§3).
enum class Axis { Tensor, Head, Token, Channel };

/// Type metadata (scales, mins, norms) is stored in (§5): 16, 16 or 32 bits each.
enum class MetaType { Fp16, Bf16, Fp32 };

/// How a spec's scales can be known while tokens stream in (the end-to-end store,
/// core/model/quantized_kv_store.h).
enum class StreamingMode {
  Exact,          ///< `none`: rows are stored as computed
  TokenLocal,     ///< axis=token, block formats, fp16/bf16, unitscale fp8: each token on arrival
  ChannelGroups,  ///< axis=channel,group=G: a group of G tokens once complete (KIVI); the tail stays exact
  Calibrated,     ///< axis=tensor|head, axis=channel without group, nvfp4: scales from the full dump
};

/// The grid of a grouped format's values (int<b>: asym or sym by the spec).
enum class GroupedLevels { None, Integer, E4m3, E5m2, Nf4 };

/// Spec options beyond the pipeline's that a format accepts (FormatInfo::options).
enum FormatOption : unsigned {
  kOptionSym = 1u << 0,          ///< sym / asym
  kOptionIntegerGrid = 1u << 1,  ///< zero=int|packed|float, round=, codes=
  kOptionUnitscale = 1u << 2,    ///< unitscale and div=
  kOptionMinScale = 1u << 3,     ///< minscale=
  kOptionGlobalScale = 1u << 4,  ///< gscale= (an engine's per-layer value for the row's tensorScale)
  kOptionClipMse = 1u << 5,      ///< clip=mse (grouped formats whose groups clip on their own)
  kOptionMetaType = 1u << 6,     ///< the GUI's scale-type control (scale=)
  kOptionFourOverSix = 1u << 7,  ///< 4over6 (nvfp4's choice of max/4 or max/6 per block)
};

/// Dequantization work per element and per group or block (core/capacity, decode cost).
struct DequantCost {
  double perElement = 0;
  double perGroup = 0;
  double perElementPerDim = 0;  ///< tqp's QJL correction Sᵀ·sign(S·r): D multiply-adds per element
};

/// The histogram's group (formats.h's GroupDetail) of one element.
struct GroupDetail;
/// What every piece of a one-pass pipeline needs of the whole tensor (formats.h).
struct TensorContext;

/// The behaviour of a row, as plain function pointers (after ggml's type_traits).
namespace format_fn {
/// Step 5 on x (checked by checkFormatSpec first); the fast kernel or the reference.
using Quantize = Status (*)(Tensor3& x, const QuantSpec& spec);
/// The histogram's group that holds element (head, token, channel).
using Describe = Expected<GroupDetail> (*)(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                           int64_t channel);
/// Scale groups, vectors or blocks on a tensor of this shape (storage, capacity).
using GroupCount = int64_t (*)(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim);
/// How the end-to-end store streams this spec.
using Streaming = StreamingMode (*)(const QuantSpec& spec);
/// Whether the format's statistics stay inside one kv head of D channels (the GUI then
/// quantizes the selected head alone), rather than spanning the layer tensor.
using PerHead = bool (*)(const QuantSpec& spec, int64_t headDim);
/// Payload bits of `quantized` values where they are not bits × values (hqq's packing).
using Payload = double (*)(const QuantSpec& spec, int64_t quantized);
/// Dequantization cost where it depends on the spec.
using Dequant = DequantCost (*)(const QuantSpec& spec);
/// Step 5 on `rows` token rows of one head (formats.h's quantizeFormatPiece); formats without one
/// run on the pipeline's general path.
using Piece = void (*)(float* base, int64_t rows, int64_t dim, const QuantSpec& spec, const TensorContext& context);
/// Block formats: `blocks` consecutive blocks at x replaced in place (fast kernel); g is the
/// tensor scale (formats with tensorScale), ignored by others.
using BlockKernel = void (*)(float* x, int64_t blocks, float g);
/// Block formats: the same, reading `in` and writing `out`, checking every value read (false on
/// NaN or infinity).
using BlockFromKernel = bool (*)(const float* in, float* out, int64_t blocks);
/// Block formats: the scalar reference of one block, in place.
using BlockReference = void (*)(float* x, float g);
/// Block formats: the effective scale of one block and (formats with a min) the min in *zero.
using BlockScale = float (*)(const float* x, float g, float* zero);
/// Block formats: the value of code c before the scale (nullptr: c itself, plus the min).
using CodeValue = float (*)(int code);
}  // namespace format_fn

/// One row of the format table: what a format is and what it does.
struct FormatInfo {
  FormatId id{};
  std::string_view name{};      ///< spec name ("int" for the integer family)
  FormatKind kind{};
  int blockSize = 0;            ///< values per block along the token row; 0 = not a block format
  double payloadBits = 0;       ///< bits per quantized value, metadata excluded (int: per `bits`)
  int blockMetaBits = 0;        ///< metadata bits per block (block formats), 0 otherwise
  int tensorMetaBits = 0;       ///< metadata bits per layer tensor (nvfp4: 32), 0 otherwise
  bool hasBits = false;         ///< takes a bit width (int1..int8, tq1..tq8, tqp2..tqp8, nuq2..nuq8, lmtq2..3, lmqjl3..4)
  bool grouped = false;         ///< accepts axis=/group=/clip=/scale=
  std::string_view metadata{};  ///< human description of the metadata stored
  std::string_view reference{};  ///< the reference quantizer it reproduces
  std::string_view description{};///< one line for lists and tooltips
  int minBits = 1;              ///< smallest bit width (formats with hasBits)
  int maxBits = 8;              ///< largest bit width (formats with hasBits)

  // ---- Levels and defaults (§2, §3) ----
  GroupedLevels levels = GroupedLevels::None;  ///< grouped formats: the grid of a group's values
  int codebookBitsOffset = 0;   ///< the codebook has bits − this (tqp, lmqjl: one bit is the residual's sign)
  int blockCodeLo = 0;          ///< block formats: the first code the histogram draws
  int blockCodeHi = 0;          ///< block formats: the last code the histogram draws
  format_fn::CodeValue blockCodeValue = nullptr;  ///< block formats: a code's value (nullptr: the code, plus the min)
  Axis defaultAxis = Axis::Token;
  int defaultGroup = 0;         ///< group= without one (grouped formats: on axis=token|channel only)
  MetaType defaultScale = MetaType::Fp16;
  unsigned options = 0;         ///< FormatOption bits
  bool alwaysRotates = false;   ///< step 3 always rotates (§11 vector formats)
  bool hadamardOnly = false;    ///< rotates by the normalized Hadamard matrix only, with no seed (LMDeploy)
  /// A second-level scale g from the whole layer tensor's max |x| (nvfp4: fp32(max/(448·6)), §2),
  /// which every block kernel of the row receives; null: the row has none. `gscale=S` replaces it.
  float (*tensorScale)(float maxAbs) = nullptr;
  bool exact = false;           ///< stores values as they are and counts them as the fp16 baseline (`none`)
  bool flatGroups = false;      ///< groups of the flattened layer tensor: axis=tensor|token and group=G only (hqq)
  std::string_view bitsNote{};  ///< added to the parser's message on a bit width out of range
  std::string_view symNote{};   ///< why sym/asym do not apply, in the parser's message

  // ---- Storage (§5) ----
  double scalesPerGroup = 0;    ///< values in the `scale=` type per group or vector (0 with unitscale)
  bool asymMin = false;         ///< asym (not zero=packed) stores a min too, in the `scale=` type
  int codebookEntryBits = 0;    ///< per layer tensor: 2^b codebook entries of this many bits (nuq)
  format_fn::Payload payload = nullptr;  ///< payload bits where not bits × values

  // ---- Behaviour ----
  format_fn::Quantize quantizeReference = nullptr;  ///< the scalar reference (core/quant/reference.h)
  format_fn::Quantize quantizeFast = nullptr;       ///< the fast kernel; absent: the reference runs
  format_fn::Piece quantizePiece = nullptr;         ///< the fast kernel on pieces (needs quantizeFast)
  format_fn::BlockKernel blockKernel = nullptr;
  format_fn::BlockFromKernel blockFromKernel = nullptr;
  format_fn::BlockReference blockReference = nullptr;
  format_fn::BlockScale blockScale = nullptr;
  format_fn::Describe describeGroup = nullptr;      ///< nullptr: no groups, the element alone
  format_fn::GroupCount groupCount = nullptr;       ///< nullptr: no groups (0)
  format_fn::PerHead quantizesPerHead = nullptr;
  format_fn::Streaming streaming = nullptr;
  std::string_view calibratedNote{}; ///< the e2e store's sentence when streaming is Calibrated (empty: scales)
  DequantCost dequant{};                            ///< capacity's dequantization cost
  format_fn::Dequant dequantFor = nullptr;          ///< the same where it depends on the spec
  double benchTarget = 0;       ///< `kvscope-cli bench` quantize rows: target fraction of copy; 0 = reported only
};

/// All rows, in the order the GUI lists them.
std::span<const FormatInfo> formatTable();
/// The row of a format.
const FormatInfo& formatInfo(FormatId id);
/// Looks a format up by spec name (for `int<b>`, pass "int"); nullptr when unknown.
const FormatInfo* findFormat(std::string_view name);

}  // namespace kvscope
