// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/bench/suite.h"

#include <malloc.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/bench/dump_workloads.h"
#include "core/bench/measure.h"
#include "core/bench/workloads.h"
#include "core/quant/format_table.h"
#include "core/quant/spec.h"
#include "core/bench/model_workloads.h"

namespace kvscope::bench {

const std::vector<std::string>& suiteGroups() {
  static const std::vector<std::string> groups{"quantize", "attention", "interactive", "eval",
                                               "open", "sensitivity", "record"};
  return groups;
}

const char* verdictName(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "pass";
    case Verdict::Fail: return "FAIL";
    case Verdict::Info: return "info";
    case Verdict::NotRun: return "not run";
  }
  return "?";
}

double SuiteRow::figure(const std::string& key, double fallback) const {
  for (const auto& [k, v] : figures) {
    if (k == key) return v;
  }
  return fallback;
}

// `int4,group=128` is per-token groups of 128 channels: one group per token row of a head at
// D = 128.
const std::vector<std::string>& quantizeSpecs() {
  static const std::vector<std::string> specs{
      "int4,group=128", "int2,axis=channel,group=32", "q4_0", "fp8_e4m3", "nvfp4",
      "int4,rot=hadamard,outliers=0.01", "tq4", "tqp4", "nuq4,axis=channel"};
  return specs;
}

std::pair<std::string, std::string> interactiveSpecs() {
  return {"int2,axis=channel,group=32,residual=128", "int2,axis=token,group=32,residual=128"};
}

namespace {

constexpr double kQuantizeBandwidthTarget = 0.50;
constexpr double kAttentionGemmTarget = 0.30;
constexpr double kInteractiveSeconds = 0.050;
constexpr double kEvalSeconds = 60.0;
constexpr double kEvalRssSlack = 300.0 * 1024 * 1024;
constexpr double kOpenSeconds = 1.0;
constexpr double kSensitivitySeconds = 180.0;  // issue 21: the default ladder on the 8B shape
constexpr double kDiagnoseSeconds = 20.0;
constexpr double kPlanSeconds = 60.0;  // issue 21: plan search on top of the map
constexpr double kOpenRss = 100.0 * 1024 * 1024;
constexpr double kRecordGemmTarget = 0.50;  // issue 28: the layer GEMMs at half the machine GEMM rate
constexpr double kE2eRecordRatio = 2.5;      // issue 28: e2e with a q4_0 cache at most 2.5x the record

std::string percent(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ratio < 0.1 ? "%.1f%%" : "%.0f%%", 100.0 * ratio);
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string mib(double bytes) { return fixed(bytes / (1024.0 * 1024.0), 0) + " MiB"; }

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

std::string shapeText(int kvHeads, int tokens, int dim) {
  return "KVH=" + std::to_string(kvHeads) + " T=" + std::to_string(tokens) +
         " D=" + std::to_string(dim);
}

SuiteRow notRun(const std::string& group, const std::string& name, const std::string& shape,
                const std::string& target, const Status& why) {
  SuiteRow row;
  row.group = group;
  row.name = name;
  row.shape = shape;
  row.target = target;
  row.verdict = Verdict::NotRun;
  row.note = why.message();
  return row;
}

Verdict judge(bool met) { return met ? Verdict::Pass : Verdict::Fail; }

// Hands freed heap back to the system so RSS baselines are not inflated by earlier groups.
void trimHeap() { malloc_trim(0); }

class SuiteRunner {
 public:
  explicit SuiteRunner(const SuiteOptions& options) : options_(options) {
    result_.quick = options.quick;
    result_.machine.cpu = cpuModel();
    result_.machine.threads = threadCount();
    budget_ = options.quick ? Budget{2, 3, 0.0} : Budget{3, 20, 1.0};
  }

