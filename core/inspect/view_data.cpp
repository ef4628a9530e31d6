// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/inspect/view_data.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>
#include <ctime>
#include <limits>

#include <omp.h>

#include "core/quant/finite_check.h"
#include "core/quant/codebook.h"
#include "core/quant/lmdeploy_tq.h"
#include "core/quant/format_table.h"
#include "core/quant/fp_types.h"
#include "core/util/simd.h"
#include "core/quant/pipeline_reference.h"
#include "core/quant/rotation.h"

namespace kvscope {

namespace {

// Below this many values a pass runs on one thread: spawning costs more than it saves.
constexpr int64_t kParallelValues = int64_t{1} << 16;
constexpr int64_t kRadix = 65536;

using fp::magnitudeKey;

inline float fromKey(uint32_t key) {
  float v;
  std::memcpy(&v, &key, sizeof v);
  return v;
}

int threadsFor(int64_t n) { return n >= kParallelValues ? std::max(1, omp_get_max_threads()) : 1; }

// Histogram of keys[i] >> shift (masked to 16 bits) over the values whose key, shifted right by
// 16, equals `high` (or all values when high < 0), summed over threads into counts[0, kRadix).
void radixCounts(const float* v, int64_t n, int64_t high, std::vector<int64_t>& counts) {
  const int threads = threadsFor(n);
  counts.assign(static_cast<size_t>(threads * kRadix), 0);
#pragma omp parallel num_threads(threads)
  {
    int64_t* mine = counts.data() + static_cast<size_t>(omp_get_thread_num()) * kRadix;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t k = magnitudeKey(v[i]);
      if (high < 0) {
        ++mine[k >> 16];
      } else if ((k >> 16) == static_cast<uint32_t>(high)) {
        ++mine[k & 0xffffu];
      }
    }
  }
  for (int t = 1; t < threads; ++t) {
    const int64_t* theirs = counts.data() + static_cast<size_t>(t) * kRadix;
    for (int64_t b = 0; b < kRadix; ++b) counts[static_cast<size_t>(b)] += theirs[b];
  }
}

// Key of the k-th smallest |v| (0-based), and how many values have a smaller key, given the
// counts of the keys' upper 16 bits (`highCounts`); `counts` is scratch.
std::pair<uint32_t, int64_t> selectKey(const float* v, int64_t n, int64_t k, const std::vector<int64_t>& highCounts,
                                       std::vector<int64_t>& counts) {
  int64_t below = 0;
  int64_t high = 0;
  while (below + highCounts[static_cast<size_t>(high)] <= k) below += highCounts[static_cast<size_t>(high++)];
  radixCounts(v, n, high, counts);
  int64_t low = 0;
  while (below + counts[static_cast<size_t>(low)] <= k) below += counts[static_cast<size_t>(low++)];
  return {static_cast<uint32_t>((high << 16) | low), below};
}

// The histogram bin floor((v − lo) / span · bins) of n values, by a multiply (vectorized), and
// where that lands within rounding of an edge (flag 1) the caller decides by the division.
KVSCOPE_SIMD_CLONES void binsByMultiply(const float* v, int64_t n, double lo, double perUnit, int32_t* bin,
                                        uint8_t* nearEdge) {
  for (int64_t i = 0; i < n; ++i) {
    const double t = (static_cast<double>(v[i]) - lo) * perUnit;
    const auto b = static_cast<int32_t>(t);
    const double f = t - static_cast<double>(b);
    bin[i] = b;
    nearEdge[i] = static_cast<uint8_t>((f < 1e-6) | (f > 1 - 1e-6));
  }
}

// Gathers the slice a histogram counts into `buffer` when it is strided; returns its start.
const float* sliceOf(const Tensor3& x, int64_t head, HistogramScope scope, int64_t index, int64_t* n,
                     std::vector<float>& buffer) {
  *n = 0;
  if (head < 0 || head >= x.heads) return nullptr;
  switch (scope) {
    case HistogramScope::Head:
      *n = x.tokens * x.dim;
      return x.row(head, 0);
    case HistogramScope::Channel:
      if (index < 0 || index >= x.dim) return nullptr;
      buffer.resize(static_cast<size_t>(x.tokens));
      for (int64_t t = 0; t < x.tokens; ++t) buffer[static_cast<size_t>(t)] = x.at(head, t, index);
      *n = x.tokens;
      return buffer.data();
    case HistogramScope::Token:
      if (index < 0 || index >= x.tokens) return nullptr;
      *n = x.dim;
      return x.row(head, index);
  }
  return nullptr;
}

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

void computeHeatmapInto(const Tensor3& x, int64_t head, const Tensor3* xHat, int64_t hatHead,
                        HeatmapValue value, int maxColumns, HeatmapData& out) {
  out.channels = out.tokens = out.columns = 0;
  out.cells.clear();
  out.cellToken.clear();
  out.channelMax.clear();
  out.maxValue = out.minPositive = 0;
  if (head < 0 || head >= x.heads || x.tokens == 0 || x.dim == 0) return;
  const bool error = value == HeatmapValue::Error;
  if (error && (!xHat || hatHead < 0 || hatHead >= xHat->heads || xHat->tokens != x.tokens ||
                xHat->dim != x.dim)) {
    return;
  }
  out.channels = static_cast<int>(x.dim);
  out.tokens = static_cast<int>(x.tokens);
  out.columns = std::clamp(maxColumns, 1, out.tokens);
  const auto channels = static_cast<size_t>(out.channels);
  const size_t nCells = channels * static_cast<size_t>(out.columns);
  out.cells.resize(nCells);
  out.cellToken.resize(nCells);
  out.channelMax.assign(channels, 0.0f);

  // σ per channel, summed token by token (the same order as a per-channel loop).
  std::vector<double> inverseSigma(channels, 1.0);
  if (value == HeatmapValue::Normalized) {
    std::vector<double> sum(channels, 0.0), sum2(channels, 0.0);
    for (int64_t t = 0; t < x.tokens; ++t) {
      const float* r = x.row(head, t);
      for (size_t c = 0; c < channels; ++c) {
        const double v = r[c];
        sum[c] += v;
        sum2[c] += v * v;
      }
    }
    const double n = static_cast<double>(x.tokens);
    for (size_t c = 0; c < channels; ++c) {
      const double var = std::max(0.0, sum2[c] / n - (sum[c] / n) * (sum[c] / n));
      inverseSigma[c] = var > 0 ? 1.0 / std::sqrt(var) : 0.0;
    }
  }

  // Token rows are contiguous, so each column walks its tokens row by row and keeps a running
  // maximum per channel; `!(m <= best)` keeps the first maximum and lets a NaN show.
  const int columns = out.columns;
#pragma omp parallel if (int64_t{out.tokens} * out.channels >= kParallelValues)
  {
    std::vector<float> best(channels);
    std::vector<int> bestToken(channels);
#pragma omp for schedule(static)
    for (int b = 0; b < columns; ++b) {
      const int t0 = out.binStart(b);
      const int t1 = out.binStart(b + 1);
      std::fill(best.begin(), best.end(), -1.0f);
      std::fill(bestToken.begin(), bestToken.end(), t0);
      for (int t = t0; t < t1; ++t) {
        const float* r = x.row(head, t);
        const float* rh = error ? xHat->row(hatHead, t) : nullptr;
        for (size_t c = 0; c < channels; ++c) {
          float m = 0;
          switch (value) {
            case HeatmapValue::Magnitude: m = std::fabs(r[c]); break;
            case HeatmapValue::Normalized: m = static_cast<float>(std::fabs(r[c]) * inverseSigma[c]); break;
            case HeatmapValue::Error: m = std::fabs(rh[c] - r[c]); break;
          }
          if (!(m <= best[c])) {
            best[c] = m;
            bestToken[c] = t;
          }
        }
      }
      for (size_t c = 0; c < channels; ++c) {
        const size_t i = c * static_cast<size_t>(columns) + static_cast<size_t>(b);
        out.cells[i] = best[c];
        out.cellToken[i] = bestToken[c];
      }
    }
  }
  float minPositive = std::numeric_limits<float>::infinity();
  for (size_t c = 0; c < channels; ++c) {
    const float* line = out.cells.data() + c * static_cast<size_t>(columns);
    for (int b = 0; b < columns; ++b) {
      const float v = line[b];
      out.channelMax[c] = std::max(out.channelMax[c], v);
      out.maxValue = std::max(out.maxValue, v);
      if (v > 0) minPositive = std::min(minPositive, v);
    }
  }
  out.minPositive = std::isfinite(minPositive) ? minPositive : 0.0f;
}

namespace {
double medianAbsFromHigh(const float* v, int64_t n, const std::vector<int64_t>& highCounts,
                         std::vector<int64_t>& counts);
}  // namespace

HeatmapData computeHeatmap(const Tensor3& x, const Tensor3* xHat, int64_t head, HeatmapValue value, int maxColumns) {
  HeatmapData out;
  if (value == HeatmapValue::Error && (!xHat || !xHat->sameShape(x))) return out;
  computeHeatmapInto(x, head, xHat, head, value, maxColumns, out);
  return out;
}

HistogramData computeHistogram(const Tensor3& x, const Tensor3* xHat, int64_t head, HistogramScope scope,
                               int64_t index, int bins) {
  HistogramData out;
  HistogramWorkspace workspace;
  computeHistogramInto(x, head, xHat && xHat->sameShape(x) ? xHat : nullptr, head, scope, index, bins, workspace, out);
  return out;
}

double medianAbs(const float* v, int64_t n, std::vector<int64_t>& counts) {
  if (n <= 0) return 0.0;
  radixCounts(v, n, -1, counts);
  const std::vector<int64_t> high(counts.begin(), counts.begin() + kRadix);
  return medianAbsFromHigh(v, n, high, counts);
}

namespace {

double medianAbsFromHigh(const float* v, int64_t n, const std::vector<int64_t>& highCounts,
                         std::vector<int64_t>& counts) {
  if (n <= 0) return 0.0;
  const int64_t mid = n / 2;
  const auto [key, below] = selectKey(v, n, mid, highCounts, counts);
  const double upper = fromKey(key);
  if (n % 2 == 1) return upper;
  // The other middle value: the same key when it repeats below rank mid, else the largest
  // key under it.
  if (below < mid) return upper;
  uint32_t lower = 0;
  const int threads = threadsFor(n);
  const uint32_t middle = key;  // a plain variable: clang 14's OpenMP cannot capture a structured binding
#pragma omp parallel for schedule(static) reduction(max : lower) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t k = magnitudeKey(v[i]);
    const uint32_t under = k < middle ? k : 0;  // branch-free, so the loop vectorizes
    lower = under > lower ? under : lower;
  }
  return 0.5 * (upper + static_cast<double>(fromKey(lower)));
}

}  // namespace

