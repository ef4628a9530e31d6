// SPDX-License-Identifier: GPL-3.0-or-later
// The pipeline of quantization.md §1 around the formats (step 5 lives in formats.cpp), and the
// storage accounting of §5.
#include "core/quant/quantize.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <omp.h>

#include "core/quant/format_table.h"
#include "core/quant/hqq.h"
#include "core/quant/fp_types.h"
#include "core/quant/formats.h"
#include "core/quant/kernels_block.h"
#include "core/quant/kernels_grouped.h"
#include "core/quant/rotation.h"
#include "core/util/simd.h"

#if defined(KVSCOPE_X86_64_V4)
#include <immintrin.h>
#endif
// Streaming (non-temporal) stores where the target has them (core/util/simd.h says when);
// elsewhere plain copies and a release fence, with the same results.
#if KVSCOPE_HAS_SSE_STREAMING
#include <xmmintrin.h>
#else
#include <atomic>
#endif

namespace kvscope {

namespace {

bool isPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

/// Rotates each (first, second) channel pair of every token by ±angle(position, pair).
void rotatePairs(Tensor3& x, const RopeParams& rope, int64_t positionOffset, double sign) {
  const int64_t d = x.dim;
  const int64_t pairs = d / 2;
  if (pairs == 0) return;
  // Frequencies and angles in double: float angles at position 32k lose whole radians of phase.
  std::vector<double> freq(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    freq[static_cast<size_t>(i)] =
        std::pow(rope.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  }
  const bool interleaved = rope.style == RopeStyle::Interleaved;
#pragma omp parallel for schedule(static) if (x.tokens * d > 65536)
  for (int64_t t = 0; t < x.tokens; ++t) {
    std::vector<double> c(static_cast<size_t>(pairs)), s(static_cast<size_t>(pairs));
    const double pos = static_cast<double>(t + positionOffset);
    for (int64_t i = 0; i < pairs; ++i) {
      const double angle = sign * pos * freq[static_cast<size_t>(i)];
      c[static_cast<size_t>(i)] = std::cos(angle);
      s[static_cast<size_t>(i)] = std::sin(angle);
    }
    for (int64_t h = 0; h < x.heads; ++h) {
      float* row = x.row(h, t);
      for (int64_t i = 0; i < pairs; ++i) {
        const int64_t a = interleaved ? 2 * i : i;
        const int64_t b = interleaved ? 2 * i + 1 : i + pairs;
        const double x0 = row[a], x1 = row[b];
        const double ci = c[static_cast<size_t>(i)], si = s[static_cast<size_t>(i)];
        row[a] = static_cast<float>(x0 * ci - x1 * si);
        row[b] = static_cast<float>(x0 * si + x1 * ci);
      }
    }
  }
}

/// First non-finite element of `x`, as a message; empty when all are finite.
std::string firstNonFinite(const Tensor3& x) {
  for (int64_t h = 0; h < x.heads; ++h) {
    for (int64_t t = 0; t < x.tokens; ++t) {
      const float* row = x.row(h, t);
      for (int64_t c = 0; c < x.dim; ++c) {
        if (!std::isfinite(row[c])) {
          return "non-finite value at head " + std::to_string(h) + ", token " + std::to_string(t) +
                 ", channel " + std::to_string(c);
        }
      }
    }
  }
  return {};
}

// Below this many elements threads cost more than they save.
constexpr int64_t kParallelThreshold = int64_t{1} << 16;
// Above this many bytes an output is streamed past the caches.
constexpr int64_t kStreamBytes = int64_t{32} << 20;

/// Copies n floats and says whether any of them is non-finite, in one vectorizable pass: an
/// exponent of all ones carries into bit 31 when 2^23 is added to it.
KVSCOPE_SIMD_CLONES bool copyAndCheck(const float* __restrict src, float* __restrict dst, int64_t n) {
  uint32_t carry = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = src[i];
    dst[i] = v;
    carry |= simd::nonFiniteBits(v);
  }
  return (carry & 0x80000000u) != 0;
}

/// Copies n floats (n a multiple of 4) to a 16-byte aligned `dst` with non-temporal stores: a
/// layer-sized output does not fit in cache anyway, and streaming it skips reading every line
/// of it from memory before it is overwritten. The caller fences (_mm_sfence) once after its
/// last call, before other threads read `dst`; a fence per call would wait for each piece's
/// stores to drain instead of overlapping them with the next piece's work.
void streamOut(const float* src, float* dst, int64_t n) {
#if KVSCOPE_HAS_SSE_STREAMING
  for (int64_t i = 0; i < n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
#else
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
#endif
}

/// Orders every streamed store before what follows (_mm_sfence; a release fence elsewhere).
void streamFence() {
#if KVSCOPE_HAS_SSE_STREAMING
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

/// The min and max of n >= 1 floats, and whether any is non-finite.
KVSCOPE_SIMD_CLONES bool rangeAndCheck(const float* x, int64_t n, float* lo, float* hi) {
  uint32_t carry = 0;
  const kernels::MinMax mm = kernels::minMaxCheckInline(x, n, &carry);
  *lo = mm.lo;
  *hi = mm.hi;
  return (carry & 0x80000000u) != 0;
}

/// Copies the kept rows of every head ([0, first) and [first + count, tokens)) from `src` to `dst`;
/// says whether any is non-finite.
bool copyKeptRows(const Tensor3& src, Tensor3& dst, int64_t first, int64_t count) {
  bool bad = false;
  const int64_t tail = src.tokens - first - count;
  for (int64_t h = 0; h < src.heads; ++h) {
    bad |= copyAndCheck(src.row(h, 0), dst.row(h, 0), first * src.dim);
    bad |= copyAndCheck(src.row(h, first + count), dst.row(h, first + count), tail * src.dim);
  }
  return bad;
}

/// How the quantized rows [first, first + count) of every head split into tasks of whole pieces
/// (formatPieceRows), about 64 KiB each, and whether outputs go out by streaming stores.
struct PieceGrid {
  PieceGrid(const Tensor3& dst, int64_t first, int64_t rows, int64_t pieceRows)
      : heads(dst.heads),
        count(rows),
        dim(dst.dim),
        rowsPerTask(pieceRows * std::max<int64_t>(1, (int64_t{16384} / std::max<int64_t>(dst.dim, 1)) / pieceRows)),
        tasksPerHead((count + rowsPerTask - 1) / rowsPerTask),
        tasks(heads * tasksPerHead),
        // Outputs larger than a cache are streamed (when every task starts on a 16-byte boundary).
        stream(heads * rows * dim * static_cast<int64_t>(sizeof(float)) > kStreamBytes && dim % 4 == 0 &&
               reinterpret_cast<uintptr_t>(dst.data.data()) % 16 == 0 && (first * dim) % 4 == 0) {}
  int64_t heads, count, dim, rowsPerTask, tasksPerHead, tasks;
  bool stream;
};

/// How a pass over the pieces ended.
enum class PassEnd { Done, Cancelled, NonFinite };

/// Runs fn(head, firstRow, rows, stage) for every task of `grid` on all threads, `stage` a
/// per-thread buffer of rowsPerTask·dim floats; fn returns false for a non-finite input. One
/// parallel loop (a barrier per slab costs more than a slab's work when another process holds a
/// core); the calling thread (OpenMP thread 0) reports progress from `from` to `to` every few
/// tasks and every thread stops at its next task after a cancel or a non-finite value. Streamed
/// stores are fenced before the loop ends.
template <class Fn>
PassEnd forEachPiece(const PieceGrid& grid, const Progress& progress, double from, double to, const char* what, Fn fn) {
  std::atomic<bool> stop{false}, cancelled{false};
  std::atomic<int64_t> done{0};
  int bad = 0;
#pragma omp parallel if (grid.tasks * grid.rowsPerTask * grid.dim > kParallelThreshold)
  {
    static thread_local std::vector<float> stage;
    stage.resize(static_cast<size_t>(grid.rowsPerTask * grid.dim));
    int64_t mine = 0;  // tasks this thread has started
#pragma omp for schedule(dynamic, 4) reduction(| : bad)
    for (int64_t task = 0; task < grid.tasks; ++task) {
      if (stop.load(std::memory_order_relaxed)) continue;
      const double fraction = static_cast<double>(done.load()) / static_cast<double>(grid.tasks);
      if (omp_get_thread_num() == 0 && mine++ % 16 == 0 && !report(progress, from + (to - from) * fraction, what)) {
        cancelled = true;
        stop = true;
        continue;
      }
      const int64_t h = task / grid.tasksPerHead;
      const int64_t r0 = (task % grid.tasksPerHead) * grid.rowsPerTask;
      if (!fn(h, r0, std::min(grid.rowsPerTask, grid.count - r0), stage.data())) {
        bad = 1;
        stop = true;
        continue;
      }
      done.fetch_add(1, std::memory_order_relaxed);
    }
    // Each thread's streamed stores are ordered before the parallel region's closing barrier,
    // so the caller sees the whole output.
    if (grid.stream) streamFence();
  }
  if (bad != 0) return PassEnd::NonFinite;
  return cancelled ? PassEnd::Cancelled : PassEnd::Done;
}

/// Writes n floats from a stage buffer to their place in the output.
void writeOut(const PieceGrid& grid, const float* stage, float* out, int64_t n) {
  if (grid.stream) {
    streamOut(stage, out, n);
  } else {
    std::memcpy(out, stage, static_cast<size_t>(n) * sizeof(float));
  }
}

Status statusOf(PassEnd end, bool& nonFinite) {
  nonFinite = end == PassEnd::NonFinite;
  return end == PassEnd::Cancelled ? Status::cancelled() : Status::ok();
}

/// How far ahead slicesAhead prefetches: far enough to cover the memory latency over a slice's
/// arithmetic, near enough that the lines are still in L1/L2 when their slice comes (64 KiB,
/// the next task's matching slice, was 8-15 % slower on two cores for int4, int2 channel, q4_0
/// and rotation with outliers).
constexpr int64_t kPrefetchBytes = 8192;

/// Runs fn(s0, rows) over a task's `len` rows (of d values) in slices of `sliceRows`; before
/// each slice it prefetches (non-temporal) the rows kPrefetchBytes (at least one slice) ahead in
/// the task's input, continuing into the next task's rows (the same head's next rows, or the
/// next head's first, which OpenMP's dynamic schedule mostly gives the same thread), so that
/// memory traffic overlaps the arithmetic instead of alternating with it. fn returns false to
/// stop.
template <class Fn>
KVSCOPE_INLINE bool slicesAhead(const Tensor3& input, const PieceGrid& grid, int64_t first, int64_t h, int64_t r0,
                                int64_t len, int64_t sliceRows, Fn fn) {
  const int64_t d = grid.dim;
  const bool sameHead = r0 + len < grid.count;
  const float* next = sameHead ? input.row(h, first + r0 + len) : (h + 1 < grid.heads ? input.row(h + 1, first) : nullptr);
  const int64_t nextLen = std::min(grid.rowsPerTask, sameHead ? grid.count - r0 - len : grid.count);
  const float* here = input.row(h, first + r0);
  const int64_t distance = std::max<int64_t>(sliceRows, kPrefetchBytes / (d * static_cast<int64_t>(sizeof(float))));
  auto rowAt = [&](int64_t r) -> const float* {
    if (r < len) return here + r * d;
    return next != nullptr && r - len < nextLen ? next + (r - len) * d : nullptr;
  };
  for (int64_t s0 = 0; s0 < len; s0 += sliceRows) {
    const int64_t rows = std::min(sliceRows, len - s0);
    for (int64_t r = s0 + distance; r < s0 + distance + rows; ++r) {
      const auto* ahead = reinterpret_cast<const char*>(rowAt(r));
      if (ahead == nullptr) break;
      for (int64_t b = 0; b < d * static_cast<int64_t>(sizeof(float)); b += 64) __builtin_prefetch(ahead + b, 0, 0);
    }
    if (!fn(s0, rows)) return false;
  }
  return true;
}

/// Slices of about 4 KiB that hold whole pieces of `pieceRows` rows.
int64_t sliceRowsFor(int64_t pieceRows, int64_t d) {
  return pieceRows * std::max<int64_t>(1, 1024 / std::max<int64_t>(d * pieceRows, 1));
}

/// Steps 2 and 5 in one parallel pass, for a format that splits into pieces of `pieceRows` token
/// rows (formatPieceRows) when there is no rotation and no outliers: each piece is copied from
/// `src` into `dst` (whose shape is src's), checked, and quantized while it is still in cache,
/// never compacted. Sets `nonFinite` (and stops) when the input holds a non-finite value.
Status quantizeOnePass(const Tensor3& src, const QuantSpec& spec, Tensor3& dst, int64_t first,
                       int64_t count, int64_t pieceRows, const Progress& progress, bool& nonFinite) {
  const int64_t kvh = src.heads, d = src.dim;
  nonFinite = copyKeptRows(src, dst, first, count);
  if (nonFinite) return Status::ok();
  TensorContext context;
  // nvfp4's range pass also keeps every block's max |x| (1/16 of the layer, kept between calls
  // per calling thread), so the quantizing pass reads them instead of recomputing them: the
  // range pass waits on memory anyway. (Pieces hold whole blocks: formatPieceRows asks that D be
  // a multiple of the block size.)
  static thread_local std::vector<float> keptMaxima;
  std::vector<float>& maxima = keptMaxima;
  if (spec.format == FormatId::Nvfp4) {
    const int64_t perHead = count * d / 16;
    if (maxima.size() < static_cast<size_t>(kvh * perHead)) maxima.resize(static_cast<size_t>(kvh * perHead));
    float top = 0.0f;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(max : top) reduction(| : bad) if (kvh * count * d > kParallelThreshold)
    for (int64_t h = 0; h < kvh; ++h) {
      float largest = 0.0f;
      bad |= kernels::nvfp4BlockMaxima(src.row(h, first), perHead, maxima.data() + h * perHead, &largest) ? 1 : 0;
      top = std::max(top, largest);
    }
    nonFinite = bad != 0;
    if (nonFinite) return Status::ok();
    context = formatTensorContext(spec, 0.0f, top);
  } else if (formatNeedsTensorRange(spec)) {
    // A read-only pass over the quantized rows (which also checks them all).
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(min : lo) reduction(max : hi) reduction(| : bad) if (kvh * count * d > kParallelThreshold)
    for (int64_t h = 0; h < kvh; ++h) {
      float l = 0.0f, u = 0.0f;
      bad |= rangeAndCheck(src.row(h, first), count * d, &l, &u) ? 1 : 0;
      lo = std::min(lo, l);
      hi = std::max(hi, u);
    }
    nonFinite = bad != 0;
    if (nonFinite) return Status::ok();
    context = formatTensorContext(spec, lo, hi);
  }
  const PieceGrid grid(dst, first, count, pieceRows);
  // A task works through its rows in slices of about 4 KiB: read and checked, quantized and
  // streamed out one after the other, while rows 8 KiB ahead are being fetched (slicesAhead).
  const int64_t sliceRows = sliceRowsFor(pieceRows, d);
  const bool readsSource = formatPieceReadsSource(spec);
  const kernels::BlockFromKernel blockFrom = kernels::blockFromKernel(spec.format);
  const int64_t blockSize = formatInfo(spec.format).blockSize;
  const PassEnd end = forEachPiece(grid, progress, 0.0, 0.95, "quantizing", [&](int64_t h, int64_t r0, int64_t len, float* stage) {
    float* out = dst.row(h, first + r0);
    // Streamed outputs are quantized in the per-thread stage, which stays in L1/L2.
    float* work = grid.stream ? stage : out;
    const float* in = src.row(h, first + r0);
    return slicesAhead(src, grid, first, h, r0, len, sliceRows, [&](int64_t s0, int64_t rows) {
      if (spec.format == FormatId::Nvfp4) {
        // Checked by the range pass: the kernel reads the input itself.
        kernels::nvfp4From(in + s0 * d, work + s0 * d, rows * d / 16, context.nvfp4Scale,
                           maxima.data() + (h * count + r0 + s0) * d / 16);
      } else if (readsSource) {
        // Per-token groups and channel runs read the input themselves and check it on the way.
        if (!quantizeFormatPieceFrom(in + s0 * d, work + s0 * d, rows, d, spec)) return false;
      } else if (blockFrom != nullptr) {
        // So do the ggml blocks.
        if (!blockFrom(in + s0 * d, work + s0 * d, rows * d / blockSize)) return false;
      } else {
        if (copyAndCheck(in + s0 * d, work + s0 * d, rows * d)) return false;
        quantizeFormatPiece(work + s0 * d, rows, d, spec, context);
      }
      if (grid.stream) streamOut(work + s0 * d, out + s0 * d, rows * d);
      return true;
    });
  });
  return statusOf(end, nonFinite);
}

using fp::magnitudeKey;

std::vector<int64_t> selectOutliersByIndex(const float* values, int64_t n, int64_t count);
void selectOutliersByIndexInto(const float* values, int64_t n, int64_t count, std::vector<int64_t>& picked);

struct Outlier {
  size_t index;  ///< flat index into the quantized tensor (quantizeInPieces: into its head's quantized part)
  float value;
};

/// Dense-and-sparse split of one kv head: zeroes its `count` outliers in `x` and appends them
/// to `out`.
void extractOutliers(Tensor3& x, int64_t head, int64_t count, std::vector<Outlier>& out) {
  const size_t base = x.index(head, 0, 0);
  for (int64_t i : selectOutliersByIndex(x.data.data() + base, x.tokens * x.dim, count)) {
    const size_t idx = base + static_cast<size_t>(i);
    out.push_back({idx, x.data[idx]});
    x.data[idx] = 0.0f;
  }
}

}  // namespace

int64_t outlierCount(double fraction, int64_t n) {
  if (fraction <= 0 || n <= 0) return 0;
  const auto k = static_cast<int64_t>(std::ceil(fraction * static_cast<double>(n)));
  return std::min(k, n);
}

namespace {

/// The count-th largest of n magnitude keys, and how many keys above it there are.
struct KeyRank {
  uint32_t key = 0;
  int64_t above = 0;
};

// Radix select on magnitude keys: for finite floats, the bit patterns of non-negative values
// order like the values. A histogram of the upper 16 bits finds the bucket of the count-th
// largest key, and a selection among that bucket's keys the key itself, without sorting or
// allocating per element (a 32k-token layer holds millions per head). 1 ≤ count ≤ n.
template <class Key>
KeyRank countthLargestKey(Key key, int64_t n, int64_t count) {
  // One histogram per thread, all zeros between calls: each call clears only the buckets its
  // keys span. (A fresh one per call, or clearing and walking all 65536 buckets, cost more than
  // the passes on the few candidates of quantizeInPieces.)
  static thread_local std::vector<uint32_t> hist(65536);
  static thread_local std::vector<uint32_t> bucket;
  uint32_t lowest = 65535, highest = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = key(i) >> 16;
    ++hist[b];
    lowest = std::min(lowest, b);
    highest = std::max(highest, b);
  }
  int64_t above = 0;  // keys in buckets above the count-th largest's
  uint32_t high = highest;
  while (above + hist[high] < count) above += hist[high--];
  std::fill(hist.begin() + lowest, hist.begin() + highest + 1, 0);
  bucket.clear();
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t k = key(i);
    if ((k >> 16) == high) bucket.push_back(k);
  }
  const auto rank = static_cast<size_t>(count - above - 1);  // within the bucket, largest first
  std::nth_element(bucket.begin(), bucket.begin() + static_cast<std::ptrdiff_t>(rank), bucket.end(), std::greater<>());
  const uint32_t threshold = bucket[rank];
  // nth_element leaves every larger key before it.
  for (size_t i = 0; i < rank; ++i) above += bucket[i] > threshold ? 1 : 0;
  return {threshold, above};
}

// The `count` indices of largest |x| (ties: lower index first), in ascending index order.
void selectOutliersByIndexInto(const float* values, int64_t n, int64_t count, std::vector<int64_t>& picked) {
  picked.clear();
  count = std::min(count, n);
  if (count <= 0) return;
  auto key = [values](int64_t i) { return magnitudeKey(values[i]); };
  const KeyRank t = countthLargestKey(key, n, count);
  // Everything above the threshold, then ties at it by ascending index (§1: lower index first),
  // without a branch per element: near the threshold (the candidates of quantizeInPieces are)
  // it would be mispredicted every other time.
  int64_t ties = count - t.above, taken = 0;
  picked.resize(static_cast<size_t>(count) + 1);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t k = key(i);
    const int64_t tie = k == t.key ? 1 : 0;
    const int64_t take = (k > t.key ? 1 : 0) | (tie & (ties > 0 ? 1 : 0));
    picked[static_cast<size_t>(taken)] = i;
    taken += take;
    ties -= tie & take;
  }
  picked.resize(static_cast<size_t>(count));
}

std::vector<int64_t> selectOutliersByIndex(const float* values, int64_t n, int64_t count) {
  std::vector<int64_t> picked;
  selectOutliersByIndexInto(values, n, count, picked);
  return picked;
}

}  // namespace

