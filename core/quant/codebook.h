// SPDX-License-Identifier: GPL-3.0-or-later
// The codebook quantizers of quantization.md §11: TurboQuant's Lloyd–Max codebooks for one
// coordinate of a random unit vector (tq, tqp), its 1-bit QJL residual sketch (tqp), and the
// k-means codebook of KVQuant-style non-uniform datatypes (nuq). The per-vector kernels work in
// the rotated space of step 3; rotating is the pipeline's job.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/quant/spec.h"
#include "core/util/tensor.h"

namespace kvscope::codebook {

/// Smallest head dim the sphere codebooks are defined for (D = 1 has no density).
inline constexpr int kMinSphereDim = 2;

/// The b-bit Lloyd–Max quantizer for the density f(t) ∝ (1 − t²)^((D−3)/2) on [−1, 1] of one
/// coordinate of a uniformly random unit vector in R^D.
struct SphereCodebook {
  int dim = 0;
  int bits = 0;
  std::vector<double> centroids;   ///< 2^b values, ascending
  std::vector<double> boundaries;  ///< the 2^b − 1 midpoints between neighbouring centroids
  std::vector<float> levels;       ///< centroids as float (what the kernels store)
  std::vector<float> thresholds;   ///< smallest float above each midpoint: u >= thresholds[k] means code k+1 is nearer
  int iterations = 0;              ///< Lloyd (and Newton-accelerated) steps taken
  double lastMove = 0.0;           ///< largest centroid move of the final Lloyd step (<= 1e-12)
  double distortion = 0.0;         ///< E[(t − q(t))²] under f, by the same quadrature
  double asymmetry = 0.0;          ///< max |c_i + c_{K−1−i}| of the solve, before it is made exactly symmetric
};

/// Solves the codebook for (dim >= 2, bits 1..8) without the cache (for tests).
SphereCodebook solveSphereCodebook(int dim, int bits);
/// The cached codebook of (dim, bits), solved on first use; safe to call from any thread.
const SphereCodebook& sphereCodebook(int dim, int bits);

/// Integrals of f over [a, b] ⊂ [−1, 1] (unnormalized f = (1 − t²)^((D−3)/2)).
struct CellIntegrals {
  double mass = 0.0;    ///< ∫ f
  double moment = 0.0;  ///< ∫ t f
};
/// The integrals over one cell, by Gauss–Legendre quadrature in θ (t = sin θ).
CellIntegrals sphereCell(int dim, double a, double b);
/// E[(t − q(t))²] under the normalized f for the quantizer with these ascending centroids and
/// midpoint boundaries.
double sphereDistortion(int dim, std::span<const double> centroids);

/// §1.3's QJL matrix S of tqp: D×D normal draws of the stream seeded with seed + 1, row-major,
/// stored as float, with its transpose.
struct QjlMatrix {
  int dim = 0;
  std::vector<float> s;   ///< S[i*D + j]
  std::vector<float> st;  ///< S transposed: st[j*D + i] = S[i*D + j]
};
/// The matrix for a spec's `seed=` (the stream is seeded with seed + 1); cached.
std::shared_ptr<const QjlMatrix> qjlMatrix(int dim, uint64_t seed);

/// Σ x[i]² in double, in the fixed order the kernels and the reference share: eight interleaved
/// partial sums (element i into sum i mod 8), combined pairwise.
double sumOfSquares(const float* x, int64_t n);

/// tq<bits> on `rows` vectors of `dim` floats (one token of one kv head each), in place.
void tqRows(float* x, int64_t rows, int dim, int bits, MetaType meta);
/// tqp<bits> (bits >= 2) on `rows` vectors, in place; `seed` is the spec's seed=.
void tqpRows(float* x, int64_t rows, int dim, int bits, MetaType meta, uint64_t seed);
/// The scalar references of both (the spec's formulas one value at a time); the kernels match
/// them bit for bit.
void tqRowsReference(float* x, int64_t rows, int dim, int bits, MetaType meta);
void tqpRowsReference(float* x, int64_t rows, int dim, int bits, MetaType meta, uint64_t seed);

/// A nuq codebook: 2^b fp16 values (stored), ascending, and the kernels' thresholds.
struct NuqCodebook {
  std::vector<float> levels;      ///< the stored (fp16-rounded) centroids, ascending
  std::vector<float> thresholds;  ///< smallest float above each midpoint of neighbouring levels
  std::vector<double> centroids;  ///< k-means centroids before rounding
  int rounds = 0;                 ///< Lloyd rounds run (<= 100)
};
/// §11's k-means of `values` (the y = x/s of one layer tensor; taken by value and sorted) into
/// 2^bits centroids, then rounded to fp16. An empty input gives all-zero levels.
NuqCodebook nuqKmeans(std::vector<float> values, int bits);
/// The codebook from given centroids (rounded to fp16), for tests and describeGroup.
NuqCodebook nuqFromCentroids(std::vector<double> centroids);
/// Index of the stored level nearest v (ties: the lower index).
int nuqIndex(const NuqCodebook& book, float v);

/// nuq<b> (step 5) on the quantized values of one layer tensor, in place: each group (spec's
/// axis, group and clip, as nf4 groups) scaled by s = meta(a), one k-means codebook fitted to
/// every y = clamp(x/s, −1, 1) of the tensor, x̂ = s·c[k]. Returns the codebook.
NuqCodebook quantizeNuqTensor(Tensor3& x, const QuantSpec& spec);
/// The same by reference::groupIndices and distance comparisons in double (for tests).
NuqCodebook quantizeNuqTensorReference(Tensor3& x, const QuantSpec& spec);
/// The spec whose grouping, clipping and scale rule nuq shares (nf4's: max-abs, s = meta(a)).
QuantSpec nuqGrouping(const QuantSpec& spec);

/// vLLM's TurboQuant key codebook (`tqg<b>`, docs/formats.md): the b-bit Lloyd–Max quantizer of
/// the Gaussian N(0, 1/D), solved as vLLM solves it (centroids.py `solve_lloyd_max`: start at
/// the midpoints of 2^b equal cells of [−3.5σ, 3.5σ], cells integrated by 200-panel trapezoids,
/// outer edges ±10.5σ, at most 200 Lloyd steps, stop when no centroid moves by 1e-10; float64),
/// then stored as float32 with float32 midpoints (c_i + c_{i+1})/2.
struct GaussianCodebook {
  int dim = 0;
  int bits = 0;
  std::vector<double> centroids;  ///< the float64 solve, ascending
  std::vector<float> levels;      ///< centroids as float32 (what vLLM's kernels read)
  std::vector<float> midpoints;   ///< fp32((levels[i] + levels[i+1]) / 2); u >= midpoints[k] means code k+1
  int iterations = 0;             ///< Lloyd steps taken
};
/// Solves without the cache (for tests); dim >= 1, bits 1..8.
GaussianCodebook solveGaussianCodebook(int dim, int bits);
/// The cached codebook of (dim, bits); safe to call from any thread.
const GaussianCodebook& gaussianCodebook(int dim, int bits);
/// The code of one normalized coordinate: the number of midpoints m with u >= m (vLLM's
/// binary-search bucketize; a value on a midpoint takes the upper centroid).
int gaussianCode(const GaussianCodebook& book, float u);
/// tqg<bits> on `rows` rotated vectors of `dim` floats, in place: n = fp32(‖y‖), u = y/(n + 1e-8)
/// in fp32, codes by gaussianCode, norm correction ĉ = c·(1/√(Σc² + 1e-16)) in fp32, and
/// ŷ = meta(n)·ĉ. One scalar implementation serves as kernel and reference.
void tqgRows(float* x, int64_t rows, int dim, int bits, MetaType meta);

}  // namespace kvscope::codebook
