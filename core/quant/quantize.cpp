// SPDX-License-Identifier: GPL-3.0-or-later
// The pipeline of quantization.md §1 around the formats (step 5 lives in formats.cpp), and the
// storage accounting of §5.
#include "core/quant/quantize.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <omp.h>
#include <xmmintrin.h>

#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/simd.h"

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
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    carry |= (bits & 0x7f800000u) + 0x00800000u;
  }
  return (carry & 0x80000000u) != 0;
}

/// Copies n floats (n a multiple of 4) to a 16-byte aligned `dst` with non-temporal stores: a
/// layer-sized output does not fit in cache anyway, and streaming it skips reading every line
/// of it from memory before it is overwritten. The caller fences (_mm_sfence) once after its
/// last call, before other threads read `dst`; a fence per call would wait for each piece's
/// stores to drain instead of overlapping them with the next piece's work.
void streamOut(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
}

/// The largest |x| of n floats, and whether any is non-finite.
KVSCOPE_SIMD_CLONES bool maxAbsAndCheck(const float* x, int64_t n, float* maxAbs) {
  uint32_t carry = 0, top = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    const uint32_t magnitude = bits & 0x7fffffffu;  // orders like |x| for finite x
    carry |= (bits & 0x7f800000u) + 0x00800000u;
    top = magnitude > top ? magnitude : top;
  }
  std::memcpy(maxAbs, &top, sizeof top);
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

/// Steps 2 and 5 in one parallel pass, for a format that splits into pieces of `pieceRows` token
/// rows (formatPieceRows) when there is no rotation and no outliers: each piece is copied from
/// `src` into `dst` (whose shape is src's), checked, and quantized while it is still in cache, in
/// place, never compacted. Progress and cancellation between slabs of pieces. Sets `nonFinite`
/// (and stops) when the input holds a non-finite value.
Status quantizeOnePass(const Tensor3& src, const QuantSpec& spec, Tensor3& dst, int64_t first,
                       int64_t count, int64_t pieceRows, const Progress& progress, bool& nonFinite) {
  const int64_t kvh = src.heads, d = src.dim;
  nonFinite = copyKeptRows(src, dst, first, count);
  if (nonFinite) return Status::ok();
  float tensorScale = 0.0f;
  if (formatNeedsTensorMaxAbs(spec)) {
    float top = 0.0f;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(max : top) reduction(| : bad) if (kvh * count * d > kParallelThreshold)
    for (int64_t h = 0; h < kvh; ++h) {
      float m = 0.0f;
      bad |= maxAbsAndCheck(src.row(h, first), count * d, &m) ? 1 : 0;
      top = std::max(top, m);
    }
    nonFinite = bad != 0;
    if (nonFinite) return Status::ok();
    tensorScale = formatTensorScale(spec, top);
  }
  // Outputs larger than a cache are streamed (when every task starts on a 16-byte boundary).
  const bool stream = kvh * count * d * static_cast<int64_t>(sizeof(float)) > kStreamBytes && d % 4 == 0 &&
                      reinterpret_cast<uintptr_t>(dst.data.data()) % 16 == 0 && (first * d) % 4 == 0;
  // Tasks of whole pieces, about 64 KiB each.
  const int64_t rowsPerTask = pieceRows * std::max<int64_t>(1, (int64_t{16384} / std::max<int64_t>(d, 1)) / pieceRows);
  const int64_t tasksPerHead = (count + rowsPerTask - 1) / rowsPerTask;
  const int64_t tasks = kvh * tasksPerHead;
  // One parallel loop (a barrier per slab costs more than a slab's work when another process
  // holds a core); the calling thread (OpenMP thread 0) reports progress every few pieces and
  // every thread stops at the next piece after a cancel or a non-finite value.
  std::atomic<bool> stop{false}, cancelled{false};
  std::atomic<int64_t> done{0};
  int bad = 0;
#pragma omp parallel if (tasks * rowsPerTask * d > kParallelThreshold)
  {
  int64_t mine = 0;  // pieces this thread has started
#pragma omp for schedule(dynamic, 4) reduction(| : bad)
  for (int64_t task = 0; task < tasks; ++task) {
    if (stop.load(std::memory_order_relaxed)) continue;
    if (omp_get_thread_num() == 0 && mine++ % 16 == 0 &&
        !report(progress, 0.95 * static_cast<double>(done.load()) / static_cast<double>(tasks), "quantizing")) {
      cancelled = true;
      stop = true;
      continue;
    }
    const int64_t h = task / tasksPerHead;
    const int64_t r0 = (task % tasksPerHead) * rowsPerTask;
    const int64_t len = std::min(rowsPerTask, count - r0);
    float* out = dst.row(h, first + r0);
    if (stream) {
      // Quantized in a per-thread buffer that stays in L1/L2, then streamed out.
      static thread_local std::vector<float> stage;
      stage.resize(static_cast<size_t>(rowsPerTask * d));
      if (copyAndCheck(src.row(h, first + r0), stage.data(), len * d)) {
        bad = 1;
        stop = true;
        continue;
      }
      quantizeFormatPiece(stage.data(), len, d, spec, tensorScale);
      streamOut(stage.data(), out, len * d);
    } else {
      if (copyAndCheck(src.row(h, first + r0), out, len * d)) {
        bad = 1;
        stop = true;
        continue;
      }
      quantizeFormatPiece(out, len, d, spec, tensorScale);
    }
    done.fetch_add(1, std::memory_order_relaxed);
  }
  // Each thread's streamed stores are ordered before the parallel region's closing barrier, so
  // the caller sees the whole output.
  if (stream) _mm_sfence();
  }
  nonFinite = bad != 0;
  if (cancelled && !nonFinite) return Status::cancelled();
  return Status::ok();
}

