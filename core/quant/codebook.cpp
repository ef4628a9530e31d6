// SPDX-License-Identifier: GPL-3.0-or-later
// Codebooks of quantization.md §11 and their per-vector kernels.
//
// The sphere density f(t) ∝ (1 − t²)^((D−3)/2) is singular at ±1 for D = 2 and has a
// non-smooth derivative there for even D, and for large D it is a spike of width 1/√D. In
// θ = asin t it becomes cos^(D−2) θ dθ, analytic on [−π/2, π/2] for every D >= 2, so composite
// Gauss–Legendre in θ, with panels a fraction of the spike's width, integrates every cell to
// rounding error. Lloyd's map (centroids -> centroids of the midpoint cells) converges linearly
// and slowly for 256 levels; Newton steps on its fixed-point equation (a tridiagonal Jacobian
// with closed-form entries) are taken whenever they shrink the residual, and the result is the
// last Lloyd step once no centroid moves more than 1e-12.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "core/quant/codebook.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numbers>
#include <utility>

#include "core/quant/fp_types.h"
#include "core/quant/kernels_grouped.h"
#include "core/quant/reference.h"
#include "core/quant/rng.h"
#include "core/util/simd.h"

namespace kvscope::codebook {
namespace {

// ---- Gauss–Legendre nodes ------------------------------------------------------------------

constexpr int kNodes = 20;

struct GaussLegendre {
  std::array<double, kNodes> x{}, w{};
};

// Nodes and weights on [−1, 1] by Newton's method on P_n from the Chebyshev guesses.
const GaussLegendre& gaussLegendre() {
  static const GaussLegendre rule = [] {
    GaussLegendre g;
    const int n = kNodes;
    for (int i = 0; i < (n + 1) / 2; ++i) {
      double z = std::cos(std::numbers::pi * (i + 0.75) / (n + 0.5));
      double dp = 0.0;
      for (int it = 0; it < 100; ++it) {
        double p0 = 1.0, p1 = 0.0;
        for (int k = 1; k <= n; ++k) {
          const double p2 = p1;
          p1 = p0;
          p0 = ((2.0 * k - 1.0) * z * p1 - (k - 1.0) * p2) / k;
        }
        dp = n * (z * p0 - p1) / (z * z - 1.0);
        const double step = p0 / dp;
        z -= step;
        if (std::fabs(step) < 1e-16) break;
      }
      // Recompute the derivative at the converged node for the weight.
      double p0 = 1.0, p1 = 0.0;
      for (int k = 1; k <= n; ++k) {
        const double p2 = p1;
        p1 = p0;
        p0 = ((2.0 * k - 1.0) * z * p1 - (k - 1.0) * p2) / k;
      }
      dp = n * (z * p0 - p1) / (z * z - 1.0);
      const double weight = 2.0 / ((1.0 - z * z) * dp * dp);
      g.x[i] = -z;
      g.x[n - 1 - i] = z;
      g.w[i] = weight;
      g.w[n - 1 - i] = weight;
    }
    return g;
  }();
  return rule;
}

// The θ-space integrand cos^(D−2) θ as a function of t = sin θ.
double weightAt(int dim, double t) {
  if (dim == 2) return 1.0;
  return std::exp(0.5 * (dim - 2) * std::log1p(-t * t));
}

// f(t) = (1 − t²)^((D−3)/2), for the Newton derivatives (interior points only).
double densityAt(int dim, double t) { return std::exp(0.5 * (dim - 3) * std::log1p(-t * t)); }

struct Quadrature {
  double panel = 0.0;  // widest panel in θ
  double cut = 0.0;    // |θ| beyond which cos^(D−2) θ underflows: nothing to integrate
};

Quadrature quadratureFor(int dim) {
  Quadrature q;
  const double width = 1.0 / std::sqrt(std::max(dim - 2, 1));
  q.panel = std::min(0.5 * width, std::numbers::pi / 16.0);
  q.cut = dim <= 3 ? std::numbers::pi / 2 : std::acos(std::exp(-700.0 / (dim - 2)));
  return q;
}

// Calls f(t, w) at every quadrature node of [a, b] (t-space), w the θ-space weight times f.
template <class F>
void integrate(int dim, double a, double b, F f) {
  const Quadrature q = quadratureFor(dim);
  double lo = std::asin(std::clamp(a, -1.0, 1.0));
  double hi = std::asin(std::clamp(b, -1.0, 1.0));
  lo = std::max(lo, -q.cut);
  hi = std::min(hi, q.cut);
  if (!(hi > lo)) return;
  const auto panels = static_cast<int>(std::ceil((hi - lo) / q.panel));
  const double h = (hi - lo) / panels;
  const GaussLegendre& g = gaussLegendre();
  for (int p = 0; p < panels; ++p) {
    const double mid = lo + (p + 0.5) * h;
    for (int k = 0; k < kNodes; ++k) {
      const double theta = mid + 0.5 * h * g.x[k];
      const double t = std::sin(theta);
      f(t, 0.5 * h * g.w[k] * weightAt(dim, t));
    }
  }
}

// ---- Lloyd–Max on the sphere density ------------------------------------------------------

std::vector<double> midpoints(const std::vector<double>& c) {
  std::vector<double> m(c.size() - 1);
  for (size_t i = 0; i + 1 < c.size(); ++i) m[i] = 0.5 * (c[i] + c[i + 1]);
  return m;
}

struct LloydImage {
  std::vector<double> centroids;  // centroid of each cell (the old value where a cell is empty)
  std::vector<double> mass;
  double residual = 0.0;  // max |image − c|
};

LloydImage lloydImage(int dim, const std::vector<double>& c) {
  const size_t k = c.size();
  const std::vector<double> m = midpoints(c);
  LloydImage out;
  out.centroids.resize(k);
  out.mass.resize(k);
  for (size_t i = 0; i < k; ++i) {
    const double a = i == 0 ? -1.0 : m[i - 1];
    const double b = i + 1 == k ? 1.0 : m[i];
    const CellIntegrals cell = sphereCell(dim, a, b);
    out.mass[i] = cell.mass;
    out.centroids[i] = cell.mass > 0.0 ? cell.moment / cell.mass : c[i];
    out.residual = std::max(out.residual, std::fabs(out.centroids[i] - c[i]));
  }
  return out;
}

// Centroids at the quantiles (i + ½)/K of f, from its θ-space CDF on a fine grid.
std::vector<double> quantileStart(int dim, int levels) {
  const Quadrature q = quadratureFor(dim);
  const int steps = std::max(4096, static_cast<int>(std::ceil(2.0 * q.cut / q.panel)) * 4);
  std::vector<double> cdf(static_cast<size_t>(steps) + 1, 0.0);
  const double h = 2.0 * q.cut / steps;
  for (int s = 0; s < steps; ++s) {
    const double a = std::sin(-q.cut + s * h), b = std::sin(-q.cut + (s + 1) * h);
    cdf[static_cast<size_t>(s) + 1] = cdf[static_cast<size_t>(s)] + sphereCell(dim, a, b).mass;
  }
  const double total = cdf.back();
  std::vector<double> c(static_cast<size_t>(levels));
  size_t s = 0;
  for (int i = 0; i < levels; ++i) {
    const double target = total * (i + 0.5) / levels;
    while (s + 1 < cdf.size() - 1 && cdf[s + 1] < target) ++s;
    const double span = cdf[s + 1] - cdf[s];
    const double frac = span > 0.0 ? (target - cdf[s]) / span : 0.5;
    c[static_cast<size_t>(i)] = std::sin(-q.cut + (static_cast<double>(s) + frac) * h);
  }
  return c;
}

bool strictlyIncreasingInside(const std::vector<double>& c) {
  if (!(c.front() > -1.0) || !(c.back() < 1.0)) return false;
  for (size_t i = 0; i + 1 < c.size(); ++i) {
    if (!(c[i] < c[i + 1])) return false;
  }
  return true;
}

// A Newton step on F(c) = image(c) − c: J is tridiagonal, its entries from
// ∂m/∂b = f(b)(b − m)/M and ∂m/∂a = f(a)(m − a)/M for a cell [a, b] of mass M and centroid m.
std::vector<double> newtonStep(int dim, const std::vector<double>& c, const LloydImage& img) {
  const size_t k = c.size();
  const std::vector<double> m = midpoints(c);
  std::vector<double> lower(k, 0.0), diag(k, -1.0), upper(k, 0.0), rhs(k);
  for (size_t i = 0; i < k; ++i) {
    rhs[i] = -(img.centroids[i] - c[i]);
    if (!(img.mass[i] > 0.0)) return {};
    const double mi = img.centroids[i];
    if (i > 0) {
      const double a = m[i - 1];
      const double dA = densityAt(dim, a) * (mi - a) / img.mass[i];
      lower[i] = 0.5 * dA;
      diag[i] += 0.5 * dA;
    }
    if (i + 1 < k) {
      const double b = m[i];
      const double dB = densityAt(dim, b) * (b - mi) / img.mass[i];
      upper[i] = 0.5 * dB;
      diag[i] += 0.5 * dB;
    }
  }
  // Thomas algorithm.
  for (size_t i = 1; i < k; ++i) {
    const double w = lower[i] / diag[i - 1];
    diag[i] -= w * upper[i - 1];
    rhs[i] -= w * rhs[i - 1];
  }
  std::vector<double> delta(k);
  delta[k - 1] = rhs[k - 1] / diag[k - 1];
  for (size_t i = k - 1; i-- > 0;) delta[i] = (rhs[i] - upper[i] * delta[i + 1]) / diag[i];
  std::vector<double> next(k);
  for (size_t i = 0; i < k; ++i) next[i] = c[i] + delta[i];
  return next;
}

// Smallest float strictly above the double `mid`: "v >= result" is "v > mid" for every float v.
float thresholdAbove(double mid) {
  float f = static_cast<float>(mid);
  if (static_cast<double>(f) <= mid) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

// ---- Kernels --------------------------------------------------------------------------------

KVSCOPE_INLINE double sumOfSquaresInline(const float* x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      const double v = x[i + k];
      acc[k] += v * v;
    }
  }
  for (int k = 0; i + k < n; ++k) {
    const double v = x[i + k];
    acc[k] += v * v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Index of the level nearest u: the number of thresholds at or below u.
KVSCOPE_INLINE int levelIndex(const float* thresholds, int levels, float u) {
  int idx = 0;
  for (int step = levels / 2; step >= 1; step /= 2) idx += u >= thresholds[idx + step - 1] ? step : 0;
  return idx;
}

// Branch-free selects over the L − 1 thresholds (unrolled, so the loop over coordinates
// vectorizes with the running level in a register).
template <int L>
KVSCOPE_INLINE void selectLevels(const float* u, int dim, const float* t, const float* l, float* code) {
  // Local copies: a select between two registers if-converts; one that loads l[k + 1] only when
  // the comparison holds would stay a branch.
  float tl[L - 1], ll[L];
  for (int k = 0; k < L; ++k) ll[k] = l[k];
  for (int k = 0; k + 1 < L; ++k) tl[k] = t[k];
  for (int j = 0; j < dim; ++j) {
    const float v = u[j];
    float c = ll[0];
    for (int k = 0; k + 1 < L; ++k) c = v >= tl[k] ? ll[k + 1] : c;
    code[j] = c;
  }
}

// u = x/n and the codebook levels of u into `code` (float, the û of tq): the inner loops of
// tq and tqp. Returns meta(n).
KVSCOPE_INLINE float normalizeAndCode(const float* x, int dim, const SphereCodebook& book, MetaType meta,
                                      float* u, float* code) {
  const double norm = std::sqrt(sumOfSquaresInline(x, dim));
  const double inv = norm > 0.0 ? 1.0 / norm : 0.0;
  for (int j = 0; j < dim; ++j) u[j] = static_cast<float>(static_cast<double>(x[j]) * inv);
  const int levels = static_cast<int>(book.levels.size());
  const float* t = book.thresholds.data();
  const float* l = book.levels.data();
  switch (levels) {
    case 2: selectLevels<2>(u, dim, t, l, code); break;
    case 4: selectLevels<4>(u, dim, t, l, code); break;
    case 8: selectLevels<8>(u, dim, t, l, code); break;
    case 16: selectLevels<16>(u, dim, t, l, code); break;
    default:
      for (int j = 0; j < dim; ++j) code[j] = l[levelIndex(t, levels, u[j])];
      break;
  }
  return fp::metaRound(norm, meta);
}

KVSCOPE_SIMD_CLONES void tqRowsImpl(float* x, int64_t rows, int dim, const SphereCodebook* book, MetaType meta) {
  std::vector<float> u(static_cast<size_t>(dim)), code(static_cast<size_t>(dim));
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * dim;
    const float n = normalizeAndCode(v, dim, *book, meta, u.data(), code.data());
    for (int j = 0; j < dim; ++j) v[j] = n * code[j];
  }
}

constexpr int kLanes = 16;  // tokens per block of the QJL products

// out[i][t] = Σ_j m[i][j]·in[j][t] for a block of kLanes tokens (in, out: [dim][kLanes]), each
// (i, t) summed in order j = 0, 1, … with separate multiply and add (as the reference does).
KVSCOPE_INLINE void blockProduct(const float* m, const float* in, float* out, int dim) {
  int i = 0;
  for (; i + 4 <= dim; i += 4) {
    float acc0[kLanes] = {}, acc1[kLanes] = {}, acc2[kLanes] = {}, acc3[kLanes] = {};
    const float* m0 = m + static_cast<int64_t>(i) * dim;
    const float* m1 = m0 + dim;
    const float* m2 = m1 + dim;
    const float* m3 = m2 + dim;
    for (int j = 0; j < dim; ++j) {
      const float* col = in + static_cast<int64_t>(j) * kLanes;
      const float s0 = m0[j], s1 = m1[j], s2 = m2[j], s3 = m3[j];
      for (int t = 0; t < kLanes; ++t) {
        acc0[t] += s0 * col[t];
        acc1[t] += s1 * col[t];
        acc2[t] += s2 * col[t];
        acc3[t] += s3 * col[t];
      }
    }
    for (int t = 0; t < kLanes; ++t) {
      out[(i + 0) * kLanes + t] = acc0[t];
      out[(i + 1) * kLanes + t] = acc1[t];
      out[(i + 2) * kLanes + t] = acc2[t];
      out[(i + 3) * kLanes + t] = acc3[t];
    }
  }
  for (; i < dim; ++i) {
    float acc[kLanes] = {};
    const float* mi = m + static_cast<int64_t>(i) * dim;
    for (int j = 0; j < dim; ++j) {
      const float* col = in + static_cast<int64_t>(j) * kLanes;
      for (int t = 0; t < kLanes; ++t) acc[t] += mi[j] * col[t];
    }
    for (int t = 0; t < kLanes; ++t) out[i * kLanes + t] = acc[t];
  }
}

KVSCOPE_SIMD_CLONES void tqpRowsImpl(float* x, int64_t rows, int dim, const SphereCodebook* book, MetaType meta,
                                     const QjlMatrix* qjl) {
  const auto d = static_cast<size_t>(dim);
  std::vector<float> u(d), code(d * kLanes), residual(d * kLanes), proj(d * kLanes), back(d * kLanes);
  float norms[kLanes], coef[kLanes];
  const double factor = std::sqrt(std::numbers::pi / 2.0) / dim;
  for (int64_t r0 = 0; r0 < rows; r0 += kLanes) {
    const int lanes = static_cast<int>(std::min<int64_t>(kLanes, rows - r0));
    std::fill(residual.begin(), residual.end(), 0.0f);
    for (int t = 0; t < lanes; ++t) {
      float* c = code.data() + t * d;
      norms[t] = normalizeAndCode(x + (r0 + t) * dim, dim, *book, meta, u.data(), c);
      float* rt = proj.data();  // scratch: this token's residual, row-major
      for (int j = 0; j < dim; ++j) rt[j] = u[j] - c[j];
      coef[t] = static_cast<float>(factor * fp::metaRound(std::sqrt(sumOfSquaresInline(rt, dim)), meta));
      for (int j = 0; j < dim; ++j) residual[static_cast<size_t>(j) * kLanes + t] = rt[j];
    }
    blockProduct(qjl->s.data(), residual.data(), proj.data(), dim);
    // sign(S·r), sign(0) = +1 (also for −0).
    for (size_t k = 0; k < d * kLanes; ++k) proj[k] = proj[k] >= 0.0f ? 1.0f : -1.0f;
    blockProduct(qjl->st.data(), proj.data(), back.data(), dim);
    for (int t = 0; t < lanes; ++t) {
      float* v = x + (r0 + t) * dim;
      const float* c = code.data() + t * d;
      for (int j = 0; j < dim; ++j) v[j] = norms[t] * (c[j] + coef[t] * back[static_cast<size_t>(j) * kLanes + t]);
    }
  }
}

}  // namespace

// ---- Public: sphere codebooks ----------------------------------------------------------------

CellIntegrals sphereCell(int dim, double a, double b) {
  CellIntegrals out;
  integrate(dim, a, b, [&](double t, double w) {
    out.mass += w;
    out.moment += w * t;
  });
  return out;
}

double sphereDistortion(int dim, std::span<const double> centroids) {
  const size_t k = centroids.size();
  double total = 0.0, err = 0.0;
  for (size_t i = 0; i < k; ++i) {
    const double a = i == 0 ? -1.0 : 0.5 * (centroids[i - 1] + centroids[i]);
    const double b = i + 1 == k ? 1.0 : 0.5 * (centroids[i] + centroids[i + 1]);
    const double c = centroids[i];
    integrate(dim, a, b, [&](double t, double w) {
      total += w;
      err += w * (t - c) * (t - c);
    });
  }
  return total > 0.0 ? err / total : 0.0;
}

SphereCodebook solveSphereCodebook(int dim, int bits) {
  SphereCodebook book;
  book.dim = dim;
  book.bits = bits;
  const int levels = 1 << bits;
  std::vector<double> c = quantileStart(dim, levels);
  LloydImage img = lloydImage(dim, c);
  int iterations = 1;
  constexpr double kTolerance = 1e-12;
  constexpr int kMaxIterations = 100000;
  // Newton while it helps, Lloyd otherwise; stop once the residual no longer falls (rounding
  // floor, far below the tolerance) or a Lloyd step would move no centroid more than 1e-15.
  while (img.residual > 1e-15 && iterations < kMaxIterations) {
    std::vector<double> next = newtonStep(dim, c, img);
    if (!next.empty() && strictlyIncreasingInside(next)) {
      LloydImage nextImg = lloydImage(dim, next);
      ++iterations;
      if (nextImg.residual < img.residual) {
        c = std::move(next);
        img = std::move(nextImg);
        continue;
      }
    }
    if (img.residual <= kTolerance) break;  // Newton stalled at the rounding floor
    c = img.centroids;  // a Lloyd step
    img = lloydImage(dim, c);
    ++iterations;
  }
  // The result is one Lloyd step beyond the last iterate, which moved no centroid by more than
  // img.residual.
  book.lastMove = img.residual;
  book.centroids = img.centroids;
  // f is even, so the quantizer is symmetric; the solve is so to rounding, and making it exact
  // puts the middle boundary of every codebook at exactly 0 (where §11's tie rule then holds).
  const size_t k = book.centroids.size();
  for (size_t i = 0; i < k / 2; ++i) {
    const double lo = book.centroids[i], hi = book.centroids[k - 1 - i];
    book.asymmetry = std::max(book.asymmetry, std::fabs(lo + hi));
    book.centroids[i] = 0.5 * (lo - hi);
    book.centroids[k - 1 - i] = 0.5 * (hi - lo);
  }
  book.iterations = iterations;
  book.boundaries = midpoints(book.centroids);
  for (double v : book.centroids) book.levels.push_back(static_cast<float>(v));
  for (double m : book.boundaries) book.thresholds.push_back(thresholdAbove(m));
  book.distortion = sphereDistortion(dim, book.centroids);
  return book;
}

const SphereCodebook& sphereCodebook(int dim, int bits) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, std::unique_ptr<SphereCodebook>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{dim, bits}];
  if (!slot) slot = std::make_unique<SphereCodebook>(solveSphereCodebook(dim, bits));
  return *slot;
}