  Status run(const std::vector<std::string>& groups) {
    for (size_t i = 0; i < groups.size(); ++i) {
      const std::string& g = groups[i];
      if (!report(options_.progress, static_cast<double>(i) / static_cast<double>(groups.size()), g)) {
        return Status::cancelled();
      }
      if (g == "quantize") quantize();
      if (g == "attention") attention();
      if (g == "interactive") interactive();
      if (g == "eval") KVS_RETURN_IF_ERROR(eval());
      if (g == "open") KVS_RETURN_IF_ERROR(open());
      if (g == "sensitivity") KVS_RETURN_IF_ERROR(sensitivity());
      if (g == "record") KVS_RETURN_IF_ERROR(record());
    }
    return Status::ok();
  }

  SuiteResult take() { return std::move(result_); }

 private:
  void measureCopyOnce(size_t bytes) {
    if (result_.machine.copyBytes > 0) return;
    const CopyRate copy = measureCopy(bytes, budget_.minRuns, budget_.minSeconds);
    const CopyRate fresh = measureCopyIntoFresh(bytes, budget_.minRuns, budget_.minSeconds);
    result_.machine.copyBytes = static_cast<double>(copy.bytes);
    result_.machine.copyBytesPerSecond = copy.bytesPerSecond;
    result_.machine.copyFreshBytesPerSecond = fresh.bytesPerSecond;
  }

  void measureGemmOnce() {
    if (result_.machine.gemmN > 0) return;
    const GemmRate gemm = measureGemm(options_.quick ? 256 : 1024, budget_.minRuns, budget_.minSeconds);
    result_.machine.gemmN = gemm.n;
    result_.machine.gemmFlopsPerSecond = gemm.flopsPerSecond;
  }

  void quantize() {
    const int kvh = 8, tokens = options_.quick ? 512 : 32768, dim = 128;
    const std::string shape = shapeText(kvh, tokens, dim);
    const std::string target = "≥ " + percent(kQuantizeBandwidthTarget) + " of copy";
    const Tensor3 x = syntheticTensor(kvh, tokens, dim, 1);
    measureCopyOnce(x.size() * sizeof(float));
    for (const std::string& spec : quantizeSpecs()) {
      auto figures = benchQuantize(x, spec, budget_);
      if (!figures) {
        result_.rows.push_back(notRun("quantize", spec, shape, target, figures.status()));
        continue;
      }
      SuiteRow row;
      row.group = "quantize";
      row.name = spec;
      row.shape = shape;
      row.seconds = figures->pipeline.best;
      row.medianSeconds = figures->pipeline.median;
      row.cpuSeconds = figures->pipeline.cpu;
      row.runs = figures->pipeline.runs;
      const auto n = static_cast<double>(figures->elements);
      // Read the input once and write the reconstruction once: what a copy of it moves. The
      // ratio divides by the copies paired with this spec's runs (same bytes, same moments).
      const double bytes = 2.0 * n * sizeof(float);
      const double copyRate = bytes / figures->copy.best;
      const double ratio = bytes / row.seconds / copyRate;
      const double formatRatio = bytes / figures->format.best / copyRate;
      const double freshRatio = bytes / figures->fresh.best / copyRate;
      row.figures = {{"elements_per_s", n / row.seconds},
                     {"bytes_per_s", bytes / row.seconds},
                     {"bandwidth_ratio", ratio},
                     {"format_seconds", figures->format.best},
                     {"format_cpu_seconds", figures->format.cpu},
                     {"format_elements_per_s", n / figures->format.best},
                     {"format_bandwidth_ratio", formatRatio},
                     {"fresh_seconds", figures->fresh.best},
                     {"fresh_bandwidth_ratio", freshRatio},
                     {"copy_seconds", figures->copy.best},
                     {"copy_bytes_per_s", copyRate}};
      row.measured = percent(ratio) + " of copy";
      row.note = "into a reused buffer, each run after a copy of the same bytes (best copy " +
                 fixed(copyRate / 1e9, 1) + " GB/s); step 5 alone " + percent(formatRatio) +
                 " of copy; returning a fresh result each run " + percent(freshRatio);
      // The target is the row's (format_table.cpp): integer and block formats ≥ 50 % of copy, the
      // codebook formats their own (issue 19: a rotation and a codebook search per vector, tqp's
      // two D×D products, nuq's k-means over the whole tensor); fp8 and the rest are reported for
      // information.
      const auto parsed = parseSpec(spec);
      const double rowTarget = formatInfo(parsed->format).benchTarget;
      if (rowTarget > 0.0) {
        row.target = "≥ " + percent(rowTarget) + " of copy";
        row.verdict = judge(ratio >= rowTarget);
      } else {
        row.target = "none (not an integer or block format)";
        row.verdict = Verdict::Info;
      }
      result_.rows.push_back(std::move(row));
    }
  }