std::vector<int64_t> selectOutliers(const float* values, int64_t n, int64_t count) {
  std::vector<int64_t> picked = selectOutliersByIndex(values, n, count);
  auto key = [values](int64_t i) { return magnitudeKey(values[i]); };
  std::sort(picked.begin(), picked.end(), [&](int64_t a, int64_t b) {
    const uint32_t ka = key(a), kb = key(b);
    return ka != kb ? ka > kb : a < b;
  });
  return picked;
}

void applyRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset) {
  rotatePairs(x, rope, positionOffset, +1.0);
}

void applyInverseRope(Tensor3& x, const RopeParams& rope, int64_t positionOffset) {
  rotatePairs(x, rope, positionOffset, -1.0);
}

namespace {

using simd::F8;

// The fast Walsh–Hadamard transform (Sylvester order, so the result is x·H) in float32: every
// value is multiplied by the float nearest 1/√D, then stages of stride 1, 2, 4, … each turn
// (a, b) into (a + b, a - b). Scaling first keeps every partial sum within √D of the inputs'
// size, so a sum overflows only where the result itself could. Every version below performs
// exactly these float operations, in this order, so all give the same bits
// (docs/spec-strings.md, "rot=hadamard").
KVSCOPE_SIMD_CLONES void hadamardRows(float* x, int64_t rows, int64_t d, float norm) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    for (int64_t i = 0; i < d; ++i) row[i] *= norm;
    for (int64_t len = 1; len < d; len <<= 1) {
      for (int64_t i = 0; i < d; i += 2 * len) {
        for (int64_t j = i; j < i + len; ++j) {
          const float a = row[j], b = row[j + len];
          row[j] = a + b;
          row[j + len] = a - b;
        }
      }
    }
  }
}