std::shared_ptr<const QjlMatrix> qjlMatrix(int dim, uint64_t seed) {
  static std::mutex mutex;
  static std::map<std::pair<int, uint64_t>, std::shared_ptr<const QjlMatrix>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{dim, seed}];
  if (!slot) {
    if (cache.size() > 64) {  // a search over many seeds: keep memory bounded
      cache.clear();
    }
    auto m = std::make_shared<QjlMatrix>();
    m->dim = dim;
    const auto d = static_cast<size_t>(dim);
    m->s.resize(d * d);
    m->st.resize(d * d);
    NormalStream normal(seed + 1);
    for (size_t i = 0; i < d; ++i) {
      for (size_t j = 0; j < d; ++j) {
        const auto v = static_cast<float>(normal.next());
        m->s[i * d + j] = v;
        m->st[j * d + i] = v;
      }
    }
    cache[{dim, seed}] = m;
    return m;
  }
  return slot;
}

double sumOfSquares(const float* x, int64_t n) { return sumOfSquaresInline(x, n); }

void tqRows(float* x, int64_t rows, int dim, int bits, MetaType meta) {
  if (rows <= 0 || dim <= 0) return;
  tqRowsImpl(x, rows, dim, &sphereCodebook(dim, bits), meta);
}

void tqpRows(float* x, int64_t rows, int dim, int bits, MetaType meta, uint64_t seed) {
  if (rows <= 0 || dim <= 0) return;
  const auto qjl = qjlMatrix(dim, seed);
  tqpRowsImpl(x, rows, dim, &sphereCodebook(dim, bits - 1), meta, qjl.get());
}