  void attention() {
    AttentionShape shape;
    if (options_.quick) {
      shape.tokens = 1024;
      shape.queries = 16;
    }
    const std::string shapeStr = "H=" + std::to_string(shape.heads) + " Tq=" +
                                 std::to_string(shape.queries) + " " +
                                 shapeText(shape.kvHeads, shape.tokens, shape.dim);
    const std::string target = "≥ " + percent(kAttentionGemmTarget) + " of GEMM";
    measureGemmOnce();
    auto figures = benchAttention(shape, budget_);
    if (!figures) {
      result_.rows.push_back(notRun("attention", "three cases", shapeStr, target, figures.status()));
      return;
    }
    SuiteRow row;
    row.group = "attention";
    row.name = "three cases";
    row.shape = shapeStr;
    row.seconds = figures->time.best;
    row.medianSeconds = figures->time.median;
    row.cpuSeconds = figures->time.cpu;
    row.runs = figures->time.runs;
    const double gflops = figures->countedFlops / row.seconds / 1e9;
    const double ratio = gflops * 1e9 / result_.machine.gemmFlopsPerSecond;
    row.figures = {{"counted_flops", figures->countedFlops},
                   {"gflops", gflops},
                   {"gemm_ratio", ratio},
                   {"engine_flops", figures->engineFlops},
                   {"engine_gflops", figures->engineFlops / row.seconds / 1e9}};
    row.measured = fixed(gflops, 1) + " GFLOP/s = " + percent(ratio) + " of GEMM";
    row.target = target;
    row.verdict = judge(ratio >= kAttentionGemmTarget);
    result_.rows.push_back(std::move(row));
  }

  void interactive() {
    InteractiveShape shape;
    if (options_.quick) shape.tokens = 4096;
    const std::string shapeStr = shapeText(shape.kvHeads, shape.tokens, shape.dim) + " " +
                                 std::to_string(shape.columns) + " px";
    const std::string target = "≤ " + fixed(kInteractiveSeconds * 1000, 0) + " ms";
    const auto [keySpec, valueSpec] = interactiveSpecs();
    auto figures = benchInteractive(shape, keySpec, valueSpec, budget_);
    if (!figures) {
      result_.rows.push_back(notRun("interactive", "one head", shapeStr, target, figures.status()));
      return;
    }
    const std::pair<const char*, const Sample*> lines[] = {
        {"one head (kivi-2)", &figures->oneHead},
        {"whole layer (kivi-2)", &figures->wholeLayer}};
    for (const auto& [name, sample] : lines) {
      SuiteRow row;
      row.group = "interactive";
      row.name = name;
      row.shape = shapeStr;
      row.seconds = sample->best;
      row.medianSeconds = sample->median;
      row.cpuSeconds = sample->cpu;
      row.runs = sample->runs;
      row.figures = {{"milliseconds", 1000 * sample->best}};
      // Where one (separate) run spent its time, for the diagnosis.
      const auto& steps = sample == &figures->wholeLayer ? figures->wholeLayerSteps : figures->oneHeadSteps;
      std::string breakdown;
      for (const Step& step : steps) {
        row.figures.emplace_back("step_ms:" + step.name, 1000 * step.seconds);
        row.figures.emplace_back("step_cpu_ms:" + step.name, 1000 * step.cpuSeconds);
        breakdown += (breakdown.empty() ? "" : ", ") + step.name + " " +
                     fixed(1000 * step.seconds, 1) + "/" + fixed(1000 * step.cpuSeconds, 1);
      }
      row.measured = fixed(1000 * sample->best, 1) + " ms";
      row.target = target;
      row.verdict = judge(sample->best <= kInteractiveSeconds);
      row.note = "one run, wall/cpu ms: " + breakdown;
      if (sample == &figures->wholeLayer) {
        row.note = "quantizes all kv heads first, as the GUI does for axis=tensor and nvfp4; " + row.note;
      }
      result_.rows.push_back(std::move(row));
    }
    SuiteRow drift;
    drift.group = "interactive";
    drift.name = "drift series (one kv head)";
    drift.shape = shapeStr;
    drift.seconds = figures->driftSeries.best;
    drift.medianSeconds = figures->driftSeries.median;
    drift.cpuSeconds = figures->driftSeries.cpu;
    drift.runs = figures->driftSeries.runs;
    drift.figures = {{"milliseconds", 1000 * figures->driftSeries.best}};
    drift.measured = fixed(1000 * figures->driftSeries.best, 1) + " ms";
    drift.target = "none (separate worker)";
    drift.verdict = Verdict::Info;
    drift.note = "attentionPositionSeries of the visible kv head, which the drift view computes after the other views";
    result_.rows.push_back(std::move(drift));
  }

