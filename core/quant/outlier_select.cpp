// SPDX-License-Identifier: GPL-3.0-or-later
// Outlier selection (quantization.md §1 step 4): a radix select on magnitude keys, and the
// candidate collector of the fast strategy's first pass (vector clones, or AVX-512 compress
// where the CPU has it: core/util/simd.h decides, core/util/simd_avx512.h holds the intrinsics).
#include "core/quant/outlier_select.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/util/simd.h"
#include "core/util/simd_avx512.h"
#include "core/util/small_float.h"


namespace kvscope {

using fp::magnitudeKey;

int64_t outlierCount(double fraction, int64_t n) {
  if (fraction <= 0 || n <= 0) return 0;
  const auto k = static_cast<int64_t>(std::ceil(fraction * static_cast<double>(n)));
  return std::min(k, n);
}

// Radix select on magnitude keys: for finite floats, the bit patterns of non-negative values
// order like the values. A histogram of the upper 16 bits finds the bucket of the count-th
// largest key, and a selection among that bucket's keys the key itself, without sorting or
// allocating per element (a 32k-token layer holds millions per head). 1 ≤ count ≤ n.
KeyRank countthLargestMagnitude(const float* values, int64_t n, int64_t count) {
  auto key = [values](int64_t i) { return magnitudeKey(values[i]); };
  // One histogram per thread, all zeros between calls: each call clears only the buckets its
  // keys span. (A fresh one per call, or clearing and walking all 65536 buckets, cost more than
  // the passes on the few candidates of the fast strategy.)
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
  const KeyRank t = countthLargestMagnitude(values, n, count);
  // Everything above the threshold, then ties at it by ascending index (§1: lower index first),
  // without a branch per element: near the threshold (the fast strategy's candidates are)
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

std::vector<int64_t> selectOutliers(const float* values, int64_t n, int64_t count) {
  std::vector<int64_t> picked;
  selectOutliersByIndexInto(values, n, count, picked);
  auto key = [values](int64_t i) { return magnitudeKey(values[i]); };
  std::sort(picked.begin(), picked.end(), [&](int64_t a, int64_t b) {
    const uint32_t ka = key(a), kb = key(b);
    return ka != kb ? ka > kb : a < b;
  });
  return picked;
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
/// collectAtLeastCloned with AVX-512, without a branch per value: the offsets of the values that
/// qualify are packed onto a list in index order (simd::v4::offsetsAtLeast), and the values are
/// fetched by that list afterwards.
KVSCOPE_TARGET_V4 void collectAtLeastV4(const float* x, int64_t n, uint32_t floor, int64_t base,
                                        std::vector<Outlier>& out) {
  static thread_local std::vector<int32_t> offsets;
  if (offsets.size() < static_cast<size_t>(n + 16)) offsets.resize(static_cast<size_t>(n + 16));
  const int32_t* hit = offsets.data();
  const int64_t hits = simd::v4::offsetsAtLeast(x, n, floor, offsets.data());
  for (int64_t j = 0; j < hits; ++j) out.push_back({static_cast<size_t>(base + hit[j]), x[hit[j]]});
}
#endif

}  // namespace

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

}  // namespace kvscope
