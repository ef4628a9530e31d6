// SPDX-License-Identifier: GPL-3.0-or-later
// Attention reconstruction metrics (quantization.md §6).
//
// Work is split into items (kv head g, chunk of queries). For one item the G query heads of g
// and the chunk's queries form the rows of Qc [rows, D]; keys 0 … pmax (pmax = the chunk's last
// position) the columns. Scores S = Qc·Kᵀ and their change ΔS = Qc·(K̂−K)ᵀ are float32 GEMMs;
// computing ΔS directly (rather than Qc·K̂ᵀ − S) keeps small score changes exact to float
// precision. Softmax, log-sum-exp, KL and argmax run per row in float64. Outputs use GEMMs of
// the probabilities: O = P·V, and the changes ΔO directly: key_only (P̂−P)·V, value_only P·(V̂−V),
// joint (P̂−P)·V + P̂·(V̂−V), so relative errors far below float32 resolution of O survive.
#include "core/attention/attention.h"

#include <Eigen/Dense>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/attention/engine.h"
#include "core/attention/softmax_rows.h"
#include "core/util/simd.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kvscope {
namespace attention_engine {

std::atomic<bool>& fusedRows() {
  static std::atomic<bool> on{true};
  return on;
}

namespace {

using RowMatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMapF = Eigen::Map<const RowMatF>;

// Target size of one item's score matrix (rows × keys): bounds memory per thread (~5 such
// float matrices, 20 MiB) while keeping GEMMs large enough to run near peak.
#ifdef NDEBUG
constexpr int64_t kTargetScoreElements = int64_t{1} << 20;
#else
// Unoptimized (debug and sanitizer) builds run Eigen's GEMMs some fifty times slower: smaller
// items keep a cancel answered within a fraction of a second there too.
constexpr int64_t kTargetScoreElements = int64_t{1} << 16;
#endif


Status checkTensor(const Tensor3* t, const char* name, const Tensor3& key) {
  if (!t) return Status::invalidArgument(std::string("attention: ") + name + " is missing");
  if (!t->sameShape(key) || t->data.size() != key.data.size()) {
    return Status::invalidArgument(
        std::string("attention: ") + name + " has shape [" + std::to_string(t->heads) + ", " +
        std::to_string(t->tokens) + ", " + std::to_string(t->dim) + "], key has [" +
        std::to_string(key.heads) + ", " + std::to_string(key.tokens) + ", " +
        std::to_string(key.dim) + "]");
  }
  return Status::ok();
}

// Queries per work item: score matrices of about kTargetScoreElements, and enough items that
// every thread has work even with few kv heads. (The split decides which keys each GEMM sums
// over, so it decides the last bits of the results too.)
void splitIntoItems(Shape& s) {
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  int64_t chunk = std::max<int64_t>(1, kTargetScoreElements / (s.group * s.tokens));
  const int64_t minChunks = (threads + s.kvHeads - 1) / s.kvHeads;
  chunk = std::min(chunk, (s.selected + minChunks - 1) / minChunks);
  s.chunk = std::max<int64_t>(1, std::min(chunk, s.selected));
  s.chunksPerHead = (s.selected + s.chunk - 1) / s.chunk;
}

Expected<Shape> validate(const AttentionInput& in, const AttentionCaseSelection& which) {
  if (!in.query) return Status::invalidArgument("attention: the layer has no query");
  if (!in.key) return Status::invalidArgument("attention: key is missing");
  const Tensor3& k = *in.key;
  if (k.heads <= 0 || k.tokens <= 0 || k.dim <= 0 ||
      k.data.size() != static_cast<size_t>(k.heads * k.tokens * k.dim)) {
    return Status::invalidArgument("attention: key is empty or inconsistent");
  }
  KVS_RETURN_IF_ERROR(checkTensor(in.value, "value", k));
  if (which.keyOnly || which.joint) KVS_RETURN_IF_ERROR(checkTensor(in.keyHat, "reconstructed key", k));
  if (which.valueOnly || which.joint) {
    KVS_RETURN_IF_ERROR(checkTensor(in.valueHat, "reconstructed value", k));
  }
  const Tensor3& q = *in.query;
  if (q.dim != k.dim) {
    return Status::invalidArgument("attention: query head dim " + std::to_string(q.dim) +
                                   " differs from key head dim " + std::to_string(k.dim));
  }
  if (q.heads <= 0 || q.heads % k.heads != 0) {
    return Status::invalidArgument("attention: " + std::to_string(q.heads) +
                                   " query heads are not a multiple of " + std::to_string(k.heads) +
                                   " kv heads");
  }
  if (q.tokens < 1 || q.tokens > k.tokens) {
    return Status::invalidArgument("attention: " + std::to_string(q.tokens) +
                                   " queries for " + std::to_string(k.tokens) +
                                   " tokens (need 1 ≤ Tq ≤ T)");
  }
  if (q.data.size() != static_cast<size_t>(q.heads * q.tokens * q.dim)) {
    return Status::invalidArgument("attention: query data does not match its shape");
  }
  if (in.lastQueries < 0) return Status::invalidArgument("attention: lastQueries must be ≥ 0");
  if (!(in.softmaxScale >= 0) || !std::isfinite(in.softmaxScale)) {
    return Status::invalidArgument("attention: softmax scale must be finite and ≥ 0");
  }
  Shape s;
  s.kvHeads = k.heads;
  s.tokens = k.tokens;
  s.dim = k.dim;
  s.heads = q.heads;
  s.queries = q.tokens;
  s.group = q.heads / k.heads;
  s.selected = in.lastQueries > 0 ? std::min<int64_t>(in.lastQueries, s.queries) : s.queries;
  s.firstQuery = s.queries - s.selected;
  s.scale = in.softmaxScale > 0 ? in.softmaxScale : 1.0 / std::sqrt(static_cast<double>(s.dim));
  splitIntoItems(s);
  return s;
}

// Sums over the rows of one item; reduced per kv head in item order (deterministic).
struct Partial {
  double scoreAbsSum = 0, scoreMax = 0;
  int64_t scoreCount = 0;
  double klSum = 0, klMax = 0;
  int64_t top1 = 0;
  double relKey = 0, relValue = 0, relJoint = 0;
};

// §6's argmax of a row: the lowest j of the largest q·k_j. The float GEMM's scores `approx`
// (within `tol` of the exact ones) narrow it to the keys within 2·tol of their maximum; those are
// compared by float64 dot products summed in one fixed order, so keys that reconstruct to the
// same row score exactly alike and ties go to the lowest index (quantization.md §6).
int64_t exactArgmax(const double* approx, int64_t n, double tol, const float* q, const float* keys, int64_t d) {
  const double m = *std::max_element(approx, approx + n);
  if (!(m == m)) return std::find_if(approx, approx + n, [](double v) { return v != v; }) - approx;
  int64_t best = -1, candidates = 0;
  double bestDot = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (!(approx[j] >= m - 2.0 * tol)) continue;
    ++candidates;
    double dot = 0;
    const float* k = keys + j * d;
    for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * static_cast<double>(k[c]);
    if (best < 0 || dot > bestDot) {
      best = j;
      bestDot = dot;
    }
  }
  return best;
}

// exactArgmax over candidates already picked (ascending indices within the error bound of the
// maximum): the same float64 dot products, the same tie rule.
int64_t exactArgmaxOf(const std::vector<int64_t>& candidates, const float* q, const float* keys, int64_t d) {
  int64_t best = -1;
  double bestDot = 0;
  for (const int64_t j : candidates) {
    double dot = 0;
    const float* k = keys + j * d;
    for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * static_cast<double>(k[c]);
    if (best < 0 || dot > bestDot) {
      best = j;
      bestDot = dot;
    }
  }
  return best;
}

// A bound on |float GEMM dot − exact dot| for vectors of norms a and b in d dimensions (the
// classic γ_d·‖a‖‖b‖ with unit roundoff 2^-24, doubled for margin).
double gemmErrorBound(double a, double b, int64_t d) {
  return a * b * static_cast<double>(d + 2) * 0x1.0p-23;
}

double relativeError(const float* diff, const float* ref, int64_t d) {
  double num = 0, den = 0;
  for (int64_t c = 0; c < d; ++c) {
    num += static_cast<double>(diff[c]) * diff[c];
    den += static_cast<double>(ref[c]) * ref[c];
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

// Scratch of one work item. Its buffers only grow and are reused across items and calls: an
// item needs ~30 MiB of matrices, and fresh allocations of that size cost more in page faults
// than the item's arithmetic on some machines.
struct Workspace {
  std::vector<float> qc, scores, deltaK, deltaScores, prob, deltaProb, probHat, out, deltaV;
  std::vector<float> diffKey, diffValue, diffJoint;
  std::vector<double> sd, dd, shat, p, phat, rowKl;
  std::vector<int64_t> candidates;  // argmax candidates of one row
  std::vector<float> probStack, outStack, diffStack;  // the stacked output products' operands
};

template <class T>
T* grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// Workspaces kept between calls: at most one per thread, the rest are freed when returned.
class WorkspacePool {
 public:
  std::unique_ptr<Workspace> acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return std::make_unique<Workspace>();
    std::unique_ptr<Workspace> w = std::move(free_.back());
    free_.pop_back();
    return w;
  }
  void release(std::unique_ptr<Workspace> w) {
    int keep = 1;
#ifdef _OPENMP
    keep = omp_get_max_threads();
#endif
    std::lock_guard<std::mutex> lock(mutex_);
    if (static_cast<int>(free_.size()) < keep) free_.push_back(std::move(w));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Workspace>> free_;
};

WorkspacePool& workspaces() {
  static WorkspacePool pool;
  return pool;
}

// Flush-to-zero and denormals-are-zero while the output GEMMs run (x86 MXCSR). Their left
// factors are probabilities and their changes, spread over a hundred orders of magnitude: the
// products below 2^-126 (and P, ΔP, P̂ there, which gemmFloat already sets to zero) would be
// subnormal, and every one costs a microcode assist, which made these GEMMs run at half the
// speed of the score GEMMs. What they could add is below 2^-126 per product, invisible next to
// outputs of ordinary size (docs/performance.md, section 2, has the measurement and the reading).
class FlushSubnormals {
 public:
#if KVSCOPE_HAS_SSE_STREAMING
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushSubnormals() { _mm_setcsr(saved_); }
#else
  FlushSubnormals() = default;
#endif
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
#if KVSCOPE_HAS_SSE_STREAMING
  unsigned saved_;
#endif
};

using MapF = Eigen::Map<RowMatF>;
using MapA = Eigen::Map<Eigen::ArrayXd>;

// One work item; returns its partial sums and writes per-row values when asked. `base`
// supplies the original scores, normalizers and outputs; `fill` receives them.
Partial runItem(const AttentionInput& in, const AttentionCaseSelection& which, const Shape& s,
                int64_t g, int64_t chunkIndex, RowValues* rowsOut, const ItemBaseline* base,
                ItemBaseline* fill, Workspace& ws, const std::function<bool()>& stop) {
  const bool needKeys = which.keyOnly || which.joint;
  const bool needValues = which.valueOnly || which.joint;
  const int64_t i0 = s.firstQuery + chunkIndex * s.chunk;
  const int64_t i1 = std::min(s.queries, i0 + s.chunk);
  const int64_t nq = i1 - i0;
  const int64_t rows = s.group * nq;
  const int64_t ncol = s.tokens - s.queries + i1;  // keys 0 … position of query i1-1
  const int64_t d = s.dim;

  MapF qc(grow(ws.qc, rows * d), rows, d);
  for (int64_t hh = 0; hh < s.group; ++hh) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* src = in.query->row(g * s.group + hh, i);
      std::copy(src, src + d, qc.row(hh * nq + (i - i0)).data());
    }
  }
  ConstMapF kAll(in.key->row(g, 0), s.tokens, d);
  ConstMapF vAll(in.value->row(g, 0), s.tokens, d);
  auto kg = kAll.topRows(ncol);
  auto vg = vAll.topRows(ncol);

  float* ownScores = nullptr;
  if (!base) {
    ownScores = grow(ws.scores, rows * ncol);
    MapF(ownScores, rows, ncol).noalias() = qc * kg.transpose();
  }
  ConstMapF scores(base ? base->scores.data() : ownScores, rows, ncol);
  MapF deltaScores(needKeys ? grow(ws.deltaScores, rows * ncol) : nullptr, needKeys ? rows : 0, ncol);
  double maxKeyNorm = 0, maxDeltaNorm = 0;
  if (needKeys) {
    ConstMapF khAll(in.keyHat->row(g, 0), s.tokens, d);
    MapF deltaK(grow(ws.deltaK, ncol * d), ncol, d);
    deltaK = khAll.topRows(ncol) - kg;
    deltaScores.noalias() = qc * deltaK.transpose();
    // Largest key and key-change norms, for the argmax's error bounds.
    maxKeyNorm = static_cast<double>(kg.rowwise().norm().maxCoeff()) * 1.001;
    maxDeltaNorm = static_cast<double>(deltaK.rowwise().norm().maxCoeff()) * 1.001;
  }
  if (stop()) return {};

  // value_only on a baseline needs nothing but P, which the baseline keeps: no softmax at all.
  if (base && !needKeys && !base->prob.empty()) {
    // The float P the softmax below would write: the same float64 values, rounded the same way.
    MapF prob(grow(ws.prob, rows * ncol), rows, ncol);
    prob = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
               base->prob.data(), rows, ncol).unaryExpr([](double x) { return gemmFloat(x); });
    ConstMapF out(base->out.data(), rows, d);
    ConstMapF vhAll(in.valueHat->row(g, 0), s.tokens, d);
    MapF deltaV(grow(ws.deltaV, ncol * d), ncol, d);
    deltaV = vhAll.topRows(ncol) - vg;
    MapF diffValue(grow(ws.diffValue, rows * d), rows, d);
    {
      const FlushSubnormals flush;
      diffValue.noalias() = prob * deltaV;
    }
    Partial part;
    for (int64_t r = 0; r < rows; ++r) {
      const double rv = relativeError(diffValue.row(r).data(), out.row(r).data(), d);
      part.relValue += rv;
      if (rowsOut) {
        const int64_t hh = r / nq, i = i0 + r % nq;
        const size_t at = static_cast<size_t>((g * s.group + hh) * s.selected + (i - s.firstQuery));
        rowsOut->relValueOnly[at] = rv;
      }
    }
    return part;
  }