  std::string tempDir() const {
    if (!options_.tempDir.empty()) return options_.tempDir;
    const char* env = std::getenv("TMPDIR");
    return env && *env ? env : "/tmp";
  }

  Progress subProgress() const {
    return [this](double, std::string_view what) { return report(options_.progress, 0, what); };
  }

  Status eval() {
    DumpShape shape;
    if (options_.quick) {
      shape.layers = 2;
      shape.tokens = 1024;
      shape.queries = 16;
    }
    const std::string shapeStr = "L=" + std::to_string(shape.layers) + " H=" +
                                 std::to_string(shape.heads) + " Tq=" +
                                 std::to_string(shape.queries) + " " +
                                 shapeText(shape.kvHeads, shape.tokens, shape.dim);
    const double rssLimit = 2.0 * static_cast<double>(shape.layerFloatBytes()) + kEvalRssSlack;
    const std::string timeTarget = "< " + fixed(kEvalSeconds, 0) + " s";
    const std::string rssTarget = "≤ " + mib(rssLimit);
    trimHeap();
    auto figures = benchEval(shape, "kivi-2", tempDir(), subProgress());
    if (!figures) {
      if (figures.status().code() == StatusCode::Cancelled) return figures.status();
      result_.rows.push_back(notRun("eval", "time (kivi-2)", shapeStr, timeTarget, figures.status()));
      result_.rows.push_back(notRun("eval", "peak RSS (kivi-2)", shapeStr, rssTarget, figures.status()));
      return Status::ok();
    }
    SuiteRow time;
    time.group = "eval";
    time.name = "time (kivi-2)";
    time.shape = shapeStr;
    time.seconds = time.medianSeconds = figures->seconds;
    time.cpuSeconds = figures->cpuSeconds;
    time.runs = 1;
    time.figures = {{"seconds", figures->seconds}, {"generate_seconds", figures->generateSeconds},
                    {"dump_bytes", static_cast<double>(figures->dumpBytes)}};
    time.measured = fixed(figures->seconds, 1) + " s";
    time.target = timeTarget;
    time.verdict = judge(figures->seconds < kEvalSeconds);
    SuiteRow rss = time;
    rss.runs = 0;  // a memory figure: the table shows no time for it
    rss.name = "peak RSS (kivi-2)";
    rss.note = "whole process: the bench program's own RSS before the eval was " +
               mib(static_cast<double>(figures->baselineRssBytes));
    rss.figures = {{"peak_rss_bytes", static_cast<double>(figures->peakRssBytes)},
                   {"baseline_rss_bytes", static_cast<double>(figures->baselineRssBytes)},
                   {"limit_bytes", rssLimit}};
    rss.measured = mib(static_cast<double>(figures->peakRssBytes));
    rss.target = rssTarget;
    rss.verdict = judge(static_cast<double>(figures->peakRssBytes) <= rssLimit);
    result_.rows.push_back(std::move(time));
    result_.rows.push_back(std::move(rss));
    return Status::ok();
  }

