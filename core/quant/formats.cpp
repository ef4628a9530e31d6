// SPDX-License-Identifier: GPL-3.0-or-later
// Step 5 of the pipeline, fast path: whole layer at a time, contiguous groups, vectorizable inner
// loops, OpenMP across rows / groups for large tensors. Agrees bit for bit with reference.cpp.
// The kernels never read floating-point exception flags; telling GCC so lets it if-convert the
// clamps and selects of the element loops into vector code (results are unchanged).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "core/quant/formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/quant/codebook.h"
#include "core/quant/format_ops.h"
#include "core/quant/hqq.h"
#include "core/quant/lmdeploy_tq.h"
#include "core/quant/fp_types.h"
#include "core/quant/fp_vec.h"
#include "core/quant/kernels_block.h"
#include "core/quant/kernels_grouped.h"
#include "core/quant/reference.h"
#include "core/util/simd.h"

namespace kvscope {

namespace {
/// HQQ's groups on a layer tensor of quantized tokens (flattened [heads, tokens, D]).
hqq::Layout hqqLayout(const Tensor3& x, const QuantSpec& spec) {
  return hqq::Layout{static_cast<int64_t>(x.size()), spec.group, spec.axis != Axis::Token};
}
}  // namespace

namespace {

using kernels::GroupedKind;
using kernels::GroupParams;

// Below this many elements threads cost more than they save.
constexpr int64_t kParallelThreshold = int64_t{1} << 16;

// Per-thread scratch that only ever grows, so no group allocates.
float* scratch(int slot, int64_t n) {
  static thread_local std::vector<float> buffers[4];
  auto& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

int64_t runLength(int group, int64_t axisLength) {
  if (group <= 0 || group >= axisLength) return axisLength;
  return group;
}

}  // namespace

Status checkFormatSpec(const Tensor3& x, const QuantSpec& spec) {
  if (x.size() != static_cast<size_t>(x.heads * x.tokens * x.dim)) {
    return Status::internal("tensor data size does not match its shape");
  }
  if (formatInfo(spec.format).kind == FormatKind::Optimized) {
    const int64_t n = x.heads * x.tokens * x.dim;
    if (spec.group < 1 || n % spec.group != 0) {
      return Status::invalidArgument("hqq: \"group_size should be divisble by the total tensor dimensions\" (HQQ "
                                     "refuses it): the layer tensor holds " + std::to_string(n) +
                                     " values, not a multiple of group=" + std::to_string(spec.group));
    }
  }
  return checkFormatSpec(spec, x.heads, x.dim);
}

Status checkFormatSpec(const QuantSpec& spec, int64_t heads, int64_t dim) {
  const FormatInfo& info = formatInfo(spec.format);
  if (info.kind == FormatKind::Integer) {
    if (spec.bits < 1 || spec.bits > 8) {
      return Status::invalidArgument("int bits must be 1..8, got " + std::to_string(spec.bits));
    }
    if (spec.symmetric && spec.bits < 2) {
      return Status::invalidArgument("int1 cannot be symmetric (sym needs at least 2 bits)");
    }
  }
  if (info.kind == FormatKind::Block) {
    const int64_t row = heads * dim;
    if (row % info.blockSize != 0) {
      return Status::invalidArgument(std::string(info.name) + " needs a token row (kv_heads*head_dim = " +
                                     std::to_string(row) + ") that is a multiple of its block size " +
                                     std::to_string(info.blockSize));
    }
  }
  if (info.kind == FormatKind::Vector || info.kind == FormatKind::NonUniform) {
    if (spec.bits < info.minBits || spec.bits > info.maxBits) {
      return Status::invalidArgument(std::string(info.name) + " bits must be " + std::to_string(info.minBits) + ".." +
                                     std::to_string(info.maxBits) + ", got " + std::to_string(spec.bits));
    }
  }
  if (info.kind == FormatKind::Vector && dim < codebook::kMinSphereDim) {
    return Status::invalidArgument(std::string(info.name) + " needs a head dim of at least 2, got " + std::to_string(dim));
  }
  if (info.kind == FormatKind::Optimized) {
    if (!hqq::validBits(spec.bits)) {
      return Status::invalidArgument("hqq bits must be 1..8, got " + std::to_string(spec.bits));
    }
  }
  if (info.kind == FormatKind::NonUniform && spec.clip.kind == Clip::Kind::Mse) {
    return Status::invalidArgument("nuq does not take clip=mse (allowed: clip=p)");
  }
  if (spec.clip.kind == Clip::Kind::Percentile && !(spec.clip.p > 0.0 && spec.clip.p <= 1.0)) {
    return Status::invalidArgument("clip percentile must be in (0, 1]");
  }
  return Status::ok();
}

namespace {

// ---- Grouped formats --------------------------------------------------------------------------

// The parameters of a group whose values span [lo, hi], without clipping (max-abs formats see
// [-a, a], a the larger magnitude).
GroupParams paramsOfUnclippedRange(const QuantSpec& spec, float lo, float hi) {
  double l = lo, u = hi;
  if (kernels::groupedKind(spec) != GroupedKind::Asym) {
    u = std::max(std::fabs(l), std::fabs(u));
    l = -u;
  }
  return kernels::paramsFromRange(spec, l, u);
}

GroupParams paramsOf(const QuantSpec& spec, const float* x, int64_t n, float* work) {
  const kernels::ClipRange r = kernels::clippedRange(spec, x, n, work);
  return kernels::paramsFromRange(spec, r.lo, r.hi);
}

// The element quantizer of kind K with the constants of `spec`, for loops compiled once per kind.
template <GroupedKind K>
struct ElementQuantizer {
  explicit ElementQuantizer(const QuantSpec& spec)
      : asymTop(kernels::roundingCeiling(static_cast<float>((1 << spec.bits) - 1))),
        symTop(kernels::roundingCeiling(static_cast<float>((1 << (spec.bits > 1 ? spec.bits - 1 : 1)) - 1))),
        thresholds(kernels::nf4Thresholds().data()) {}
  /// x̂ of x with scale s and (asym) zero m.
  KVSCOPE_INLINE float operator()(float x, float s, float m) const {
    if constexpr (K == GroupedKind::Asym) return kernels::quantAsym(x, s, m, asymTop);
    if constexpr (K == GroupedKind::Sym) return kernels::quantSym(x, s, symTop);
    if constexpr (K == GroupedKind::E4m3) return kernels::quantE4m3(x, s);
    if constexpr (K == GroupedKind::E5m2) return kernels::quantE5m2(x, s);
    if constexpr (K == GroupedKind::Nf4) return kernels::quantNf4(x, s, thresholds);
  }
  float asymTop, symTop;
  const float* thresholds;
};

// The parameters of n groups from their unclipped ranges [lo, hi] (paramsFromRange of each,
// with the max-abs formats' range [-a, a]): int asym and sym four groups at a time in double
// lanes (the same operations), the others one by one.
template <GroupedKind K>
KVSCOPE_INLINE void paramsOfRanges(const QuantSpec& spec, const float* lo, const float* hi, float* s, float* m,
                                   int64_t n) {
  int64_t i = 0;
  if constexpr (K == GroupedKind::Asym || K == GroupedKind::Sym) {
    using F4 = float __attribute__((vector_size(16), aligned(4)));
    const double top = K == GroupedKind::Asym ? static_cast<double>((1 << spec.bits) - 1)
                                              : static_cast<double>((1 << (spec.bits - 1)) - 1);
    for (; i + 4 <= n; i += 4) {
      F4 l4, h4;
      std::memcpy(&l4, lo + i, sizeof l4);
      std::memcpy(&h4, hi + i, sizeof h4);
      const simd::D4 l = __builtin_convertvector(l4, simd::D4), u = __builtin_convertvector(h4, simd::D4);
      if constexpr (K == GroupedKind::Asym) {
        fp::metaRound4((u - l) / top, spec.scale, s + i);
        fp::metaRound4(l, spec.scale, m + i);
      } else {
        const simd::D4 al = simd::abs(l), au = simd::abs(u);
        // std::max(|l|, |u|): |l| unless |u| is larger.
        fp::metaRound4((al < au ? au : al) / top, spec.scale, s + i);
        for (int k = 0; k < 4; ++k) m[i + k] = 0.0f;
      }
    }
    if (spec.minScale > 0) {
      // minscale=S, as paramsFromRange applies it.
      const auto floor = static_cast<float>(spec.minScale);
      for (int64_t k = 0; k < i; ++k) s[k] = std::max(s[k], floor);
    }
  }
  for (; i < n; ++i) {
    const GroupParams p = paramsOfUnclippedRange(spec, lo[i], hi[i]);
    s[i] = p.scale;
    m[i] = p.zero;
  }
}

// axis=token without clipping, one element quantizer: for a batch of rows, every group's range,
// then their parameters together (paramsOfRanges), then the apply loops. Reads `in` and writes
// `out` (the same buffer or distinct ones); with Check, ORs the finite-check bits of every value
// read into *carry (minMaxCheckInline).
template <GroupedKind K, bool Check>
KVSCOPE_INLINE void tokenRowsNoClip(const float* in, float* out, int64_t rows, int64_t dim, int64_t run,
                                    const QuantSpec& spec, uint32_t* carry) {
  const ElementQuantizer<K> quant(spec);
  const int64_t perRow = (dim + run - 1) / run;
  constexpr int64_t kBatch = 64;  // groups per batch (whole rows; at least one row)
  const int64_t batchRows = std::max<int64_t>(1, kBatch / perRow);
  float* lo = scratch(3, 4 * batchRows * perRow);
  float* hi = lo + batchRows * perRow;
  float* s = hi + batchRows * perRow;
  float* m = s + batchRows * perRow;
  for (int64_t r0 = 0; r0 < rows; r0 += batchRows) {
    const int64_t r1 = std::min(rows, r0 + batchRows);
    int64_t g = 0;
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c0 = 0; c0 < dim; c0 += run, ++g) {
        const float* x = in + r * dim + c0;
        const int64_t len = std::min(run, dim - c0);
        const kernels::MinMax mm = Check ? kernels::minMaxCheckInline(x, len, carry) : kernels::minMaxInline(x, len);
        lo[g] = mm.lo;
        hi[g] = mm.hi;
      }
    }
    paramsOfRanges<K>(spec, lo, hi, s, m, g);
    g = 0;
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c0 = 0; c0 < dim; c0 += run, ++g) {
        const float* x = in + r * dim + c0;
        float* y = out + r * dim + c0;
        const int64_t len = std::min(run, dim - c0);
        const float sg = s[g], mg = m[g];
        for (int64_t i = 0; i < len; ++i) y[i] = quant(x[i], sg, mg);
      }
    }
  }
}

