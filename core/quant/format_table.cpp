// SPDX-License-Identifier: GPL-3.0-or-later
// The one table of formats (quantization.md §2). Adding a row here makes the parser accept the
// name, the storage accounting count it, the GUI list it and the table-driven tests cover it.
#include "core/quant/format_table.h"

#include <array>

namespace kvscope {
namespace {

// Field order: id, name, kind, blockSize, payloadBits, blockMetaBits, tensorMetaBits, hasBits,
// grouped, metadata, reference, description, minBits, maxBits.
constexpr std::array kFormats{
    FormatInfo{FormatId::Int, "int", FormatKind::Integer, 0, 0.0, 0, 0, true, true,
               "per group: scale (asym: and min), in the `scale=` type",
               "uniform integer quantizer (quantization.md §2)",
               "uniform integers of 1-8 bits per group: asym (scale+min) or sym (scale)"},
    FormatInfo{FormatId::Fp8E4M3, "fp8_e4m3", FormatKind::Float8, 0, 8.0, 0, 0, false, true,
               "per group: one scale (fp32 by default; none with unitscale)",
               "OCP FP8 E4M3 (no infinities, max 448), RNE, saturating",
               "8-bit float, 4 exponent / 3 mantissa bits, scaled by max-abs/448"},
    FormatInfo{FormatId::Fp8E5M2, "fp8_e5m2", FormatKind::Float8, 0, 8.0, 0, 0, false, true,
               "per group: one scale (fp32 by default; none with unitscale)",
               "OCP FP8 E5M2 (max finite 57344), RNE, saturating",
               "8-bit float, 5 exponent / 2 mantissa bits, scaled by max-abs/57344"},
    FormatInfo{FormatId::Nf4, "nf4", FormatKind::Codebook, 0, 4.0, 0, 0, false, true,
               "per group: one absmax scale", "QLoRA NormalFloat4 codebook",
               "4-bit codebook of normal quantiles (QLoRA NF4), scaled by group max-abs"},
    FormatInfo{FormatId::Mxfp4, "mxfp4", FormatKind::Block, 32, 4.0, 8, 0, false, false,
               "per 32-value block: one E8M0 power-of-two scale",
               "OCP Microscaling MXFP4 (E2M1 elements, E8M0 scale)",
               "OCP MX fp4: E2M1 values, power-of-two scale per 32 values of a token row"},
    FormatInfo{FormatId::Nvfp4, "nvfp4", FormatKind::Block, 16, 4.0, 8, 32, false, false,
               "per 16-value block: one E4M3 scale; per layer tensor: one fp32 scale",
               "NVIDIA NVFP4 (E2M1 elements, E4M3 block scale, fp32 tensor scale)",
               "NVIDIA fp4: E2M1 values, E4M3 scale per 16 values, fp32 scale per tensor"},
    FormatInfo{FormatId::Kvfp4, "kvfp4", FormatKind::Block, 16, 4.0, 8, 0, false, false,
               "per 16-value block: one 8-bit power-of-two exponent (e + 127)",
               "SGLang KVFP4 (FP4MXBlock16KVQuantizeUtil): E2M1 with ties away from zero, scale 2^ceil(log2(max/6))",
               "SGLang fp4: E2M1 values (ties away from zero), power-of-two scale 2^ceil(log2(max/6)) per 16 "
               "values of a token row"},
    FormatInfo{FormatId::Q8_0, "q8_0", FormatKind::Block, 32, 8.0, 16, 0, false, false,
               "per 32-value block: fp16 scale", "ggml quantize_row_q8_0_ref",
               "ggml q8_0: 8-bit symmetric, fp16 scale per 32 values (8.5 bpe)"},
    FormatInfo{FormatId::Q4_0, "q4_0", FormatKind::Block, 32, 4.0, 16, 0, false, false,
               "per 32-value block: fp16 scale", "ggml quantize_row_q4_0_ref",
               "ggml q4_0: 4-bit symmetric, fp16 scale per 32 values (4.5 bpe)"},
    FormatInfo{FormatId::Q4_1, "q4_1", FormatKind::Block, 32, 4.0, 32, 0, false, false,
               "per 32-value block: fp16 scale and fp16 min", "ggml quantize_row_q4_1_ref",
               "ggml q4_1: 4-bit with min, fp16 scale+min per 32 values (5 bpe)"},
    FormatInfo{FormatId::Q5_0, "q5_0", FormatKind::Block, 32, 5.0, 16, 0, false, false,
               "per 32-value block: fp16 scale", "ggml quantize_row_q5_0_ref",
               "ggml q5_0: 5-bit symmetric, fp16 scale per 32 values (5.5 bpe)"},
    FormatInfo{FormatId::Q5_1, "q5_1", FormatKind::Block, 32, 5.0, 32, 0, false, false,
               "per 32-value block: fp16 scale and fp16 min", "ggml quantize_row_q5_1_ref",
               "ggml q5_1: 5-bit with min, fp16 scale+min per 32 values (6 bpe)"},
    FormatInfo{FormatId::Iq4Nl, "iq4_nl", FormatKind::Block, 32, 4.0, 16, 0, false, false,
               "per 32-value block: fp16 scale", "ggml quantize_row_iq4_nl_ref",
               "ggml iq4_nl: 4-bit non-linear table -127..113, fp16 scale per 32 values (4.5 bpe)"},
    FormatInfo{FormatId::Tq, "tq", FormatKind::Vector, 0, 0.0, 0, 0, true, false,
               "per vector (one token of one kv head): its norm, in the `scale=` type",
               "TurboQuant-MSE (Zandieh et al. 2025): Lloyd-Max codebook of a random unit vector's coordinate",
               "TurboQuant-MSE: rotated unit vector, each coordinate on the b-bit Lloyd-Max codebook of "
               "the sphere's coordinate density, times the stored norm", 1, 8},
    FormatInfo{FormatId::Tqp, "tqp", FormatKind::Vector, 0, 0.0, 0, 0, true, false,
               "per vector: its norm and its residual's norm, in the `scale=` type",
               "TurboQuant-prod (Zandieh et al. 2025): tq<b-1> plus a 1-bit QJL sketch of the residual",
               "TurboQuant-prod: tq<b-1> plus the signs of a seeded Gaussian projection of the residual "
               "(unbiased inner products, larger MSE than tq<b>)", 2, 8},
    FormatInfo{FormatId::Tqg, "tqg", FormatKind::Vector, 0, 0.0, 0, 0, true, false,
               "per vector (one token of one kv head): its norm, in the `scale=` type",
               "vLLM TurboQuant keys (turboquant_*_nc): Gaussian N(0, 1/D) Lloyd-Max codebook, norm correction",
               "vLLM TurboQuant-MSE keys: rotated vector over (norm + 1e-8), each coordinate on vLLM's b-bit "
               "Lloyd-Max codebook of N(0, 1/D), the codes renormalized to unit norm, times the stored norm", 1, 8},
    FormatInfo{FormatId::Lmtq, "lmtq", FormatKind::Vector, 0, 0.0, 0, 0, true, false,
               "per vector (one token of one kv head): its norm, in the `scale=` type (the model dtype)",
               "LMDeploy TurboQuant values (quant_policy 42): Gaussian Lloyd-Max codebook of turbo_quant.py",
               "LMDeploy TurboQuant (MSE): Hadamard-rotated unit vector, each coordinate on LMDeploy's b-bit "
               "Gaussian N(0, 1/D) Lloyd-Max table, times the stored norm", 2, 3},
    FormatInfo{FormatId::Lmqjl, "lmqjl", FormatKind::Vector, 0, 0.0, 0, 0, true, false,
               "per vector: its norm and its residual's RMS, in the `scale=` type (the model dtype)",
               "LMDeploy TurboQuant keys (quant_policy 42, \"QJL4\"): lmtq<b-1> plus the residual's sign bits",
               "LMDeploy TurboQuant keys: lmtq<b-1> plus one sign bit per coordinate of the residual, scaled by "
               "the residual's RMS (deterministic, no projection)", 3, 4},
    FormatInfo{FormatId::Nuq, "nuq", FormatKind::NonUniform, 0, 0.0, 0, 0, true, true,
               "per group: one absmax scale; per layer tensor: 2^b fp16 codebook values",
               "KVQuant-style non-uniform datatype (Hooper et al. 2024), plain k-means per layer tensor",
               "KVQuant-style non-uniform: values over their group's max-abs on a k-means codebook of "
               "2^b fp16 values fitted to the whole layer tensor", 2, 8},
    FormatInfo{FormatId::Hqq, "hqq", FormatKind::Optimized, 0, 0.0, 0, 0, true, false,
               "per group: scale and zero point in the `scale=` type (the model dtype)",
               "HQQ Quantizer.quantize with optimize_weights_proximal_legacy (mobiusml/hqq), as transformers' "
               "HQQ cache calls it",
               "HQQ (transformers' backend=HQQ): asymmetric groups of the flattened layer tensor, zero points "
               "refined by HQQ's proximal lp-shrinkage rounds", 1, 8},
    FormatInfo{FormatId::Fp16, "fp16", FormatKind::Elementwise, 0, 16.0, 0, 0, false, false,
               "none", "IEEE binary16, round to nearest even",
               "every value rounded to IEEE half precision"},
    FormatInfo{FormatId::Bf16, "bf16", FormatKind::Elementwise, 0, 16.0, 0, 0, false, false,
               "none", "bfloat16, round to nearest even",
               "every value rounded to bfloat16 (8 exponent, 7 mantissa bits)"},
    FormatInfo{FormatId::Fp32, "fp32", FormatKind::Elementwise, 0, 32.0, 0, 0, false, false,
               "none", "IEEE binary32 (the dump's values as they are)",
               "every value kept as a 32-bit float: exact, counted as 32 bits (llama.cpp's f32 cache)"},
    FormatInfo{FormatId::None, "none", FormatKind::Elementwise, 0, 16.0, 0, 0, false, false,
               "none", "exact copy (counted as the fp16 baseline)",
               "no quantization: the reference itself, counted as 16 bits"},
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