  Status sensitivity() {
    DumpShape shape;
    if (options_.quick) {
      shape.layers = 2;
      shape.tokens = 1024;
      shape.queries = 16;
    }
    const std::string shapeStr = "L=" + std::to_string(shape.layers) + " H=" +
                                 std::to_string(shape.heads) + " Tq=" +
                                 std::to_string(shape.queries) + " " +
                                 shapeText(shape.kvHeads, shape.tokens, shape.dim);
    const std::string mapTarget = "< " + fixed(kSensitivitySeconds, 0) + " s";
    const std::string dxTarget = "< " + fixed(kDiagnoseSeconds, 0) + " s";
    const std::string planTarget = "< " + fixed(kPlanSeconds, 0) + " s";
    trimHeap();
    auto figures = benchSensitivity(shape, tempDir(), subProgress());
    if (!figures) {
      if (figures.status().code() == StatusCode::Cancelled) return figures.status();
      result_.rows.push_back(notRun("sensitivity", "map (default ladder)", shapeStr, mapTarget, figures.status()));
      result_.rows.push_back(notRun("sensitivity", "plan search + joint eval", shapeStr, planTarget, figures.status()));
      result_.rows.push_back(notRun("sensitivity", "diagnose", shapeStr, dxTarget, figures.status()));
      return Status::ok();
    }
    SuiteRow map;
    map.group = "sensitivity";
    map.name = "map (default ladder)";
    map.shape = shapeStr;
    map.seconds = map.medianSeconds = figures->seconds;
    map.cpuSeconds = figures->cpuSeconds;
    map.runs = 1;
    map.figures = {{"seconds", figures->seconds}, {"generate_seconds", figures->generateSeconds},
                   {"candidates", static_cast<double>(figures->candidates)},
                   {"peak_rss_bytes", static_cast<double>(figures->peakRssBytes)}};
    map.measured = fixed(figures->seconds, 1) + " s, " + std::to_string(figures->candidates) + " specs × K, V";
    map.target = mapTarget;
    map.verdict = judge(figures->seconds < kSensitivitySeconds);
    SuiteRow dx = map;
    dx.name = "diagnose";
    dx.seconds = dx.medianSeconds = figures->diagnoseSeconds;
    dx.cpuSeconds = figures->diagnoseCpuSeconds;
    dx.figures = {{"seconds", figures->diagnoseSeconds}};
    dx.measured = fixed(figures->diagnoseSeconds, 1) + " s";
    dx.target = dxTarget;
    dx.verdict = judge(figures->diagnoseSeconds < kDiagnoseSeconds);
    SuiteRow plan = map;
    plan.name = "plan search + joint eval";
    plan.seconds = plan.medianSeconds = figures->planSeconds;
    plan.cpuSeconds = figures->planCpuSeconds;
    plan.figures = {{"seconds", figures->planSeconds}, {"solve_seconds", figures->planSolveSeconds},
                    {"found", figures->planFound ? 1.0 : 0.0}};
    plan.measured = fixed(figures->planSeconds, 1) + " s (solver " + fixed(figures->planSolveSeconds, 3) + " s" +
                    (figures->planFound ? "" : ", no plan: no joint eval") + ")";
    plan.target = planTarget;
    plan.verdict = judge(figures->planSeconds < kPlanSeconds);
    result_.rows.push_back(std::move(map));
    result_.rows.push_back(std::move(plan));
    result_.rows.push_back(std::move(dx));
    return Status::ok();
  }