// ---- References: §11 one value at a time ----------------------------------------------------

namespace {

// The level nearest u by comparing distances in double (ties: the lower level).
float nearestLevel(const SphereCodebook& book, float u) {
  size_t best = 0;
  double bestDistance = std::fabs(static_cast<double>(u) - book.centroids[0]);
  for (size_t k = 1; k < book.centroids.size(); ++k) {
    const double distance = std::fabs(static_cast<double>(u) - book.centroids[k]);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = k;
    }
  }
  return book.levels[best];
}

}  // namespace

void tqRowsReference(float* x, int64_t rows, int dim, int bits, MetaType meta) {
  const SphereCodebook& book = sphereCodebook(dim, bits);
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * dim;
    const double n = std::sqrt(sumOfSquares(v, dim));
    const float stored = fp::metaRound(n, meta);
    for (int j = 0; j < dim; ++j) {
      const float u = n > 0.0 ? static_cast<float>(static_cast<double>(v[j]) * (1.0 / n)) : 0.0f;
      v[j] = stored * nearestLevel(book, u);
    }
  }
}

void tqpRowsReference(float* x, int64_t rows, int dim, int bits, MetaType meta, uint64_t seed) {
  const SphereCodebook& book = sphereCodebook(dim, bits - 1);
  const auto qjl = qjlMatrix(dim, seed);
  const auto d = static_cast<size_t>(dim);
  std::vector<float> code(d), residual(d), sign(d);
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * dim;
    const double n = std::sqrt(sumOfSquares(v, dim));
    const float stored = fp::metaRound(n, meta);
    for (size_t j = 0; j < d; ++j) {
      const float u = n > 0.0 ? static_cast<float>(static_cast<double>(v[j]) * (1.0 / n)) : 0.0f;
      code[j] = nearestLevel(book, u);
      residual[j] = u - code[j];
    }
    const float gamma = fp::metaRound(std::sqrt(sumOfSquares(residual.data(), dim)), meta);
    const auto coef = static_cast<float>(std::sqrt(std::numbers::pi / 2.0) / dim * gamma);
    for (size_t i = 0; i < d; ++i) {
      float p = 0.0f;
      for (size_t j = 0; j < d; ++j) p += qjl->s[i * d + j] * residual[j];
      sign[i] = p >= 0.0f ? 1.0f : -1.0f;
    }
    for (size_t j = 0; j < d; ++j) {
      float w = 0.0f;
      for (size_t i = 0; i < d; ++i) w += qjl->s[i * d + j] * sign[i];
      v[j] = stored * (code[j] + coef * w);
    }
  }
}