void computeHistogramInto(const Tensor3& x, int64_t head, const Tensor3* xHat, int64_t hatHead,
                          HistogramScope scope, int64_t index, int bins, HistogramWorkspace& workspace,
                          HistogramData& out) {
  out.edges.clear();
  out.original.clear();
  out.reconstructed.clear();
  out.count = 0;
  out.min = out.max = out.kurtosis = out.maxOverMedian = 0;
  int64_t n = 0, nHat = 0;
  const float* values = sliceOf(x, head, scope, index, &n, workspace.original);
  const float* hat = nullptr;
  if (xHat && xHat->tokens == x.tokens && xHat->dim == x.dim) {
    hat = sliceOf(*xHat, hatHead, scope, index, &nHat, workspace.reconstructed);
    if (nHat != n) hat = nullptr;
  }
  if (!values || n == 0 || bins < 1) return;
  out.count = n;

  // Pass 1: ranges and the mean (`simd` lets the compiler reorder the sums, so they vectorize).
  float mn = std::numeric_limits<float>::infinity(), mx = -mn;
  float hmn = mn, hmx = mx;
  double sum = 0;
  const int threads = threadsFor(n);
#pragma omp parallel for simd schedule(static) num_threads(threads) reduction(min : mn) reduction(max : mx) reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    const float v = values[i];
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
  }
  if (hat) {
#pragma omp parallel for simd schedule(static) num_threads(threads) reduction(min : hmn) reduction(max : hmx)
    for (int64_t i = 0; i < n; ++i) {
      hmn = std::min(hmn, hat[i]);
      hmx = std::max(hmx, hat[i]);
    }
  }
  out.min = mn;
  out.max = mx;
  double lo = mn, hi = mx;
  if (hat) {
    lo = std::min(lo, static_cast<double>(hmn));
    hi = std::max(hi, static_cast<double>(hmx));
  }
  if (!(hi > lo)) {  // a constant slice still gets one visible bin around its value
    lo -= 0.5;
    hi += 0.5;
  }
  out.edges.resize(static_cast<size_t>(bins) + 1);
  for (int i = 0; i <= bins; ++i) out.edges[static_cast<size_t>(i)] = lo + (hi - lo) * i / bins;
  const double mean = sum / static_cast<double>(n);
  const double span = hi - lo;

  // Pass 2: the central moments and max |x|.
  double m2 = 0, m4 = 0;
  float maxAbs = 0;