/// The butterflies of stage `Len` (1, 2 or 4) inside one vector of eight floats: lanes (j, j+Len)
/// become (a+b, a-b), the same two operations the scalar stage does.
template <int Len>
KVSCOPE_INLINE F8 butterflyInside(F8 v) {
  if constexpr (Len == 1) {
    const F8 swapped = __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
    return __builtin_shufflevector(v + swapped, swapped - v, 0, 9, 2, 11, 4, 13, 6, 15);
  } else if constexpr (Len == 2) {
    const F8 swapped = __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
    return __builtin_shufflevector(v + swapped, swapped - v, 0, 1, 10, 11, 4, 5, 14, 15);
  } else {
    const F8 swapped = __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
    return __builtin_shufflevector(v + swapped, swapped - v, 0, 1, 2, 3, 12, 13, 14, 15);
  }
}

/// The butterflies of every stage whose partners are Stride, 2·Stride, … vectors apart in v[0..N).
template <int N, int Stride>
KVSCOPE_INLINE void butterflyAcross(F8* v) {
  if constexpr (Stride < N) {
    for (int i = 0; i < N; i += 2 * Stride) {
      for (int j = i; j < i + Stride; ++j) {
        const F8 a = v[j], b = v[j + Stride];
        v[j] = a + b;
        v[j + Stride] = a - b;
      }
    }
    butterflyAcross<N, 2 * Stride>(v);
  }
}

