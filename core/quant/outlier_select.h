// SPDX-License-Identifier: GPL-3.0-or-later
// Step 4 of the pipeline (quantization.md §1, `outliers=f`, dense-and-sparse): per kv head, the
// ceil(f·N) elements of largest |x| (ties: lower flat index first), chosen by a radix select on
// magnitude keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvscope {

/// ceil(f·n) as §1 step 4 writes it (computed in double), bounded by n; 0 for f ≤ 0.
int64_t outlierCount(double fraction, int64_t n);
/// Flat indices of the `count` values of largest |x| among values[0..n) (ties: lower index
/// first), in that order. Values must be finite.
std::vector<int64_t> selectOutliers(const float* values, int64_t n, int64_t count);

/// One value set aside by step 4: where it was and what it was.
struct Outlier {
  size_t index;  ///< flat index into the tensor (or the head part) it was taken from
  float value;
};

/// The same indices as selectOutliers, in ascending index order, into `picked` (reused).
void selectOutliersByIndexInto(const float* values, int64_t n, int64_t count, std::vector<int64_t>& picked);

/// The count-th largest magnitude key (fp::magnitudeKey) of values[0..n) and how many keys lie
/// above it; 1 ≤ count ≤ n.
struct KeyRank {
  uint32_t key = 0;
  int64_t above = 0;
};
KeyRank countthLargestMagnitude(const float* values, int64_t n, int64_t count);

/// Appends to `out` every (base + i, x[i]) of x[0..n) whose magnitude key is at least `floor`, in
/// index order (AVX-512 where the CPU has it).
void collectAtLeast(const float* x, int64_t n, uint32_t floor, int64_t base, std::vector<Outlier>& out);

}  // namespace kvscope