// ---- nuq k-means ----------------------------------------------------------------------------

namespace {

// Sorts floats ascending by their bits (LSD radix sort, four passes of 8 bits): −0 sorts
// below +0, which k-means cannot tell apart.
void radixSort(std::vector<float>& v) {
  const size_t n = v.size();
  if (n < 4096) {
    std::sort(v.begin(), v.end());
    return;
  }
  std::vector<uint32_t> keys(n), tmp(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t b = fp::bitsOf(v[i]);
    keys[i] = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  }
  // Four passes of 8 bits: 256 output streams stay in cache where 2048 thrash it. A pass whose
  // digit is the same for every key (common: y in [−1, 1] shares its top exponent bits) is skipped.
  for (int shift = 0; shift < 32; shift += 8) {
    std::array<size_t, 257> count{};
    for (size_t i = 0; i < n; ++i) ++count[((keys[i] >> shift) & 0xffu) + 1];
    if (std::find(count.begin() + 1, count.end(), n) != count.end()) continue;
    for (size_t b = 1; b < count.size(); ++b) count[b] += count[b - 1];
    for (size_t i = 0; i < n; ++i) tmp[count[(keys[i] >> shift) & 0xffu]++] = keys[i];
    keys.swap(tmp);
  }
  for (size_t i = 0; i < n; ++i) {
    const uint32_t k = keys[i];
    v[i] = fp::fromBits((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
  }
}

// Sums of a sorted array's ranges in a fixed order: a prefix sum at every 64th element plus the
// elements since (so each range sum costs at most 126 additions, not n).
class RangeSums {
 public:
  explicit RangeSums(const std::vector<float>& v) : v_(v) {
    prefix_.resize(v.size() / kStride + 1, 0.0);
    double s = 0.0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i % kStride == 0) prefix_[i / kStride] = s;
      s += v[i];
    }
    if (v.size() % kStride == 0) prefix_[v.size() / kStride] = s;
  }
  /// Σ v[0..i).
  [[nodiscard]] double prefix(size_t i) const {
    double s = prefix_[i / kStride];
    for (size_t k = i / kStride * kStride; k < i; ++k) s += v_[k];
    return s;
  }

 private:
  static constexpr size_t kStride = 64;
  const std::vector<float>& v_;
  std::vector<double> prefix_;
};

}  // namespace

