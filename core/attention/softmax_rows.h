// SPDX-License-Identifier: GPL-3.0-or-later
// The per-row float64 work of the attention engine (softmax, log-sum-exp, KL, the float
// probabilities for the output GEMMs) in a few fused, vectorized passes. Every value is the one
// the engine's Eigen expressions give on the baseline build (SSE2, two doubles per packet): the
// same operations in the same order per element, and sums in Eigen's reduction order, so the
// AVX-512, AVX2 and baseline clones and the Eigen code they replace agree bit for bit
// (tests/core/attention/softmax_rows_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace kvscope::attention_engine {

/// What one pass over a row's scores finds. s_j = scale·S_j, d_j = scale·ΔS_j, ŝ_j = s_j + d_j.
struct RowScan {
  double maxScore = 0;     ///< max_j s_j
  double maxScoreHat = 0;  ///< max_j ŝ_j (with ΔS)
  double absDeltaSum = 0;  ///< Σ_j |d_j|, in the order of Eigen's `abs().sum()`
  double absDeltaMax = 0;  ///< max_j |d_j|
  bool finite = true;      ///< every s_j, d_j and ŝ_j is finite (else use the Eigen path)
};

/// Scans n ≥ 1 scores S (and, when `deltaScores` is not null, their changes ΔS).
RowScan scanScores(const float* scores, const float* deltaScores, int64_t n, double scale);

/// e_j = exp(x_j − m) for x = s (or ŝ when `deltaScores` is not null), as Eigen's
/// `ArrayXd::exp()` computes it into an array starting on a 16-byte boundary: its packet exp for
/// the pairs, std::exp for an odd last element. Returns Σ e_j in the order of Eigen's `sum()`.
double expScores(const float* scores, const float* deltaScores, int64_t n, double scale, double m, double* e);

/// Σ x_j in the order of Eigen's `sum()` over n doubles starting on a 16-byte boundary (or over
/// an expression without direct access) on the baseline build.
double eigenOrderSum(const double* x, int64_t n);

/// Eigen's packet exp of the baseline build for one value (pexp_double with SSE2's floor and
/// ldexp), as a reference for tests.
double eigenPacketExp(double x);

/// The float a probability (or a change of one) enters the output GEMMs as: the nearest float,
/// zero below the smallest normal float (2^-126), which the GEMMs would spend microcode assists
/// on for no visible effect (docs/performance.md, section 2).
float gemmFloat(double x);

/// One row's normalization and what the output GEMMs read:
///   p_j = e_j / z written to p (which may be e) when `divide`, else p_j = e_j (p unused);
///   with eHat: p̂_j = ê_j / ẑ written back over eHat, and Σ p_j·d_j (Eigen's order) returned;
///   prob[j] = gemmFloat(p_j), deltaProb[j] = gemmFloat(p̂_j − p_j), probHat[j] = gemmFloat(p̂_j)
///   for each that is not null.
struct RowOutputs {
  float* prob = nullptr;
  float* deltaProb = nullptr;
  float* probHat = nullptr;
};
double normalizeRow(const double* e, double* p, bool divide, double z, double* eHat, double zHat,
                    const float* deltaScores, double scale, int64_t n, const RowOutputs& out);

/// Indices j (ascending) with x_j ≥ threshold, x = s or ŝ as in expScores: the candidates of
/// the engine's exact argmax (few: those within its error bound of the maximum).
void candidatesAtLeast(const float* scores, const float* deltaScores, int64_t n, double scale, double threshold,
                       std::vector<int64_t>& out);

}  // namespace kvscope::attention_engine