/// hadamardRows for D = 8·V (V = 4…32), one row at a time held in vectors of eight floats: stages
/// 1-4 inside each vector, then the wider ones across them; the scalar order on the same floats.
template <int V>
KVSCOPE_INLINE void hadamardRowsBlocked(float* x, int64_t rows, float norm) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * 8 * V;
    F8 v[V];
    for (int k = 0; k < V; ++k) {
      std::memcpy(&v[k], row + 8 * k, sizeof(F8));
      v[k] = butterflyInside<4>(butterflyInside<2>(butterflyInside<1>(v[k] * norm)));
    }
    butterflyAcross<V, 1>(v);
    for (int k = 0; k < V; ++k) std::memcpy(row + 8 * k, &v[k], sizeof(F8));
  }
}

/// x·H for `rows` rows of `d` values (d a power of two) in the clones.
KVSCOPE_SIMD_CLONES void hadamardClonedRows(float* x, int64_t rows, int64_t d, float norm) {
  switch (d) {
    case 32: hadamardRowsBlocked<4>(x, rows, norm); return;
    case 64: hadamardRowsBlocked<8>(x, rows, norm); return;
    case 128: hadamardRowsBlocked<16>(x, rows, norm); return;
    case 256: hadamardRowsBlocked<32>(x, rows, norm); return;
    default: hadamardRows(x, rows, d, norm); return;
  }
}