#pragma omp parallel for simd schedule(static) num_threads(threads) reduction(+ : m2, m4) reduction(max : maxAbs)
  for (int64_t i = 0; i < n; ++i) {
    const double d = values[i] - mean;
    const double d2 = d * d;
    m2 += d2;
    m4 += d2 * d2;
    maxAbs = std::max(maxAbs, std::fabs(values[i]));
  }

  // Pass 3: both histograms and the radix counts of |x| for the median (per-thread counts).
  // The bin is floor((v − lo) / span · bins); a multiply gives it except within rounding of an
  // edge, where the division decides, so the counts are those of the formula.
  const double perUnit = bins / span;
  const auto binOf = [lo, span, bins, perUnit](double v) {
    const double t = (v - lo) * perUnit;
    int b = static_cast<int>(t);
    const double f = t - b;
    if (f < 1e-6 || f > 1 - 1e-6) b = static_cast<int>((v - lo) / span * bins);
    return std::clamp(b, 0, bins - 1);
  };
  // Four interleaved copies of the bin counts: a quantized tensor hits the same few bins over
  // and over, and consecutive increments of one counter would wait on each other.
  constexpr int kLanes = 4;
  const auto binsStride = static_cast<size_t>(2 * bins);
  const size_t stride = kLanes * binsStride + static_cast<size_t>(kRadix);
  workspace.counts.assign(static_cast<size_t>(threads) * stride, 0);
  // Bins come a chunk at a time from binsByMultiply; the counting itself is scalar.
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel num_threads(threads)
  {
    int64_t* mine = workspace.counts.data() + static_cast<size_t>(omp_get_thread_num()) * stride;
    int64_t* radix = mine + kLanes * binsStride;
    int32_t bin[kChunk], hatBin[kChunk];
    uint8_t near[kChunk], hatNear[kChunk];
    const auto exact = [&](const float* from, int64_t i, const int32_t* b, const uint8_t* nearEdge) {
      return nearEdge[i] ? binOf(from[i]) : std::clamp(b[i], 0, bins - 1);
    };
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t i0 = c * kChunk, m = std::min(kChunk, n - i0);
      binsByMultiply(values + i0, m, lo, perUnit, bin, near);
      if (hat) binsByMultiply(hat + i0, m, lo, perUnit, hatBin, hatNear);
      for (int64_t j = 0; j < m; ++j) {
        int64_t* lane = mine + static_cast<size_t>(j % kLanes) * binsStride;
        ++lane[exact(values + i0, j, bin, near)];
        if (hat) ++lane[bins + exact(hat + i0, j, hatBin, hatNear)];
        ++radix[magnitudeKey(values[i0 + j]) >> 16];
      }
    }
  }
  out.original.assign(static_cast<size_t>(bins), 0.0);
  if (hat) out.reconstructed.assign(static_cast<size_t>(bins), 0.0);
  std::vector<int64_t>& radixTotal = workspace.radix;
  radixTotal.assign(static_cast<size_t>(kRadix), 0);
  for (int t = 0; t < threads; ++t) {
    const int64_t* theirs = workspace.counts.data() + static_cast<size_t>(t) * stride;
    for (int l = 0; l < kLanes; ++l) {
      const int64_t* lane = theirs + static_cast<size_t>(l) * binsStride;
      for (int b = 0; b < bins; ++b) {
        out.original[static_cast<size_t>(b)] += static_cast<double>(lane[b]);
        if (hat) out.reconstructed[static_cast<size_t>(b)] += static_cast<double>(lane[bins + b]);
      }
    }
    const int64_t* theirRadix = theirs + kLanes * binsStride;
    for (int64_t b = 0; b < kRadix; ++b) radixTotal[static_cast<size_t>(b)] += theirRadix[b];
  }
  m2 /= static_cast<double>(n);
  m4 /= static_cast<double>(n);
  out.kurtosis = m2 > 0 ? m4 / (m2 * m2) : 0.0;
  const double median = medianAbsFromHigh(values, n, radixTotal, workspace.counts);
  out.maxOverMedian = median > 0 ? maxAbs / median : 0.0;
}