  // Each row's entries past its position stay zero (causal mask); only those are cleared. On a
  // baseline, key_only never reads P (only P̂ − P), so it is not written.
  const bool writeProb = !base || needValues;
  // With all three cases the output GEMMs go in two stacked products, [ΔP; P]·V and [P; P̂]·ΔV,
  // which pack V and ΔV once instead of twice (ΔP, P, P̂ lie one after the other for it). Each
  // output row is summed exactly as in its own product: the same depth blocking, rows in
  // multiples of four (a single row would be a matrix-vector product, a tiny product a
  // coefficient-wise one, which sum in other orders; those cases keep separate products).
  const bool stacked = !base && which.keyOnly && which.valueOnly && which.joint && rows % 4 == 0 &&
                       ncol + rows + d >= 20;
  float* stack = stacked ? grow(ws.probStack, 3 * rows * ncol) : nullptr;
  MapF prob(stacked ? stack + rows * ncol : grow(ws.prob, rows * ncol), rows, ncol);
  MapF deltaProb(stacked ? stack : needKeys ? grow(ws.deltaProb, rows * ncol) : nullptr, needKeys ? rows : 0, ncol);
  MapF probHat(stacked ? stack + 2 * rows * ncol : which.joint ? grow(ws.probHat, rows * ncol) : nullptr,
               which.joint ? rows : 0, ncol);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t nk = s.tokens - s.queries + (i0 + r % nq) + 1;
    if (writeProb) prob.row(r).tail(ncol - nk).setZero();
    if (needKeys) deltaProb.row(r).tail(ncol - nk).setZero();
    if (which.joint) probHat.row(r).tail(ncol - nk).setZero();
  }

  MapA sd(grow(ws.sd, ncol), ncol), dd(grow(ws.dd, ncol), ncol), shat(grow(ws.shat, ncol), ncol);
  MapA p(grow(ws.p, ncol), ncol), phat(grow(ws.phat, ncol), ncol);
  Partial part;
  double* rowKl = grow(ws.rowKl, rows);
  std::fill(rowKl, rowKl + rows, 0.0);
  if (fill) fill->prob.assign(static_cast<size_t>(rows * ncol), 0.0);
  const bool storedProb = base && !base->prob.empty();
  const double maxKeyTol = maxKeyNorm, maxDeltaTol = maxDeltaNorm;

  // One row through Eigen's expressions: the definition the fused passes below reproduce bit for
  // bit (softmax_rows.h), and the path of rows with a non-finite score.
  auto eigenRow = [&](int64_t r, int64_t nk) {
    auto sdh = sd.head(nk);
    sdh = scores.row(r).head(nk).transpose().cast<double>().array() * s.scale;
    double m1 = 0, z1 = 0;
    const double* phData = p.data();
    if (storedProb) {  // the baseline's P: the values the branches below would compute
      m1 = base->rowMax[static_cast<size_t>(r)];
      z1 = base->rowSum[static_cast<size_t>(r)];
      phData = base->prob.data() + r * ncol;
    } else {
      auto pw = p.head(nk);
      if (base) {
        m1 = base->rowMax[static_cast<size_t>(r)];
        pw = (sdh - m1).exp();
        z1 = base->rowSum[static_cast<size_t>(r)];
      } else {
        m1 = sdh.maxCoeff();
        pw = (sdh - m1).exp();
        z1 = pw.sum();
      }
      pw /= z1;
    }
    Eigen::Map<const Eigen::ArrayXd> ph(phData, nk);
    if (fill) {
      fill->rowMax[static_cast<size_t>(r)] = m1;
      fill->rowSum[static_cast<size_t>(r)] = z1;
      std::copy(phData, phData + nk, fill->prob.data() + r * ncol);
    }
    if (writeProb) prob.row(r).head(nk) = ph.unaryExpr([](double x) { return gemmFloat(x); }).matrix().transpose();
    if (!needKeys) return;

    auto ddh = dd.head(nk);
    ddh = deltaScores.row(r).head(nk).transpose().cast<double>().array() * s.scale;
    auto shh = shat.head(nk);
    shh = sdh + ddh;
    const double m2 = shh.maxCoeff();
    auto phh = phat.head(nk);
    phh = (shh - m2).exp();
    const double z2 = phh.sum();
    phh /= z2;
    // KL(P‖P̂) = Σ P_j (ln P_j − ln P̂_j) = (lse(ŝ) − lse(s)) − Σ P_j δ_j, all terms log-domain:
    // no exp of a difference can underflow to an infinite logarithm.
    const double lseDiff = (m2 + std::log(z2)) - (m1 + std::log(z1));
    double kl = lseDiff - (ph * ddh).sum();
    if (kl < 0) kl = 0;  // rounding of a zero divergence; NaN input stays visible as NaN
    rowKl[r] = kl;
    part.klSum += kl;
    part.klMax = std::max(part.klMax, kl);
    const auto absd = ddh.abs();
    part.scoreAbsSum += absd.sum();
    part.scoreMax = std::max(part.scoreMax, absd.maxCoeff());
    part.scoreCount += nk;
    {
      const float* qr = qc.row(r).data();
      const double qNorm = static_cast<double>(qc.row(r).norm()) * 1.001;
      const double tolS = s.scale * gemmErrorBound(qNorm, maxKeyTol, d);
      // ŝ = s + Δs carries the errors of both products.
      const double tolHat = tolS + s.scale * gemmErrorBound(qNorm, maxDeltaTol, d) +
                            4.0 * std::numeric_limits<double>::epsilon() * std::fabs(m2);
      const int64_t top = exactArgmax(sdh.data(), nk, tolS, qr, in.key->row(g, 0), d);
      const int64_t topHat = exactArgmax(shh.data(), nk, tolHat, qr, in.keyHat->row(g, 0), d);
      if (top == topHat) ++part.top1;
    }
    deltaProb.row(r).head(nk) = (phh - ph).unaryExpr([](double x) { return gemmFloat(x); }).matrix().transpose();
    if (which.joint) probHat.row(r).head(nk) = phh.unaryExpr([](double x) { return gemmFloat(x); }).matrix().transpose();
  };

  std::vector<int64_t>& candidates = ws.candidates;
  const bool fused = fusedRows().load(std::memory_order_relaxed);
  for (int64_t r = 0; r < rows; ++r) {
    if (r % 32 == 31 && stop()) return {};
    const int64_t i = i0 + r % nq;
    const int64_t nk = s.tokens - s.queries + i + 1;  // keys 0 … p
    const float* sRow = scores.row(r).data();
    const float* dRow = needKeys ? deltaScores.row(r).data() : nullptr;
    const RowScan scan = fused ? scanScores(sRow, dRow, nk, s.scale) : RowScan{0, 0, 0, 0, false};
    if (!scan.finite) {
      eigenRow(r, nk);
      continue;
    }
    // The same values as eigenRow, in four passes over the row: scan, exp (and Σ), normalize
    // (with the float P, ΔP, P̂ and Σ P·δ), and the argmax candidates.
    double m1 = 0, z1 = 0;
    const double* pRow = p.data();
    bool divide = true;
    if (storedProb) {
      m1 = base->rowMax[static_cast<size_t>(r)];
      z1 = base->rowSum[static_cast<size_t>(r)];
      pRow = base->prob.data() + r * ncol;
      divide = false;
    } else if (base) {
      m1 = base->rowMax[static_cast<size_t>(r)];
      (void)expScores(sRow, nullptr, nk, s.scale, m1, p.data());
      z1 = base->rowSum[static_cast<size_t>(r)];
    } else {
      m1 = scan.maxScore;
      z1 = expScores(sRow, nullptr, nk, s.scale, m1, p.data());
    }
    RowOutputs outs;
    outs.prob = writeProb ? prob.row(r).data() : nullptr;
    if (!needKeys) {
      normalizeRow(pRow, p.data(), divide, z1, nullptr, 0.0, nullptr, s.scale, nk, outs);
      if (divide) pRow = p.data();
    } else {
      const double m2 = scan.maxScoreHat;
      const double z2 = expScores(sRow, dRow, nk, s.scale, m2, phat.data());
      outs.deltaProb = deltaProb.row(r).data();
      outs.probHat = which.joint ? probHat.row(r).data() : nullptr;
      const double weighted = normalizeRow(pRow, p.data(), divide, z1, phat.data(), z2, dRow, s.scale, nk, outs);
      if (divide) pRow = p.data();
      const double lseDiff = (m2 + std::log(z2)) - (m1 + std::log(z1));
      double kl = lseDiff - weighted;
      if (kl < 0) kl = 0;
      rowKl[r] = kl;
      part.klSum += kl;
      part.klMax = std::max(part.klMax, kl);
      part.scoreAbsSum += scan.absDeltaSum;
      part.scoreMax = std::max(part.scoreMax, scan.absDeltaMax);
      part.scoreCount += nk;
      const float* qr = qc.row(r).data();
      const double qNorm = static_cast<double>(qc.row(r).norm()) * 1.001;
      const double tolS = s.scale * gemmErrorBound(qNorm, maxKeyTol, d);
      const double tolHat = tolS + s.scale * gemmErrorBound(qNorm, maxDeltaTol, d) +
                            4.0 * std::numeric_limits<double>::epsilon() * std::fabs(m2);
      candidatesAtLeast(sRow, nullptr, nk, s.scale, scan.maxScore - 2.0 * tolS, candidates);
      const int64_t top = exactArgmaxOf(candidates, qr, in.key->row(g, 0), d);
      candidatesAtLeast(sRow, dRow, nk, s.scale, m2 - 2.0 * tolHat, candidates);
      const int64_t topHat = exactArgmaxOf(candidates, qr, in.keyHat->row(g, 0), d);
      if (top == topHat) ++part.top1;
    }
    if (fill) {
      fill->rowMax[static_cast<size_t>(r)] = m1;
      fill->rowSum[static_cast<size_t>(r)] = z1;
      std::copy(pRow, pRow + nk, fill->prob.data() + r * ncol);
    }
  }

  // [ΔP·V; P·V] and [P·ΔV; ΔP·V + P̂·ΔV] when stacked, one product each.
  float* outStack = stacked ? grow(ws.outStack, 2 * rows * d) : nullptr;
  float* diffStack = stacked ? grow(ws.diffStack, 2 * rows * d) : nullptr;
  float* ownOut = nullptr;
  if (stacked) {
    ownOut = outStack + rows * d;
    const FlushSubnormals flush;
    MapF(outStack, 2 * rows, d).noalias() = MapF(stack, 2 * rows, ncol) * vg;
  } else if (!base) {
    ownOut = grow(ws.out, rows * d);
    const FlushSubnormals flush;
    MapF(ownOut, rows, d).noalias() = prob * vg;
  }
  if (stop()) return {};
  ConstMapF out(base ? base->out.data() : ownOut, rows, d);
  if (fill) {
    fill->scores.assign(ownScores, ownScores + rows * ncol);
    fill->out.assign(ownOut, ownOut + rows * d);
  }
  MapF diffKey(stacked ? outStack : needKeys ? grow(ws.diffKey, rows * d) : nullptr, needKeys ? rows : 0, d);
  MapF diffValue(stacked ? diffStack : which.valueOnly ? grow(ws.diffValue, rows * d) : nullptr,
                 which.valueOnly ? rows : 0, d);
  MapF diffJoint(stacked ? diffStack + rows * d : which.joint ? grow(ws.diffJoint, rows * d) : nullptr,
                 which.joint ? rows : 0, d);
  if (stacked) {
    ConstMapF vhAll(in.valueHat->row(g, 0), s.tokens, d);
    MapF deltaV(grow(ws.deltaV, ncol * d), ncol, d);
    deltaV = vhAll.topRows(ncol) - vg;
    diffValue.setZero();  // what `=` starts a product from
    diffJoint = diffKey;
    const FlushSubnormals flush;
    MapF(diffStack, 2 * rows, d).noalias() += MapF(stack + rows * ncol, 2 * rows, ncol) * deltaV;
  } else if (needKeys) {
    const FlushSubnormals flush;
    diffKey.noalias() = deltaProb * vg;
  }
  if (needValues && !stacked) {
    ConstMapF vhAll(in.valueHat->row(g, 0), s.tokens, d);
    MapF deltaV(grow(ws.deltaV, ncol * d), ncol, d);
    deltaV = vhAll.topRows(ncol) - vg;
    const FlushSubnormals flush;
    if (which.valueOnly) diffValue.noalias() = prob * deltaV;
    if (which.joint) {
      diffJoint = diffKey;
      diffJoint.noalias() += probHat * deltaV;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* o = out.row(r).data();
    const double rk = which.keyOnly ? relativeError(diffKey.row(r).data(), o, d) : 0.0;
    const double rv = which.valueOnly ? relativeError(diffValue.row(r).data(), o, d) : 0.0;
    const double rj = which.joint ? relativeError(diffJoint.row(r).data(), o, d) : 0.0;
    part.relKey += rk;
    part.relValue += rv;
    part.relJoint += rj;
    if (rowsOut) {
      const int64_t hh = r / nq, i = i0 + r % nq;
      const size_t at =
          static_cast<size_t>((g * s.group + hh) * s.selected + (i - s.firstQuery));
      rowsOut->kl[at] = rowKl[r];
      rowsOut->relKeyOnly[at] = rk;
      rowsOut->relValueOnly[at] = rv;
      rowsOut->relJoint[at] = rj;
    }
  }
  return part;
}