NuqCodebook nuqFromCentroids(std::vector<double> centroids) {
  NuqCodebook book;
  std::sort(centroids.begin(), centroids.end());
  book.centroids = std::move(centroids);
  for (double c : book.centroids) book.levels.push_back(static_cast<float>(fp::roundDoubleTo(c, 10, -14, fp::kFp16Max)));
  for (size_t i = 0; i + 1 < book.levels.size(); ++i) {
    book.thresholds.push_back(
        thresholdAbove(0.5 * (static_cast<double>(book.levels[i]) + static_cast<double>(book.levels[i + 1]))));
  }
  return book;
}

NuqCodebook nuqKmeans(std::vector<float> values, int bits) {
  const size_t levels = size_t{1} << bits;
  if (values.empty()) return nuqFromCentroids(std::vector<double>(levels, 0.0));
  radixSort(values);
  const size_t n = values.size();
  std::vector<double> c(levels);
  for (size_t i = 0; i < levels; ++i) {
    const auto idx = static_cast<size_t>(std::floor((static_cast<double>(i) + 0.5) * static_cast<double>(n) /
                                                    static_cast<double>(levels)));
    c[i] = values[std::min(idx, n - 1)];
  }
  const RangeSums sums(values);
  int rounds = 0;
  std::vector<size_t> order(levels), begin(levels), end(levels);
  while (rounds < 100) {
    ++rounds;
    // Cells: a value goes to its nearest centroid, ties to the lower index. In the order of
    // (value, index) each distinct value's cell is a run of the sorted values, owned by its
    // lowest index (the others, equal to it, get nothing); at an exact midpoint the value goes
    // to whichever neighbour has the lower index.
    for (size_t i = 0; i < levels; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c[a] < c[b] || (c[a] == c[b] && a < b); });
    size_t start = 0;
    size_t g = 0;
    while (g < levels) {
      size_t next = g + 1;
      while (next < levels && c[order[next]] == c[order[g]]) ++next;
      size_t stop = n;
      if (next < levels) {
        const double mid = 0.5 * (c[order[g]] + c[order[next]]);
        const auto from = values.begin() + static_cast<std::ptrdiff_t>(start);
        const auto it = order[g] < order[next]
                            ? std::upper_bound(from, values.end(), mid,
                                               [](double m, float v) { return m < static_cast<double>(v); })
                            : std::lower_bound(from, values.end(), mid,
                                               [](float v, double m) { return static_cast<double>(v) < m; });
        stop = static_cast<size_t>(it - values.begin());
      }
      begin[order[g]] = start;
      end[order[g]] = stop;
      for (size_t e = g + 1; e < next; ++e) begin[order[e]] = end[order[e]] = stop;
      start = stop;
      g = next;
    }
    double moved = 0.0;
    for (size_t i = 0; i < levels; ++i) {
      if (end[i] > begin[i]) {
        const double mean = (sums.prefix(end[i]) - sums.prefix(begin[i])) / static_cast<double>(end[i] - begin[i]);
        moved = std::max(moved, std::fabs(mean - c[i]));
        c[i] = mean;
      }
    }
    if (moved <= 1e-7) break;
  }
  NuqCodebook book = nuqFromCentroids(std::move(c));
  book.rounds = rounds;
  return book;
}