#if defined(KVSCOPE_X86_64_V4)
// GCC 12's AVX-512 intrinsics start from an "undefined" register it then warns about.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// The butterflies of stage `Len` (1, 2, 4 or 8) inside one vector of sixteen floats: lane j
/// becomes v[j]·sign + v[j^Len], with sign +1 where j's Len bit is clear (a + b) and -1 where it
/// is set (a - b). The product is exact, so the fused multiply-add rounds a + b and a - b once,
/// as the scalar stage does (signed zeros included).
template <int Len>
KVSCOPE_TARGET_V4 inline __m512 butterflyInsideV4(__m512 v) {
  const auto sign = [](int j) { return (j & Len) != 0 ? -1.0f : 1.0f; };
  const __m512 signs = _mm512_setr_ps(sign(0), sign(1), sign(2), sign(3), sign(4), sign(5), sign(6), sign(7), sign(8),
                                      sign(9), sign(10), sign(11), sign(12), sign(13), sign(14), sign(15));
  __m512 partner;
  if constexpr (Len == 1) {
    partner = _mm512_permute_ps(v, 0xB1);  // lanes 1,0,3,2 in each 128-bit quarter
  } else if constexpr (Len == 2) {
    partner = _mm512_permute_ps(v, 0x4E);  // 2,3,0,1
  } else if constexpr (Len == 4) {
    partner = _mm512_shuffle_f32x4(v, v, 0xB1);  // quarters 1,0,3,2
  } else {
    partner = _mm512_shuffle_f32x4(v, v, 0x4E);  // quarters 2,3,0,1
  }
  return _mm512_fmadd_ps(v, signs, partner);
}

/// The butterflies of the stages whose partners are Stride, 2·Stride, … vectors apart.
template <int V, int Stride>
KVSCOPE_TARGET_V4 inline void butterflyAcrossV4(__m512* v) {
  if constexpr (Stride < V) {
    for (int i = 0; i < V; i += 2 * Stride) {
      for (int j = i; j < i + Stride; ++j) {
        const __m512 a = v[j], b = v[j + Stride];
        v[j] = _mm512_add_ps(a, b);
        v[j + Stride] = _mm512_sub_ps(a, b);
      }
    }
    butterflyAcrossV4<V, 2 * Stride>(v);
  }
}

/// hadamardRowsBlocked with AVX-512 for D = 16·V (V = 2…16): a row is V vectors of sixteen
/// floats, stages 1-8 inside each vector, then the stages from 16 up across them. Reads `in` and
/// writes `out` (which may be `in`); with Check, says whether any value of `in` is non-finite
/// (the check of copyAndCheck, folded into the loads).
template <int V, bool Check>
KVSCOPE_TARGET_V4 bool hadamardRowsV4(const float* in, float* out, int64_t rows, float norm) {
  const __m512 scale = _mm512_set1_ps(norm);
  simd::U16 carry{};
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = in + r * 16 * V;
    float* to = out + r * 16 * V;
    __m512 v[V];
#pragma GCC unroll 16
    for (int k = 0; k < V; ++k) {
      const __m512 x = _mm512_loadu_ps(from + 16 * k);
      if constexpr (Check) carry |= simd::nonFiniteBits(std::bit_cast<simd::F16>(x));
      v[k] = butterflyInsideV4<8>(
          butterflyInsideV4<4>(butterflyInsideV4<2>(butterflyInsideV4<1>(_mm512_mul_ps(x, scale)))));
    }
    butterflyAcrossV4<V, 1>(v);
#pragma GCC unroll 16
    for (int k = 0; k < V; ++k) _mm512_storeu_ps(to + 16 * k, v[k]);
  }
  return simd::anyNonFinite(carry);
}
#pragma GCC diagnostic pop
#endif

/// The float32 factor of every rotated value: 1/√d rounded to float.
float hadamardNorm(int64_t d) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))); }

/// x·H for `rows` rows of `d` values (d a power of two).
void hadamardAnyRows(float* x, int64_t rows, int64_t d) {
  const float norm = hadamardNorm(d);
#if defined(KVSCOPE_X86_64_V4)
  if (simd::hasX86_64V4()) {
    switch (d) {
      case 32: hadamardRowsV4<2, false>(x, x, rows, norm); return;
      case 64: hadamardRowsV4<4, false>(x, x, rows, norm); return;
      case 128: hadamardRowsV4<8, false>(x, x, rows, norm); return;
      case 256: hadamardRowsV4<16, false>(x, x, rows, norm); return;
      default: break;
    }
  }
#endif
  hadamardClonedRows(x, rows, d, norm);
}

/// copyAndCheck of `rows` rows of `d` values from `in` to `out`, then x·H on `out`, in one pass
/// where AVX-512 allows; says whether any value of `in` is non-finite.
bool copyCheckAndRotate(const float* in, float* out, int64_t rows, int64_t d) {
#if defined(KVSCOPE_X86_64_V4)
  if (simd::hasX86_64V4()) {
    const float norm = hadamardNorm(d);
    switch (d) {
      case 32: return hadamardRowsV4<2, true>(in, out, rows, norm);
      case 64: return hadamardRowsV4<4, true>(in, out, rows, norm);
      case 128: return hadamardRowsV4<8, true>(in, out, rows, norm);
      case 256: return hadamardRowsV4<16, true>(in, out, rows, norm);
      default: break;
    }
  }
#endif
  if (copyAndCheck(in, out, rows * d)) return true;
  hadamardAnyRows(out, rows, d);
  return false;
}

}  // namespace

void hadamardTransformRows(float* x, int64_t rows, int64_t d) {
  if (!isPowerOfTwo(d)) return;  // callers validate; a no-op beats a corrupt tensor
  hadamardAnyRows(x, rows, d);
}

void hadamardInPlace(Tensor3& x) {
  const int64_t d = x.dim;
  if (!isPowerOfTwo(d)) return;  // callers validate; a no-op beats a corrupt tensor
  const int64_t rows = x.heads * x.tokens;
  constexpr int64_t kRowsPerTask = 64;
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel for schedule(dynamic, 4) if (rows * d > kParallelThreshold)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t r0 = t * kRowsPerTask;
    hadamardAnyRows(x.data.data() + r0 * d, std::min(kRowsPerTask, rows - r0), d);
  }
}

namespace {

/// Appends to `out` every (index base + i, x[i]) of x[0..n) with magnitudeKey ≥ floor.
KVSCOPE_SIMD_CLONES void collectAtLeastCloned(const float* x, int64_t n, uint32_t floor, int64_t base,
                                        std::vector<Outlier>& out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const simd::I8 keys = reinterpret_cast<simd::I8>(simd::load(x + i)) & 0x7fffffff;
    // Unsigned order of keys < 2^31 is their signed order.
    const simd::I8 hit = keys >= static_cast<int32_t>(floor);
    uint64_t words[4];
    std::memcpy(words, &hit, sizeof words);
    if ((words[0] | words[1] | words[2] | words[3]) == 0) continue;
    for (int64_t j = i; j < i + 8; ++j) {
      if (magnitudeKey(x[j]) >= floor) out.push_back({static_cast<size_t>(base + j), x[j]});
    }
  }
  for (; i < n; ++i) {
    if (magnitudeKey(x[i]) >= floor) out.push_back({static_cast<size_t>(base + i), x[i]});
  }
}

