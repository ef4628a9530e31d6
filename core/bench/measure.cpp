// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/bench/measure.h"

#include <sys/resource.h>

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace kvscope::bench {

double nowSeconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

int threadCount() { return omp_get_max_threads(); }

void setThreadCount(int threads) { omp_set_num_threads(std::max(1, threads)); }

namespace {

// A "Name:   1234 kB" line of /proc/self/status, in bytes; 0 when absent.
int64_t procStatusKb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) == 0 && line.size() > field.size() &&
        line[field.size()] == ':') {
      return std::stoll(line.substr(field.size() + 1)) * 1024;
    }
  }
  return 0;
}

// splitmix64: a counter-based generator, so every element's value depends only on its index.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A standard normal value for index i (Box-Muller on two uniforms drawn from the index).
float gaussianAt(uint64_t seed, uint64_t i) {
  const uint64_t r = mix(seed ^ mix(i));
  const double u1 = (static_cast<double>(r >> 40) + 0.5) / static_cast<double>(1ULL << 24);
  const double u2 = static_cast<double>(r & 0xffffffULL) / static_cast<double>(1ULL << 24);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace

int64_t currentRssBytes() { return procStatusKb("VmRSS"); }
int64_t peakRssBytes() { return procStatusKb("VmHWM"); }

int64_t rusagePeakRssBytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

double processCpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

bool resetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

Expected<Sample> timeRepeated(const std::function<Status()>& work, const Budget& budget,
                              const std::function<void()>& setup) {
  std::vector<double> times;
  double leastCpu = 0;
  const double start = nowSeconds();
  while (static_cast<int>(times.size()) < std::max(1, budget.minRuns) ||
         (nowSeconds() - start < budget.minSeconds &&
          static_cast<int>(times.size()) < budget.maxRuns)) {
    if (setup) setup();
    const double c0 = processCpuSeconds();
    const double t0 = nowSeconds();
    Status s = work();
    const double t1 = nowSeconds();
    const double cpu = processCpuSeconds() - c0;
    if (!s.isOk()) return s;
    leastCpu = times.empty() ? cpu : std::min(leastCpu, cpu);
    times.push_back(t1 - t0);
  }
  std::sort(times.begin(), times.end());
  Sample sample;
  sample.runs = static_cast<int>(times.size());
  sample.best = times.front();
  sample.median = times[times.size() / 2];
  sample.cpu = leastCpu;
  return sample;
}

void parallelCopy(float* dst, const float* src, int64_t n) {
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    const int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin) * sizeof(float));
  }
}

namespace {

// Touches every page from the thread that will later copy that slice, with values that differ
// from element to element, as real tensors do (a buffer of one repeated value is what a host's
// page merging or memory compression could serve without reading memory).
void parallelFill(float* dst, int64_t n, float value) {
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    const int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    for (int64_t i = begin; i < end; ++i) dst[i] = value + static_cast<float>(i & 0xffffff);
  }
}

}  // namespace

CopyRate measureCopy(size_t bytes, int minRuns, double minSeconds) {
  const auto n = static_cast<int64_t>(bytes / sizeof(float));
  std::vector<float> src(static_cast<size_t>(n)), dst(static_cast<size_t>(n));
  parallelFill(src.data(), n, 1.0f);
  parallelFill(dst.data(), n, 0.0f);
  CopyRate rate;
  rate.bytes = static_cast<size_t>(n) * sizeof(float);
  auto sample = timeRepeated(
      [&] {
        parallelCopy(dst.data(), src.data(), n);
        return Status::ok();
      },
      {minRuns, 1000, minSeconds});
  rate.time = *sample;
  rate.bytesPerSecond = 2.0 * static_cast<double>(rate.bytes) / rate.time.best;
  return rate;
}

CopyRate measureCopyIntoFresh(size_t bytes, int minRuns, double minSeconds) {
  const auto n = static_cast<int64_t>(bytes / sizeof(float));
  std::vector<float> src(static_cast<size_t>(n));
  parallelFill(src.data(), n, 1.0f);
  CopyRate rate;
  rate.bytes = static_cast<size_t>(n) * sizeof(float);
  float sink = 0;
  auto sample = timeRepeated(
      [&] {
        std::vector<float> dst(static_cast<size_t>(n), 0.0f);
        parallelCopy(dst.data(), src.data(), n);
        sink += dst[static_cast<size_t>(n / 2)];
        return Status::ok();
      },
      {minRuns, 1000, minSeconds});
  rate.time = *sample;
  rate.bytesPerSecond = 2.0 * static_cast<double>(rate.bytes) / rate.time.best;
  if (sink < 0) rate.bytesPerSecond = 0;  // keeps the copies observable
  return rate;
}

GemmRate measureGemm(int n, int minRuns, double minSeconds) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Matrix a = Matrix::Random(n, n), b = Matrix::Random(n, n), c(n, n);
  GemmRate rate;
  rate.n = n;
  auto sample = timeRepeated(
      [&] {
        c.noalias() = a * b;
        return Status::ok();
      },
      {minRuns, 1000, minSeconds});
  rate.time = *sample;
  const double flops = 2.0 * static_cast<double>(n) * n * n;
  rate.flopsPerSecond = flops / rate.time.best;
  if (!std::isfinite(c(0, 0))) rate.flopsPerSecond = 0;  // keeps the product observable
  return rate;
}

Tensor3 syntheticTensor(int64_t heads, int64_t tokens, int64_t dim, uint64_t seed) {
  Tensor3 x;
  x.heads = heads;
  x.tokens = tokens;
  x.dim = dim;
  x.data.resize(static_cast<size_t>(heads * tokens * dim));
  const int64_t n = heads * tokens * dim;
  float* out = x.data.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = i % dim;
    const int64_t h = i / (tokens * dim);
    // Channel statistics vary by head and channel; every 16th channel is an outlier channel.
    const float channelScale = (d % 16 == 3) ? 8.0f : 1.0f + 0.25f * static_cast<float>((d * 7 + h) % 5);
    const float channelMean = 0.1f * static_cast<float>((d * 13 + h * 3) % 11 - 5);
    out[i] = channelMean + channelScale * gaussianAt(seed, static_cast<uint64_t>(i));
  }
  return x;
}

Tensor3 perturbed(const Tensor3& x, double relative, uint64_t seed) {
  Tensor3 y = x;
  const auto n = static_cast<int64_t>(x.size());
  const auto r = static_cast<float>(relative);
  float* out = y.data.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    out[i] += r * std::fabs(out[i]) * gaussianAt(seed, static_cast<uint64_t>(i));
  }
  return y;
}

}  // namespace kvscope::bench