template <bool Check>
KVSCOPE_INLINE void tokenRowsNoClipAnyKind(const float* in, float* out, int64_t rows, int64_t dim, int64_t run,
                                           const QuantSpec& spec, uint32_t* carry) {
  switch (kernels::groupedKind(spec)) {
    case GroupedKind::Asym: tokenRowsNoClip<GroupedKind::Asym, Check>(in, out, rows, dim, run, spec, carry); break;
    case GroupedKind::Sym: tokenRowsNoClip<GroupedKind::Sym, Check>(in, out, rows, dim, run, spec, carry); break;
    case GroupedKind::E4m3: tokenRowsNoClip<GroupedKind::E4m3, Check>(in, out, rows, dim, run, spec, carry); break;
    case GroupedKind::E5m2: tokenRowsNoClip<GroupedKind::E5m2, Check>(in, out, rows, dim, run, spec, carry); break;
    case GroupedKind::Nf4: tokenRowsNoClip<GroupedKind::Nf4, Check>(in, out, rows, dim, run, spec, carry); break;
  }
}

KVSCOPE_SIMD_CLONES void groupedTokenRowsNoClip(float* base, int64_t rows, int64_t dim, int64_t run,
                                                const QuantSpec& spec) {
  tokenRowsNoClipAnyKind<false>(base, base, rows, dim, run, spec, nullptr);
}

// The same reading `in` and writing `out`, checking every value read; false for a non-finite one.
KVSCOPE_SIMD_CLONES bool groupedTokenRowsNoClipFrom(const float* in, float* out, int64_t rows, int64_t dim,
                                                    int64_t run, const QuantSpec& spec) {
  uint32_t carry = 0;
  tokenRowsNoClipAnyKind<true>(in, out, rows, dim, run, spec, &carry);
  return (carry & 0x80000000u) == 0;
}

// axis=token: each row of D values splits into runs of G channels.
void groupedTokenRows(float* base, int64_t rows, int64_t dim, const QuantSpec& spec) {
  const int64_t run = runLength(spec.group, dim);
  if (spec.clip.kind == Clip::Kind::None) {
    groupedTokenRowsNoClip(base, rows, dim, run, spec);
    return;
  }
  float* work = scratch(0, run);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = base + r * dim;
    for (int64_t c0 = 0; c0 < dim; c0 += run) {
      const int64_t len = std::min(run, dim - c0);
      kernels::applyGroup(spec, paramsOf(spec, row + c0, len, work), row + c0, len);
    }
  }
}

void groupedByToken(Tensor3& x, const QuantSpec& spec) {
  const int64_t rows = x.heads * x.tokens;
  const int64_t dim = x.dim;
  float* data = x.data.data();
  constexpr int64_t kRowsPerTask = 64;
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(x.size()) > kParallelThreshold)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t r0 = task * kRowsPerTask;
    groupedTokenRows(data + r0 * dim, std::min(kRowsPerTask, rows - r0), dim, spec);
  }
}

// Applies per-channel parameters to `len` rows of `dim` values (token-major, unit stride).
template <GroupedKind K>
KVSCOPE_INLINE void applyPerChannel(const QuantSpec& spec, const float* s, const float* m, float* base, int64_t len,
                     int64_t dim) {
  const ElementQuantizer<K> quant(spec);
  for (int64_t t = 0; t < len; ++t) {
    float* row = base + t * dim;
    for (int64_t d = 0; d < dim; ++d) row[d] = quant(row[d], s[d], m[d]);
  }
}