bool quantizesPerHead(const QuantSpec& spec, int64_t headDim) {
  return formatInfo(spec.format).quantizesPerHead(spec, headDim);
}

void copyHeads(const Tensor3& x, int64_t first, int64_t count, Tensor3& out) {
  out.heads = count;
  out.tokens = x.tokens;
  out.dim = x.dim;
  const auto n = static_cast<size_t>(count * x.tokens * x.dim);
  out.data.resize(n);
  if (n > 0) std::memcpy(out.data.data(), x.row(first, 0), n * sizeof(float));
}

Expected<AttentionPositionSeries> kvHeadPositionSeries(const AttentionInput& oneHead, int64_t kvHead,
                                                       int64_t kvHeads, const Progress& progress) {
  auto series = attentionPositionSeries(oneHead, SeriesGrouping::KvHead, progress);
  if (!series) return series.status();
  AttentionPositionSeries out;
  out.grouping = SeriesGrouping::KvHead;
  out.positions = std::move(series->positions);
  const auto lines = static_cast<size_t>(kvHeads);
  const auto line = static_cast<size_t>(kvHead);
  for (auto [to, from] : {std::pair{&out.kl, &series->kl}, std::pair{&out.relKeyOnly, &series->relKeyOnly},
                          std::pair{&out.relValueOnly, &series->relValueOnly},
                          std::pair{&out.relJoint, &series->relJoint}}) {
    to->resize(lines);
    if (!from->empty()) (*to)[line] = std::move(from->front());
  }
  return out;
}