// Checked inside items so a cancel lands within a fraction of one item: the reporting thread
// (OpenMP thread 0, the only one that ever calls `progress`) asks the callback, every thread
// sees the flag.
std::function<bool()> stopCheck(const Progress& progress, std::atomic<bool>& cancelled,
                                const std::atomic<int64_t>& done, int64_t items, const char* what) {
  return [&progress, &cancelled, &done, items, what]() {
    if (cancelled.load(std::memory_order_relaxed)) return true;
    bool reporter = true;
#ifdef _OPENMP
    reporter = omp_get_thread_num() == 0;
#endif
    if (reporter && !report(progress, static_cast<double>(done.load()) / static_cast<double>(items), what)) {
      cancelled = true;
    }
    return cancelled.load(std::memory_order_relaxed);
  };
}

// runItem with a workspace from the pool.
Partial runItemPooled(const AttentionInput& in, const AttentionCaseSelection& which, const Shape& s,
                      int64_t g, int64_t chunkIndex, RowValues* rowsOut, const ItemBaseline* base,
                      ItemBaseline* fill, const std::function<bool()>& stop) {
  std::unique_ptr<Workspace> ws = workspaces().acquire();
  const Partial part = runItem(in, which, s, g, chunkIndex, rowsOut, base, fill, *ws, stop);
  workspaces().release(std::move(ws));
  return part;
}

}  // namespace