// One run of `len` tokens (rows of `dim` values, token-major) of one head, grouped per channel.
// Processed token-major: running per-channel min/max vectors instead of strided gathers
// (gathers only when clipping).
KVSCOPE_SIMD_CLONES void groupedChannelRun(float* base, int64_t len, int64_t dim, const QuantSpec& spec) {
  const GroupedKind kind = kernels::groupedKind(spec);
  float* lo = scratch(0, 4 * dim);
  float* hi = lo + dim;
  float* s = hi + dim;
  float* m = s + dim;
  if (spec.clip.kind == Clip::Kind::None) {
    std::copy(base, base + dim, lo);
    std::copy(base, base + dim, hi);
    for (int64_t t = 1; t < len; ++t) {
      const float* row = base + t * dim;
      for (int64_t d = 0; d < dim; ++d) {
        lo[d] = row[d] < lo[d] ? row[d] : lo[d];
        hi[d] = row[d] > hi[d] ? row[d] : hi[d];
      }
    }
    switch (kind) {
      case GroupedKind::Asym: paramsOfRanges<GroupedKind::Asym>(spec, lo, hi, s, m, dim); break;
      case GroupedKind::Sym: paramsOfRanges<GroupedKind::Sym>(spec, lo, hi, s, m, dim); break;
      case GroupedKind::E4m3: paramsOfRanges<GroupedKind::E4m3>(spec, lo, hi, s, m, dim); break;
      case GroupedKind::E5m2: paramsOfRanges<GroupedKind::E5m2>(spec, lo, hi, s, m, dim); break;
      case GroupedKind::Nf4: paramsOfRanges<GroupedKind::Nf4>(spec, lo, hi, s, m, dim); break;
    }
  } else {
    float* column = scratch(1, len);
    float* work = scratch(2, len);
    for (int64_t d = 0; d < dim; ++d) {
      for (int64_t t = 0; t < len; ++t) column[t] = base[t * dim + d];
      const GroupParams p = paramsOf(spec, column, len, work);
      s[d] = p.scale;
      m[d] = p.zero;
    }
  }
  switch (kind) {
    case GroupedKind::Asym: applyPerChannel<GroupedKind::Asym>(spec, s, m, base, len, dim); break;
    case GroupedKind::Sym: applyPerChannel<GroupedKind::Sym>(spec, s, m, base, len, dim); break;
    case GroupedKind::E4m3: applyPerChannel<GroupedKind::E4m3>(spec, s, m, base, len, dim); break;
    case GroupedKind::E5m2: applyPerChannel<GroupedKind::E5m2>(spec, s, m, base, len, dim); break;
    case GroupedKind::Nf4: applyPerChannel<GroupedKind::Nf4>(spec, s, m, base, len, dim); break;
  }
}

// The min and max of channels [d0, d0 + 16·Vecs) over `len` rows of `dim` values, held in
// registers across the rows; ORs the finite-check bits of every value read into *bits.
template <int Vecs>
KVSCOPE_INLINE void channelRanges(const float* in, int64_t len, int64_t dim, int64_t d0, float* lo, float* hi,
                                  simd::U16* bits) {
  using simd::F16;
  F16 l[Vecs], h[Vecs];
  simd::U16 acc{};
  for (int i = 0; i < Vecs; ++i) {
    l[i] = h[i] = simd::load16(in + d0 + 16 * i);
    acc |= simd::nonFiniteBits(l[i]);
  }
  for (int64_t t = 1; t < len; ++t) {
    for (int i = 0; i < Vecs; ++i) {
      const F16 v = simd::load16(in + t * dim + d0 + 16 * i);
      l[i] = simd::min(l[i], v);
      h[i] = simd::max(h[i], v);
      acc |= simd::nonFiniteBits(v);
    }
  }
  *bits |= acc;
  for (int i = 0; i < Vecs; ++i) {
    simd::store(lo + d0 + 16 * i, l[i]);
    simd::store(hi + d0 + 16 * i, h[i]);
  }
}

// One run of `len` tokens grouped per channel without clipping, reading `in` and writing `out`:
// the per-channel ranges (channelRanges: 64 channels at a time, so that each row gives four
// adjacent cache lines, which the hardware prefetchers follow better than one line per row;
// then 16; then one by one), checking every value read (the finite-check bits go into *carry),
// the parameters of all channels together, then the apply loop. The same groups and parameters
// as groupedChannelRun.
template <GroupedKind K>
KVSCOPE_INLINE void channelRunNoClipFrom(const float* in, float* out, int64_t len, int64_t dim, const QuantSpec& spec,
                                         uint32_t* carry) {
  float* lo = scratch(0, 4 * dim);
  float* hi = lo + dim;
  float* s = hi + dim;
  float* m = s + dim;
  simd::U16 bits{};
  int64_t d0 = 0;
  for (; d0 + 64 <= dim; d0 += 64) channelRanges<4>(in, len, dim, d0, lo, hi, &bits);
  for (; d0 + 16 <= dim; d0 += 16) channelRanges<1>(in, len, dim, d0, lo, hi, &bits);
  uint32_t rest = 0;
  for (; d0 < dim; ++d0) {
    float l = in[d0], h = l;
    for (int64_t t = 0; t < len; ++t) {
      const float v = in[t * dim + d0];
      l = v < l ? v : l;
      h = v > h ? v : h;
      rest |= simd::nonFiniteBits(v);
    }
    lo[d0] = l;
    hi[d0] = h;
  }
  for (int i = 0; i < 16; ++i) rest |= bits[i];
  *carry |= rest;
  paramsOfRanges<K>(spec, lo, hi, s, m, dim);
  const ElementQuantizer<K> quant(spec);
  for (int64_t t = 0; t < len; ++t) {
    const float* x = in + t * dim;
    float* y = out + t * dim;
    for (int64_t d = 0; d < dim; ++d) y[d] = quant(x[d], s[d], m[d]);
  }
}

// channelRunNoClipFrom for every run of a piece of `rows` rows (runs count from its first row, as
// in quantizeFormatPiece); false for a non-finite value.
KVSCOPE_SIMD_CLONES bool groupedChannelRunsNoClipFrom(const float* in, float* out, int64_t rows, int64_t dim,
                                                      const QuantSpec& spec) {
  const int64_t run = runLength(spec.group, rows);
  uint32_t carry = 0;
  for (int64_t t0 = 0; t0 < rows; t0 += run) {
    const int64_t len = std::min(run, rows - t0);
    const float* x = in + t0 * dim;
    float* y = out + t0 * dim;
    switch (kernels::groupedKind(spec)) {
      case GroupedKind::Asym: channelRunNoClipFrom<GroupedKind::Asym>(x, y, len, dim, spec, &carry); break;
      case GroupedKind::Sym: channelRunNoClipFrom<GroupedKind::Sym>(x, y, len, dim, spec, &carry); break;
      case GroupedKind::E4m3: channelRunNoClipFrom<GroupedKind::E4m3>(x, y, len, dim, spec, &carry); break;
      case GroupedKind::E5m2: channelRunNoClipFrom<GroupedKind::E5m2>(x, y, len, dim, spec, &carry); break;
      case GroupedKind::Nf4: channelRunNoClipFrom<GroupedKind::Nf4>(x, y, len, dim, spec, &carry); break;
    }
  }
  return (carry & 0x80000000u) == 0;
}