int nuqIndex(const NuqCodebook& book, float v) {
  return levelIndex(book.thresholds.data(), static_cast<int>(book.levels.size()), v);
}

// ---- nuq on a layer tensor ------------------------------------------------------------------

QuantSpec nuqGrouping(const QuantSpec& spec) {
  QuantSpec g = spec;
  g.format = FormatId::Nf4;
  g.symmetric = false;
  return g;
}

namespace {

// A contiguous group of a token, head or tensor layout.
struct Span {
  int64_t start = 0, length = 0;
};

std::vector<Span> contiguousGroups(const QuantSpec& spec, const Tensor3& x) {
  std::vector<Span> spans;
  switch (spec.axis) {
    case Axis::Tensor: spans.push_back({0, static_cast<int64_t>(x.size())}); break;
    case Axis::Head:
      for (int64_t h = 0; h < x.heads; ++h) spans.push_back({h * x.tokens * x.dim, x.tokens * x.dim});
      break;
    case Axis::Token: {
      const int64_t g = spec.group <= 0 || spec.group >= x.dim ? x.dim : spec.group;
      spans.reserve(static_cast<size_t>(x.heads * x.tokens * ((x.dim + g - 1) / g)));
      for (int64_t r = 0; r < x.heads * x.tokens; ++r) {
        for (int64_t d0 = 0; d0 < x.dim; d0 += g) spans.push_back({r * x.dim + d0, std::min(g, x.dim - d0)});
      }
      break;
    }
    case Axis::Channel: break;
  }
  return spans;
}

KVSCOPE_INLINE float toUnit(float x, float s) {
  const float v = x / kernels::safeDivisor(s);
  return s > 0.0f ? std::clamp(v, -1.0f, 1.0f) : 0.0f;
}

// x̂ = s·c[k] for n values sharing scale s, or n values with per-value scales (scales != nullptr).
template <int L>
KVSCOPE_INLINE void nuqSelect(float* x, int64_t n, float s, const float* scales, const float* t, const float* l) {
  float tl[L - 1], ll[L];  // local copies, so the selects if-convert (see selectLevels)
  for (int k = 0; k < L; ++k) ll[k] = l[k];
  for (int k = 0; k + 1 < L; ++k) tl[k] = t[k];
  for (int64_t i = 0; i < n; ++i) {
    const float si = scales != nullptr ? scales[i] : s;
    const float v = x[i] / kernels::safeDivisor(si);
    float c = ll[0];
    for (int k = 0; k + 1 < L; ++k) c = v >= tl[k] ? ll[k + 1] : c;
    x[i] = c * si;
  }
}

KVSCOPE_SIMD_CLONES void nuqApply(float* x, int64_t n, float s, const float* scales, const NuqCodebook* book) {
  const int levels = static_cast<int>(book->levels.size());
  const float* l = book->levels.data();
  const float* t = book->thresholds.data();
  if (levels <= 16) {
    switch (levels) {
      case 4: nuqSelect<4>(x, n, s, scales, t, l); break;
      case 8: nuqSelect<8>(x, n, s, scales, t, l); break;
      default: nuqSelect<16>(x, n, s, scales, t, l); break;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float si = scales != nullptr ? scales[i] : s;
      x[i] = l[levelIndex(t, levels, x[i] / kernels::safeDivisor(si))] * si;
    }
  }
}

constexpr int64_t kParallelValues = int64_t{1} << 16;

}  // namespace

