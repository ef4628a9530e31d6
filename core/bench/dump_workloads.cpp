// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/bench/dump_workloads.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "core/bench/measure.h"
#include "core/io/dump.h"
#include "core/engine/presets.h"
#include "core/diagnose/diagnose.h"
#include "core/report/eval.h"
#include "core/sensitivity/plan_search.h"
#include "core/sensitivity/sensitivity.h"
#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "core/synth/synth.h"

namespace kvscope::bench {

int64_t freeDiskBytes(const std::string& dir) {
  struct statvfs fs{};
  if (statvfs(dir.c_str(), &fs) != 0) return -1;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

namespace {

namespace fs = std::filesystem;

// A fresh folder under `parent`, removed with its content when the object goes.
class ScratchDir {
 public:
  static Expected<ScratchDir> create(const std::string& parent, const std::string& prefix) {
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      fs::path p = fs::path(parent) / (prefix + std::to_string(::getpid()) + "-" + std::to_string(rd() % 1000000));
      std::error_code ec;
      if (fs::create_directories(p, ec)) return ScratchDir(p);
      if (ec && ec != std::errc::file_exists) {
        return Status::ioError(p.string() + ": cannot create folder: " + ec.message());
      }
    }
    return Status::ioError(parent + ": cannot create a scratch folder");
  }
  ScratchDir(ScratchDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  explicit ScratchDir(fs::path p) : path_(std::move(p)) {}
  fs::path path_;
};

SynthOptions synthFor(const DumpShape& shape) {
  SynthOptions o;
  o.layers = shape.layers;
  o.kvHeads = shape.kvHeads;
  o.heads = shape.heads;
  o.tokens = shape.tokens;
  o.queries = shape.queries;
  o.headDim = shape.dim;
  o.dtype = DiskType::Float16;
  o.model = "synthetic-llama-3-8b-shape";
  return o;
}

struct Generated {
  std::string path;
  double seconds = 0;
  int64_t bytes = 0;
};

Expected<Generated> generate(const ScratchDir& dir, const DumpShape& shape, const Progress& progress) {
  Generated g;
  g.path = dir.file("bench.h5");
  const double t0 = nowSeconds();
  KVS_RETURN_IF_ERROR(writeSynthDump(g.path, synthFor(shape), progress));
  g.seconds = nowSeconds() - t0;
  std::error_code ec;
  g.bytes = static_cast<int64_t>(fs::file_size(g.path, ec));
  return g;
}

// Drops the file's pages from the page cache so the next open reads from disk.
bool evictFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  const bool ok = ::fdatasync(fd) == 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

Expected<EvalFigures> benchEval(const DumpShape& shape, const std::string& preset,
                                const std::string& tempDir, const Progress& progress) {
  auto specs = presetSpecs(preset, KvShape{shape.dim, shape.layers, shape.kvHeads});
  if (!specs) return specs.status();
  auto dir = ScratchDir::create(tempDir, "kvscope-bench-eval-");
  if (!dir) return dir.status();
  auto generated = generate(*dir, shape, progress);
  if (!generated) return generated.status().withContext("generating the eval dump");

  EvalFigures figures;
  figures.shape = shape;
  figures.preset = preset;
  figures.generateSeconds = generated->seconds;
  figures.dumpBytes = generated->bytes;
  malloc_trim(0);
  figures.baselineRssBytes = currentRssBytes();
  resetPeakRss();
  const double c0 = processCpuSeconds();
  const double t0 = nowSeconds();
  auto dump = Dump::open(generated->path);
  if (!dump) return dump.status();
  EvalOptions options;
  options.key = specs->key;
  options.value = specs->value;
  options.preset = preset;
  auto report = evaluate(**dump, options, progress);
  if (!report) return report.status();
  figures.seconds = nowSeconds() - t0;
  figures.cpuSeconds = processCpuSeconds() - c0;
  figures.peakRssBytes = peakRssBytes();
  return figures;
}

std::vector<int> scalingThreadCounts(int maxThreads) {
  std::vector<int> counts;
  for (int t = 1; t < maxThreads; t *= 2) counts.push_back(t);
  counts.push_back(std::max(1, maxThreads));
  return counts;
}

Expected<ScalingFigures> benchScaling(const DumpShape& shape, const std::string& keySpec,
                                      const std::string& valueSpec, int maxThreads, int repeats,
                                      const std::string& tempDir, const Progress& progress) {
  auto key = parseSpec(keySpec);
  if (!key) return key.status().withContext("key spec");
  auto value = parseSpec(valueSpec);
  if (!value) return value.status().withContext("value spec");
  auto dir = ScratchDir::create(tempDir, "kvscope-bench-scaling-");
  if (!dir) return dir.status();
  auto generated = generate(*dir, shape, progress);
  if (!generated) return generated.status().withContext("generating the scaling dump");
  ScalingFigures figures;
  figures.shape = shape;
  figures.keySpec = keySpec;
  figures.valueSpec = valueSpec;
  figures.generateSeconds = generated->seconds;
  figures.dumpBytes = generated->bytes;
  EvalOptions options;
  options.key = *key;
  options.value = *value;
  const int before = threadCount();
  Status failed = Status::ok();
  for (const int threads : scalingThreadCounts(maxThreads)) {
    setThreadCount(threads);
    ScalingRun run;
    run.threads = threads;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      malloc_trim(0);
      const double c0 = processCpuSeconds();
      const double t0 = nowSeconds();
      auto dump = Dump::open(generated->path);
      if (!dump) {
        failed = dump.status();
        break;
      }
      auto report = evaluate(**dump, options, progress);
      if (!report) {
        failed = report.status();
        break;
      }
      const double seconds = nowSeconds() - t0, cpu = processCpuSeconds() - c0;
      if (run.runs == 0 || seconds < run.seconds) {
        run.seconds = seconds;
        run.cpuSeconds = cpu;
      }
      ++run.runs;
    }
    if (!failed.isOk()) break;
    figures.runs.push_back(run);
  }
  setThreadCount(before);
  if (!failed.isOk()) return failed;
  return figures;
}

Expected<SensitivityFigures> benchSensitivity(const DumpShape& shape, const std::string& tempDir,
                                              const Progress& progress) {
  auto dir = ScratchDir::create(tempDir, "kvscope-bench-sensitivity-");
  if (!dir) return dir.status();
  auto generated = generate(*dir, shape, progress);
  if (!generated) return generated.status().withContext("generating the sensitivity dump");
  SensitivityFigures figures;
  figures.shape = shape;
  figures.candidates = static_cast<int>(sensitivityCandidates().size());
  figures.generateSeconds = generated->seconds;
  malloc_trim(0);
  resetPeakRss();
  {
    const double c0 = processCpuSeconds();
    const double t0 = nowSeconds();
    auto dump = Dump::open(generated->path);
    if (!dump) return dump.status();
    auto map = sensitivityMap(**dump, SensitivityOptions{}, progress);
    if (!map) return map.status();
    figures.seconds = nowSeconds() - t0;
    figures.cpuSeconds = processCpuSeconds() - c0;
    // Plan search on top of the map: the solver, then eval of the chosen plans together.
    const double pc0 = processCpuSeconds();
    const double pt0 = nowSeconds();
    PlanSearchOptions po;
    po.keyBudget = kvscope::Budget{AttentionField::KlMean, 1e-2};
    po.valueBudget = kvscope::Budget{AttentionField::OutputRelError, 0.1};
    auto plan = planFromMap(*map, po);
    if (!plan) return plan.status();
    figures.planSolveSeconds = nowSeconds() - pt0;
    figures.planFound = plan->found;
    if (plan->found) {
      EvalOptions eo;
      eo.key = plan->key;
      eo.value = plan->value;
      auto joint = evaluate(**dump, eo, progress);
      if (!joint) return joint.status();
    }
    figures.planSeconds = nowSeconds() - pt0;
    figures.planCpuSeconds = processCpuSeconds() - pc0;
  }
  {
    const double c0 = processCpuSeconds();
    const double t0 = nowSeconds();
    auto dump = Dump::open(generated->path);
    if (!dump) return dump.status();
    auto dx = diagnose(**dump, DiagnoseOptions{}, progress);
    if (!dx) return dx.status();
    figures.diagnoseSeconds = nowSeconds() - t0;
    figures.diagnoseCpuSeconds = processCpuSeconds() - c0;
  }
  figures.peakRssBytes = peakRssBytes();
  return figures;
}

Expected<OpenFigures> benchOpen(const DumpShape& shape, const std::string& tempDir,
                                const Progress& progress) {
  auto dir = ScratchDir::create(tempDir, "kvscope-bench-open-");
  if (!dir) return dir.status();
  auto generated = generate(*dir, shape, progress);
  if (!generated) return generated.status().withContext("generating the large dump");

  OpenFigures figures;
  figures.shape = shape;
  figures.generateSeconds = generated->seconds;
  figures.dumpBytes = generated->bytes;
  figures.evicted = evictFromPageCache(generated->path);
  malloc_trim(0);
  figures.rssBeforeBytes = currentRssBytes();
  {
    const double c0 = processCpuSeconds();
    const double t0 = nowSeconds();
    auto dump = Dump::open(generated->path);
    figures.seconds = nowSeconds() - t0;
    figures.cpuSeconds = processCpuSeconds() - c0;
    if (!dump) return dump.status();
    figures.rssAfterBytes = currentRssBytes();
  }
  auto warm = timeRepeated(
      [&]() -> Status {
        auto dump = Dump::open(generated->path);
        return dump ? Status::ok() : dump.status();
      },
      Budget{3, 10, 0.2});
  if (!warm) return warm.status();
  figures.warmSeconds = warm->best;
  return figures;
}

}  // namespace kvscope::bench