namespace {

// One layer's share of a run: its shape, and the partial sums of its items.
struct LayerRun {
  const AttentionInput* input = nullptr;
  const AttentionBaseline* baseline = nullptr;
  RowValues* rows = nullptr;
  Shape s;
  int64_t items = 0;
  bool parallel = false;  // whether its items run on threads (else as one inactive region)
  std::vector<Partial> partials;
};

Expected<LayerRun> startRun(const AttentionInput& input, const AttentionCaseSelection& which, RowValues* rows,
                            const AttentionBaseline* baseline) {
  auto shape = validate(input, which);
  if (!shape) return shape.status();
  LayerRun run;
  run.input = &input;
  run.baseline = baseline;
  run.rows = rows;
  run.s = *shape;
  if (baseline) {
    if (baseline->query != input.query || baseline->key != input.key ||
        baseline->value != input.value || baseline->softmaxScale != input.softmaxScale ||
        baseline->lastQueries != input.lastQueries) {
      return Status::invalidArgument(
          "attention: the baseline was prepared for other tensors or options");
    }
    run.s = baseline->shape;  // the items must split the layer as they did when it was prepared
  }
  const Shape& s = run.s;
  if (rows) {
    const size_t n = static_cast<size_t>(s.heads * s.selected);
    rows->selectedQueries = s.selected;
    rows->firstQuery = s.firstQuery;
    rows->kl.assign(n, 0.0);
    rows->relKeyOnly.assign(n, 0.0);
    rows->relValueOnly.assign(n, 0.0);
    rows->relJoint.assign(n, 0.0);
  }
  run.items = s.kvHeads * s.chunksPerHead;
  run.partials.resize(static_cast<size_t>(run.items));
  // Threads only pay off beyond a few million multiply-adds (waking them costs more below). A
  // layer below that runs its items in an inactive region, where Eigen may thread a GEMM itself.
  const double work = static_cast<double>(s.heads * s.selected) * static_cast<double>(s.tokens * s.dim);
  run.parallel = run.items > 1 && work > 2e6;
  return run;
}

Partial runItemOf(const LayerRun& run, const AttentionCaseSelection& which, int64_t item,
                  const std::function<bool()>& stop) {
  const Shape& s = run.s;
  return runItemPooled(*run.input, which, s, item / s.chunksPerHead, item % s.chunksPerHead, run.rows,
                       run.baseline ? &run.baseline->items[static_cast<size_t>(item)] : nullptr, nullptr, stop);
}

std::vector<AttentionCases> reduceRun(const LayerRun& run, const AttentionCaseSelection& which) {
  const Shape& s = run.s;
  const std::vector<Partial>& partials = run.partials;
  std::vector<AttentionCases> result(static_cast<size_t>(s.kvHeads));
  const double perHead = static_cast<double>(s.group * s.selected);
  for (int64_t g = 0; g < s.kvHeads; ++g) {
    Partial sum;
    for (int64_t c = 0; c < s.chunksPerHead; ++c) {
      const Partial& p = partials[static_cast<size_t>(g * s.chunksPerHead + c)];
      sum.scoreAbsSum += p.scoreAbsSum;
      sum.scoreMax = std::max(sum.scoreMax, p.scoreMax);
      sum.scoreCount += p.scoreCount;
      sum.klSum += p.klSum;
      sum.klMax = std::max(sum.klMax, p.klMax);
      sum.top1 += p.top1;
      sum.relKey += p.relKey;
      sum.relValue += p.relValue;
      sum.relJoint += p.relJoint;
    }
    AttentionCases& c = result[static_cast<size_t>(g)];
    AttentionMetrics keyScores;
    if (which.keyOnly || which.joint) {
      keyScores.scoreMae = sum.scoreCount ? sum.scoreAbsSum / static_cast<double>(sum.scoreCount) : 0;
      keyScores.scoreMax = sum.scoreMax;
      keyScores.klMean = sum.klSum / perHead;
      keyScores.klMax = sum.klMax;
      keyScores.top1Agreement = static_cast<double>(sum.top1) / perHead;
    }
    if (which.keyOnly) {
      c.keyOnly = keyScores;
      c.keyOnly.outputRelError = sum.relKey / perHead;
    }
    if (which.valueOnly) c.valueOnly.outputRelError = sum.relValue / perHead;
    if (which.joint) {
      c.joint = keyScores;  // P̂ depends on K̂ only, so the score fields equal key_only's
      c.joint.outputRelError = sum.relJoint / perHead;
    }
  }
  return result;
}

}  // namespace

