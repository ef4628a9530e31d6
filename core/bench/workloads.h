// SPDX-License-Identifier: GPL-3.0-or-later
// The work `kvscope-cli bench` and kvscope_bench time, each as one function: a quantize round
// trip and attention metrics (the interactive path lives in interactive.h, opening a dump in
// dump_workloads.h). Shapes are
// parameters so the same code serves the full-size figures and the quick smoke run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/bench/interactive.h"
#include "core/bench/measure.h"
#include "core/quant/formats.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope::bench {

/// One layer tensor quantized and reconstructed under one spec.
struct QuantizeFigures {
  std::string spec;      ///< the spec string as given
  int64_t elements = 0;  ///< KVH·T·D
  Sample pipeline;       ///< quantizeTensorInto: steps 1-6 into a reused output buffer
  Sample copy;           ///< STREAM copy of the same bytes, one run before each pipeline run
  Sample fresh;          ///< quantizeTensor: the same with a freshly allocated result each run
  Sample format;         ///< quantizeFormatInPlace alone on a prepared copy (step 5 only)
};

/// Times the quantize round trip of `x` under `spec` (parsed with parseSpec).
Expected<QuantizeFigures> benchQuantize(const Tensor3& x, std::string_view spec,
                                        const Budget& budget);

/// The shape of one layer's attention work.
struct AttentionShape {
  int heads = 32;    ///< H
  int kvHeads = 8;   ///< KVH
  int tokens = 8192; ///< T
  int queries = 64;  ///< Tq
  int dim = 128;     ///< D
};

/// Attention metrics of one layer, all three cases.
struct AttentionFigures {
  AttentionShape shape;
  Sample time;
  double countedFlops = 0;  ///< attentionFlops(shape): what the GFLOP/s figure divides
  double engineFlops = 0;   ///< what the engine itself reports doing (attention_engine::gemmFlops)
};

/// FLOPs we count for attention metrics: 3 cases × (scores q·k + output P·v) × 2·H·Tq·T·D,
/// no causal discount (queries are the last Tq positions, so under Tq/T of the work is masked).
double attentionFlops(const AttentionShape& shape);

/// Times attentionMetrics on synthetic Q, K, V and perturbed K̂, V̂ of `shape`.
Expected<AttentionFigures> benchAttention(const AttentionShape& shape, const Budget& budget);

/// The attention work of `kvscope-cli eval` on several layers: K and V quantized with a spec
/// (real reconstructions), then the three cases of every layer (attentionMetricsOfLayers).
struct EvalAttentionFigures {
  AttentionShape shape;     ///< one layer's shape
  int layers = 0;
  std::string spec;         ///< the K and V spec
  Sample time;              ///< all layers' attention metrics
  double countedFlops = 0;  ///< layers × attentionFlops(shape)
  double engineFlops = 0;   ///< layers × attention_engine::gemmFlops
};

/// Times the attention metrics of `layers` layers of `shape` as `kvscope-cli synth` makes them
/// (fp16-rounded), K and V quantized with `spec`.
Expected<EvalAttentionFigures> benchEvalAttention(const AttentionShape& shape, int layers, std::string_view spec,
                                                  const Budget& budget);

}  // namespace kvscope::bench