// axis=channel: each channel of a head splits into runs of G tokens.
void groupedByChannel(Tensor3& x, const QuantSpec& spec) {
  const int64_t dim = x.dim;
  const int64_t tokens = x.tokens;
  const int64_t run = runLength(spec.group, tokens);
  if (tokens == 0 || dim == 0) return;
  const int64_t runs = (tokens + run - 1) / run;
  const int64_t tasks = x.heads * runs;
#pragma omp parallel for schedule(dynamic, 1) if (static_cast<int64_t>(x.size()) > kParallelThreshold)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t h = task / runs;
    const int64_t t0 = (task % runs) * run;
    groupedChannelRun(x.row(h, t0), std::min(run, tokens - t0), dim, spec);
  }
}

// axis=tensor / head: one large contiguous group; min/max and the apply loop split across threads.
void groupedContiguous(float* g, int64_t n, const QuantSpec& spec) {
  if (n == 0) return;
  const bool parallel = n > kParallelThreshold;
  GroupParams params;
  if (spec.clip.kind == Clip::Kind::None) {
    constexpr int64_t kChunk = int64_t{1} << 15;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<kernels::MinMax> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t c = 0; c < chunks; ++c) {
      parts[static_cast<size_t>(c)] = kernels::minMax(g + c * kChunk, std::min(kChunk, n - c * kChunk));
    }
    kernels::MinMax all = parts[0];
    for (const auto& p : parts) {
      all.lo = p.lo < all.lo ? p.lo : all.lo;
      all.hi = p.hi > all.hi ? p.hi : all.hi;
    }
    params = paramsOfUnclippedRange(spec, all.lo, all.hi);
  } else {
    std::vector<float> work(static_cast<size_t>(n));
    params = paramsOf(spec, g, n, work.data());
  }
  constexpr int64_t kApplyChunk = int64_t{1} << 14;
  const int64_t chunks = (n + kApplyChunk - 1) / kApplyChunk;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c) {
    kernels::applyGroup(spec, params, g + c * kApplyChunk, std::min(kApplyChunk, n - c * kApplyChunk));
  }
}

void quantizeGrouped(Tensor3& x, const QuantSpec& spec) {
  switch (spec.axis) {
    case Axis::Token: groupedByToken(x, spec); break;
    case Axis::Channel: groupedByChannel(x, spec); break;
    case Axis::Head: {
      const int64_t n = x.tokens * x.dim;
      for (int64_t h = 0; h < x.heads; ++h) groupedContiguous(x.data.data() + h * n, n, spec);
      break;
    }
    case Axis::Tensor: groupedContiguous(x.data.data(), static_cast<int64_t>(x.size()), spec); break;
  }
}

// ---- Block formats ----------------------------------------------------------------------------

/// A row's tensor scale (FormatInfo::tensorScale; nvfp4: fp32(a/2688) from the layer tensor's
/// max |x|, §2), or `gscale=S` (an engine's per-layer k_scale, 1 when uncalibrated).
float tensorScaleOf(const QuantSpec& spec, float maxAbs) {
  return spec.globalScale > 0 ? static_cast<float>(spec.globalScale) : formatInfo(spec.format).tensorScale(maxAbs);
}

float tensorMaxAbs(const Tensor3& x) {
  const float* p = x.data.data();
  const auto n = static_cast<int64_t>(x.size());
  if (n == 0) return 0.0f;
  constexpr int64_t kChunk = int64_t{1} << 15;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<float> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t c = 0; c < chunks; ++c) {
    const kernels::MinMax mm = kernels::minMax(p + c * kChunk, std::min(kChunk, n - c * kChunk));
    parts[static_cast<size_t>(c)] = std::max(std::fabs(mm.lo), std::fabs(mm.hi));
  }
  return *std::max_element(parts.begin(), parts.end());
}

void quantizeBlocks(Tensor3& x, const QuantSpec& spec) {
  const FormatInfo& info = formatInfo(spec.format);
  const kernels::BlockKernel kernel = info.blockKernel;
  const int64_t block = info.blockSize;
  const float g = info.tensorScale ? tensorScaleOf(spec, tensorMaxAbs(x)) : 0.0f;
  const bool parallel = static_cast<int64_t>(x.size()) > kParallelThreshold;
  if (x.dim % block == 0) {
    // Blocks never straddle heads: each head row holds whole blocks.
    // Runs of 256 blocks, so each kernel call batches.
    constexpr int64_t kRun = 256;
    const int64_t blocks = static_cast<int64_t>(x.size()) / block;
    const int64_t runs = (blocks + kRun - 1) / kRun;
    float* data = x.data.data();
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < runs; ++r) kernel(data + r * kRun * block, std::min(kRun, blocks - r * kRun), g);
    return;
  }
  // Gather each token row [head, channel], quantize its blocks, scatter back.
  const int64_t rowLength = x.heads * x.dim;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < x.tokens; ++t) {
    float* row = scratch(0, rowLength);
    for (int64_t h = 0; h < x.heads; ++h) std::copy_n(x.row(h, t), x.dim, row + h * x.dim);
    kernel(row, rowLength / block, g);
    for (int64_t h = 0; h < x.heads; ++h) std::copy_n(row + h * x.dim, x.dim, x.row(h, t));
  }
}

// ---- Elementwise ------------------------------------------------------------------------------

template <float (*Round)(float)>
void roundEach(Tensor3& x) {
  float* p = x.data.data();
  const auto n = static_cast<int64_t>(x.size());
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) p[i] = Round(p[i]);
}

// ---- Vector formats (§11) ----------------------------------------------------------------------

// Runs of 256 token vectors of x in parallel (each vector is independent, so the split does not
// change a bit): rows(base, count) quantizes `count` vectors at base.
template <typename Rows>
void forEachVectorRun(Tensor3& x, Rows rows) {
  const int64_t total = x.heads * x.tokens;
  constexpr int64_t kRun = 256;
  const int64_t runs = (total + kRun - 1) / kRun;
  float* data = x.data.data();
#pragma omp parallel for schedule(dynamic, 4) if (static_cast<int64_t>(x.size()) > kParallelThreshold)
  for (int64_t r = 0; r < runs; ++r) rows(data + r * kRun * x.dim, std::min(kRun, total - r * kRun));
}

}  // namespace

Status quantizeFormatInPlace(Tensor3& x, const QuantSpec& spec) {
  return quantizeFormatWith(formatInfo(spec.format), x, spec);
}

Status quantizeFormatWith(const FormatInfo& row, Tensor3& x, const QuantSpec& spec) {
  KVS_RETURN_IF_ERROR(checkFormatSpec(x, spec));
  if (x.size() == 0) return Status::ok();
  // The integer zero point and the engines' rounding modes have no fast kernel, nor has a row
  // without quantizeFast: the scalar reference is what runs.
  if (usesReferenceQuantizer(spec) || row.quantizeFast == nullptr) return row.quantizeReference(x, spec);
  return row.quantizeFast(x, spec);
}

