// SPDX-License-Identifier: GPL-3.0-or-later
// Measuring tools shared by `kvscope-cli bench` and the Google Benchmark binary: clocks, resident
// memory, and this machine's own references (copy bandwidth, float32 GEMM rate), measured in the
// same run as the work they are compared with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope::bench {

/// Seconds on a monotonic clock (only differences mean anything).
double nowSeconds();

/// Threads an OpenMP parallel region in core uses (omp_get_max_threads).
int threadCount();
/// Sets the threads later OpenMP regions of this thread use (omp_set_num_threads; ≥ 1).
void setThreadCount(int threads);

/// Resident set size of this process now, in bytes (VmRSS); 0 when unknown.
int64_t currentRssBytes();
/// Highest resident set size since start or the last resetPeakRss, in bytes (VmHWM); 0 when unknown.
int64_t peakRssBytes();
/// Peak resident set size as getrusage(RUSAGE_SELF).ru_maxrss reports it, in bytes.
int64_t rusagePeakRssBytes();
/// Resets the high-water mark to the current RSS (Linux `/proc/self/clear_refs` "5"); false when
/// the kernel refuses, in which case peakRssBytes keeps counting from process start.
bool resetPeakRss();

/// Best and median of repeated timings.
struct Sample {
  double best = 0;    ///< fastest run, seconds: the least disturbed on a shared machine
  double median = 0;  ///< median run, seconds
  double cpu = 0;     ///< least process CPU time (user + system, all threads) of a run, seconds
  int runs = 0;
};

/// CPU time (user + system) this process has used so far, all threads, in seconds.
double processCpuSeconds();

/// How long to keep repeating a measurement.
struct Budget {
  int minRuns = 3;
  int maxRuns = 50;
  double minSeconds = 0.5;
};

/// Runs `work` at least `minRuns` times and until `minSeconds` have passed (at most `maxRuns`),
/// timing each call; `setup`, when set, runs untimed before each call. Stops at the first failed
/// Status and returns it.
Expected<Sample> timeRepeated(const std::function<Status()>& work, const Budget& budget,
                              const std::function<void()>& setup = {});

/// dst[i] = src[i] for i < n, each thread copying one contiguous slice (STREAM's static schedule).
void parallelCopy(float* dst, const float* src, int64_t n);

/// STREAM "copy" of `bytes` between two buffers touched beforehand, split over all threads.
struct CopyRate {
  size_t bytes = 0;          ///< bytes copied per run
  Sample time;
  double bytesPerSecond = 0; ///< STREAM convention: (bytes read + bytes written) / best time
};
/// Measures copy bandwidth; `bytes` is rounded down to whole floats.
CopyRate measureCopy(size_t bytes, int minRuns = 5, double minSeconds = 0.3);

/// The same copy into a freshly allocated, zero-filled std::vector each run (what an API that
/// returns a new Tensor3 pays: page faults plus the fill).
CopyRate measureCopyIntoFresh(size_t bytes, int minRuns = 5, double minSeconds = 0.3);

/// float32 matrix product rate of Eigen (all threads, this build's instruction set).
struct GemmRate {
  int n = 0;               ///< n×n times n×n
  Sample time;
  double flopsPerSecond = 0;  ///< 2·n³ / best time
};
GemmRate measureGemm(int n = 1024, int minRuns = 3, double minSeconds = 0.3);

/// Deterministic key-like data: per-channel Gaussian with a few channels 8× wider (the outlier
/// channels real keys have). Same seed, same values, whatever the thread count.
Tensor3 syntheticTensor(int64_t heads, int64_t tokens, int64_t dim, uint64_t seed);

/// A copy of `x` with relative Gaussian noise of size `relative` (a stand-in reconstruction).
Tensor3 perturbed(const Tensor3& x, double relative, uint64_t seed);

}  // namespace kvscope::bench
