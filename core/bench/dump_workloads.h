// SPDX-License-Identifier: GPL-3.0-or-later
// Benchmarks that need a dump on disk: a whole-model evaluation and opening a large dump. Each
// generates its synthetic fp16 dump into a temporary folder and removes it afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/util/status.h"

namespace kvscope::bench {

/// A model-shaped synthetic dump.
struct DumpShape {
  int layers = 32;
  int heads = 32;     ///< H
  int kvHeads = 8;    ///< KVH
  int tokens = 8192;  ///< T
  int queries = 64;   ///< Tq (0 = no query)
  int dim = 128;      ///< D
  /// Bytes of the fp16 datasets writeSynthDump writes (key, key_pre_rope, value, query).
  [[nodiscard]] int64_t diskBytes() const {
    return int64_t{2} * layers *
           (int64_t{3} * kvHeads * tokens * dim + int64_t{heads} * queries * dim);
  }
  /// float32 bytes of one layer's K, V and Q in memory.
  [[nodiscard]] int64_t layerFloatBytes() const {
    return int64_t{4} * (int64_t{2} * kvHeads * tokens * dim + int64_t{heads} * queries * dim);
  }
};

/// A whole-model evaluation (kvscope::evaluate) of a generated dump.
struct EvalFigures {
  DumpShape shape;
  std::string preset;
  double generateSeconds = 0;  ///< writing the dump (setup, not judged)
  double seconds = 0;          ///< Dump::open + evaluate, wall clock
  double cpuSeconds = 0;       ///< process CPU time of the same, all threads
  int64_t baselineRssBytes = 0;  ///< RSS just before opening
  int64_t peakRssBytes = 0;      ///< the process's peak RSS during the evaluation
  int64_t dumpBytes = 0;         ///< size of the generated file
};

/// Generates a dump of `shape` under `tempDir`, evaluates it with `preset`, deletes it.
Expected<EvalFigures> benchEval(const DumpShape& shape, const std::string& preset,
                                const std::string& tempDir, const Progress& progress = {});

/// The sensitivity map (default ladder) and the diagnosis of one generated dump.
struct SensitivityFigures {
  DumpShape shape;
  int candidates = 0;            ///< candidates per side
  double generateSeconds = 0;
  double seconds = 0;            ///< Dump::open + sensitivityMap, wall clock
  double cpuSeconds = 0;
  double diagnoseSeconds = 0;    ///< Dump::open + diagnose, wall clock
  double diagnoseCpuSeconds = 0;
  double planSeconds = 0;        ///< plan search on the map (planFromMap) + the joint evaluation, wall clock
  double planCpuSeconds = 0;
  double planSolveSeconds = 0;   ///< planFromMap alone (the map already computed)
  bool planFound = false;        ///< the bench budgets found a plan (kl_mean ≤ 1e-2, output_rel_error ≤ 0.1: the synthetic llama profile meets them)
  int64_t peakRssBytes = 0;      ///< the process's peak RSS during both
};

/// Generates a dump of `shape` under `tempDir`, maps it with sensitivityCandidates(), searches
/// a plan on the map and evaluates it, diagnoses it, deletes it.
Expected<SensitivityFigures> benchSensitivity(const DumpShape& shape, const std::string& tempDir,
                                              const Progress& progress = {});

/// Opening a large dump (metadata only).
struct OpenFigures {
  DumpShape shape;
  double generateSeconds = 0;
  int64_t dumpBytes = 0;
  double seconds = 0;            ///< Dump::open with the file evicted from the page cache (cold)
  double cpuSeconds = 0;         ///< process CPU time of that open
  double warmSeconds = 0;        ///< best of a few Dump::open right after (file metadata cached)
  bool evicted = false;          ///< whether the kernel accepted the eviction (posix_fadvise)
  int64_t rssBeforeBytes = 0;    ///< RSS before opening
  int64_t rssAfterBytes = 0;     ///< RSS with the dump open
};

/// Generates a dump of `shape` under `tempDir`, times Dump::open (cold, then warm) and the RSS it
/// adds, deletes it.
Expected<OpenFigures> benchOpen(const DumpShape& shape, const std::string& tempDir,
                                const Progress& progress = {});

/// One evaluation of a scaling workload at one thread count.
struct ScalingRun {
  int threads = 0;
  double seconds = 0;     ///< Dump::open + evaluate, wall clock (best of the runs)
  double cpuSeconds = 0;  ///< process CPU time of that run, all threads
  int runs = 0;
};

/// A workload evaluated at 1, 2, 4, … threads up to `maxThreads` (and at maxThreads itself).
struct ScalingFigures {
  DumpShape shape;
  std::string keySpec, valueSpec;
  double generateSeconds = 0;
  int64_t dumpBytes = 0;
  std::vector<ScalingRun> runs;  ///< ascending thread counts; runs[0] is one thread
};

/// The thread counts a scaling run visits: 1, 2, 4, … below `maxThreads`, then maxThreads.
std::vector<int> scalingThreadCounts(int maxThreads);

/// Generates a dump of `shape` under `tempDir` and evaluates it with the K and V specs at each of
/// scalingThreadCounts(maxThreads) (OpenMP's thread count set for each, restored afterwards),
/// best of `repeats` runs each; deletes the dump.
Expected<ScalingFigures> benchScaling(const DumpShape& shape, const std::string& keySpec,
                                      const std::string& valueSpec, int maxThreads, int repeats,
                                      const std::string& tempDir, const Progress& progress = {});

/// Free bytes on the file system holding `dir`, or -1 when unknown.
int64_t freeDiskBytes(const std::string& dir);

}  // namespace kvscope::bench