std::vector<int64_t> selectOutliersByIndex(const float* values, int64_t n, int64_t count);

struct Outlier {
  size_t index;  ///< flat index into the quantized tensor
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

// The `count` indices of largest |x| (ties: lower index first), in ascending index order.
// Radix select on the bits of |x|: for finite floats, the bit patterns of non-negative values
// order like the values. Two 16-bit histogram passes find the k-th largest magnitude T
// without sorting or allocating per element (a 32k-token layer holds millions per head).
std::vector<int64_t> selectOutliersByIndex(const float* values, int64_t n, int64_t count) {
  count = std::min(count, n);
  if (count <= 0) return {};
  auto key = [values](int64_t i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof bits);
    return bits & 0x7fffffffu;
  };
  std::vector<int64_t> hist(65536);
  for (int64_t i = 0; i < n; ++i) ++hist[key(i) >> 16];
  int64_t above = 0;  // elements with a larger key than the threshold bucket
  uint32_t high = 65535;
  while (above + hist[high] < count) above += hist[high--];
  std::fill(hist.begin(), hist.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t k = key(i);
    if ((k >> 16) == high) ++hist[k & 0xffffu];
  }
  uint32_t low = 65535;
  while (above + hist[low] < count) above += hist[low--];
  const uint32_t threshold = (high << 16) | low;
  // Everything above the threshold, then ties at it by ascending index (§1: lower index first).
  int64_t ties = count - above;
  std::vector<int64_t> picked;
  picked.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t k = key(i);
    if (k > threshold || (k == threshold && ties-- > 0)) picked.push_back(i);
  }
  return picked;
}

}  // namespace

std::vector<int64_t> selectOutliers(const float* values, int64_t n, int64_t count) {
  std::vector<int64_t> picked = selectOutliersByIndex(values, n, count);
  auto key = [values](int64_t i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof bits);
    return bits & 0x7fffffffu;
  };
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

using simd::D4;

// The fast Walsh–Hadamard transform (Sylvester order, so the result is x·H) of `rows` rows of
// `d` values, four rows at a time: lane k of work[i] holds element i of row k, so every
// butterfly is one vector operation whatever its stride. Each lane does exactly the scalar
// transform's double operations in the same order.
KVSCOPE_SIMD_CLONES void hadamardRows(float* x, int64_t rows, int64_t d, double norm, D4* work) {
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const int64_t n = std::min<int64_t>(4, rows - r0);
    float* base = x + r0 * d;
    for (int64_t i = 0; i < d; ++i) {
      D4 v = {0, 0, 0, 0};
      for (int64_t k = 0; k < n; ++k) v[k] = base[k * d + i];
      work[i] = v;
    }
    for (int64_t len = 1; len < d; len <<= 1) {
      for (int64_t i = 0; i < d; i += 2 * len) {
        for (int64_t j = i; j < i + len; ++j) {
          const D4 a = work[j], b = work[j + len];
          work[j] = a + b;
          work[j + len] = a - b;
        }
      }
    }
    for (int64_t i = 0; i < d; ++i) {
      const D4 v = work[i] * norm;
      for (int64_t k = 0; k < n; ++k) base[k * d + i] = static_cast<float>(v[k]);
    }
  }
}

}  // namespace