Expected<std::vector<AttentionCases>> run(const AttentionInput& input,
                                          const AttentionCaseSelection& which, RowValues* rows,
                                          const Progress& progress,
                                          const AttentionBaseline* baseline) {
  auto started = startRun(input, which, rows, baseline);
  if (!started) return started.status();
  LayerRun& layer = *started;
  std::atomic<bool> cancelled{false};
  std::atomic<int64_t> done{0};
  if (!report(progress, 0.0, "attention metrics")) return Status::cancelled();
  const auto stop = stopCheck(progress, cancelled, done, layer.items, "attention metrics");
#pragma omp parallel for schedule(dynamic, 1) if (layer.parallel)
  for (int64_t item = 0; item < layer.items; ++item) {
    if (cancelled.load(std::memory_order_relaxed)) continue;
    layer.partials[static_cast<size_t>(item)] = runItemOf(layer, which, item, stop);
    done.fetch_add(1);
    stop();  // reports the finished fraction (thread 0) and sees a cancel
  }
  if (cancelled) return Status::cancelled();
  return reduceRun(layer, which);
}

Expected<std::vector<std::vector<AttentionCases>>> runLayers(const std::vector<AttentionInput>& inputs,
                                                             const AttentionCaseSelection& which,
                                                             const Progress& progress) {
  std::vector<LayerRun> layers;
  layers.reserve(inputs.size());
  for (const AttentionInput& in : inputs) {
    auto started = startRun(in, which, nullptr, nullptr);
    if (!started) return started.status();
    layers.push_back(std::move(*started));
  }
  // The items of every layer that runs on threads, in layer order, in one loop: each item is
  // computed exactly as in a call for its layer alone, so the results are those calls' results.
  std::vector<std::pair<size_t, int64_t>> items;
  for (size_t l = 0; l < layers.size(); ++l) {
    if (!layers[l].parallel) continue;
    for (int64_t i = 0; i < layers[l].items; ++i) items.emplace_back(l, i);
  }
  const auto total = static_cast<int64_t>(items.size());
  std::atomic<bool> cancelled{false};
  std::atomic<int64_t> done{0};
  if (!report(progress, 0.0, "attention metrics")) return Status::cancelled();
  const auto stop = stopCheck(progress, cancelled, done, std::max<int64_t>(total, 1), "attention metrics");
#pragma omp parallel for schedule(dynamic, 1) if (total > 1)
  for (int64_t k = 0; k < total; ++k) {
    if (cancelled.load(std::memory_order_relaxed)) continue;
    const auto [l, item] = items[static_cast<size_t>(k)];
    layers[l].partials[static_cast<size_t>(item)] = runItemOf(layers[l], which, item, stop);
    done.fetch_add(1);
    stop();
  }
  if (cancelled) return Status::cancelled();
  std::vector<std::vector<AttentionCases>> results;
  results.reserve(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    if (!layers[l].parallel) {  // as its own call would: an inactive region
      auto alone = run(inputs[l], which, nullptr, {});
      if (!alone) return alone.status();
      results.push_back(std::move(*alone));
    } else {
      results.push_back(reduceRun(layers[l], which));
    }
  }
  return results;
}