namespace format_ops {

Status groupedFast(Tensor3& x, const QuantSpec& spec) {
  quantizeGrouped(x, spec);
  return Status::ok();
}

Status blocksFast(Tensor3& x, const QuantSpec& spec) {
  if (formatInfo(spec.format).blockKernel == nullptr) return formatInfo(spec.format).quantizeReference(x, spec);
  quantizeBlocks(x, spec);
  return Status::ok();
}

Status fp16Fast(Tensor3& x, const QuantSpec& /*spec*/) {
  roundEach<&fp::roundFp16>(x);
  return Status::ok();
}

Status bf16Fast(Tensor3& x, const QuantSpec& /*spec*/) {
  roundEach<&fp::roundBf16>(x);
  return Status::ok();
}

Status lmdeployFast(Tensor3& x, const QuantSpec& spec) {
  const auto dim = static_cast<int>(x.dim);
  forEachVectorRun(x, [&](float* base, int64_t count) {
    lmdeploy_tq::quantizeRows(spec.format, base, count, dim, spec.bits, spec.scale);
  });
  return Status::ok();
}

Status tqFast(Tensor3& x, const QuantSpec& spec) {
  const auto dim = static_cast<int>(x.dim);
  (void)codebook::sphereCodebook(dim, spec.bits);  // built once, before the threads need it
  forEachVectorRun(x, [&](float* base, int64_t count) { codebook::tqRows(base, count, dim, spec.bits, spec.scale); });
  return Status::ok();
}

Status tqpFast(Tensor3& x, const QuantSpec& spec) {
  const auto dim = static_cast<int>(x.dim);
  (void)codebook::qjlMatrix(dim, spec.seed);  // built once, before the threads need them
  (void)codebook::sphereCodebook(dim, spec.bits - 1);
  forEachVectorRun(x, [&](float* base, int64_t count) {
    codebook::tqpRows(base, count, dim, spec.bits, spec.scale, spec.seed);
  });
  return Status::ok();
}

Status tqgFast(Tensor3& x, const QuantSpec& spec) {
  const auto dim = static_cast<int>(x.dim);
  (void)codebook::gaussianCodebook(dim, spec.bits);
  forEachVectorRun(x, [&](float* base, int64_t count) { codebook::tqgRows(base, count, dim, spec.bits, spec.scale); });
  return Status::ok();
}

Status nuqFast(Tensor3& x, const QuantSpec& spec) {
  codebook::quantizeNuqTensor(x, spec);
  return Status::ok();
}

Status hqqFast(Tensor3& x, const QuantSpec& spec) {
  (void)hqq::quantizeTensor(x.data.data(), hqqLayout(x, spec), spec.bits, spec.scale);
  return Status::ok();
}

}  // namespace format_ops

namespace {

KVSCOPE_SIMD_CLONES void roundFp16Run(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = fp::roundFp16(x[i]);
}

KVSCOPE_SIMD_CLONES void roundBf16Run(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = fp::roundBf16(x[i]);
}

}  // namespace

namespace format_ops {

void fp16Piece(float* base, int64_t rows, int64_t dim, const QuantSpec& /*spec*/, const TensorContext& /*context*/) {
  roundFp16Run(base, rows * dim);
}

void bf16Piece(float* base, int64_t rows, int64_t dim, const QuantSpec& /*spec*/, const TensorContext& /*context*/) {
  roundBf16Run(base, rows * dim);
}

void unchangedPiece(float* /*base*/, int64_t /*rows*/, int64_t /*dim*/, const QuantSpec& /*spec*/,
                    const TensorContext& /*context*/) {}

void blocksPiece(float* base, int64_t rows, int64_t dim, const QuantSpec& spec, const TensorContext& context) {
  const FormatInfo& info = formatInfo(spec.format);
  const int64_t blocks = rows * dim / info.blockSize;
  if (info.blockKernel == nullptr) {  // a row without a fast kernel: its block reference, as blocksFast
    for (int64_t b = 0; b < blocks; ++b) info.blockReference(base + b * info.blockSize, context.nvfp4Scale);
    return;
  }
  info.blockKernel(base, blocks, context.nvfp4Scale);
}

void groupedPiece(float* base, int64_t rows, int64_t dim, const QuantSpec& spec, const TensorContext& context) {
  const int64_t n = rows * dim;
  if (spec.axis == Axis::Tensor) {
    kernels::applyGroup(spec, GroupParams{context.scale, context.zero}, base, n);
    return;
  }
  if (spec.axis == Axis::Token) {
    groupedTokenRows(base, rows, dim, spec);
    return;
  }
  // Channel runs count from the piece's first row; a piece shorter than G is the last run.
  const int64_t run = runLength(spec.group, rows);
  for (int64_t t0 = 0; t0 < rows; t0 += run) {
    groupedChannelRun(base + t0 * dim, std::min(run, rows - t0), dim, spec);
  }
}

}  // namespace format_ops

int64_t formatPieceRows(const QuantSpec& spec, int64_t tokens, int64_t dim) {
  const FormatInfo& info = formatInfo(spec.format);
  // The reference quantizes the whole tensor; the codebook formats have no piece (nuq's codebook
  // needs the whole tensor, tq/tqp rotate every vector and are not written for pieces).
  if (usesReferenceQuantizer(spec) || info.quantizeFast == nullptr || info.quantizePiece == nullptr) return 0;
  if (!info.grouped) return info.blockSize == 0 || dim % info.blockSize == 0 ? 1 : 0;
  switch (spec.axis) {
    case Axis::Token: return 1;
    case Axis::Channel: return std::max<int64_t>(runLength(spec.group, tokens), 1);
    case Axis::Tensor: return spec.clip.kind == Clip::Kind::None ? 1 : 0;
    case Axis::Head: break;
  }
  return 0;
}

bool formatNeedsTensorRange(const QuantSpec& spec) {
  const FormatInfo& info = formatInfo(spec.format);
  if (info.tensorScale != nullptr) return true;
  return info.grouped && info.levels != GroupedLevels::None && spec.axis == Axis::Tensor &&
         spec.clip.kind == Clip::Kind::None;
}

TensorContext formatTensorContext(const QuantSpec& spec, float lo, float hi) {
  TensorContext c;
  if (formatInfo(spec.format).tensorScale != nullptr) {
    c.nvfp4Scale = tensorScaleOf(spec, std::max(std::fabs(lo), std::fabs(hi)));
  } else if (formatNeedsTensorRange(spec)) {
    const GroupParams p = paramsOfUnclippedRange(spec, lo, hi);
    c.scale = p.scale;
    c.zero = p.zero;
  }
  return c;
}

void quantizeFormatPiece(float* base, int64_t rows, int64_t dim, const QuantSpec& spec,
                         const TensorContext& context) {
  formatInfo(spec.format).quantizePiece(base, rows, dim, spec, context);
}

bool formatPieceReadsSource(const QuantSpec& spec) {
  const FormatInfo& info = formatInfo(spec.format);
  return !usesReferenceQuantizer(spec) && info.quantizeFast != nullptr && info.grouped &&
         info.levels != GroupedLevels::None && (spec.axis == Axis::Token || spec.axis == Axis::Channel) &&
         spec.clip.kind == Clip::Kind::None;
}