void hadamardInPlace(Tensor3& x) {
  const int64_t d = x.dim;
  if (!isPowerOfTwo(d)) return;  // callers validate; a no-op beats a corrupt tensor
  const double norm = 1.0 / std::sqrt(static_cast<double>(d));
  const int64_t rows = x.heads * x.tokens;
  constexpr int64_t kRowsPerTask = 64;
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel if (rows * d > kParallelThreshold)
  {
    std::vector<double> work(static_cast<size_t>(4 * d));  // one per thread; GCC vectors alias their elements
#pragma omp for schedule(dynamic, 4)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t r0 = t * kRowsPerTask;
      hadamardRows(x.data.data() + r0 * d, std::min(kRowsPerTask, rows - r0), d, norm,
                   reinterpret_cast<D4*>(work.data()));
    }
  }
}

StorageCount storageFor(const QuantSpec& spec, int64_t kvHeads, int64_t tokens, int64_t headDim) {
  StorageCount s;
  s.elements = kvHeads * tokens * headDim;
  const int64_t kept = std::min<int64_t>(int64_t{spec.sinks} + spec.residual, tokens);
  const int64_t quantTokens = tokens - kept;
  const int64_t quantized = kvHeads * quantTokens * headDim;
  s.keptBits = 16.0 * static_cast<double>(kvHeads * kept * headDim);
  s.outlierBits = 48.0 * static_cast<double>(kvHeads * outlierCount(spec.outliers, quantTokens * headDim));
  if (quantized == 0) return s;

  const FormatInfo& info = formatInfo(spec.format);
  const double payload = info.hasBits ? spec.bits : info.payloadBits;
  s.payloadBits = payload * static_cast<double>(quantized);
  const auto groups = static_cast<double>(groupCount(spec, kvHeads, quantTokens, headDim));
  switch (info.kind) {
    case FormatKind::Integer:
    case FormatKind::Float8:
    case FormatKind::Codebook: {
      if (spec.unitscale) break;
      const double valueBits = spec.scale == MetaType::Fp32 ? 32.0 : 16.0;
      const double perGroup = (info.kind == FormatKind::Integer && !spec.symmetric) ? 2.0 : 1.0;
      s.metadataBits = groups * perGroup * valueBits;
      break;
    }
    case FormatKind::Block:
      s.metadataBits = groups * info.blockMetaBits + info.tensorMetaBits;
      break;
    case FormatKind::Elementwise:
      break;
  }
  return s;
}

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
    if (spec.hadamard) hadamardInPlace(q);
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
    // Step 6: restore outliers, rotate back (H is symmetric and orthogonal: H·H = I).
    for (const auto& head : outliers) {
      for (const Outlier& o : head) q.data[o.index] = o.value;
    }
    if (spec.hadamard) hadamardInPlace(q);
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
  if (spec.hadamard && !isPowerOfTwo(source->dim)) {
    return Status::invalidArgument("spec '" + specText + "': rot=hadamard needs a head dim that is a power of two, but D = " +
                                   std::to_string(source->dim));
  }
  Tensor3& recon = out.reconstruction;
  if (source == &recon) return Status::internal("quantizeTensorInto: the output aliases the input");
  if (source->size() != static_cast<size_t>(source->heads * source->tokens * source->dim)) {
    return Status::internal("quantizeTensor: tensor data size does not match its shape");
  }

  // Step 2: only tokens [S, T-R) are quantized.
  const int64_t kvh = source->heads, tokens = source->tokens, d = source->dim;
  const int64_t kept = std::min<int64_t>(int64_t{spec.sinks} + spec.residual, tokens);
  const int64_t first = std::min<int64_t>(spec.sinks, tokens);
  const int64_t count = tokens - kept;
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
  if (quantize && pieceRows > 0 && !spec.hadamard && outlierCount(spec.outliers, count * d) == 0) {
    st = quantizeOnePass(*source, spec, recon, first, count, pieceRows, progress, nonFinite);
  } else {
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
