// SPDX-License-Identifier: GPL-3.0-or-later
// The benchmark suite behind `kvscope-cli bench`: five groups of measurements, each compared with
// a target and with this machine's own references measured in the same run.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/util/status.h"

namespace kvscope::bench {

/// The groups, in the order they are reported: "quantize", "attention", "interactive", "eval",
/// "open", "sensitivity", "record" ("open" runs first, in a process that has done nothing else yet).
const std::vector<std::string>& suiteGroups();

/// The spec strings the quantize group times, in order.
const std::vector<std::string>& quantizeSpecs();
/// The K and V spec strings of the interactive group (kivi-2 of quantization.md §9).
std::pair<std::string, std::string> interactiveSpecs();

/// What to run.
struct SuiteOptions {
  std::vector<std::string> only;  ///< groups to run; empty = all
  bool quick = false;             ///< small shapes (seconds in all), for smoke tests
  std::string tempDir;            ///< where generated dumps go; empty = $TMPDIR or /tmp
  std::string llamaCppDir;        ///< record group: tests/conformance with node-llama-cpp, to time llama.cpp too
  Progress progress;              ///< told the current step; false cancels
};

/// Outcome of one row against its target.
enum class Verdict { Pass, Fail, Info, NotRun };
/// "pass", "FAIL", "info", "not run".
const char* verdictName(Verdict v);

/// One measured line of the table.
struct SuiteRow {
  std::string group;   ///< one of suiteGroups()
  std::string name;    ///< what was measured, e.g. a spec string
  std::string shape;   ///< e.g. "KVH=8 T=32768 D=128"
  double seconds = 0;  ///< best run
  double medianSeconds = 0;
  double cpuSeconds = 0;  ///< least process CPU time of a run (all threads): load-independent-ish
  int runs = 0;
  /// Named figures in display order (elements_per_s, bandwidth_ratio, gflops, peak_rss_bytes …).
  std::vector<std::pair<std::string, double>> figures;
  std::string measured;  ///< the figure the target judges, as text ("41% of copy")
  std::string target;    ///< the target, as text ("≥ 50% of copy")
  Verdict verdict = Verdict::Info;
  std::string note;      ///< why a row did not run, or a caveat

  /// The figure called `key`, or `fallback`.
  [[nodiscard]] double figure(const std::string& key, double fallback = 0) const;
};

/// This machine's references, measured in the same run.
struct MachineFigures {
  std::string cpu;                 ///< model name from /proc/cpuinfo
  int threads = 0;                 ///< OpenMP threads used
  double copyBytes = 0;            ///< bytes per copy run (0 = not measured)
  double copyBytesPerSecond = 0;   ///< STREAM copy, (read + write) / time
  double copyFreshBytesPerSecond = 0;  ///< the same copy into a newly allocated vector each run
  int gemmN = 0;                   ///< 0 = not measured
  double gemmFlopsPerSecond = 0;   ///< Eigen float32 n×n GEMM
};

/// Everything one run measured.
struct SuiteResult {
  bool quick = false;
  MachineFigures machine;
  std::vector<SuiteRow> rows;
};

/// Runs the selected groups. A group whose code fails (or is not implemented yet) yields rows
/// with Verdict::NotRun and the reason, so the others still report. Errors: an unknown group.
Expected<SuiteResult> runSuite(const SuiteOptions& options);

/// The result as JSON text ({"kvscope_bench": 1, "machine": {...}, "rows": [...]}).
std::string suiteToJson(const SuiteResult& result);

}  // namespace kvscope::bench