bool quantizeFormatPieceFrom(const float* in, float* out, int64_t rows, int64_t dim, const QuantSpec& spec) {
  if (spec.axis == Axis::Channel) return groupedChannelRunsNoClipFrom(in, out, rows, dim, spec);
  return groupedTokenRowsNoClipFrom(in, out, rows, dim, runLength(spec.group, dim), spec);
}

int64_t groupCount(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim) {
  const FormatInfo& info = formatInfo(spec.format);
  if (heads <= 0 || tokens <= 0 || dim <= 0 || info.groupCount == nullptr) return 0;
  return info.groupCount(spec, heads, tokens, dim);
}

namespace format_ops {

int64_t groupsPerBlock(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim) {
  return heads * tokens * dim / formatInfo(spec.format).blockSize;
}

// One norm (tqp: and a residual norm) per vector.
int64_t groupsPerVector(const QuantSpec& /*spec*/, int64_t heads, int64_t tokens, int64_t /*dim*/) {
  return heads * tokens;
}

int64_t groupsFlat(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim) {
  return spec.group > 0 ? heads * tokens * dim / spec.group : 0;
}

int64_t groupsByAxis(const QuantSpec& spec, int64_t heads, int64_t tokens, int64_t dim) {
  switch (spec.axis) {
    case Axis::Tensor: return 1;
    case Axis::Head: return heads;
    case Axis::Token: {
      const int64_t run = runLength(spec.group, dim);
      return heads * tokens * ((dim + run - 1) / run);
    }
    case Axis::Channel: {
      const int64_t run = runLength(spec.group, tokens);
      return heads * dim * ((tokens + run - 1) / run);
    }
  }
  return 0;
}

}  // namespace format_ops

}  // namespace kvscope

// ---- describeGroup ------------------------------------------------------------------------------

