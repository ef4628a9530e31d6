// SPDX-License-Identifier: GPL-3.0-or-later
// lmtq / lmqjl: LMDeploy's TurboQuant cache, read from InternLM/lmdeploy (commit 1263d5cd):
// lmdeploy/pytorch/kernels/cuda/turbo_quant.py (get_lloyd_max_codebook, hadamard_rotate),
// fill_kv_cache.py (_fill_page_quant_turbo_qjl4 for K, _fill_page_quant_turbo_int2 for V) and
// flatten_kv_cache.py (the dequantization). docs/formats.md states the rule.
#include "core/quant/lmdeploy_tq.h"

#include <algorithm>
#include <cmath>

#include "core/quant/codebook.h"
#include "core/quant/fp_types.h"

namespace kvscope::lmdeploy_tq {
namespace {

// turbo_quant.py get_lloyd_max_codebook, "precomputed ... at sigma=1" (numeric tables; the
// converged Gaussian Lloyd–Max values to about 1e-7, tests/core/quant/codebook checks that).
const std::vector<float> kC2{-1.5104176f, -0.4527808f, 0.4527808f, 1.5104176f};
const std::vector<float> kB2{-0.9815992f, 0.0f, 0.9815992f};
const std::vector<float> kC3{-2.1519456f, -1.3439093f, -0.7560052f, -0.2450942f,
                             0.2450942f,  0.7560052f,  1.3439093f,  2.1519456f};
const std::vector<float> kB3{-1.7479274f, -1.0499573f, -0.5005497f, 0.0f, 0.5005497f, 1.0499573f, 1.7479274f};

// The rotated vector as hadamard_rotate returns it: cast back to the model dtype.
void toModelDtype(float* y, int dim, MetaType meta) {
  if (meta == MetaType::Fp32) return;
  for (int i = 0; i < dim; ++i) y[i] = fp::metaRound(y[i], meta);
}

// sqrt(Σ v² + 1e-8) as float: LMDeploy's tl.sqrt(tl.sum(x * x) + 1e-8).
float normWithEpsilon(const float* v, int dim) {
  return static_cast<float>(std::sqrt(codebook::sumOfSquares(v, dim) + 1e-8));
}

template <bool Reference>
void rows(FormatId format, float* x, int64_t count, int dim, int bits, MetaType meta) {
  const bool qjl = format == FormatId::Lmqjl;
  const Book b = book(dim, qjl ? bits - 1 : bits);
  const auto levels = static_cast<int>(b.centroids.size());
  const float rootD = static_cast<float>(std::sqrt(static_cast<double>(dim)));  // math.sqrt(2 * head_dim)
  std::vector<float> u(static_cast<size_t>(dim)), r(static_cast<size_t>(dim));
  std::vector<int> code(static_cast<size_t>(dim));
  for (int64_t row = 0; row < count; ++row) {
    float* y = x + row * dim;
    toModelDtype(y, dim, meta);
    const float n = normWithEpsilon(y, dim);
    for (int i = 0; i < dim; ++i) {
      u[static_cast<size_t>(i)] = y[i] / n;
      int k = 0;
      if constexpr (Reference) {
        // the number of boundaries strictly below u
        k = static_cast<int>(std::lower_bound(b.boundaries.begin(), b.boundaries.end(), u[static_cast<size_t>(i)]) -
                             b.boundaries.begin());
      } else {
        for (int j = 0; j + 1 < levels; ++j) k += u[static_cast<size_t>(i)] > b.boundaries[static_cast<size_t>(j)] ? 1 : 0;
      }
      code[static_cast<size_t>(i)] = k;
    }
    const float nStored = fp::metaRound(n, meta);
    if (!qjl) {
      for (int i = 0; i < dim; ++i) {
        y[i] = fp::metaRound(b.centroids[static_cast<size_t>(code[static_cast<size_t>(i)])] * nStored, meta);
      }
      continue;
    }
    for (int i = 0; i < dim; ++i) {
      r[static_cast<size_t>(i)] = u[static_cast<size_t>(i)] - b.centroids[static_cast<size_t>(code[static_cast<size_t>(i)])];
    }
    const float gamma = normWithEpsilon(r.data(), dim) / rootD;
    const float gStored = fp::metaRound(gamma, meta);
    for (int i = 0; i < dim; ++i) {
      const float sign = r[static_cast<size_t>(i)] >= 0.0f ? 1.0f : -1.0f;  // qjl bit = (r >= 0), sign = 2·bit − 1
      const float c = b.centroids[static_cast<size_t>(code[static_cast<size_t>(i)])];
      y[i] = fp::metaRound(nStored * (c + gStored * sign), meta);
    }
  }
}

}  // namespace

const std::vector<float>& centroidsAtUnitSigma(int bits) { return bits == 2 ? kC2 : kC3; }
const std::vector<float>& boundariesAtUnitSigma(int bits) { return bits == 2 ? kB2 : kB3; }

Book book(int dim, int bits) {
  // centroids_std * sigma: a float32 tensor times a Python float, computed in float.
  const auto sigma = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  Book b;
  for (float c : centroidsAtUnitSigma(bits)) b.centroids.push_back(c * sigma);
  for (float v : boundariesAtUnitSigma(bits)) b.boundaries.push_back(v * sigma);
  return b;
}

void quantizeRows(FormatId format, float* x, int64_t count, int dim, int bits, MetaType meta) {
  rows<false>(format, x, count, dim, bits, meta);
}

void quantizeRowsReference(FormatId format, float* x, int64_t count, int dim, int bits, MetaType meta) {
  rows<true>(format, x, count, dim, bits, meta);
}

}  // namespace kvscope::lmdeploy_tq