Status checkInput(const AttentionInput& input, const AttentionCaseSelection& which) {
  return validate(input, which).status();
}

double gemmFlops(const AttentionInput& input, const AttentionCaseSelection& which) {
  auto shape = validate(input, which);
  if (!shape) return 0;
  const Shape s = *shape;
  const bool needKeys = which.keyOnly || which.joint;
  const int gemms = 2 /* S, O */ + (needKeys ? 2 : 0) /* ΔS, ΔP·V */ + (which.valueOnly ? 1 : 0) +
                    (which.joint ? 1 : 0);
  double flops = 0;
  for (int64_t c = 0; c < s.chunksPerHead; ++c) {
    const int64_t i0 = s.firstQuery + c * s.chunk;
    const int64_t i1 = std::min(s.queries, i0 + s.chunk);
    const double rows = static_cast<double>(s.group * (i1 - i0));
    const double ncol = static_cast<double>(s.tokens - s.queries + i1);
    flops += 2.0 * rows * ncol * static_cast<double>(s.dim) * gemms;
  }
  return flops * static_cast<double>(s.kvHeads);
}

}  // namespace attention_engine

Expected<std::shared_ptr<const AttentionBaseline>> prepareAttentionBaseline(
    const AttentionInput& input, size_t maxBytes, const Progress& progress) {
  using namespace attention_engine;
  const AttentionCaseSelection none{false, false, false};
  auto shape = validate(input, none);
  if (!shape) return shape.status();
  const Shape s = *shape;
  double bytes = 0;
  for (int64_t c = 0; c < s.chunksPerHead; ++c) {
    const int64_t i0 = s.firstQuery + c * s.chunk;
    const int64_t i1 = std::min(s.queries, i0 + s.chunk);
    const double rows = static_cast<double>(s.group * (i1 - i0));
    bytes += rows * (12.0 * static_cast<double>(s.tokens - s.queries + i1) + 4.0 * s.dim + 16.0);
  }
  bytes *= static_cast<double>(s.kvHeads);
  if (bytes > static_cast<double>(maxBytes)) {
    return Status::resourceLimit("attention baseline: " + std::to_string(bytes / (1 << 20)) +
                                 " MiB exceeds the limit of " +
                                 std::to_string(static_cast<double>(maxBytes) / (1 << 20)) + " MiB");
  }
  auto b = std::make_shared<AttentionBaseline>();
  b->query = input.query;
  b->key = input.key;
  b->value = input.value;
  b->softmaxScale = input.softmaxScale;
  b->lastQueries = input.lastQueries;
  b->shape = s;
  const int64_t items = s.kvHeads * s.chunksPerHead;
  b->items.resize(static_cast<size_t>(items));
  for (int64_t item = 0; item < items; ++item) {
    const int64_t c = item % s.chunksPerHead;
    const int64_t i0 = s.firstQuery + c * s.chunk;
    const size_t rows = static_cast<size_t>(s.group * (std::min(s.queries, i0 + s.chunk) - i0));
    b->items[static_cast<size_t>(item)].rowMax.resize(rows);
    b->items[static_cast<size_t>(item)].rowSum.resize(rows);
  }
  std::atomic<bool> cancelled{false};
  std::atomic<int64_t> done{0};
  const auto stop = stopCheck(progress, cancelled, done, items, "attention baseline");
  const double work = static_cast<double>(s.heads * s.selected) * static_cast<double>(s.tokens * s.dim);
  const bool parallel = items > 1 && work > 2e6;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t item = 0; item < items; ++item) {
    if (cancelled.load(std::memory_order_relaxed)) continue;
    runItemPooled(input, none, s, item / s.chunksPerHead, item % s.chunksPerHead, nullptr, nullptr,
                  &b->items[static_cast<size_t>(item)], stop);
    done.fetch_add(1);
    stop();  // reports the finished fraction (thread 0) and sees a cancel
  }
  if (cancelled) return Status::cancelled();
  return std::shared_ptr<const AttentionBaseline>(std::move(b));
}

