// SPDX-License-Identifier: GPL-3.0-or-later
// The one table of formats (quantization.md §2). Adding a row here (and its FormatId) makes the
// parser accept the name, the storage accounting count it, the capacity planner, the end-to-end
// store and the GUI read its behaviour, and the table-driven tests cover it; a row without a
// fast kernel runs its reference.
#include "core/quant/format_table.h"

#include <array>

#include "core/quant/format_ops.h"
#include "core/quant/hqq.h"
#include "core/quant/kernels_block.h"
#include "core/quant/reference.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

// Behaviour that is a small function of the spec; the kernels are in format_ops.h.

// Grouped formats: a group's statistic stays in one head unless it spans the tensor (unitscale
// has none: s = 1 whatever the group).
bool groupedPerHead(const QuantSpec& spec, int64_t /*headDim*/) {
  return spec.unitscale || spec.axis != Axis::Tensor;
}
// Blocks stay inside a head's row when D is a multiple of the block size.
bool blocksInHead(const QuantSpec& spec, int64_t headDim) {
  const int block = formatInfo(spec.format).blockSize;
  return block > 0 && headDim % block == 0;
}
bool alwaysPerHead(const QuantSpec& /*spec*/, int64_t /*headDim*/) { return true; }
// A statistic of the whole layer tensor: nvfp4's g, nuq's codebook, hqq's groups and optimizer.
bool neverPerHead(const QuantSpec& /*spec*/, int64_t /*headDim*/) { return false; }

StreamingMode streamExact(const QuantSpec& /*spec*/) { return StreamingMode::Exact; }
// One token's values, its own blocks or norm, a fixed grid.
StreamingMode streamTokenLocal(const QuantSpec& /*spec*/) { return StreamingMode::TokenLocal; }
// A statistic of the whole layer tensor (nvfp4's second-level scale, nuq's codebook, hqq's groups).
StreamingMode streamCalibrated(const QuantSpec& /*spec*/) { return StreamingMode::Calibrated; }
StreamingMode groupedStreaming(const QuantSpec& spec) {
  if (spec.unitscale) return StreamingMode::TokenLocal;  // no statistic at all
  if (spec.axis == Axis::Token) return StreamingMode::TokenLocal;
  if (spec.axis == Axis::Channel && spec.group > 0) return StreamingMode::ChannelGroups;
  return StreamingMode::Calibrated;
}

// Dequantization: unpack (shift + mask) for sub-byte payloads, decode (int→float, table lookup
// or fp8 convert), then scale (multiply) and, with a min, an add.
constexpr double kUnpack = 2;
DequantCost integerDequant(const QuantSpec& spec) {
  const double minOps = spec.symmetric ? 0 : 1;
  return {.perElement = (spec.bits < 8 ? kUnpack : 0) + 1 + 1 + minOps, .perGroup = spec.symmetric ? 1.0 : 2.0};
}
DequantCost fp8Dequant(const QuantSpec& spec) {
  return spec.unitscale ? DequantCost{.perElement = 1} : DequantCost{.perElement = 2, .perGroup = 1};
}

// hqq: HQQ's packed codes (3 bits: 10 per int32, padded), when its groups divide the tensor.
double hqqPayload(const QuantSpec& spec, int64_t quantized) {
  if (quantized % spec.group != 0) return static_cast<double>(spec.bits) * static_cast<double>(quantized);
  return hqq::payloadBits(hqq::Layout{quantized, spec.group, spec.axis != Axis::Token}, spec.bits);
}

