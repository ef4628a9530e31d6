// SPDX-License-Identifier: GPL-3.0-or-later
// LMDeploy's TurboQuant KV cache (`--quant-policy 42`, PyTorch engine) as two vector formats
// (docs/formats.md "lmtq and lmqjl"): `lmtq<b>`, a b-bit Gaussian Lloyd–Max codebook on the unit
// vector of the rotated token (LMDeploy's values, b = 2), and `lmqjl<b>`, lmtq<b−1> plus the sign
// of each coordinate's residual scaled by the residual's RMS (LMDeploy's "QJL4" keys, b = 4).
// Like tq, they work on rotated vectors; rotating is the pipeline's job.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant/spec.h"

namespace kvscope::lmdeploy_tq {

/// The codebook LMDeploy scales to head dim D (turbo_quant.py get_lloyd_max_codebook): its σ = 1
/// tables times σ = 1/√D, in float (fp32(c · fp32(σ))). bits 2 or 3.
struct Book {
  std::vector<float> centroids;   ///< 2^b values, ascending
  std::vector<float> boundaries;  ///< 2^b − 1 values: code = #(u > boundary)
};
Book book(int dim, int bits);
/// The σ = 1 tables as LMDeploy lists them (float32): centroids and boundaries.
const std::vector<float>& centroidsAtUnitSigma(int bits);
const std::vector<float>& boundariesAtUnitSigma(int bits);

/// Whether a spec is one of the two formats.
inline bool isLmdeployFormat(FormatId f) { return f == FormatId::Lmtq || f == FormatId::Lmqjl; }
/// The codebook bits of a spec: lmtq<b> → b, lmqjl<b> → b − 1.
inline int codebookBits(const QuantSpec& spec) { return spec.format == FormatId::Lmqjl ? spec.bits - 1 : spec.bits; }

/// lmtq<bits> / lmqjl<bits> on `rows` rotated vectors of `dim` floats, in place.
void quantizeRows(FormatId format, float* x, int64_t rows, int dim, int bits, MetaType meta);
/// The same by a second formulation (codes by binary search, scalar loops), for the tests.
void quantizeRowsReference(FormatId format, float* x, int64_t rows, int dim, int bits, MetaType meta);

}  // namespace kvscope::lmdeploy_tq