namespace kvscope {
namespace {

int countDistinct(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return static_cast<int>(std::unique(v.begin(), v.end()) - v.begin());
}

// Distinct reconstructions among `values`, by marking which of the (sorted) levels they hit; a
// whole-tensor group has millions of values but at most a few hundred levels.
int countLevelsUsed(const std::vector<float>& values, const std::vector<double>& levels) {
  std::vector<char> hit(levels.size(), 0);
  int offGrid = 0;
  for (float v : values) {
    const auto it = std::lower_bound(levels.begin(), levels.end(), static_cast<double>(v));
    if (it != levels.end() && *it == static_cast<double>(v)) {
      hit[static_cast<size_t>(it - levels.begin())] = 1;
    } else {
      ++offGrid;  // not expected; counted rather than hidden
    }
  }
  return static_cast<int>(std::count(hit.begin(), hit.end(), 1)) + (offGrid > 0 ? 1 : 0);
}

void sortLevels(std::vector<double>& levels) {
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
}

// The positive finite values of an fp8 format, ascending (codes 1 .. max).
std::vector<float> fp8Magnitudes(FormatId format) {
  std::vector<float> m;
  for (uint32_t c = 1; c < 0x80u; ++c) {
    const float v = formatInfo(format).levels == GroupedLevels::E4m3 ? fp::e4m3Value(static_cast<uint8_t>(c))
                                                : fp::e5m2Value(static_cast<uint8_t>(c));
    if (std::isfinite(v)) m.push_back(v);
  }
  return m;
}

// The values of the group that holds element (head, token, channel) of a grouped spec.
std::vector<float> groupMembers(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                int64_t channel) {
  std::vector<float> values;
  switch (spec.axis) {
    case Axis::Tensor: values = x.data; break;
    case Axis::Head:
      values.assign(x.row(head, 0), x.row(head, 0) + x.tokens * x.dim);
      break;
    case Axis::Token: {
      const int64_t run = runLength(spec.group, x.dim);
      const int64_t c0 = channel / run * run;
      const int64_t len = std::min(run, x.dim - c0);
      values.assign(x.row(head, token) + c0, x.row(head, token) + c0 + len);
      break;
    }
    case Axis::Channel: {
      const int64_t run = runLength(spec.group, x.tokens);
      const int64_t t0 = token / run * run;
      const int64_t len = std::min(run, x.tokens - t0);
      for (int64_t t = t0; t < t0 + len; ++t) values.push_back(x.at(head, t, channel));
      break;
    }
  }
  return values;
}

Expected<GroupDetail> groupedDetail(const Tensor3& x, const QuantSpec& spec, int64_t head,
                                    int64_t token, int64_t channel) {
  std::vector<float> values = groupMembers(x, spec, head, token, channel);
  const auto n = static_cast<int64_t>(values.size());
  GroupDetail g;
  g.size = n;
  const kernels::MinMax mm = kernels::minMax(values.data(), n);
  g.lo = mm.lo;
  g.hi = mm.hi;
  std::vector<float> work(values.size());
  const kernels::ClipRange r = kernels::clippedRange(spec, values.data(), n, work.data());
  g.clipLo = r.lo;
  g.clipHi = r.hi;
  if (spec.zeroInt || spec.zeroPacked) {
    // The integer zero point: levels (q − z)·s, reconstructions by the reference.
    const reference::Params rp = reference::groupParams(spec, reference::Range{r.lo, r.hi});
    g.scale = rp.scale;
    g.zero = -static_cast<double>(rp.intZero) * rp.scale;
    for (int64_t i = 0; i < n; ++i) work[static_cast<size_t>(i)] = reference::quantizeValue(spec, rp, values[static_cast<size_t>(i)]);
    const int top = (1 << spec.bits) - 1;
    const float levelScale = spec.zeroPacked ? reference::packedScale(rp.scale) : rp.scale;
    for (int q = 0; q <= top; ++q) g.levels.push_back(static_cast<double>((static_cast<float>(q) - rp.intZero) * levelScale));
    g.codesTotal = top + 1;
    if (rp.scale == 0.0f) g.levels = {0.0};
    sortLevels(g.levels);
    g.codesUsed = countLevelsUsed(work, g.levels);
    return g;
  }
  GroupParams p = kernels::paramsFromRange(spec, r.lo, r.hi);
  if (spec.codesFp32 || spec.codesMeta) {
    // codes=fp32|meta: the stored scale and min are the reference's.
    const reference::Params rp = reference::groupParams(spec, reference::Range{r.lo, r.hi});
    p.scale = rp.scale;
    p.zero = rp.zero;
  }
  g.scale = p.scale;
  g.zero = p.zero;
  kernels::applyGroupTo(spec, p, values.data(), work.data(), n);
  if (spec.rounding != Rounding::Away || spec.codesFp32 || spec.codesMeta) {
    // The same codes; the reference decides which one each value takes (round=, codes=).
    const reference::Params rp = reference::groupParams(spec, reference::Range{r.lo, r.hi});
    for (int64_t i = 0; i < n; ++i) work[static_cast<size_t>(i)] = reference::quantizeValue(spec, rp, values[static_cast<size_t>(i)]);
  }
  const double s = p.scale;
  switch (kernels::groupedKind(spec)) {
    case GroupedKind::Asym: {
      const int top = (1 << spec.bits) - 1;
      for (int q = 0; q <= top; ++q) {
        // codes=meta reads back in the metadata type: T(T(q·s) + m).
        g.levels.push_back(spec.codesMeta ? fp::metaRound(fp::metaRound(double{p.scale} * q, spec.scale) + double{p.zero},
                                                          spec.scale)
                                          : static_cast<float>(q) * p.scale + p.zero);
      }
      g.codesTotal = top + 1;
      break;
    }
    case GroupedKind::Sym: {
      const int qmax = (1 << (spec.bits - 1)) - 1;
      for (int q = -qmax; q <= qmax; ++q) g.levels.push_back(static_cast<float>(q) * p.scale);
      g.codesTotal = 1 << spec.bits;
      break;
    }
    case GroupedKind::E4m3:
    case GroupedKind::E5m2: {
      // Only the levels the clipped range can reach: up to the level that a' itself maps to.
      const float top = kernels::groupedKind(spec) == GroupedKind::E4m3
                            ? kernels::quantE4m3(static_cast<float>(r.hi), p.scale)
                            : kernels::quantE5m2(static_cast<float>(r.hi), p.scale);
      g.levels.push_back(0.0);
      for (float m : fp8Magnitudes(spec.format)) {
        const float level = m * p.scale;
        if (level > top) break;
        g.levels.push_back(level);
        g.levels.push_back(-static_cast<double>(level));
      }
      g.codesTotal = 256;
      break;
    }
    case GroupedKind::Nf4:
      for (float c : kernels::kNf4Codebook) g.levels.push_back(static_cast<double>(c * p.scale));
      g.codesTotal = 16;
      break;
  }
  if (s == 0.0) g.levels = {static_cast<double>(p.zero)};
  sortLevels(g.levels);
  g.codesUsed = countLevelsUsed(work, g.levels);
  return g;
}

// nuq: the group as nf4 groups it, with the layer tensor's k-means codebook times its scale.
Expected<GroupDetail> nuqDetail(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                int64_t channel) {
  const QuantSpec grouping = codebook::nuqGrouping(spec);
  auto g = groupedDetail(x, grouping, head, token, channel);
  if (!g) return g;
  Tensor3 q = x;
  const codebook::NuqCodebook book = codebook::quantizeNuqTensor(q, spec);
  const double s = g->scale;
  g->levels.clear();
  for (float c : book.levels) g->levels.push_back(static_cast<double>(c * g->scale));
  if (s == 0.0) g->levels = {0.0};
  sortLevels(g->levels);
  g->levels.erase(std::unique(g->levels.begin(), g->levels.end()), g->levels.end());
  g->codesTotal = 1 << spec.bits;
  std::vector<float> recon = groupMembers(q, grouping, head, token, channel);
  g->codesUsed = countLevelsUsed(recon, g->levels);
  return g;
}

// The vector formats' group: the token's rotated vector, its range.
GroupDetail vectorGroup(const Tensor3& x, int64_t head, int64_t token) {
  GroupDetail g;
  g.size = x.dim;
  const kernels::MinMax mm = kernels::minMax(x.row(head, token), x.dim);
  g.lo = g.clipLo = mm.lo;
  g.hi = g.clipHi = mm.hi;
  return g;
}

// The codebook's bits: bits − 1 for the formats whose last bit is the residual's sign.
int codebookBitsOf(const QuantSpec& spec) { return spec.bits - formatInfo(spec.format).codebookBitsOffset; }

// lmtq, lmqjl: LMDeploy's norm (with its 1e-8) of the rotated vector in the model dtype; levels:
// its table times it.
Expected<GroupDetail> lmdeployDetail(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token) {
  GroupDetail g = vectorGroup(x, head, token);
  const auto dim = static_cast<int>(x.dim);
  std::vector<float> values(x.row(head, token), x.row(head, token) + x.dim);
  std::vector<float> y = values;
  for (float& v : y) v = fp::metaRound(v, spec.scale);
  const auto unrounded = static_cast<float>(std::sqrt(codebook::sumOfSquares(y.data(), x.dim) + 1e-8));
  const float n = fp::metaRound(unrounded, spec.scale);  // as lmdeploy_tq rounds it: float, then meta
  g.scale = n;
  const int bits = lmdeploy_tq::codebookBits(spec);
  for (float c : lmdeploy_tq::book(dim, bits).centroids) g.levels.push_back(fp::metaRound(c * n, spec.scale));
  sortLevels(g.levels);
  g.codesTotal = 1 << bits;
  lmdeploy_tq::quantizeRows(FormatId::Lmtq, values.data(), 1, dim, bits, spec.scale);
  g.codesUsed = countLevelsUsed(values, g.levels);
  return g;
}

// tqg: vLLM's codebook after norm correction: this vector's levels are meta(n)·c_k/√(Σc²), the
// factor fixed by its own codes (the arithmetic of tqgRows, so the reconstructions are levels).
Expected<GroupDetail> tqgDetail(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token) {
  GroupDetail g = vectorGroup(x, head, token);
  const auto dim = static_cast<int>(x.dim);
  const int bits = codebookBitsOf(spec);
  const codebook::GaussianCodebook& gauss = codebook::gaussianCodebook(dim, bits);
  const float* original = x.row(head, token);
  const auto raw = static_cast<float>(std::sqrt(codebook::sumOfSquares(original, x.dim)));
  std::vector<int> seen(static_cast<size_t>(1 << bits), 0);
  double c2 = 0;
  for (int64_t j = 0; j < x.dim; ++j) {
    const int k = codebook::gaussianCode(gauss, original[j] / (raw + 1e-8f));
    seen[static_cast<size_t>(k)] = 1;
    const double c = gauss.levels[static_cast<size_t>(k)];
    c2 += c * c;
  }
  const float inv = 1.0f / std::sqrt(static_cast<float>(c2) + 1e-16f);
  const float stored = fp::metaRound(raw, spec.scale);
  g.scale = stored;
  for (float c : gauss.levels) g.levels.push_back(static_cast<double>(stored * (c * inv)));
  if (stored == 0.0f) g.levels = {0.0};
  sortLevels(g.levels);
  g.codesTotal = 1 << bits;
  g.codesUsed = 0;
  for (int used : seen) g.codesUsed += used;
  return g;
}

// tq, tqp: the group is the token's rotated vector; its levels are the stored norm times the
// Lloyd–Max codebook (tqp: of its tq<b−1> stage, before the QJL correction moves values off it).
Expected<GroupDetail> sphereDetail(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token) {
  GroupDetail g = vectorGroup(x, head, token);
  const auto dim = static_cast<int>(x.dim);
  std::vector<float> values(x.row(head, token), x.row(head, token) + x.dim);
  const float n = fp::metaRound(std::sqrt(codebook::sumOfSquares(values.data(), x.dim)), spec.scale);
  g.scale = n;
  const int bits = codebookBitsOf(spec);
  const codebook::SphereCodebook& book = codebook::sphereCodebook(dim, bits);
  for (float c : book.levels) g.levels.push_back(static_cast<double>(c * n));
  if (n == 0.0f) g.levels = {0.0};
  sortLevels(g.levels);
  g.codesTotal = 1 << bits;
  codebook::tqRows(values.data(), 1, dim, bits, spec.scale);
  g.codesUsed = countLevelsUsed(values, g.levels);
  return g;
}

// hqq: the group of HQQ's layout that holds the element, after the optimizer ran on the whole
// tensor; its levels are (q − zero)·scale for every code, as stored.
Expected<GroupDetail> hqqDetail(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                int64_t channel) {
  const hqq::Layout layout = hqqLayout(x, spec);
  const int64_t flat = (head * x.tokens + token) * x.dim + channel;
  const int64_t g = layout.axis0 ? flat % layout.groups() : flat / layout.group;
  Tensor3 q = x;
  const hqq::Result r = hqq::quantizeTensor(q.data.data(), layout, spec.bits, spec.scale);
  GroupDetail d;
  d.size = layout.group;
  std::vector<float> values, recon;
  for (int64_t k = 0; k < layout.group; ++k) {
    values.push_back(x.data[static_cast<size_t>(layout.at(g, k))]);
    recon.push_back(q.data[static_cast<size_t>(layout.at(g, k))]);
  }
  const kernels::MinMax mm = kernels::minMax(values.data(), layout.group);
  d.lo = d.clipLo = mm.lo;
  d.hi = d.clipHi = mm.hi;
  d.scale = r.scale[static_cast<size_t>(g)];
  d.zero = r.zero[static_cast<size_t>(g)];
  const int codes = 1 << spec.bits;
  for (int c = 0; c < codes; ++c) {
    d.levels.push_back(fp::metaRound(fp::metaRound(static_cast<float>(c) - static_cast<float>(d.zero), spec.scale) *
                                         static_cast<float>(d.scale),
                                     spec.scale));
  }
  sortLevels(d.levels);
  d.codesTotal = codes;
  d.codesUsed = countLevelsUsed(recon, d.levels);
  return d;
}

Expected<GroupDetail> blockDetail(const Tensor3& x, const QuantSpec& spec, int64_t head,
                                  int64_t token, int64_t channel) {
  const FormatInfo& info = formatInfo(spec.format);
  const int64_t block = info.blockSize;
  const int64_t position = head * x.dim + channel;  // in the token row [head, channel]
  const int64_t start = position / block * block;
  std::vector<float> values(static_cast<size_t>(block));
  for (int64_t i = 0; i < block; ++i) {
    const int64_t p = start + i;
    values[static_cast<size_t>(i)] = x.at(p / x.dim, token, p % x.dim);
  }
  const float g = info.tensorScale ? tensorScaleOf(spec, tensorMaxAbs(x)) : 0.0f;
  GroupDetail d;
  d.size = block;
  const kernels::MinMax mm = kernels::minMax(values.data(), block);
  d.lo = d.clipLo = mm.lo;
  d.hi = d.clipHi = mm.hi;
  float zero = 0.0f;
  float scale = info.blockScale(values.data(), g, &zero);
  std::vector<float> q = values;
  if (spec.fourOverSix) {
    // 4over6: the block's scale is max/4's when that reconstructs better.
    if (reference::nvfp4FourOverSix(q.data(), g)) {
      scale = reference::e4m3(std::max(std::fabs(mm.lo), std::fabs(mm.hi)) / (4.0f * g)) * g;
    }
  } else if (info.blockKernel != nullptr) {
    info.blockKernel(q.data(), 1, g);
  } else {
    info.blockReference(q.data(), g);
  }
  d.scale = scale;
  d.zero = zero;
  d.codesUsed = countDistinct(q);
  // Every code's level: its value times the scale (e2m1, iq4_nl's table), or the code times the
  // scale plus the min (the ggml integer blocks).
  for (int c = info.blockCodeLo; c <= info.blockCodeHi; ++c) {
    d.levels.push_back(info.blockCodeValue != nullptr ? info.blockCodeValue(c) * scale
                                                      : static_cast<float>(c) * scale + zero);
  }
  d.codesTotal = 1 << static_cast<int>(info.payloadBits);
  sortLevels(d.levels);
  return d;
}

}  // namespace

Expected<GroupDetail> describeGroup(const Tensor3& x, const QuantSpec& spec, int64_t head,
                                    int64_t token, int64_t channel) {
  KVS_RETURN_IF_ERROR(checkFormatSpec(x, spec));
  if (head < 0 || head >= x.heads || token < 0 || token >= x.tokens || channel < 0 || channel >= x.dim) {
    return Status::invalidArgument("element (head " + std::to_string(head) + ", token " +
                                   std::to_string(token) + ", channel " + std::to_string(channel) +
                                   ") is outside the quantized tensor [" + std::to_string(x.heads) +
                                   ", " + std::to_string(x.tokens) + ", " + std::to_string(x.dim) + "]");
  }
  return formatInfo(spec.format).describeGroup(x, spec, head, token, channel);
}

namespace format_ops {

Expected<GroupDetail> describeGrouped(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                      int64_t channel) {
  return groupedDetail(x, spec, head, token, channel);
}

Expected<GroupDetail> describeBlock(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                    int64_t channel) {
  return blockDetail(x, spec, head, token, channel);
}

Expected<GroupDetail> describeSphere(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                     int64_t /*channel*/) {
  return sphereDetail(x, spec, head, token);
}

Expected<GroupDetail> describeTqg(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                  int64_t /*channel*/) {
  return tqgDetail(x, spec, head, token);
}

Expected<GroupDetail> describeLmdeploy(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                       int64_t /*channel*/) {
  return lmdeployDetail(x, spec, head, token);
}

Expected<GroupDetail> describeNuq(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                  int64_t channel) {
  return nuqDetail(x, spec, head, token, channel);
}

Expected<GroupDetail> describeHqq(const Tensor3& x, const QuantSpec& spec, int64_t head, int64_t token,
                                  int64_t channel) {
  return hqqDetail(x, spec, head, token, channel);
}

namespace {
// No groups: the element alone, its one reconstruction as the only level.
GroupDetail elementDetail(float v, float r, int codesTotal) {
  GroupDetail d;
  d.size = 1;
  d.lo = d.hi = d.clipLo = d.clipHi = v;
  d.levels = {r};
  d.codesUsed = 1;
  d.codesTotal = codesTotal;
  return d;
}
}  // namespace

Expected<GroupDetail> describeFp16(const Tensor3& x, const QuantSpec& /*spec*/, int64_t head, int64_t token,
                                   int64_t channel) {
  const float v = x.at(head, token, channel);
  return elementDetail(v, fp::roundFp16(v), 65536);
}

Expected<GroupDetail> describeBf16(const Tensor3& x, const QuantSpec& /*spec*/, int64_t head, int64_t token,
                                   int64_t channel) {
  const float v = x.at(head, token, channel);
  return elementDetail(v, fp::roundBf16(v), 65536);
}

Expected<GroupDetail> describeExact(const Tensor3& x, const QuantSpec& /*spec*/, int64_t head, int64_t token,
                                    int64_t channel) {
  const float v = x.at(head, token, channel);
  return elementDetail(v, v, 0);
}

}  // namespace format_ops

}  // namespace kvscope