#if defined(KVSCOPE_X86_64_V4)
/// collectAtLeastCloned with AVX-512, without a branch per value: each compare of sixteen keys
/// gives a mask, and the offsets of its set lanes are packed (compressed) onto a list in index
/// order; the values are fetched by that list afterwards.
KVSCOPE_TARGET_V4 void collectAtLeastV4(const float* x, int64_t n, uint32_t floor, int64_t base,
                                        std::vector<Outlier>& out) {
  static thread_local std::vector<int32_t> offsets;
  if (offsets.size() < static_cast<size_t>(n + 16)) offsets.resize(static_cast<size_t>(n + 16));
  int32_t* hit = offsets.data();
  int64_t hits = 0;
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i atLeast = _mm512_set1_epi32(static_cast<int32_t>(floor));
  __m512i at = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i keys = _mm512_and_si512(_mm512_loadu_si512(x + i), magnitude);
    const __mmask16 mask = _mm512_cmpge_epu32_mask(keys, atLeast);
    _mm512_storeu_si512(hit + hits, _mm512_maskz_compress_epi32(mask, at));
    hits += std::popcount(static_cast<uint32_t>(mask));
    at = _mm512_add_epi32(at, _mm512_set1_epi32(16));
  }
  for (; i < n; ++i) {
    if (magnitudeKey(x[i]) >= floor) hit[hits++] = static_cast<int32_t>(i);
  }
  for (int64_t j = 0; j < hits; ++j) out.push_back({static_cast<size_t>(base + hit[j]), x[hit[j]]});
}
#endif

/// collectAtLeastCloned, or its AVX-512 version where the CPU has it.
void collectAtLeast(const float* x, int64_t n, uint32_t floor, int64_t base, std::vector<Outlier>& out) {
#if defined(KVSCOPE_X86_64_V4)
  if (simd::hasX86_64V4()) {
    collectAtLeastV4(x, n, floor, base, out);
    return;
  }
#endif
  collectAtLeastCloned(x, n, floor, base, out);
}

/// About how many rows of a head outlierFloor samples (more cost a selection; fewer leave more
/// candidates).
constexpr int64_t kFloorSampleRows = 256;

/// A magnitude below which no outlier of a head can lie, with margin, from a sample of its rows
/// (all of them for small heads): the key of the sample's m-th largest value, m a generous
/// multiple of the sample's share of `k`. 0 (everything qualifies) when the sample is too small.
/// Rows are rotated first when `rotate`. Returns false for a non-finite sampled value.
bool outlierFloor(const float* rows, int64_t count, int64_t d, int64_t k, const QuantSpec& spec, uint32_t* floor) {
  const int64_t stride = std::max<int64_t>(1, count / kFloorSampleRows);
  const int64_t sampled = (count + stride - 1) / stride;
  std::vector<float> sample(static_cast<size_t>(sampled * d));
  for (int64_t r = 0; r < sampled; ++r) {
    if (copyAndCheck(rows + r * stride * d, sample.data() + r * d, d)) return false;
  }
  rotateRows(spec, sample.data(), sampled, d);
  const auto n = static_cast<int64_t>(sample.size());
  const double share = static_cast<double>(k) * static_cast<double>(n) / static_cast<double>(count * d);
  const auto m = static_cast<int64_t>(std::ceil(1.25 * share + 5.0 * std::sqrt(share) + 16.0));
  *floor = m < n ? countthLargestKey([&](int64_t i) { return magnitudeKey(sample[static_cast<size_t>(i)]); }, n, m).key
                  : 0;
  return true;
}