  Status open() {
    DumpShape shape;
    // Llama-3-8B-shaped at 80k tokens: key, key_pre_rope and value in fp16 make 16.1 GB.
    shape.tokens = options_.quick ? 4096 : 81920;
    shape.layers = options_.quick ? 4 : 32;
    const std::string shapeStr = "L=" + std::to_string(shape.layers) + " " +
                                 shapeText(shape.kvHeads, shape.tokens, shape.dim) + " fp16 " +
                                 mib(static_cast<double>(shape.diskBytes()));
    const std::string timeTarget = "≤ " + fixed(kOpenSeconds, 0) + " s";
    const std::string rssTarget = "≤ " + mib(kOpenRss);
    const int64_t free = freeDiskBytes(tempDir());
    if (free >= 0 && free < shape.diskBytes() + (int64_t{2} << 30)) {
      const Status why = Status::resourceLimit(tempDir() + ": " + mib(static_cast<double>(free)) +
                                               " free, the dump needs " +
                                               mib(static_cast<double>(shape.diskBytes())) +
                                               " plus 2 GiB to spare");
      result_.rows.push_back(notRun("open", "time", shapeStr, timeTarget, why));
      result_.rows.push_back(notRun("open", "RSS after open", shapeStr, rssTarget, why));
      return Status::ok();
    }
    trimHeap();
    auto figures = benchOpen(shape, tempDir(), subProgress());
    if (!figures) {
      if (figures.status().code() == StatusCode::Cancelled) return figures.status();
      result_.rows.push_back(notRun("open", "time", shapeStr, timeTarget, figures.status()));
      result_.rows.push_back(notRun("open", "RSS after open", shapeStr, rssTarget, figures.status()));
      return Status::ok();
    }
    SuiteRow time;
    time.group = "open";
    time.name = "time";
    time.shape = shapeStr;
    time.seconds = time.medianSeconds = figures->seconds;
    time.cpuSeconds = figures->cpuSeconds;
    time.runs = 1;
    time.figures = {{"seconds", figures->seconds}, {"warm_seconds", figures->warmSeconds},
                    {"generate_seconds", figures->generateSeconds},
                    {"dump_bytes", static_cast<double>(figures->dumpBytes)}};
    time.measured = fixed(1000 * figures->seconds, 1) + " ms cold, " +
                    fixed(1000 * figures->warmSeconds, 1) + " warm";
    time.note = figures->evicted ? "cold: the file was evicted from the page cache first"
                                 : "the kernel refused to evict the file: 'cold' may be warm";
    time.target = timeTarget;
    time.verdict = judge(figures->seconds <= kOpenSeconds);
    SuiteRow rss = time;
    rss.runs = 0;
    rss.name = "RSS after open";
    rss.note.clear();
    rss.figures = {{"rss_after_bytes", static_cast<double>(figures->rssAfterBytes)},
                   {"rss_before_bytes", static_cast<double>(figures->rssBeforeBytes)}};
    rss.measured = mib(static_cast<double>(figures->rssAfterBytes)) + " (+" +
                   mib(static_cast<double>(figures->rssAfterBytes - figures->rssBeforeBytes)) + ")";
    rss.target = rssTarget;
    rss.verdict = judge(static_cast<double>(figures->rssAfterBytes) <= kOpenRss);
    result_.rows.push_back(std::move(time));
    result_.rows.push_back(std::move(rss));
    return Status::ok();
  }