Expected<std::vector<AttentionCases>> attentionMetrics(const AttentionInput& input,
                                                       const AttentionCaseSelection& which,
                                                       const AttentionBaseline& baseline,
                                                       const Progress& progress) {
  if (!which.keyOnly && !which.valueOnly && !which.joint) {
    return Status::invalidArgument("attention: no case selected");
  }
  return attention_engine::run(input, which, nullptr, progress, &baseline);
}

int64_t attentionWorkItems(int64_t heads, int64_t kvHeads, int64_t tokens, int64_t queries, int lastQueries) {
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0 || tokens <= 0 || queries <= 0) return 0;
  attention_engine::Shape s;
  s.kvHeads = kvHeads;
  s.tokens = tokens;
  s.heads = heads;
  s.queries = queries;
  s.group = heads / kvHeads;
  s.selected = lastQueries > 0 ? std::min<int64_t>(lastQueries, queries) : queries;
  attention_engine::splitIntoItems(s);
  return s.kvHeads * s.chunksPerHead;
}

Expected<std::vector<std::vector<AttentionCases>>> attentionMetricsOfLayers(
    const std::vector<AttentionInput>& inputs, const Progress& progress) {
  return attention_engine::runLayers(inputs, AttentionCaseSelection{}, progress);
}

Expected<std::vector<AttentionCases>> attentionMetrics(const AttentionInput& input,
                                                       const Progress& progress) {
  return attention_engine::run(input, AttentionCaseSelection{}, nullptr, progress);
}

Expected<std::vector<AttentionCases>> attentionMetrics(const AttentionInput& input,
                                                       const AttentionCaseSelection& which,
                                                       const Progress& progress) {
  if (!which.keyOnly && !which.valueOnly && !which.joint) {
    return Status::invalidArgument("attention: no case selected");
  }
  return attention_engine::run(input, which, nullptr, progress);
}

}  // namespace kvscope
