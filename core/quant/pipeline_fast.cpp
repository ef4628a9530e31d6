// SPDX-License-Identifier: GPL-3.0-or-later
// The fast strategy (core/quant/pipeline_fast.h): a piece scheduler over the layer's token rows
// with prefetch and streaming stores, a one-pass body for plain specs and a sampled outlier floor
// for rotations and outliers. docs/performance.md, section 1, has the measurements behind each
// choice.
#include "core/quant/pipeline_fast.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include <omp.h>

#include "core/quant/finite_check.h"
#include "core/quant/formats.h"
#include "core/quant/format_table.h"
#include "core/quant/hadamard.h"
#include "core/quant/kernels_block.h"
#include "core/quant/kernels_grouped.h"
#include "core/quant/outlier_select.h"
#include "core/quant/rotation.h"
#include "core/util/simd.h"

namespace kvscope {

namespace {

// Below this many elements threads cost more than they save.
constexpr int64_t kParallelThreshold = int64_t{1} << 16;
// Above this many bytes an output is streamed past the caches.
constexpr int64_t kStreamBytes = int64_t{32} << 20;

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
    if (grid.stream) simd::streamFence();
  }
  if (bad != 0) return PassEnd::NonFinite;
  return cancelled ? PassEnd::Cancelled : PassEnd::Done;
}

/// Writes n floats from a stage buffer to their place in the output.
void writeOut(const PieceGrid& grid, const float* stage, float* out, int64_t n) {
  if (grid.stream) {
    simd::streamCopy(out, stage, n);
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
      for (int64_t b = 0; b < d * static_cast<int64_t>(sizeof(float)); b += 64) simd::prefetchOnce(ahead + b);
    }
    if (!fn(s0, rows)) return false;
  }
  return true;
}

/// Slices of about 4 KiB that hold whole pieces of `pieceRows` rows.
int64_t sliceRowsFor(int64_t pieceRows, int64_t d) {
  return pieceRows * std::max<int64_t>(1, 1024 / std::max<int64_t>(d * pieceRows, 1));
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
  *floor = m < n ? countthLargestMagnitude(sample.data(), n, m).key : 0;
  return true;
}

}  // namespace

bool fastStrategyCovers(const QuantSpec& spec, int64_t kvHeads, int64_t tokens, int64_t headDim) {
  (void)kvHeads;
  const int64_t count = quantizedTokens(spec, tokens).count;
  const FormatInfo& info = formatInfo(spec.format);
  if (count <= 0 || info.exact || formatPieceRows(spec, count, headDim) <= 0) return false;
  // The one tensor-scale format with a fused pass here is nvfp4 (its range pass and nvfp4From);
  // any other takes the reference, which computes the row's tensor scale itself.
  if (info.tensorScale != nullptr && spec.format != FormatId::Nvfp4) return false;
  const bool rotatedOrOutliers = rotates(spec) || outlierCount(spec.outliers, count * headDim) > 0;
  return !rotatedOrOutliers || !formatNeedsTensorRange(spec);
}

// Steps 2-6 in at most three parallel passes over pieces of `pieceRows` token rows
// (formatPieceRows), without compaction: kept rows are copied straight to `dst`, and quantized
// pieces are read from `src` and written to their own place in `dst`.
//  0. (no rotation and no outliers, a format with a tensor-wide scale only) a read-only range
//     pass over the quantized rows, which also checks them.
//  1. (outliers only) each head's candidates: every value at least as large as a floor that a
//     sample of the head puts safely below its ceil(f·N)-th largest |x|. This pass only reads
//     the layer (rotating each piece in a stage buffer): writing the rotated layer out and
//     reading it back in pass 3 cost more than rotating it again there.
//  2. each head's outliers: the largest of its candidates (ties: lower flat index), exactly
//     those §1 step 4 picks, since every other value lies below the floor;
//  3. each piece: copied and checked, rotated (the same bits as in pass 1), outliers zeroed,
//     quantized, restored, rotated back, written. Without rotation and outliers the format's
//     kernel reads the source itself where it can (the "one pass").
Status quantizeFast(const Tensor3& src, const QuantSpec& spec, Tensor3& dst, const Progress& progress,
                    bool& nonFinite, bool& handled) {
  handled = true;
  const int64_t kvh = src.heads, d = src.dim;
  const QuantizedTokens range = quantizedTokens(spec, src.tokens);
  const int64_t first = range.first, count = range.count;
  const int64_t pieceRows = formatPieceRows(spec, count, d);
  const bool rotate = rotates(spec);
  const int64_t k = outlierCount(spec.outliers, count * d);
  const bool plain = !rotate && k == 0;
  // The whole-D Hadamard has a fused copy-check-rotate kernel; other rotations copy, then rotate.
  const bool plainHadamard = spec.rotation == Rotation::Hadamard && (spec.rotationBlock == 0 || spec.rotationBlock == d);
  auto copyCheckRotate = [&](const float* in, float* out, int64_t rows) {
    if (plainHadamard) return copyCheckAndHadamard(in, out, rows, d);
    if (copyAndCheck(in, out, rows * d)) return true;
    rotateRows(spec, out, rows, d);
    return false;
  };
  nonFinite = copyKeptRows(src, dst, first, count);
  if (nonFinite) return Status::ok();
  const PieceGrid grid(dst, first, count, pieceRows);
  // A task works through its rows in slices of about 4 KiB: read and checked, quantized and
  // streamed out one after the other, while rows 8 KiB ahead are being fetched (slicesAhead).
  const int64_t sliceRows = sliceRowsFor(pieceRows, d);

  // Pass 0. nvfp4's range pass also keeps every block's max |x| (1/16 of the layer, kept between
  // calls per calling thread), so the quantizing pass reads them instead of recomputing them:
  // the range pass waits on memory anyway. (Pieces hold whole blocks: formatPieceRows asks that D
  // be a multiple of the block size.)
  TensorContext context;
  static thread_local std::vector<float> keptMaxima;
  std::vector<float>& maxima = keptMaxima;
  if (plain && spec.format == FormatId::Nvfp4) {
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
  } else if (plain && formatNeedsTensorRange(spec)) {
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
  PassEnd end = PassEnd::Done;
  if (plain) {
    const bool readsSource = formatPieceReadsSource(spec);
    const kernels::BlockFromKernel blockFrom = kernels::blockFromKernel(spec.format);
    const int64_t blockSize = formatInfo(spec.format).blockSize;
    end = forEachPiece(grid, progress, 0.0, 0.95, "quantizing", [&](int64_t h, int64_t r0, int64_t len, float* stage) {
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
        if (grid.stream) simd::streamCopy(out + s0 * d, work + s0 * d, rows * d);
        return true;
      });
    });
  } else {
    end = forEachPiece(grid, progress, k > 0 ? 0.45 : 0.0, 0.95, "quantizing", [&](int64_t h, int64_t r0, int64_t len, float* stage) {
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
  }
  return statusOf(end, nonFinite);
}

}  // namespace kvscope