Status formatInputInto(const Tensor3& source, int64_t first, int64_t count, const QuantSpec& spec,
                       Tensor3& out, int64_t* firstToken) {
  if (firstToken) *firstToken = quantizedTokens(spec, source.tokens).first;
  // Steps 2–4 as the pipeline runs them (core/quant/pipeline_reference.h); a rotation that does
  // not suit D (the pipeline refuses it) is left out here, so the view still shows the tokens.
  QuantSpec steps = spec;
  if (rotates(spec) && (source.dim <= 0 || !checkRotation(spec, source.dim).isOk())) steps.rotation = Rotation::None;
  switch (formatInputInto(source, steps, first, count, out)) {
    case FormatInputEnd::Done: return Status::ok();
    case FormatInputEnd::NonFinite:
      return Status::invalidData(std::string(spec.prerope ? "key_pre_rope" : "input") + ": " + firstNonFinite(source) +
                                 " (quantization needs finite values)");
    case FormatInputEnd::Cancelled: return Status::cancelled();
  }
  return Status::ok();
}

Status computeFormatSpaceInto(const Tensor3& formatInput, int64_t head, int64_t firstToken, const QuantSpec& spec,
                              HistogramScope scope, int64_t index, int bins, int64_t groupToken,
                              int64_t groupChannel, HistogramWorkspace& workspace, FormatSpaceData& out) {
  out.normalized = isVectorFormat(spec);
  out.firstToken = firstToken;
  out.histogram = HistogramData{};
  out.density.clear();
  out.group.reset();
  out.note.clear();
  if (head < 0 || head >= formatInput.heads) {
    return Status::invalidArgument("format space: kv head " + std::to_string(head) +
                                   " is not in the format input (0…" + std::to_string(formatInput.heads - 1) + ")");
  }
  // Step 5 on a copy of everything it saw (its groups may span heads), then this head alone.
  Tensor3 quantized = formatInput;
  KVS_RETURN_IF_ERROR(quantizeFormatInPlace(quantized, spec));
  copyHeads(formatInput, head, 1, out.input);
  copyHeads(quantized, head, 1, out.output);
  const int64_t dim = out.input.dim;
  // The group in this space: describeGroup reads the same input step 5 did.
  const int64_t groupRow = groupToken - firstToken;
  if (groupRow >= 0 && groupRow < formatInput.tokens) {
    auto detail = describeGroup(formatInput, spec, head, groupRow, groupChannel);
    if (!detail) return detail.status().withContext("format space");
    out.group = std::move(detail).value();
  } else {
    out.note = "token " + std::to_string(groupToken) + " is kept exactly (sink, residual window or unfilled chunk)";
  }
  const int bookBits = spec.bits - formatInfo(spec.format).codebookBitsOffset;  // tqp: its tq<b-1> stage
  if (out.normalized) {
    // u = v/‖v‖ has unit norm exactly (what the codebook's density describes); the output is
    // divided by the norm as stored, v̂/meta(‖v‖) = û, so tq's values sit on the centroids.
    for (int64_t t = 0; t < out.input.tokens; ++t) {
      float* u = out.input.row(0, t);
      float* uHat = out.output.row(0, t);
      const double norm = std::sqrt(codebook::sumOfSquares(u, dim));
      const float stored = fp::metaRound(norm, spec.scale);
      for (int64_t d = 0; d < dim; ++d) {
        u[d] = norm > 0 ? static_cast<float>(u[d] / norm) : 0.0f;
        uHat[d] = stored != 0.0f ? uHat[d] / stored : 0.0f;
      }
    }
    if (out.group) {
      GroupDetail& g = *out.group;
      const double norm = std::sqrt(codebook::sumOfSquares(formatInput.row(head, groupRow), dim));
      const double inv = norm > 0 ? 1.0 / norm : 0.0;
      g.lo *= inv;
      g.hi *= inv;
      g.clipLo *= inv;
      g.clipHi *= inv;
      g.levels.clear();
      if (lmdeploy_tq::isLmdeployFormat(spec.format)) {
        for (float c : lmdeploy_tq::book(static_cast<int>(dim), lmdeploy_tq::codebookBits(spec)).centroids) {
          g.levels.push_back(c);
        }
      } else {
        for (double c : codebook::sphereCodebook(static_cast<int>(dim), bookBits).centroids) g.levels.push_back(c);
      }
    }
  }
  int64_t histIndex = index;
  if (scope == HistogramScope::Token) {
    histIndex = index - firstToken;
    if (histIndex < 0 || histIndex >= out.input.tokens) {
      out.note = "token " + std::to_string(index) + " is kept exactly (sink, residual window or unfilled chunk)";
      return Status::ok();
    }
  }
  computeHistogramInto(out.input, 0, &out.output, 0, scope, histIndex, bins, workspace, out.histogram);
  if (out.normalized && out.histogram.count > 0) {
    out.density = sphereDensityCounts(dim, out.histogram.count, out.histogram.edges);
  }
  return Status::ok();
}