  /// The real-model rows (issue 28): a Qwen2.5-0.5B-shaped GGUF in Q8_0 and F16, recorded at
  /// T = 2048 and replayed with a q4_0 cache; llama.cpp's prompt processing beside it when asked.
  Status record() {
    ModelShape shape;
    int tokens = 2048;
    std::vector<GgmlType> types = {GgmlType::Q8_0, GgmlType::F16};
    if (options_.quick) {
      shape = ModelShape{2, 128, 4, 2, 32, 256, 1024};
      tokens = 128;
      types = {GgmlType::Q8_0};
    }
    measureGemmOnce();
    for (GgmlType type : types) {
      const std::string t = ggmlTypeInfo(type).name;
      const std::string shapeStr = "L=" + std::to_string(shape.layers) + " dim=" + std::to_string(shape.dim) + " H=" +
                                   std::to_string(shape.heads) + " KVH=" + std::to_string(shape.kvHeads) + " D=" +
                                   std::to_string(shape.headDim) + " ffn=" + std::to_string(shape.ffn) +
                                   " vocab=" + std::to_string(shape.vocab) + " T=" + std::to_string(tokens) + " " + t;
      const std::string gemmTarget = "≥ " + percent(kRecordGemmTarget) + " of GEMM";
      auto figures = benchModel(shape, type, tokens, tempDir(), options_.llamaCppDir, subProgress());
      if (!figures) {
        if (figures.status().code() == StatusCode::Cancelled) return figures.status();
        result_.rows.push_back(notRun("record", "record (" + t + ")", shapeStr, gemmTarget, figures.status()));
        continue;
      }
      const double flops = shape.layerGemmFlopsPerToken() * tokens;
      const double share = flops / figures->recordSeconds / result_.machine.gemmFlopsPerSecond;
      SuiteRow time;
      time.group = "record";
      time.name = "record (" + t + ")";
      time.shape = shapeStr;
      time.seconds = time.medianSeconds = figures->recordSeconds;
      time.cpuSeconds = figures->recordCpuSeconds;
      time.runs = 1;
      time.figures = {{"tokens_per_s", tokens / figures->recordSeconds},
                      {"layer_gemm_gflops", flops / figures->recordSeconds / 1e9},
                      {"gemm_ratio", share},
                      {"generate_seconds", figures->generateSeconds},
                      {"file_bytes", static_cast<double>(figures->fileBytes)}};
      time.measured = fixed(tokens / figures->recordSeconds, 0) + " tokens/s, layer GEMMs at " + percent(share) +
                      " of GEMM";
      time.target = gemmTarget;
      time.verdict = judge(share >= kRecordGemmTarget);
      time.note = "the whole record (loading, dequantization, attention, writing) counted as the layer GEMMs' time";
      SuiteRow rss = time;
      rss.runs = 0;
      rss.name = "record peak RSS (" + t + ")";
      const double limit = static_cast<double>(figures->fileBytes + shape.layerFloatBytes()) + 256.0 * (1 << 20);
      rss.figures = {{"peak_rss_bytes", static_cast<double>(figures->recordPeakRssBytes)}, {"limit_bytes", limit}};
      rss.measured = mib(static_cast<double>(figures->recordPeakRssBytes));
      rss.target = "≤ file + one layer f32 + 256 MiB = " + mib(limit);
      rss.verdict = judge(static_cast<double>(figures->recordPeakRssBytes) <= limit);
      rss.note = "whole process, from a reset of the peak before the record";
      SuiteRow e2e = time;
      e2e.name = "e2e q4_0 (" + t + ")";
      e2e.seconds = e2e.medianSeconds = figures->e2eSeconds;
      e2e.cpuSeconds = 0;
      const double ratio = figures->e2eSeconds / figures->recordSeconds;
      e2e.figures = {{"seconds", figures->e2eSeconds}, {"record_ratio", ratio}};
      e2e.measured = fixed(ratio, 2) + "× the record";
      e2e.target = "≤ " + fixed(kE2eRecordRatio, 1) + "× the record";
      e2e.verdict = judge(ratio <= kE2eRecordRatio);
      e2e.note = "the exact and the q4_0 replay side by side, the next-token statistics over the whole vocabulary";
      result_.rows.push_back(std::move(time));
      result_.rows.push_back(std::move(rss));
      result_.rows.push_back(std::move(e2e));
      SuiteRow llama;
      llama.group = "record";
      llama.name = "llama.cpp prompt processing (" + t + ")";
      llama.shape = shapeStr;
      if (figures->llamaCppSeconds > 0) {
        llama.seconds = llama.medianSeconds = figures->llamaCppSeconds;
        llama.runs = 1;
        const double vs = figures->recordSeconds / figures->llamaCppSeconds;
        llama.figures = {{"seconds", figures->llamaCppSeconds}, {"record_over_llamacpp", vs}};
        llama.measured = "record takes " + fixed(vs, 2) + "× llama.cpp's time";
        llama.verdict = Verdict::Info;
        llama.note = "llama.cpp through node-llama-cpp, f16 cache, all cores; it also quantizes the activations of "
                     "quantized weights";
      } else {
        llama.verdict = Verdict::NotRun;
        llama.note = figures->llamaCppNote;
      }
      result_.rows.push_back(std::move(llama));
    }
    return Status::ok();
  }