// Rows in the order the GUI lists them. Each names its fields; what a field means is in
// format_table.h. A row without quantizeFast runs its reference.
constexpr std::array kFormats{
    FormatInfo{
        .id = FormatId::Int,
        .name = "int",
        .kind = FormatKind::Integer,
        .hasBits = true,
        .grouped = true,
        .metadata = "per group: scale (asym: and min), in the `scale=` type",
        .reference = "uniform integer quantizer (quantization.md §2)",
        .description = "uniform integers of 1-8 bits per group: asym (scale+min) or sym (scale)",
        .levels = GroupedLevels::Integer,
        .options = kOptionSym | kOptionIntegerGrid | kOptionMinScale | kOptionClipMse | kOptionMetaType,
        .scalesPerGroup = 1,
        .asymMin = true,
        .quantizeReference = &format_ops::groupedReference,
        .quantizeFast = &format_ops::groupedFast,
        .quantizePiece = &format_ops::groupedPiece,
        .describeGroup = &format_ops::describeGrouped,
        .groupCount = &format_ops::groupsByAxis,
        .quantizesPerHead = &groupedPerHead,
        .streaming = &groupedStreaming,
        .dequantFor = &integerDequant,
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Fp8E4M3,
        .name = "fp8_e4m3",
        .kind = FormatKind::Float8,
        .payloadBits = 8.0,
        .grouped = true,
        .metadata = "per group: one scale (fp32 by default; none with unitscale)",
        .reference = "OCP FP8 E4M3 (no infinities, max 448), RNE, saturating",
        .description = "8-bit float, 4 exponent / 3 mantissa bits, scaled by max-abs/448",
        .levels = GroupedLevels::E4m3,
        .defaultAxis = Axis::Tensor,
        .defaultScale = MetaType::Fp32,
        .options = kOptionUnitscale | kOptionMinScale | kOptionClipMse | kOptionMetaType,
        .scalesPerGroup = 1,
        .quantizeReference = &format_ops::groupedReference,
        .quantizeFast = &format_ops::groupedFast,
        .quantizePiece = &format_ops::groupedPiece,
        .describeGroup = &format_ops::describeGrouped,
        .groupCount = &format_ops::groupsByAxis,
        .quantizesPerHead = &groupedPerHead,
        .streaming = &groupedStreaming,
        .dequantFor = &fp8Dequant,
    },
    FormatInfo{
        .id = FormatId::Fp8E5M2,
        .name = "fp8_e5m2",
        .kind = FormatKind::Float8,
        .payloadBits = 8.0,
        .grouped = true,
        .metadata = "per group: one scale (fp32 by default; none with unitscale)",
        .reference = "OCP FP8 E5M2 (max finite 57344), RNE, saturating",
        .description = "8-bit float, 5 exponent / 2 mantissa bits, scaled by max-abs/57344",
        .levels = GroupedLevels::E5m2,
        .defaultAxis = Axis::Tensor,
        .defaultScale = MetaType::Fp32,
        .options = kOptionUnitscale | kOptionMinScale | kOptionClipMse | kOptionMetaType,
        .scalesPerGroup = 1,
        .quantizeReference = &format_ops::groupedReference,
        .quantizeFast = &format_ops::groupedFast,
        .quantizePiece = &format_ops::groupedPiece,
        .describeGroup = &format_ops::describeGrouped,
        .groupCount = &format_ops::groupsByAxis,
        .quantizesPerHead = &groupedPerHead,
        .streaming = &groupedStreaming,
        .dequantFor = &fp8Dequant,
    },
    FormatInfo{
        .id = FormatId::Nf4,
        .name = "nf4",
        .kind = FormatKind::Codebook,
        .payloadBits = 4.0,
        .grouped = true,
        .metadata = "per group: one absmax scale",
        .reference = "QLoRA NormalFloat4 codebook",
        .description = "4-bit codebook of normal quantiles (QLoRA NF4), scaled by group max-abs",
        .levels = GroupedLevels::Nf4,
        .defaultGroup = 64,  // QLoRA's NF4 block size
        .options = kOptionClipMse | kOptionMetaType,
        .scalesPerGroup = 1,
        .quantizeReference = &format_ops::groupedReference,
        .quantizeFast = &format_ops::groupedFast,
        .quantizePiece = &format_ops::groupedPiece,
        .describeGroup = &format_ops::describeGrouped,
        .groupCount = &format_ops::groupsByAxis,
        .quantizesPerHead = &groupedPerHead,
        .streaming = &groupedStreaming,
        .dequant = {.perElement = 4, .perGroup = 1},
    },
    FormatInfo{
        .id = FormatId::Mxfp4,
        .name = "mxfp4",
        .kind = FormatKind::Block,
        .blockSize = 32,
        .payloadBits = 4.0,
        .blockMetaBits = 8,
        .metadata = "per 32-value block: one E8M0 power-of-two scale",
        .reference = "OCP Microscaling MXFP4 (E2M1 elements, E8M0 scale)",
        .description = "OCP MX fp4: E2M1 values, power-of-two scale per 32 values of a token row",
        .blockCodeLo = 0,
        .blockCodeHi = 15,
        .blockCodeValue = &kernels::e2m1CodeValue,
        .quantizeReference = &format_ops::blocksReference,
        .quantizeFast = &format_ops::blocksFast,
        .quantizePiece = &format_ops::blocksPiece,
        .blockKernel = &kernels::mxfp4Blocks,
        .blockReference = &reference::mxfp4Block,
        .blockScale = &kernels::mxfp4Scale,
        .describeGroup = &format_ops::describeBlock,
        .groupCount = &format_ops::groupsPerBlock,
        .quantizesPerHead = &blocksInHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 4, .perGroup = 1},  // e8m0 → 2^e per block
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Nvfp4,
        .name = "nvfp4",
        .kind = FormatKind::Block,
        .blockSize = 16,
        .payloadBits = 4.0,
        .blockMetaBits = 8,
        .tensorMetaBits = 32,
        .metadata = "per 16-value block: one E4M3 scale; per layer tensor: one fp32 scale",
        .reference = "NVIDIA NVFP4 (E2M1 elements, E4M3 block scale, fp32 tensor scale)",
        .description = "NVIDIA fp4: E2M1 values, E4M3 scale per 16 values, fp32 scale per tensor",
        .blockCodeLo = 0,
        .blockCodeHi = 15,
        .blockCodeValue = &kernels::e2m1CodeValue,
        .options = kOptionGlobalScale | kOptionFourOverSix,
        .tensorScale = kernels::nvfp4GlobalScale,
        .quantizeReference = &format_ops::blocksReference,
        .quantizeFast = &format_ops::blocksFast,
        .quantizePiece = &format_ops::blocksPiece,
        .blockKernel = &kernels::nvfp4Blocks,
        .blockReference = &reference::nvfp4Block,
        .blockScale = &kernels::nvfp4Scale,
        .describeGroup = &format_ops::describeBlock,
        .groupCount = &format_ops::groupsPerBlock,
        .quantizesPerHead = &neverPerHead,
        .streaming = &streamCalibrated,
        .dequant = {.perElement = 4, .perGroup = 2},  // e4m3 decode and × global per block
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Kvfp4,
        .name = "kvfp4",
        .kind = FormatKind::Block,
        .blockSize = 16,
        .payloadBits = 4.0,
        .blockMetaBits = 8,
        .metadata = "per 16-value block: one 8-bit power-of-two exponent (e + 127)",
        .reference = "SGLang KVFP4 (FP4MXBlock16KVQuantizeUtil): E2M1 with ties away from zero, scale 2^ceil(log2(max/6))",
        .description = "SGLang fp4: E2M1 values (ties away from zero), power-of-two scale 2^ceil(log2(max/6)) per 16 "
               "values of a token row",
        .blockCodeLo = 0,
        .blockCodeHi = 15,
        .blockCodeValue = &kernels::e2m1CodeValue,
        .quantizeReference = &format_ops::blocksReference,
        .quantizeFast = &format_ops::blocksFast,
        .quantizePiece = &format_ops::blocksPiece,
        .blockKernel = &kernels::kvfp4Blocks,
        .blockReference = &reference::kvfp4Block,
        .blockScale = &kernels::kvfp4Scale,
        .describeGroup = &format_ops::describeBlock,
        .groupCount = &format_ops::groupsPerBlock,
        .quantizesPerHead = &blocksInHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 4, .perGroup = 1},  // exp2(e − 127) per block
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Q8_0,
        .name = "q8_0",
        .kind = FormatKind::Block,
        .blockSize = 32,
        .payloadBits = 8.0,
        .blockMetaBits = 16,
        .metadata = "per 32-value block: fp16 scale",
        .reference = "ggml quantize_row_q8_0_ref",
        .description = "ggml q8_0: 8-bit symmetric, fp16 scale per 32 values (8.5 bpe)",
        .blockCodeLo = -127,
        .blockCodeHi = 127,
        .quantizeReference = &format_ops::blocksReference,
        .quantizeFast = &format_ops::blocksFast,
        .quantizePiece = &format_ops::blocksPiece,
        .blockKernel = &kernels::q8_0Blocks,
        .blockFromKernel = &kernels::q8_0BlocksFrom,
        .blockReference = &reference::q8_0Block,
        .blockScale = &kernels::q8_0Scale,
        .describeGroup = &format_ops::describeBlock,
        .groupCount = &format_ops::groupsPerBlock,
        .quantizesPerHead = &blocksInHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 2, .perGroup = 1},
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Q4_0,
        .name = "q4_0",
        .kind = FormatKind::Block,
        .blockSize = 32,
        .payloadBits = 4.0,
        .blockMetaBits = 16,
        .metadata = "per 32-value block: fp16 scale",
        .reference = "ggml quantize_row_q4_0_ref",
        .description = "ggml q4_0: 4-bit symmetric, fp16 scale per 32 values (4.5 bpe)",
        .blockCodeLo = -8,
        .blockCodeHi = 7,
        .quantizeReference = &format_ops::blocksReference,
        .quantizeFast = &format_ops::blocksFast,
        .quantizePiece = &format_ops::blocksPiece,
        .blockKernel = &kernels::q4_0Blocks,
        .blockFromKernel = &kernels::q4_0BlocksFrom,
        .blockReference = &reference::q4_0Block,
        .blockScale = &kernels::q4_0Scale,
        .describeGroup = &format_ops::describeBlock,
        .groupCount = &format_ops::groupsPerBlock,
        .quantizesPerHead = &blocksInHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 5, .perGroup = 1},  // − 8 before the multiply
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Q4_1,
        .name = "q4_1",
        .kind = FormatKind::Block,
        .blockSize = 32,
        .payloadBits = 4.0,
        .blockMetaBits = 32,
        .metadata = "per 32-value block: fp16 scale and fp16 min",
        .reference = "ggml quantize_row_q4_1_ref",
        .description = "ggml q4_1: 4-bit with min, fp16 scale+min per 32 values (5 bpe)",
        .blockCodeLo = 0,
        .blockCodeHi = 15,
        .quantizeReference = &format_ops::blocksReference,
        .quantizeFast = &format_ops::blocksFast,
        .quantizePiece = &format_ops::blocksPiece,
        .blockKernel = &kernels::q4_1Blocks,
        .blockFromKernel = &kernels::q4_1BlocksFrom,
        .blockReference = &reference::q4_1Block,
        .blockScale = &kernels::q4_1Scale,
        .describeGroup = &format_ops::describeBlock,
        .groupCount = &format_ops::groupsPerBlock,
        .quantizesPerHead = &blocksInHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 5, .perGroup = 2},
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Q5_0,
        .name = "q5_0",
        .kind = FormatKind::Block,
        .blockSize = 32,
        .payloadBits = 5.0,
        .blockMetaBits = 16,
        .metadata = "per 32-value block: fp16 scale",
        .reference = "ggml quantize_row_q5_0_ref",
        .description = "ggml q5_0: 5-bit symmetric, fp16 scale per 32 values (5.5 bpe)",
        .blockCodeLo = -16,
        .blockCodeHi = 15,
        .quantizeReference = &format_ops::blocksReference,
        .quantizeFast = &format_ops::blocksFast,
        .quantizePiece = &format_ops::blocksPiece,
        .blockKernel = &kernels::q5_0Blocks,
        .blockFromKernel = &kernels::q5_0BlocksFrom,
        .blockReference = &reference::q5_0Block,
        .blockScale = &kernels::q5_0Scale,
        .describeGroup = &format_ops::describeBlock,
        .groupCount = &format_ops::groupsPerBlock,
        .quantizesPerHead = &blocksInHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 8, .perGroup = 1},  // + the fifth bit: shift, mask, or
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Q5_1,
        .name = "q5_1",
        .kind = FormatKind::Block,
        .blockSize = 32,
        .payloadBits = 5.0,
        .blockMetaBits = 32,
        .metadata = "per 32-value block: fp16 scale and fp16 min",
        .reference = "ggml quantize_row_q5_1_ref",
        .description = "ggml q5_1: 5-bit with min, fp16 scale+min per 32 values (6 bpe)",
        .blockCodeLo = 0,
        .blockCodeHi = 31,
        .quantizeReference = &format_ops::blocksReference,
        .quantizeFast = &format_ops::blocksFast,
        .quantizePiece = &format_ops::blocksPiece,
        .blockKernel = &kernels::q5_1Blocks,
        .blockFromKernel = &kernels::q5_1BlocksFrom,
        .blockReference = &reference::q5_1Block,
        .blockScale = &kernels::q5_1Scale,
        .describeGroup = &format_ops::describeBlock,
        .groupCount = &format_ops::groupsPerBlock,
        .quantizesPerHead = &blocksInHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 8, .perGroup = 2},
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Iq4Nl,
        .name = "iq4_nl",
        .kind = FormatKind::Block,
        .blockSize = 32,
        .payloadBits = 4.0,
        .blockMetaBits = 16,
        .metadata = "per 32-value block: fp16 scale",
        .reference = "ggml quantize_row_iq4_nl_ref",
        .description = "ggml iq4_nl: 4-bit non-linear table -127..113, fp16 scale per 32 values (4.5 bpe)",
        .blockCodeLo = 0,
        .blockCodeHi = 15,
        .blockCodeValue = &kernels::iq4nlCodeValue,
        .quantizeReference = &format_ops::blocksReference,
        .quantizeFast = &format_ops::blocksFast,
        .quantizePiece = &format_ops::blocksPiece,
        .blockKernel = &kernels::iq4nlBlocks,
        .blockReference = &reference::iq4nlBlock,
        .blockScale = &kernels::iq4nlScale,
        .describeGroup = &format_ops::describeBlock,
        .groupCount = &format_ops::groupsPerBlock,
        .quantizesPerHead = &blocksInHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 4, .perGroup = 1},
        .benchTarget = 0.50,
    },
    FormatInfo{
        .id = FormatId::Tq,
        .name = "tq",
        .kind = FormatKind::Vector,
        .hasBits = true,
        .metadata = "per vector (one token of one kv head): its norm, in the `scale=` type",
        .reference = "TurboQuant-MSE (Zandieh et al. 2025): Lloyd-Max codebook of a random unit vector's coordinate",
        .description = "TurboQuant-MSE: rotated unit vector, each coordinate on the b-bit Lloyd-Max codebook of "
               "the sphere's coordinate density, times the stored norm",
        .options = kOptionMetaType,
        .alwaysRotates = true,
        .scalesPerGroup = 1,
        .quantizeReference = &format_ops::tqReference,
        .quantizeFast = &format_ops::tqFast,
        .describeGroup = &format_ops::describeSphere,
        .groupCount = &format_ops::groupsPerVector,
        .quantizesPerHead = &alwaysPerHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 4, .perGroup = 1},  // a codebook lookup and the norm's multiply
        .benchTarget = 0.25,
    },
    FormatInfo{
        .id = FormatId::Tqp,
        .name = "tqp",
        .kind = FormatKind::Vector,
        .hasBits = true,
        .metadata = "per vector: its norm and its residual's norm, in the `scale=` type",
        .reference = "TurboQuant-prod (Zandieh et al. 2025): tq<b-1> plus a 1-bit QJL sketch of the residual",
        .description = "TurboQuant-prod: tq<b-1> plus the signs of a seeded Gaussian projection of the residual "
               "(unbiased inner products, larger MSE than tq<b>)",
        .minBits = 2,
        .codebookBitsOffset = 1,
        .options = kOptionMetaType,
        .alwaysRotates = true,
        .bitsNote = "tqp<b> spends one of its b bits on the QJL sign",
        .scalesPerGroup = 2,
        .quantizeReference = &format_ops::tqpReference,
        .quantizeFast = &format_ops::tqpFast,
        .describeGroup = &format_ops::describeSphere,
        .groupCount = &format_ops::groupsPerVector,
        .quantizesPerHead = &alwaysPerHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 7, .perGroup = 2, .perElementPerDim = 1},  // and the sign bit, the QJL correction's add and its D×D product
        .benchTarget = 0.10,
    },
    FormatInfo{
        .id = FormatId::Tqg,
        .name = "tqg",
        .kind = FormatKind::Vector,
        .hasBits = true,
        .metadata = "per vector (one token of one kv head): its norm, in the `scale=` type",
        .reference = "vLLM TurboQuant keys (turboquant_*_nc): Gaussian N(0, 1/D) Lloyd-Max codebook, norm correction",
        .description = "vLLM TurboQuant-MSE keys: rotated vector over (norm + 1e-8), each coordinate on vLLM's b-bit "
               "Lloyd-Max codebook of N(0, 1/D), the codes renormalized to unit norm, times the stored norm",
        .options = kOptionMetaType,
        .alwaysRotates = true,
        .scalesPerGroup = 1,
        .quantizeReference = &format_ops::tqgReference,
        .quantizeFast = &format_ops::tqgFast,
        .describeGroup = &format_ops::describeTqg,
        .groupCount = &format_ops::groupsPerVector,
        .quantizesPerHead = &alwaysPerHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 6, .perGroup = 2},  // and the norm correction: Σc² and the multiply by 1/√(Σc²)
    },
    FormatInfo{
        .id = FormatId::Lmtq,
        .name = "lmtq",
        .kind = FormatKind::Vector,
        .hasBits = true,
        .metadata = "per vector (one token of one kv head): its norm, in the `scale=` type (the model dtype)",
        .reference = "LMDeploy TurboQuant values (quant_policy 42): Gaussian Lloyd-Max codebook of turbo_quant.py",
        .description = "LMDeploy TurboQuant (MSE): Hadamard-rotated unit vector, each coordinate on LMDeploy's b-bit "
               "Gaussian N(0, 1/D) Lloyd-Max table, times the stored norm",
        .minBits = 2,
        .maxBits = 3,
        .options = kOptionMetaType,
        .alwaysRotates = true,
        .hadamardOnly = true,
        .scalesPerGroup = 1,
        .quantizeReference = &format_ops::lmdeployReference,
        .quantizeFast = &format_ops::lmdeployFast,
        .describeGroup = &format_ops::describeLmdeploy,
        .groupCount = &format_ops::groupsPerVector,
        .quantizesPerHead = &alwaysPerHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 4, .perGroup = 1},
    },
    FormatInfo{
        .id = FormatId::Lmqjl,
        .name = "lmqjl",
        .kind = FormatKind::Vector,
        .hasBits = true,
        .metadata = "per vector: its norm and its residual's RMS, in the `scale=` type (the model dtype)",
        .reference = "LMDeploy TurboQuant keys (quant_policy 42, \"QJL4\"): lmtq<b-1> plus the residual's sign bits",
        .description = "LMDeploy TurboQuant keys: lmtq<b-1> plus one sign bit per coordinate of the residual, scaled by "
               "the residual's RMS (deterministic, no projection)",
        .minBits = 3,
        .maxBits = 4,
        .codebookBitsOffset = 1,
        .options = kOptionMetaType,
        .alwaysRotates = true,
        .hadamardOnly = true,
        .scalesPerGroup = 2,
        .quantizeReference = &format_ops::lmdeployReference,
        .quantizeFast = &format_ops::lmdeployFast,
        .describeGroup = &format_ops::describeLmdeploy,
        .groupCount = &format_ops::groupsPerVector,
        .quantizesPerHead = &alwaysPerHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 6, .perGroup = 2},  // and the sign's multiply by the stored RMS and the add
    },
    FormatInfo{
        .id = FormatId::Nuq,
        .name = "nuq",
        .kind = FormatKind::NonUniform,
        .hasBits = true,
        .grouped = true,
        .metadata = "per group: one absmax scale; per layer tensor: 2^b fp16 codebook values",
        .reference = "KVQuant-style non-uniform datatype (Hooper et al. 2024), plain k-means per layer tensor",
        .description = "KVQuant-style non-uniform: values over their group's max-abs on a k-means codebook of "
               "2^b fp16 values fitted to the whole layer tensor",
        .minBits = 2,
        .options = kOptionMetaType,
        .symNote = "nuq is symmetric by construction: its scale is the group's max-abs",
        .scalesPerGroup = 1,
        .codebookEntryBits = 16,
        .quantizeReference = &format_ops::nuqReference,
        .quantizeFast = &format_ops::nuqFast,
        .describeGroup = &format_ops::describeNuq,
        .groupCount = &format_ops::groupsByAxis,
        .quantizesPerHead = &neverPerHead,
        .streaming = &streamCalibrated,
        .calibratedNote = "codebook (k-means over the layer tensor) and scales calibrated on the dump's whole cache (KVQuant "
                        "calibrates its datatypes offline): each token is quantized on arrival with the codebook and scales "
                        "of the dump's tensor in which its row is replaced by the replay's",
        .dequant = {.perElement = 4, .perGroup = 1},  // a lookup in the layer's 2^b-entry table and the group scale
        .benchTarget = 0.05,
    },
    FormatInfo{
        .id = FormatId::Hqq,
        .name = "hqq",
        .kind = FormatKind::Optimized,
        .hasBits = true,
        .metadata = "per group: scale and zero point in the `scale=` type (the model dtype)",
        .reference = "HQQ Quantizer.quantize with optimize_weights_proximal_legacy (mobiusml/hqq), as transformers' "
               "HQQ cache calls it",
        .description = "HQQ (transformers' backend=HQQ): asymmetric groups of the flattened layer tensor, zero points "
               "refined by HQQ's proximal lp-shrinkage rounds",
        .defaultAxis = Axis::Tensor,
        .defaultGroup = 64,  // transformers QuantizedCacheConfig q_group_size; HQQ's axis 0 by default
        .flatGroups = true,
        .scalesPerGroup = 2,
        .payload = &hqqPayload,
        .quantizeReference = &format_ops::hqqReference,
        .quantizeFast = &format_ops::hqqFast,
        .describeGroup = &format_ops::describeHqq,
        .groupCount = &format_ops::groupsFlat,
        .quantizesPerHead = &neverPerHead,
        .streaming = &streamCalibrated,
        .calibratedNote = "HQQ's groups and zero points fitted to the dump's whole cache at once (transformers quantizes "
                        "the whole prefill in one call, transformers#35185): each token is quantized on arrival with the "
                        "groups of the dump's tensor in which its row is replaced by the replay's",
        .dequant = {.perElement = 5, .perGroup = 2},  // (q − zero)·scale: subtract, multiply
    },
    FormatInfo{
        .id = FormatId::Fp16,
        .name = "fp16",
        .kind = FormatKind::Elementwise,
        .payloadBits = 16.0,
        .metadata = "none",
        .reference = "IEEE binary16, round to nearest even",
        .description = "every value rounded to IEEE half precision",
        .quantizeReference = &format_ops::fp16Reference,
        .quantizeFast = &format_ops::fp16Fast,
        .quantizePiece = &format_ops::fp16Piece,
        .describeGroup = &format_ops::describeFp16,
        .quantizesPerHead = &alwaysPerHead,
        .streaming = &streamTokenLocal,
        .dequant = {},  // attention reads fp16 directly
    },
    FormatInfo{
        .id = FormatId::Bf16,
        .name = "bf16",
        .kind = FormatKind::Elementwise,
        .payloadBits = 16.0,
        .metadata = "none",
        .reference = "bfloat16, round to nearest even",
        .description = "every value rounded to bfloat16 (8 exponent, 7 mantissa bits)",
        .quantizeReference = &format_ops::bf16Reference,
        .quantizeFast = &format_ops::bf16Fast,
        .quantizePiece = &format_ops::bf16Piece,
        .describeGroup = &format_ops::describeBf16,
        .quantizesPerHead = &alwaysPerHead,
        .streaming = &streamTokenLocal,
        .dequant = {.perElement = 1},  // a shift into float32
    },
    FormatInfo{
        .id = FormatId::Fp32,
        .name = "fp32",
        .kind = FormatKind::Elementwise,
        .payloadBits = 32.0,
        .metadata = "none",
        .reference = "IEEE binary32 (the dump's values as they are)",
        .description = "every value kept as a 32-bit float: exact, counted as 32 bits (llama.cpp's f32 cache)",
        .quantizeReference = &format_ops::unchanged,
        .quantizeFast = &format_ops::unchanged,
        .quantizePiece = &format_ops::unchangedPiece,
        .describeGroup = &format_ops::describeExact,
        .quantizesPerHead = &alwaysPerHead,
        .streaming = &streamTokenLocal,
        .dequant = {},  // read as it is
    },
    FormatInfo{
        .id = FormatId::None,
        .name = "none",
        .kind = FormatKind::Elementwise,
        .payloadBits = 16.0,
        .metadata = "none",
        .reference = "exact copy (counted as the fp16 baseline)",
        .description = "no quantization: the reference itself, counted as 16 bits",
        .exact = true,
        .quantizeReference = &format_ops::unchanged,
        .quantizeFast = &format_ops::unchanged,
        .quantizePiece = &format_ops::unchangedPiece,
        .describeGroup = &format_ops::describeExact,
        .quantizesPerHead = &alwaysPerHead,
        .streaming = &streamExact,
        .dequant = {},  // attention reads fp16 directly
    },
};

}  // namespace

std::span<const FormatInfo> formatTable() { return kFormats; }

const FormatInfo& formatInfo(FormatId id) {
  for (const FormatInfo& info : kFormats) {
    if (info.id == id) return info;
  }
  return kFormats.back();  // unreachable for a valid FormatId
}

const FormatInfo* findFormat(std::string_view name) {
  for (const FormatInfo& info : kFormats) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

}  // namespace kvscope