NuqCodebook quantizeNuqTensor(Tensor3& x, const QuantSpec& spec) {
  const QuantSpec grouping = nuqGrouping(spec);
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> y(static_cast<size_t>(n));
  float* data = x.data.data();
  const bool parallel = n > kParallelValues;
  if (spec.axis != Axis::Channel) {
    const std::vector<Span> spans = contiguousGroups(spec, x);
    std::vector<float> scale(spans.size());
    const auto count = static_cast<int64_t>(spans.size());
#pragma omp parallel if (parallel)
    {
      std::vector<float> work;
#pragma omp for schedule(static)
      for (int64_t g = 0; g < count; ++g) {
        const Span sp = spans[static_cast<size_t>(g)];
        if (static_cast<int64_t>(work.size()) < sp.length) work.resize(static_cast<size_t>(sp.length));
        const kernels::ClipRange r = kernels::clippedRange(grouping, data + sp.start, sp.length, work.data());
        const float s = kernels::paramsFromRange(grouping, r.lo, r.hi).scale;
        scale[static_cast<size_t>(g)] = s;
        for (int64_t i = 0; i < sp.length; ++i) y[static_cast<size_t>(sp.start + i)] = toUnit(data[sp.start + i], s);
      }
    }
    NuqCodebook book = nuqKmeans(std::move(y), spec.bits);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t g = 0; g < count; ++g) {
      const Span sp = spans[static_cast<size_t>(g)];
      nuqApply(data + sp.start, sp.length, scale[static_cast<size_t>(g)], nullptr, &book);
    }
    return book;
  }
  // Channel groups: runs of G tokens of one channel; the scales of a run form one row of D.
  const int64_t d = x.dim, tokens = x.tokens;
  const int64_t run = spec.group <= 0 || spec.group >= tokens ? tokens : spec.group;
  const int64_t runs = tokens == 0 ? 0 : (tokens + run - 1) / run;
  std::vector<float> scales(static_cast<size_t>(x.heads * runs * d));
  const int64_t blocks = x.heads * runs;
#pragma omp parallel if (parallel)
  {
    std::vector<float> gather, work;
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t h = b / runs, t0 = (b % runs) * run, len = std::min(run, tokens - t0);
      float* base = data + (h * tokens + t0) * d;
      float* s = scales.data() + b * d;
      if (spec.clip.kind == Clip::Kind::None) {
        std::vector<float> amax(static_cast<size_t>(d), 0.0f);
        for (int64_t t = 0; t < len; ++t) {
          for (int64_t c = 0; c < d; ++c) amax[static_cast<size_t>(c)] = std::max(amax[static_cast<size_t>(c)], std::fabs(base[t * d + c]));
        }
        for (int64_t c = 0; c < d; ++c) s[c] = fp::metaRound(amax[static_cast<size_t>(c)], spec.scale);
      } else {
        gather.resize(static_cast<size_t>(len));
        work.resize(static_cast<size_t>(len));
        for (int64_t c = 0; c < d; ++c) {
          for (int64_t t = 0; t < len; ++t) gather[static_cast<size_t>(t)] = base[t * d + c];
          const kernels::ClipRange r = kernels::clippedRange(grouping, gather.data(), len, work.data());
          s[c] = kernels::paramsFromRange(grouping, r.lo, r.hi).scale;
        }
      }
      for (int64_t t = 0; t < len; ++t) {
        for (int64_t c = 0; c < d; ++c) y[static_cast<size_t>((h * tokens + t0 + t) * d + c)] = toUnit(base[t * d + c], s[c]);
      }
    }
  }
  NuqCodebook book = nuqKmeans(std::move(y), spec.bits);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t h = b / runs, t0 = (b % runs) * run, len = std::min(run, tokens - t0);
    float* base = data + (h * tokens + t0) * d;
    for (int64_t t = 0; t < len; ++t) nuqApply(base + t * d, d, 0.0f, scales.data() + b * d, &book);
  }
  return book;
}

NuqCodebook quantizeNuqTensorReference(Tensor3& x, const QuantSpec& spec) {
  const QuantSpec grouping = nuqGrouping(spec);
  const auto groups = reference::groupIndices(spec, x.heads, x.tokens, x.dim);
  std::vector<float> scale(groups.size());
  std::vector<float> y(x.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<float> values;
    for (int64_t i : groups[g]) values.push_back(x.data[static_cast<size_t>(i)]);
    const float s = reference::groupParams(grouping, reference::clipRange(grouping, values)).scale;
    scale[g] = s;
    for (int64_t i : groups[g]) {
      const float v = x.data[static_cast<size_t>(i)];
      y[static_cast<size_t>(i)] = s == 0.0f ? 0.0f : std::clamp(v / s, -1.0f, 1.0f);
    }
  }
  NuqCodebook book = nuqKmeans(y, spec.bits);
  for (size_t g = 0; g < groups.size(); ++g) {
    const float s = scale[g];
    for (int64_t i : groups[g]) {
      float& v = x.data[static_cast<size_t>(i)];
      if (s == 0.0f) {
        v = 0.0f;
        continue;
      }
      const double q = static_cast<double>(v / s);
      size_t best = 0;
      for (size_t k = 1; k < book.levels.size(); ++k) {
        if (std::fabs(q - book.levels[k]) < std::fabs(q - book.levels[best])) best = k;
      }
      v = book.levels[best] * s;
    }
  }
  return book;
}

