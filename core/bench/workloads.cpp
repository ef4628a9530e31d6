// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/bench/workloads.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/attention/attention.h"
#include "core/attention/engine.h"
#include "core/quant/formats.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"
#include "core/synth/synth.h"
#include "core/util/small_float.h"

namespace kvscope::bench {

Expected<QuantizeFigures> benchQuantize(const Tensor3& x, std::string_view spec,
                                        const Budget& budget) {
  auto parsed = parseSpec(spec);
  if (!parsed) return parsed.status();
  const QuantSpec qs = *parsed;
  QuantizeFigures figures;
  figures.spec = std::string(spec);
  figures.elements = static_cast<int64_t>(x.size());

  QuantInput input;
  input.tensor = &x;
  // The round trip as the interactive path and eval run it: into an output whose buffer is reused
  // from the previous run (the first run, untimed, allocates and touches it).
  QuantOutput reused;
  KVS_RETURN_IF_ERROR(quantizeTensorInto(input, qs, reused));
  // Each run is paired with a copy of the same bytes just before it (untimed for the pipeline,
  // timed on its own), so the bandwidth the ratio divides by is the one the machine had while
  // this spec ran: on a shared machine it drifts by ±30 % within seconds.
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> copyDst(x.size());
  parallelCopy(copyDst.data(), x.data.data(), n);  // touches the destination
  std::vector<double> copyTimes;
  auto pipeline = timeRepeated([&] { return quantizeTensorInto(input, qs, reused); }, budget, [&] {
    const double t0 = nowSeconds();
    parallelCopy(copyDst.data(), x.data.data(), n);
    copyTimes.push_back(nowSeconds() - t0);
  });
  if (!pipeline) return pipeline.status().withContext("quantizeTensorInto '" + figures.spec + "'");
  figures.pipeline = *pipeline;
  std::sort(copyTimes.begin(), copyTimes.end());
  figures.copy.runs = static_cast<int>(copyTimes.size());
  figures.copy.best = copyTimes.front();
  figures.copy.median = copyTimes[copyTimes.size() / 2];

  // The same returning a freshly allocated result each run (quantizeTensor): what a caller that
  // does not reuse buffers pays in page faults.
  auto fresh = timeRepeated(
      [&]() -> Status {
        auto out = quantizeTensor(input, qs);
        return out ? Status::ok() : out.status();
      },
      budget);
  if (!fresh) return fresh.status().withContext("quantizeTensor '" + figures.spec + "'");
  figures.fresh = *fresh;

  // Step 5 alone: the format on a copy refreshed (untimed) before each run, so every run sees
  // the original data rather than an already quantized tensor.
  Tensor3 work = x;
  auto format = timeRepeated(
      [&] { return quantizeFormatInPlace(work, qs); }, budget,
      [&] { std::copy(x.data.begin(), x.data.end(), work.data.begin()); });
  if (!format) return format.status().withContext("quantizeFormatInPlace '" + figures.spec + "'");
  figures.format = *format;
  return figures;
}

double attentionFlops(const AttentionShape& s) {
  const double perProduct = 2.0 * s.heads * s.queries * static_cast<double>(s.tokens) * s.dim;
  return 3.0 /* cases */ * 2.0 /* q·k and P·v */ * perProduct;
}

Expected<AttentionFigures> benchAttention(const AttentionShape& shape, const Budget& budget) {
  if (shape.kvHeads <= 0 || shape.heads % shape.kvHeads != 0 || shape.queries > shape.tokens) {
    return Status::invalidArgument("attention benchmark: inconsistent shape");
  }
  const Tensor3 query = syntheticTensor(shape.heads, shape.queries, shape.dim, 11);
  const Tensor3 key = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 12);
  const Tensor3 value = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 13);
  // The engine's cost does not depend on how good the reconstruction is: noise of roughly
  // int4's size stands in for it, so this benchmark runs without the quantizers.
  const Tensor3 keyHat = perturbed(key, 0.05, 14);
  const Tensor3 valueHat = perturbed(value, 0.05, 15);
  AttentionInput input;
  input.query = &query;
  input.key = &key;
  input.value = &value;
  input.keyHat = &keyHat;
  input.valueHat = &valueHat;

  AttentionFigures figures;
  figures.shape = shape;
  figures.countedFlops = attentionFlops(shape);
  figures.engineFlops = attention_engine::gemmFlops(input, AttentionCaseSelection{});
  auto time = timeRepeated(
      [&]() -> Status {
        auto metrics = attentionMetrics(input);
        return metrics ? Status::ok() : metrics.status();
      },
      budget);
  if (!time) return time.status().withContext("attentionMetrics");
  figures.time = *time;
  return figures;
}

Expected<EvalAttentionFigures> benchEvalAttention(const AttentionShape& shape, int layers, std::string_view spec,
                                                  const Budget& budget) {
  if (shape.kvHeads <= 0 || shape.heads % shape.kvHeads != 0 || shape.queries > shape.tokens || layers < 1) {
    return Status::invalidArgument("attention benchmark: inconsistent shape");
  }
  auto parsed = parseSpec(spec);
  if (!parsed) return parsed.status();
  struct Layer {
    Tensor3 q, k, v;
    QuantOutput kHat, vHat;
  };
  std::vector<Layer> data(static_cast<size_t>(layers));
  std::vector<AttentionInput> inputs;
  EvalAttentionFigures figures;
  figures.shape = shape;
  figures.layers = layers;
  figures.spec = std::string(spec);
  // The layers `kvscope-cli synth` writes for this shape (its defaults), as eval reads them back
  // from the fp16 dump: attention's cost depends on the data (how many probabilities underflow,
  // how many keys tie for the maximum), so the workload uses the dump's.
  SynthOptions synth;
  synth.layers = layers;
  synth.kvHeads = shape.kvHeads;
  synth.heads = shape.heads;
  synth.tokens = shape.tokens;
  synth.queries = shape.queries;
  synth.headDim = shape.dim;
  KVS_RETURN_IF_ERROR(validateSynthOptions(synth));
  const auto asFp16 = [](Tensor3 t) {
    for (float& x : t.data) x = fp::roundFp16(x);
    return t;
  };
  for (int l = 0; l < layers; ++l) {
    Layer& d = data[static_cast<size_t>(l)];
    SynthLayer layer = synthLayer(synth, l);
    d.q = asFp16(std::move(layer.query));
    d.k = asFp16(std::move(layer.key));
    d.v = asFp16(std::move(layer.value));
    QuantInput k{&d.k, nullptr, {}}, v{&d.v, nullptr, {}};
    KVS_RETURN_IF_ERROR(quantizeTensorInto(k, *parsed, d.kHat));
    KVS_RETURN_IF_ERROR(quantizeTensorInto(v, *parsed, d.vHat));
  }
  for (Layer& d : data) {
    AttentionInput in;
    in.query = &d.q;
    in.key = &d.k;
    in.value = &d.v;
    in.keyHat = &d.kHat.reconstruction;
    in.valueHat = &d.vHat.reconstruction;
    inputs.push_back(in);
    figures.countedFlops += attentionFlops(shape);
    figures.engineFlops += attention_engine::gemmFlops(in, AttentionCaseSelection{});
  }
  auto time = timeRepeated(
      [&]() -> Status {
        auto metrics = attentionMetricsOfLayers(inputs);
        return metrics ? Status::ok() : metrics.status();
      },
      budget);
  if (!time) return time.status().withContext("attentionMetricsOfLayers");
  figures.time = *time;
  return figures;
}

}  // namespace kvscope::bench