std::vector<double> sphereDensityCounts(int64_t dim, int64_t count, const std::vector<double>& edges) {
  std::vector<double> out;
  if (dim < codebook::kMinSphereDim || edges.size() < 2) return out;
  // Expected counts: the values counted times f's mass over each bin (within [−1, 1]).
  const auto d = static_cast<int>(dim);
  const double total = codebook::sphereCell(d, -1.0, 1.0).mass;
  out.resize(edges.size() - 1);
  for (size_t b = 0; b + 1 < edges.size(); ++b) {
    const double lo = std::clamp(edges[b], -1.0, 1.0), hi = std::clamp(edges[b + 1], -1.0, 1.0);
    const double mass = hi > lo ? codebook::sphereCell(d, lo, hi).mass : 0.0;
    out[b] = static_cast<double>(count) * mass / total;
  }
  return out;
}

void countInRange(const Tensor3& x, int64_t head, HistogramScope scope, int64_t index, double lo, double hi,
                  int bins, std::vector<double>& out) {
  out.clear();
  if (head < 0 || head >= x.heads || bins < 1 || !(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return;
  const int64_t t0 = scope == HistogramScope::Token ? index : 0;
  const int64_t t1 = scope == HistogramScope::Token ? index + 1 : x.tokens;
  const int64_t c0 = scope == HistogramScope::Channel ? index : 0;
  const int64_t c1 = scope == HistogramScope::Channel ? index + 1 : x.dim;
  if (t0 < 0 || t1 > x.tokens || c0 < 0 || c1 > x.dim) return;
  out.assign(static_cast<size_t>(bins), 0.0);
  const double span = hi - lo;
  // The formula itself (a division per value): a zoom counts one slice, a few ms for a million values.
  std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
  for (int64_t t = t0; t < t1; ++t) {
    const float* row = x.row(head, t);
    for (int64_t c = c0; c < c1; ++c) {
      const double v = row[c];
      if (!(v >= lo && v <= hi)) continue;
      const auto b = static_cast<int64_t>(std::floor((v - lo) / span * bins));
      ++counts[static_cast<size_t>(std::min<int64_t>(b, bins - 1))];
    }
  }
  for (size_t b = 0; b < counts.size(); ++b) out[b] = static_cast<double>(counts[b]);
}

void rebinHistogramInto(const Tensor3& x, int64_t head, const Tensor3* xHat, int64_t hatHead, HistogramScope scope,
                        int64_t index, double lo, double hi, int bins, HistogramData& out) {
  out = HistogramData{};
  countInRange(x, head, scope, index, lo, hi, bins, out.original);
  if (out.original.empty()) return;
  out.edges.resize(static_cast<size_t>(bins) + 1);
  for (int i = 0; i <= bins; ++i) out.edges[static_cast<size_t>(i)] = lo + (hi - lo) * i / bins;
  for (double c : out.original) out.count += static_cast<int64_t>(c);
  if (xHat && xHat->tokens == x.tokens && xHat->dim == x.dim) {
    countInRange(*xHat, hatHead, scope, index, lo, hi, bins, out.reconstructed);
  }
}

bool prefersLogCounts(const HistogramData& histogram) {
  std::vector<double> filled;
  for (double c : histogram.original) {
    if (c > 0) filled.push_back(c);
  }
  if (filled.empty()) return false;
  const double tallest = *std::max_element(filled.begin(), filled.end());
  const size_t mid = filled.size() / 2;
  std::nth_element(filled.begin(), filled.begin() + static_cast<std::ptrdiff_t>(mid), filled.end());
  double median = filled[mid];
  if (filled.size() % 2 == 0) {
    const double below = *std::max_element(filled.begin(), filled.begin() + static_cast<std::ptrdiff_t>(mid));
    median = 0.5 * (median + below);
  }
  return tallest > kHeavyTailRatio * median;
}

Status computeViewData(const LayerViewInput& layer, std::shared_ptr<const void> owner,
                       const QuantSpec& keySpec, const QuantSpec& valueSpec, const ViewRequest& request,
                       ViewWorkspace& ws, ViewData& out, const Progress& progress) {
  if (!layer.key || !layer.value || !layer.key->sameShape(*layer.value)) {
    return Status::invalidArgument("view data: K and V are missing or differ in shape");
  }
  const Tensor3& key = *layer.key;
  const int64_t head = request.kvHead;
  if (head < 0 || head >= key.heads) {
    return Status::invalidArgument("view data: kv head " + std::to_string(head) + " does not exist (0…" +
                                   std::to_string(key.heads - 1) + ")");
  }
  const Tensor3* keyPreRope = layer.keyPreRope && layer.keyPreRope->sameShape(key) ? layer.keyPreRope : nullptr;
  out.request = request;
  out.steps.clear();
  out.group.reset();
  out.groupError.clear();
  out.row.reset();
  double mark = nowSeconds(), cpuMark = cpuSeconds();
  const auto step = [&](const char* name) {
    const double now = nowSeconds(), cpuNow = cpuSeconds();
    out.steps.push_back({name, now - mark, cpuNow - cpuMark});
    mark = now;
    cpuMark = cpuNow;
    return report(progress, 0.5, name);
  };

  // The slices of the visible head, kept while the layer and head stay the same.
  const bool whole = request.wholeLayer || !quantizesPerHead(keySpec, key.dim) ||
                     !quantizesPerHead(valueSpec, key.dim);
  out.wholeLayer = whole;
  const Tensor3* keyIn = &key;
  const Tensor3* valueIn = layer.value;
  const Tensor3* preIn = keyPreRope;
  if (!whole) {
    if (ws.sliceOwner != owner || ws.slicedHead != head || !owner) {
      copyHeads(key, head, 1, ws.key);
      copyHeads(*layer.value, head, 1, ws.value);
      if (keyPreRope) copyHeads(*keyPreRope, head, 1, ws.keyPreRope);
      if (layer.query && layer.query->heads % key.heads == 0 && layer.query->heads > 0) {
        const int64_t group = layer.query->heads / key.heads;
        copyHeads(*layer.query, head * group, group, ws.query);
      }
      ws.sliceOwner = owner;
      ws.slicedHead = head;
    }
    keyIn = &ws.key;
    valueIn = &ws.value;
    preIn = keyPreRope ? &ws.keyPreRope : nullptr;
  }
  const int64_t viewHead = whole ? head : 0;

  // Quantize K and V into the output's buffers (they are reused from the previous call).
  {
    QuantOutput q;
    std::swap(q.reconstruction, out.keyHat);
    const Status s = quantizeTensorInto(QuantInput{keyIn, preIn, layer.rope}, keySpec, q, progress);
    std::swap(q.reconstruction, out.keyHat);
    if (!s.isOk()) return s.withContext("K");
    if (!step("quantize K")) return Status::cancelled();
  }
  {
    QuantOutput q;
    std::swap(q.reconstruction, out.valueHat);
    const Status s = quantizeTensorInto(QuantInput{valueIn, nullptr, layer.rope}, valueSpec, q, progress);
    std::swap(q.reconstruction, out.valueHat);
    if (!s.isOk()) return s.withContext("V");
    if (!step("quantize V")) return Status::cancelled();
  }
  out.keyStorage = storageFor(keySpec, key.heads, key.tokens, key.dim);
  out.valueStorage = storageFor(valueSpec, key.heads, key.tokens, key.dim);
  if (request.keyPreRopeHat && keyPreRope) {
    if (!out.keyPreRopeHat) out.keyPreRopeHat.emplace();
    copyHeads(out.keyHat, 0, out.keyHat.heads, *out.keyPreRopeHat);
    applyInverseRope(*out.keyPreRopeHat, layer.rope);
    if (!step("inverse RoPE")) return Status::cancelled();
  } else {
    out.keyPreRopeHat.reset();
  }

  // The original (layer) and reconstruction (output) of a view's tensor.
  const auto original = [&](TensorKind t) -> const Tensor3* {
    if (t == TensorKind::Value) return layer.value;
    if (t == TensorKind::KeyPreRope) return keyPreRope;
    return &key;
  };
  const auto reconstruction = [&](TensorKind t) -> const Tensor3* {
    if (t == TensorKind::Value) return &out.valueHat;
    if (t == TensorKind::KeyPreRope) return out.keyPreRopeHat ? &*out.keyPreRopeHat : nullptr;
    return &out.keyHat;
  };

  if (request.heatmapColumns > 0) {
    if (const Tensor3* x = original(request.heatmapTensor)) {
      computeHeatmapInto(*x, head, reconstruction(request.heatmapTensor), viewHead, request.heatmapValue,
                         request.heatmapColumns, out.heatmap);
    } else {
      computeHeatmapInto(Tensor3{}, 0, nullptr, 0, request.heatmapValue, 0, out.heatmap);
    }
    if (!step("heat map")) return Status::cancelled();
  }
  if (request.histogramBins > 0) {
    if (const Tensor3* x = original(request.histogramTensor)) {
      computeHistogramInto(*x, head, reconstruction(request.histogramTensor), viewHead, request.histogramScope,
                           request.histogramIndex, request.histogramBins, ws.histogram, out.histogram);
    } else {
      out.histogram = HistogramData{};
    }
    if (!step("histogram")) return Status::cancelled();
  }
  if (request.group) {
    // The tensor step 5 saw: pre-RoPE keys for a prerope spec, the dump's tensor otherwise.
    const bool isValue = request.histogramTensor == TensorKind::Value;
    const QuantSpec& spec = isValue ? valueSpec : keySpec;
    const Tensor3* source = isValue ? layer.value : (spec.prerope && keyPreRope ? keyPreRope : &key);
    const int64_t first = whole ? 0 : head;
    const int64_t count = whole ? key.heads : 1;
    int64_t firstToken = 0;
    // The whole layer with nothing kept, rotated or set aside is step 5's input as it stands: no
    // copy of it (a layer at T=32768 is 128 MiB).
    const bool asItStands = whole && quantizedTokens(spec, source->tokens).count == source->tokens &&
                            !rotates(spec) && !(spec.outliers > 0);
    const Status input = asItStands ? Status::ok() : formatInputInto(*source, first, count, spec, ws.formatInput, &firstToken);
    auto detail = input.isOk() ? describeGroup(asItStands ? *source : ws.formatInput, spec, viewHead,
                                               request.groupToken - firstToken, request.groupChannel)
                               : Expected<GroupDetail>(input);
    if (detail) {
      out.group = std::move(detail).value();
    } else {
      out.groupError = detail.status().message();
    }
    if (!step("group")) return Status::cancelled();
  }
  {
    const bool isValue = request.histogramTensor == TensorKind::Value;
    const QuantSpec& spec = isValue ? valueSpec : keySpec;
    // The format's space is that of the tensor step 5 saw (pre-RoPE keys for a prerope spec).
    const bool sameSpace = isValue || (request.histogramTensor == TensorKind::KeyPreRope) == spec.prerope;
    if (request.formatSpace && request.histogramBins > 0 && rotates(spec) && sameSpace &&
        checkRotation(spec, key.dim).isOk()) {
      const Tensor3* source = isValue ? layer.value : (spec.prerope && keyPreRope ? keyPreRope : &key);
      int64_t firstToken = 0;
      if (request.group && out.groupError.empty()) {  // the group step left this spec's format input in the workspace
        firstToken = quantizedTokens(spec, source->tokens).first;
      } else {
        KVS_RETURN_IF_ERROR(
            formatInputInto(*source, whole ? 0 : head, whole ? key.heads : 1, spec, ws.formatInput, &firstToken));
      }
      if (!out.formatSpace) out.formatSpace.emplace();
      const Status s = computeFormatSpaceInto(ws.formatInput, viewHead, firstToken, spec, request.histogramScope,
                                              request.histogramIndex,
                                              request.histogramBins, request.groupToken, request.groupChannel,
                                              ws.histogram, *out.formatSpace);
      if (!s.isOk()) return s;
      if (!step("format space")) return Status::cancelled();
    } else {
      out.formatSpace.reset();
    }
  }
  if (request.queryHead >= 0 && layer.query) {
    const Tensor3& query = *layer.query;
    if (query.heads % key.heads != 0 || query.heads == 0) {
      return Status::invalidData("view data: the query heads are not a multiple of the kv heads");
    }
    const int group = static_cast<int>(query.heads / key.heads);
    if (request.queryHead >= query.heads || (!whole && request.queryHead / group != head)) {
      return Status::invalidArgument("view data: query head " + std::to_string(request.queryHead) +
                                     " does not belong to kv head " + std::to_string(head));
    }
    AttentionInput attention;
    attention.query = whole ? &query : &ws.query;
    attention.key = keyIn;
    attention.value = valueIn;
    attention.keyHat = &out.keyHat;
    attention.valueHat = &out.valueHat;
    attention.softmaxScale = layer.softmaxScale;
    const int queryHead = whole ? request.queryHead : request.queryHead - static_cast<int>(head) * group;
    auto row = attentionRowDetail(attention, queryHead, request.queryIndex);
    if (!row) return row.status().withContext("attention detail");
    out.row = std::move(row).value();
    out.row->queryHead = request.queryHead;
    out.row->kvHead = request.queryHead / group;
    if (!step("attention row")) return Status::cancelled();
  }
  return Status::ok();
}

}  // namespace kvscope