// ---- tqg: vLLM's TurboQuant keys --------------------------------------------------------------

namespace {

/// ∫_a^b f by the composite trapezoid rule on `panels` equal panels, accumulated in the order
/// vLLM's `_trapz` uses (the two ends halved first, then the interior points left to right).
template <class F>
double trapezoid(F f, double a, double b, int panels) {
  const double h = (b - a) / panels;
  double sum = 0.5 * (f(a) + f(b));
  for (int i = 1; i < panels; ++i) sum += f(a + i * h);
  return sum * h;
}

}  // namespace

GaussianCodebook solveGaussianCodebook(int dim, int bits) {
  // vllm/model_executor/layers/quantization/turboquant/centroids.py (commit 06d0369d),
  // solve_lloyd_max(d, bits, max_iter=200, tol=1e-10): the same float64 operations in order.
  GaussianCodebook book;
  book.dim = dim;
  book.bits = bits;
  const int levels = 1 << bits;
  const double sigma2 = 1.0 / dim;
  const double sigma = std::sqrt(sigma2);
  const double norm = 1.0 / std::sqrt(2 * std::numbers::pi * sigma2);
  auto pdf = [&](double x) { return norm * std::exp(-x * x / (2 * sigma2)); };
  const double lo = -3.5 * sigma, hi = 3.5 * sigma;
  std::vector<double> c(static_cast<size_t>(levels));
  for (int i = 0; i < levels; ++i) c[static_cast<size_t>(i)] = lo + (hi - lo) * (i + 0.5) / levels;
  std::vector<double> edges(static_cast<size_t>(levels + 1));
  std::vector<double> next(static_cast<size_t>(levels));
  constexpr int kMaxIter = 200;
  constexpr double kTol = 1e-10;
  for (int iter = 0; iter < kMaxIter; ++iter) {
    edges.front() = lo * 3;
    edges.back() = hi * 3;
    for (int i = 0; i + 1 < levels; ++i) {
      edges[static_cast<size_t>(i + 1)] = (c[static_cast<size_t>(i)] + c[static_cast<size_t>(i + 1)]) / 2.0;
    }
    double moved = 0;
    for (int i = 0; i < levels; ++i) {
      const double a = edges[static_cast<size_t>(i)], b = edges[static_cast<size_t>(i + 1)];
      const double num = trapezoid([&](double x) { return x * pdf(x); }, a, b, 200);
      const double den = trapezoid(pdf, a, b, 200);
      next[static_cast<size_t>(i)] = den > 1e-15 ? num / den : c[static_cast<size_t>(i)];
      moved = std::max(moved, std::fabs(next[static_cast<size_t>(i)] - c[static_cast<size_t>(i)]));
    }
    book.iterations = iter + 1;
    // vLLM breaks before adopting the converged step: the result is the previous iterate.
    if (moved < kTol) break;
    c = next;
  }
  book.centroids = c;
  std::vector<float> f(c.begin(), c.end());
  std::sort(f.begin(), f.end());  // vLLM sorts before taking midpoints (c_sorted)
  book.levels = f;
  for (int i = 0; i + 1 < levels; ++i) {
    book.midpoints.push_back((f[static_cast<size_t>(i)] + f[static_cast<size_t>(i + 1)]) / 2.0f);
  }
  return book;
}

const GaussianCodebook& gaussianCodebook(int dim, int bits) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, std::unique_ptr<GaussianCodebook>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{dim, bits}];
  if (!slot) slot = std::make_unique<GaussianCodebook>(solveGaussianCodebook(dim, bits));
  return *slot;
}

int gaussianCode(const GaussianCodebook& book, float u) {
  // vllm/v1/attention/ops/triton_turboquant_store.py (commit 0135d081), _tq_fused_store_mse:
  // lo = where(y >= mid, mid + 1, lo): the count of midpoints at or below u.
  return static_cast<int>(std::upper_bound(book.midpoints.begin(), book.midpoints.end(), u) - book.midpoints.begin());
}

void tqgRows(float* x, int64_t rows, int dim, int bits, MetaType meta) {
  const GaussianCodebook& book = gaussianCodebook(dim, bits);
  std::vector<int> codes(static_cast<size_t>(dim));
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * dim;
    // triton_turboquant_store: norms = ‖k‖ (fp32), x_hat = k / (norms + 1e-8).
    const auto n = static_cast<float>(std::sqrt(sumOfSquares(v, dim)));
    const float denom = n + 1e-8f;
    double c2 = 0;
    for (int j = 0; j < dim; ++j) {
      const float u = v[j] / denom;
      const int k = gaussianCode(book, u);
      codes[static_cast<size_t>(j)] = k;
      const double c = book.levels[static_cast<size_t>(k)];
      c2 += c * c;
    }
    // triton_turboquant_decode.py (commit 055e47c2), NORM_CORRECTION: c / sqrt(Σc² + 1e-16).
    const float inv = 1.0f / std::sqrt(static_cast<float>(c2) + 1e-16f);
    const float stored = fp::metaRound(n, meta);
    for (int j = 0; j < dim; ++j) v[j] = stored * (book.levels[static_cast<size_t>(codes[static_cast<size_t>(j)])] * inv);
  }
}

}  // namespace kvscope::codebook