  const SuiteOptions& options_;
  Budget budget_;
  SuiteResult result_;
};

}  // namespace

Expected<SuiteResult> runSuite(const SuiteOptions& options) {
  std::vector<std::string> groups;
  for (const std::string& g : options.only) {
    const auto& all = suiteGroups();
    if (std::find(all.begin(), all.end(), g) == all.end()) {
      return Status::invalidArgument("unknown benchmark group '" + g +
                                     "' (allowed: quantize, attention, interactive, eval, open, sensitivity, record)");
    }
  }
  for (const std::string& g : suiteGroups()) {
    if (options.only.empty() ||
        std::find(options.only.begin(), options.only.end(), g) != options.only.end()) {
      groups.push_back(g);
    }
  }
  // "open" runs first: its target is the RSS of a process that has just opened the dump, which
  // the workspaces and heap the other groups leave behind (100-160 MiB) would hide. The rows are
  // then put back in suiteGroups() order.
  const auto open = std::find(groups.begin(), groups.end(), "open");
  if (open != groups.end()) std::rotate(groups.begin(), open, open + 1);
  SuiteRunner runner(options);
  KVS_RETURN_IF_ERROR(runner.run(groups));
  SuiteResult result = runner.take();
  const auto& order = suiteGroups();
  const auto rank = [&](const SuiteRow& row) { return std::find(order.begin(), order.end(), row.group) - order.begin(); };
  std::stable_sort(result.rows.begin(), result.rows.end(),
                   [&](const SuiteRow& a, const SuiteRow& b) { return rank(a) < rank(b); });
  return result;
}

std::string suiteToJson(const SuiteResult& result) {
  using nlohmann::json;
  // NaN and infinities have no JSON spelling: they become null.
  auto number = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json machine = {{"cpu", result.machine.cpu},
                  {"threads", result.machine.threads},
                  {"copy_bytes", number(result.machine.copyBytes)},
                  {"copy_bytes_per_s", number(result.machine.copyBytesPerSecond)},
                  {"copy_fresh_bytes_per_s", number(result.machine.copyFreshBytesPerSecond)},
                  {"gemm_n", result.machine.gemmN},
                  {"gemm_flops_per_s", number(result.machine.gemmFlopsPerSecond)}};
  json rows = json::array();
  for (const SuiteRow& r : result.rows) {
    json figures = json::object();
    for (const auto& [k, v] : r.figures) figures[k] = number(v);
    rows.push_back({{"group", r.group},
                    {"name", r.name},
                    {"shape", r.shape},
                    {"seconds", number(r.seconds)},
                    {"median_seconds", number(r.medianSeconds)},
                    {"cpu_seconds", number(r.cpuSeconds)},
                    {"runs", r.runs},
                    {"figures", figures},
                    {"measured", r.measured},
                    {"target", r.target},
                    {"verdict", verdictName(r.verdict)},
                    {"note", r.note}});
  }
  json doc = {{"kvscope_bench", 1}, {"quick", result.quick}, {"machine", machine}, {"rows", rows}};
  return doc.dump(2) + "\n";
}

}  // namespace kvscope::bench
