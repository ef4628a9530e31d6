// SPDX-License-Identifier: GPL-3.0-or-later
// Google Benchmark view of the five groups of `kvscope-cli bench` (docs/performance.md).
// KVSCOPE_BENCH_QUICK=1 switches to the quick shapes; KVSCOPE_BENCH_TMP names the folder for
// the generated dumps of eval and open (default $TMPDIR or /tmp).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/bench/dump_workloads.h"
#include "core/bench/measure.h"
#include "core/bench/suite.h"
#include "core/bench/workloads.h"
#include "core/quant/quantize.h"
#include "core/quant/formats.h"
#include "core/quant/spec.h"
#include "core/attention/attention.h"

namespace kvscope::bench {
namespace {

bool quick() {
  const char* v = std::getenv("KVSCOPE_BENCH_QUICK");
  return v && *v && std::string(v) != "0";
}

std::string scratchFolder() {
  for (const char* name : {"KVSCOPE_BENCH_TMP", "TMPDIR"}) {
    const char* v = std::getenv(name);
    if (v && *v) return v;
  }
  return "/tmp";
}

// One layer of K: KVH=8, T=32768 (quick 512), D=128, made once.
const Tensor3& layerKey() {
  static const Tensor3 x = syntheticTensor(8, quick() ? 512 : 32768, 128, 1);
  return x;
}

// This machine's copy bandwidth for one layer's bytes, measured once per run.
double copyBandwidth() {
  static const double rate = measureCopy(layerKey().size() * sizeof(float)).bytesPerSecond;
  return rate;
}

double gemmRate() {
  static const double rate = measureGemm(quick() ? 256 : 1024).flopsPerSecond;
  return rate;
}

// (bytes read + written per second) / the copy's, for a run of `seconds` over n floats.
double bandwidthRatio(int64_t n, double seconds) {
  return 2.0 * static_cast<double>(n) * sizeof(float) / seconds / copyBandwidth();
}

void BM_Copy(benchmark::State& state) {
  const auto n = static_cast<int64_t>(layerKey().size());
  std::vector<float> src(layerKey().data), dst(src.size(), 0.0f);
  for (auto _ : state) {
    parallelCopy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * n * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_Copy)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Gemm(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Matrix a = Matrix::Random(n, n), b = Matrix::Random(n, n), c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * static_cast<double>(n) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Gemm)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);

// Quantize round trip through the whole pipeline (quantizeTensorInto, reused output).
void BM_Quantize(benchmark::State& state) {
  const std::string& text = quantizeSpecs()[static_cast<size_t>(state.range(0))];
  state.SetLabel(text);
  auto spec = parseSpec(text);
  if (!spec) {
    state.SkipWithError(spec.status().message().c_str());
    return;
  }
  const Tensor3& x = layerKey();
  QuantInput input;
  input.tensor = &x;
  // Into a reused output, as eval and the GUI run it; the first call allocates and touches it.
  QuantOutput out;
  if (Status s = quantizeTensorInto(input, *spec, out); !s.isOk()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  double seconds = 0;
  for (auto _ : state) {
    const double t0 = nowSeconds();
    Status s = quantizeTensorInto(input, *spec, out);
    seconds += nowSeconds() - t0;
    if (!s.isOk()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    benchmark::DoNotOptimize(out.reconstruction.data.data());
  }
  const auto n = static_cast<int64_t>(x.size());
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * 2 * n * static_cast<int64_t>(sizeof(float)));
  // (bytes read + written)/s divided by the copy's: the fraction of memory bandwidth achieved.
  state.counters["bw_ratio"] = bandwidthRatio(n, seconds / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_Quantize)->DenseRange(0, 5)->UseRealTime()->Unit(benchmark::kMillisecond);

// Step 5 alone (quantizeFormatInPlace) on a fresh copy each iteration (copy not timed).
void BM_QuantizeFormat(benchmark::State& state) {
  const std::string& text = quantizeSpecs()[static_cast<size_t>(state.range(0))];
  state.SetLabel(text);
  auto spec = parseSpec(text);
  if (!spec) {
    state.SkipWithError(spec.status().message().c_str());
    return;
  }
  const Tensor3& x = layerKey();
  Tensor3 work = x;
  double seconds = 0;
  for (auto _ : state) {
    state.PauseTiming();
    parallelCopy(work.data.data(), x.data.data(), static_cast<int64_t>(x.size()));
    state.ResumeTiming();
    const double t0 = nowSeconds();
    Status s = quantizeFormatInPlace(work, *spec);
    seconds += nowSeconds() - t0;
    if (!s.isOk()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    benchmark::DoNotOptimize(work.data.data());
  }
  const auto n = static_cast<int64_t>(x.size());
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * 2 * n * static_cast<int64_t>(sizeof(float)));
  state.counters["bw_ratio"] = bandwidthRatio(n, seconds / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_QuantizeFormat)->DenseRange(0, 5)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Attention(benchmark::State& state) {
  AttentionShape shape;
  if (quick()) {
    shape.tokens = 1024;
    shape.queries = 16;
  }
  const Tensor3 query = syntheticTensor(shape.heads, shape.queries, shape.dim, 11);
  const Tensor3 key = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 12);
  const Tensor3 value = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 13);
  const Tensor3 keyHat = perturbed(key, 0.05, 14), valueHat = perturbed(value, 0.05, 15);
  AttentionInput input;
  input.query = &query;
  input.key = &key;
  input.value = &value;
  input.keyHat = &keyHat;
  input.valueHat = &valueHat;
  double seconds = 0;
  for (auto _ : state) {
    const double t0 = nowSeconds();
    auto m = attentionMetrics(input);
    seconds += nowSeconds() - t0;
    if (!m) {
      state.SkipWithError(m.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(m->data());
  }
  const double flops = attentionFlops(shape);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["gemm_ratio"] =
      flops / (seconds / static_cast<double>(state.iterations())) / gemmRate();
}
BENCHMARK(BM_Attention)->UseRealTime()->Unit(benchmark::kMillisecond);

// Spec change → data of the visible views of one (layer, head): arg 0 = that head only,
// 1 = the whole layer quantized first (as the GUI does for specs whose groups span heads).
void BM_Interactive(benchmark::State& state) {
  InteractiveShape shape;
  if (quick()) shape.tokens = 4096;
  const bool whole = state.range(0) != 0;
  state.SetLabel(whole ? "whole layer" : "one head");
  static const Tensor3 key = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 21);
  static const Tensor3 value = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 22);
  static const Tensor3 query = syntheticTensor(shape.heads, shape.queries, shape.dim, 23);
  const auto [keySpec, valueSpec] = interactiveSpecs();
  ViewWorkspace workspace;  // reused across iterations, as the GUI's worker does
  ViewData views;
  for (auto _ : state) {
    const Status s = recomputeViews(key, value, query, shape.kvHeads / 2, keySpec, valueSpec, whole,
                                    /*withPreRope=*/false, shape, workspace, views);
    if (!s.isOk()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    benchmark::DoNotOptimize(views.row->joint.probabilities.data());
  }
}
BENCHMARK(BM_Interactive)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

DumpShape evalShape() {
  DumpShape shape;
  if (quick()) {
    shape.layers = 2;
    shape.tokens = 1024;
    shape.queries = 16;
  }
  return shape;
}

// Whole-model eval (kivi-2): one iteration, the time of open + evaluate only (the dump is
// generated first and not timed).
void BM_Eval(benchmark::State& state) {
  for (auto _ : state) {
    auto figures = benchEval(evalShape(), "kivi-2", scratchFolder());
    if (!figures) {
      state.SkipWithError(figures.status().message().c_str());
      return;
    }
    state.SetIterationTime(figures->seconds);
    state.counters["peak_RSS_MiB"] = static_cast<double>(figures->peakRssBytes) / (1 << 20);
    state.counters["generate_s"] = figures->generateSeconds;
  }
}
BENCHMARK(BM_Eval)->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);

// Opening a 16.1 GB fp16 dump (quick: 100 MB), cold cache; RSS with the dump open.
void BM_Open(benchmark::State& state) {
  DumpShape shape;
  shape.tokens = quick() ? 4096 : 81920;
  shape.layers = quick() ? 4 : 32;
  for (auto _ : state) {
    auto figures = benchOpen(shape, scratchFolder());
    if (!figures) {
      state.SkipWithError(figures.status().message().c_str());
      return;
    }
    state.SetIterationTime(figures->seconds);
    state.counters["warm_ms"] = 1000 * figures->warmSeconds;
    state.counters["RSS_MiB"] = static_cast<double>(figures->rssAfterBytes) / (1 << 20);
    state.counters["generate_s"] = figures->generateSeconds;
  }
}
BENCHMARK(BM_Open)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvscope::bench

BENCHMARK_MAIN();