/// Steps 2-6 for a format that splits into pieces of rows (as quantizeOnePass) with rotation
/// and/or outliers, without compaction and in at most two parallel passes:
///  1. (outliers only) each head's candidates: every value at least as large as a floor that a
///     sample of the head puts safely below its ceil(f·N)-th largest |x|. This pass only reads
///     the layer (rotating each piece in a stage buffer): writing the rotated layer out and
///     reading it back in pass 3 cost more than rotating it again there.
///  2. each head's outliers: the largest of its candidates (ties: lower flat index), exactly
///     those §1 step 4 picks, since every other value lies below the floor;
///  3. each piece: rotated (the same bits as in pass 1), outliers zeroed, quantized, restored,
///     rotated back, written.
/// Sets `handled` to false, having written nothing that matters, when a head's sample
/// misjudged its floor (fewer candidates than outliers); the caller then runs the general path.
Status quantizeInPieces(const Tensor3& src, const QuantSpec& spec, Tensor3& dst, int64_t first, int64_t count,
                        int64_t pieceRows, const Progress& progress, bool& nonFinite, bool& handled) {
  handled = true;
  const int64_t kvh = src.heads, d = src.dim;
  const bool rotate = rotates(spec);
  // The whole-D Hadamard has a fused copy-check-rotate kernel; other rotations copy, then rotate.
  const bool plainHadamard = spec.rotation == Rotation::Hadamard && (spec.rotationBlock == 0 || spec.rotationBlock == d);
  auto copyCheckRotate = [&](const float* in, float* out, int64_t rows) {
    if (plainHadamard) return copyCheckAndRotate(in, out, rows, d);
    if (copyAndCheck(in, out, rows * d)) return true;
    rotateRows(spec, out, rows, d);
    return false;
  };
  const int64_t k = outlierCount(spec.outliers, count * d);
  nonFinite = copyKeptRows(src, dst, first, count);
  if (nonFinite) return Status::ok();
  const PieceGrid grid(dst, first, count, pieceRows);
  const int64_t sliceRows = sliceRowsFor(pieceRows, d);

  // Passes 1 and 2: the outliers of every head, by ascending flat index within the head. The
  // candidate and outlier lists (about 2 % of the tensor) are kept between calls, per calling
  // thread: allocating them afresh cost thousands of page faults per layer.
  // (References, so that the worker threads use the calling thread's lists, not their own.)
  static thread_local std::vector<std::vector<Outlier>> keptOutliers, keptCandidates;
  std::vector<std::vector<Outlier>>& outliers = keptOutliers;
  std::vector<std::vector<Outlier>>& found = keptCandidates;
  outliers.resize(static_cast<size_t>(kvh));
  for (auto& list : outliers) list.clear();
  if (k > 0) {
    std::vector<uint32_t> floors(static_cast<size_t>(kvh));
    int bad = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : bad) if (kvh * count * d > kParallelThreshold)
    for (int64_t h = 0; h < kvh; ++h) {
      bad |= outlierFloor(src.row(h, first), count, d, k, spec, &floors[static_cast<size_t>(h)]) ? 0 : 1;
    }
    if (bad != 0) {
      nonFinite = true;
      return Status::ok();
    }
    // Candidates per thread and head, merged afterwards (no locks in the pass).
    const int threads = std::max(1, omp_get_max_threads());
    found.resize(static_cast<size_t>(threads * kvh));
    for (auto& part : found) {
      part.clear();
      part.reserve(static_cast<size_t>(2 * k / threads + 64));
    }
    const PassEnd end = forEachPiece(grid, progress, 0.0, 0.45, "outliers", [&](int64_t h, int64_t r0, int64_t len, float* stage) {
      std::vector<Outlier>& mine = found[static_cast<size_t>(omp_get_thread_num() * kvh + h)];
      const uint32_t floor = floors[static_cast<size_t>(h)];
      return slicesAhead(src, grid, first, h, r0, len, sliceRows, [&](int64_t s0, int64_t rows) {
        const int64_t n = rows * d;
        const int64_t at = (r0 + s0) * d;
        const float* in = src.row(h, first + r0 + s0);
        if (rotate) {
          float* part = stage + s0 * d;
          if (copyCheckRotate(in, part, rows)) return false;
          in = part;
        }
        // Unrotated, the source is read in place, unchecked: a non-finite value among the
        // candidates is harmless to the selection, and pass 3 checks every value it quantizes.
        collectAtLeast(in, n, floor, at, mine);
        return true;
      });
    });
    if (end != PassEnd::Done) return statusOf(end, nonFinite);
    int shortOf = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : shortOf) if (kvh * count * d > kParallelThreshold)
    for (int64_t h = 0; h < kvh; ++h) {
      // Each thread's candidates are sorted by index when it met its tasks in ascending order
      // (as OpenMP's dynamic schedule hands them out); merged into one list in index order.
      const auto byIndex = [](const Outlier& a, const Outlier& b) { return a.index < b.index; };
      static thread_local std::vector<Outlier> all, merged;
      static thread_local std::vector<float> values;
      static thread_local std::vector<int64_t> picked;
      all.clear();
      for (int t = 0; t < threads; ++t) {
        auto& part = found[static_cast<size_t>(t * kvh + h)];
        if (!std::is_sorted(part.begin(), part.end(), byIndex)) std::sort(part.begin(), part.end(), byIndex);
        merged.clear();
        std::merge(all.begin(), all.end(), part.begin(), part.end(), std::back_inserter(merged), byIndex);
        all.swap(merged);
      }
      if (static_cast<int64_t>(all.size()) < k) {
        shortOf = 1;
        continue;
      }
      // The same selection as the whole head's, on the candidates in index order (so its "lower
      // index first" on ties is §1 step 4's lower flat index first).
      values.resize(all.size());
      for (size_t i = 0; i < all.size(); ++i) values[i] = all[i].value;
      std::vector<Outlier>& mine = outliers[static_cast<size_t>(h)];
      mine.reserve(static_cast<size_t>(k));
      selectOutliersByIndexInto(values.data(), static_cast<int64_t>(values.size()), k, picked);
      for (int64_t i : picked) mine.push_back(all[static_cast<size_t>(i)]);
    }
    if (shortOf != 0) {
      handled = false;
      return Status::ok();
    }
  }

  // Pass 3.
  const PassEnd end = forEachPiece(grid, progress, k > 0 ? 0.45 : 0.0, 0.95, "quantizing", [&](int64_t h, int64_t r0, int64_t len, float* stage) {
    const std::vector<Outlier>& mine = outliers[static_cast<size_t>(h)];
    auto next = std::lower_bound(mine.begin(), mine.end(), static_cast<size_t>(r0 * d),
                                 [](const Outlier& o, size_t at) { return o.index < at; });
    return slicesAhead(src, grid, first, h, r0, len, sliceRows, [&](int64_t s0, int64_t rows) {
      float* part = stage + s0 * d;
      const int64_t n = rows * d;
      const auto at = static_cast<size_t>((r0 + s0) * d);
      const float* in = src.row(h, first + r0 + s0);
      if (rotate ? copyCheckRotate(in, part, rows) : copyAndCheck(in, part, n)) return false;
      const auto begin = next;
      for (; next != mine.end() && next->index < at + static_cast<size_t>(n); ++next) part[next->index - at] = 0.0f;
      quantizeFormatPiece(part, rows, d, spec, TensorContext{});
      for (auto o = begin; o != next; ++o) part[o->index - at] = o->value;
      unrotateRows(spec, part, rows, d);
      writeOut(grid, part, dst.row(h, first + r0 + s0), n);
      return true;
    });
  });
  return statusOf(end, nonFinite);
}

}  // namespace

namespace {

/// Copies `src` into `dst` (same shape, dst sized), all cores; says whether any value is non-finite.
bool copyTensorAndCheck(const Tensor3& src, Tensor3& dst) {
  const int64_t n = static_cast<int64_t>(src.size());
  constexpr int64_t kChunk = int64_t{1} << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n > kParallelThreshold)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t at = c * kChunk;
    bad |= copyAndCheck(src.data.data() + at, dst.data.data() + at, std::min(kChunk, n - at)) ? 1 : 0;
  }
  return bad != 0;
}

/// Steps 2-6 for any spec, on `recon` already holding a copy of the source: the quantized tokens
/// are compacted inside recon's own buffer (fresh allocations of a whole layer cost more than the
/// quantization), rotated, stripped of outliers, quantized, restored and moved back.
Status quantizeGeneral(const QuantSpec& spec, const std::string& specText, Tensor3& recon,
                       int64_t first, int64_t count, const Progress& progress) {
  const int64_t kvh = recon.heads, tokens = recon.tokens, d = recon.dim;
  const int64_t kept = tokens - count;
  const auto rowBytes = static_cast<size_t>(d) * sizeof(float);
  // Kept rows wait in a small side buffer.
  std::vector<float> keptRows(static_cast<size_t>(kvh * kept * d));
  for (int64_t h = 0; h < kvh; ++h) {
    float* dst = keptRows.data() + h * kept * d;
    std::copy_n(recon.row(h, 0), static_cast<size_t>(first * d), dst);
    std::copy_n(recon.row(h, first + count), static_cast<size_t>((kept - first) * d), dst + first * d);
  }
  Tensor3 q;
  q.heads = kvh;
  q.tokens = count;
  q.dim = d;
  q.data = std::move(recon.data);
  if (kept > 0) {
    // Moving left, head by head: a head's source never lies below an earlier head's target.
    for (int64_t h = 0; h < kvh; ++h) {
      std::memmove(q.data.data() + h * count * d, q.data.data() + (h * tokens + first) * d,
                   static_cast<size_t>(count) * rowBytes);
    }
    q.data.resize(static_cast<size_t>(kvh * count * d));
  }
  auto steps3to6 = [&]() -> Status {
    // Step 3: rotation.
    rotateRows(spec, q.data.data(), kvh * count, d);
    // Step 4: dense-and-sparse outliers, per kv head; heads in parallel, a batch per report.
    const int64_t perHead = outlierCount(spec.outliers, count * d);
    std::vector<std::vector<Outlier>> outliers(static_cast<size_t>(kvh));
    if (perHead > 0) {
      const int64_t batch = std::max(1, omp_get_max_threads());
      for (int64_t h0 = 0; h0 < kvh; h0 += batch) {
        if (!report(progress, 0.5 * static_cast<double>(h0) / static_cast<double>(kvh), "outliers")) {
          return Status::cancelled();
        }
        const int64_t h1 = std::min(kvh, h0 + batch);
#pragma omp parallel for schedule(dynamic, 1) if (count * d > kParallelThreshold)
        for (int64_t h = h0; h < h1; ++h) {
          extractOutliers(q, h, perHead, outliers[static_cast<size_t>(h)]);
        }
      }
    }
    if (!report(progress, 0.5, "quantizing")) return Status::cancelled();
    // Step 5: the format.
    KVS_RETURN_IF_ERROR(quantizeFormatInPlace(q, spec).withContext("spec '" + specText + "'"));
    if (!report(progress, 0.9, "reconstructing")) return Status::cancelled();
    // Step 6: restore outliers, rotate back (x·Rᵀ).
    for (const auto& head : outliers) {
      for (const Outlier& o : head) q.data[o.index] = o.value;
    }
    unrotateRows(spec, q.data.data(), kvh * count, d);
    return Status::ok();
  };
  Status st = steps3to6();
  recon.data = std::move(q.data);
  if (!st.isOk()) return st;
  if (kept > 0) {
    recon.data.resize(static_cast<size_t>(kvh * tokens * d));  // within capacity: no allocation
    // Moving right, last head first, mirrors the compaction.
    for (int64_t h = kvh - 1; h >= 0; --h) {
      std::memmove(recon.row(h, first), recon.data.data() + h * count * d, static_cast<size_t>(count) * rowBytes);
    }
    for (int64_t h = 0; h < kvh; ++h) {
      const float* src = keptRows.data() + h * kept * d;
      std::copy_n(src, static_cast<size_t>(first * d), recon.row(h, 0));
      std::copy_n(src + first * d, static_cast<size_t>((kept - first) * d), recon.row(h, first + count));
    }
  }
  return Status::ok();
}

}  // namespace

Status quantizeTensorInto(const QuantInput& input, const QuantSpec& spec, QuantOutput& out,
                         const Progress& progress) {
  if (input.tensor == nullptr) return Status::internal("quantizeTensor: no input tensor");
  const Tensor3& reference = *input.tensor;
  const std::string specText = toString(spec);

  // Step 1: pre-RoPE keys are quantized before rotation by position.
  const Tensor3* source = &reference;
  if (spec.prerope) {
    if (input.preRope == nullptr) {
      return Status::invalidArgument("spec '" + specText + "': prerope needs key_pre_rope, which was not given");
    }
    if (!input.preRope->sameShape(reference)) {
      return Status::invalidData("key_pre_rope's shape differs from key's");
    }
    source = input.preRope;
  }
  if (rotates(spec)) KVS_RETURN_IF_ERROR(checkRotation(spec, source->dim).withContext("spec '" + specText + "'"));
  Tensor3& recon = out.reconstruction;
  if (source == &recon) return Status::internal("quantizeTensorInto: the output aliases the input");
  if (source->size() != static_cast<size_t>(source->heads * source->tokens * source->dim)) {
    return Status::internal("quantizeTensor: tensor data size does not match its shape");
  }

  // Step 2: only tokens [S, T-R) are quantized.
  const int64_t kvh = source->heads, tokens = source->tokens, d = source->dim;
  const QuantizedTokens range = quantizedTokens(spec, tokens);
  const int64_t first = range.first;
  const int64_t count = range.count;
  const bool quantize = count > 0 && spec.format != FormatId::None;
  if (quantize) KVS_RETURN_IF_ERROR(checkFormatSpec(spec, kvh, d).withContext("spec '" + specText + "'"));

  out.storage = storageFor(spec, kvh, tokens, d);
  recon.heads = kvh;
  recon.tokens = tokens;
  recon.dim = d;
  recon.data.resize(source->size());  // reuses the buffer's capacity

  bool nonFinite = false;
  Status st;
  const int64_t pieceRows = quantize ? formatPieceRows(spec, count, d) : 0;
  const bool inPieces = quantize && pieceRows > 0;
  const bool rotatedOrOutliers = rotates(spec) || outlierCount(spec.outliers, count * d) > 0;
  bool handled = false;
  if (inPieces && !rotatedOrOutliers) {
    st = quantizeOnePass(*source, spec, recon, first, count, pieceRows, progress, nonFinite);
    handled = true;
  } else if (inPieces && !formatNeedsTensorRange(spec)) {
    st = quantizeInPieces(*source, spec, recon, first, count, pieceRows, progress, nonFinite, handled);
  }
  if (!handled) {
    nonFinite = copyTensorAndCheck(*source, recon);
    if (!nonFinite && quantize) st = quantizeGeneral(spec, specText, recon, first, count, progress);
  }
  if (nonFinite) {
    recon = Tensor3{};
    return Status::invalidData(std::string(spec.prerope ? "key_pre_rope" : "input") + ": " +
                               firstNonFinite(*source) + " (quantization needs finite values)");
  }
  if (!st.isOk()) {
    recon = Tensor3{};  // no half-built result
    return st;
  }
  if (spec.prerope) applyRope(recon, input.rope);
  if (!report(progress, 1.0, "done")) {
    recon = Tensor3{};
    return Status::cancelled();
  }
  return Status::ok();
}

Expected<QuantOutput> quantizeTensor(const QuantInput& input, const QuantSpec& spec,
                                     const Progress& progress) {
  QuantOutput out;
  KVS_RETURN_IF_ERROR(quantizeTensorInto(input, spec, out, progress));
  return out;
}

}  // namespace kvscope
