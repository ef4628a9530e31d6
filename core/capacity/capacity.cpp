// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/capacity/capacity.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/quantize.h"
#include "core/quant/rotation.h"

namespace kvscope {
namespace {

// Dense (no structured sparsity) figures from the vendors' datasheets; bandwidth in bytes/s.
constexpr std::array<DeviceInfo, 5> kDevices{{
    {"h100", "NVIDIA H100 SXM5 80GB", 3.35e12, 989.5e12, 1979e12,
     "NVIDIA H100 Tensor Core GPU datasheet (SXM): 3.35 TB/s HBM3; FP16 Tensor 1,979 TFLOPS and "
     "INT8 Tensor 3,958 TOPS with sparsity, half that dense"},
    {"h200", "NVIDIA H200 SXM 141GB", 4.8e12, 989.5e12, 1979e12,
     "NVIDIA H200 Tensor Core GPU datasheet (SXM): 4.8 TB/s HBM3e; FP16 Tensor 1,979 TFLOPS and "
     "INT8 Tensor 3,958 TOPS with sparsity, half that dense"},
    {"a100", "NVIDIA A100 SXM4 80GB", 2.039e12, 312e12, 624e12,
     "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM): 2,039 GB/s HBM2e; FP16 Tensor 312 TFLOPS, "
     "INT8 Tensor 624 TOPS dense"},
    {"l4", "NVIDIA L4 24GB", 300e9, 121e12, 242.5e12,
     "NVIDIA L4 Tensor Core GPU datasheet: 300 GB/s GDDR6; FP16 Tensor 242 TFLOPS and INT8 Tensor "
     "485 TOPS with sparsity, half that dense"},
    {"rtx4090", "NVIDIA GeForce RTX 4090 24GB", 1008e9, 330.3e12, 660.6e12,
     "NVIDIA Ada Lovelace architecture whitepaper (RTX 4090): 1,008 GB/s GDDR6X; FP16 Tensor "
     "(FP16 accumulate) 330.3 TFLOPS, INT8 Tensor 660.6 TOPS dense"},
}};

struct TensorCost {
  double bits = 0;
  double ops = 0;
  double bitsPerElement = 0;
};

TensorCost costOf(const QuantSpec& spec, const ModelShape& shape, int64_t context) {
  const StorageCount storage = storageFor(spec, shape.kvHeads, context, shape.headDim);
  const int64_t quantTokens = quantizedTokens(spec, context).count;
  const double quantized = static_cast<double>(shape.kvHeads) * static_cast<double>(quantTokens) *
                           shape.headDim;
  const DequantOps ops = dequantOps(spec);
  double total = 0;
  const FormatInfo& info = formatInfo(spec.format);
  if (!info.exact && quantTokens > 0) {
    total = quantized * ops.perElement +
            static_cast<double>(groupCount(spec, shape.kvHeads, quantTokens, shape.headDim)) *
                ops.perGroup;
    // Rotating each reconstructed vector back: one add or subtract per element per butterfly
    // stage for the Hadamard kinds, a D×D product for rot=random.
    total += quantized / static_cast<double>(shape.headDim) * rotationCost(spec, shape.headDim);
    // tqp's QJL correction Sᵀ·sign(S·r): a D×D product per vector, D multiply-adds per element.
    if (info.dequant.perElementPerDim > 0) {
      total += quantized * static_cast<double>(shape.headDim) * info.dequant.perElementPerDim;
    }
    // RoPE on the reconstruction: two multiplies and an add per element.
    if (spec.prerope) total += quantized * 3;
    total += storage.outlierBits / 48.0;  // one scatter per restored outlier
  }
  return {storage.totalBits(), total, storage.bitsPerElement()};
}

/// A plan's cost over all layers: bits and ops summed, bits per element over all elements.
TensorCost planCost(const Plan& plan, const ModelShape& shape, int64_t context) {
  const double layers = shape.layers;
  if (isUniform(plan)) {
    const TensorCost c = costOf(plan.base, shape, context);
    return {layers * c.bits, layers * c.ops, c.bitsPerElement};
  }
  TensorCost sum;
  for (int l = 0; l < shape.layers; ++l) {
    const TensorCost c = costOf(specForLayer(plan, l, shape.layers), shape, context);
    sum.bits += c.bits;
    sum.ops += c.ops;
  }
  const double elements = layers * static_cast<double>(shape.kvHeads) * static_cast<double>(context) * shape.headDim;
  sum.bitsPerElement = elements > 0 ? sum.bits / elements : 0;
  return sum;
}

CapacityEntry entryFor(const std::string& name, const Plan& key, const Plan& value,
                       const CapacityRequest& r, double available) {
  CapacityEntry e;
  e.name = name;
  e.keySpec = toString(key);
  e.valueSpec = toString(value);
  const TensorCost k = planCost(key, r.shape, r.context);
  const TensorCost v = planCost(value, r.shape, r.context);
  e.keyBitsPerElement = k.bitsPerElement;
  e.valueBitsPerElement = v.bitsPerElement;
  e.bytesPerToken = (k.bits + v.bits) / 8.0 / static_cast<double>(r.context);
  e.tokensFit = e.bytesPerToken > 0 ? std::floor(available / e.bytesPerToken) : 0;
  const double perSequence = e.bytesPerToken * static_cast<double>(r.context);
  e.sequencesFit = perSequence > 0 ? static_cast<int64_t>(std::floor(available / perSequence)) : 0;
  e.batchFits = perSequence * static_cast<double>(r.batch) <= available;
  if (r.decode) {
    DecodeCost d;
    d.bytesRead = static_cast<double>(r.batch) * perSequence;
    d.dequantOps = static_cast<double>(r.batch) * (k.ops + v.ops);
    d.memorySeconds = d.bytesRead / r.decode->bandwidth;
    d.computeSeconds = d.dequantOps / r.decode->opsPerSecond;
    d.seconds = std::max(d.memorySeconds, d.computeSeconds);
    d.memoryBound = d.memorySeconds >= d.computeSeconds;
    e.decode = d;
  }
  return e;
}

}  // namespace

DequantOps dequantOps(const QuantSpec& spec) {
  // The row's cost (format_table.cpp): unpack (shift + mask) for sub-byte payloads, decode
  // (int→float, table lookup or fp8 convert), then scale (multiply) and, with a min, an add.
  const FormatInfo& info = formatInfo(spec.format);
  const DequantCost cost = info.dequantFor != nullptr ? info.dequantFor(spec) : info.dequant;
  return {cost.perElement, cost.perGroup};
}

std::span<const DeviceInfo> deviceTable() { return kDevices; }

const DeviceInfo* findDevice(std::string_view name) {
  for (const DeviceInfo& d : kDevices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

Expected<CapacityReport> planCapacity(const CapacityRequest& r) {
  if (r.shape.layers <= 0 || r.shape.kvHeads <= 0 || r.shape.headDim <= 0) {
    return Status::invalidArgument("capacity: layers, kv heads and head dim must be positive");
  }
  if (r.context <= 0) return Status::invalidArgument("capacity: context must be ≥ 1 token");
  if (r.batch <= 0) return Status::invalidArgument("capacity: batch must be ≥ 1");
  if (!(r.memoryBytes > 0)) return Status::invalidArgument("capacity: memory must be > 0");
  if (!(r.weightsBytes >= 0)) return Status::invalidArgument("capacity: weights must be ≥ 0");
  if (r.decode && (!(r.decode->bandwidth > 0) || !(r.decode->opsPerSecond > 0))) {
    return Status::invalidArgument("capacity: decode bandwidth and op rate must be > 0");
  }
  SpecContext keyContext{true, r.shape.kvHeads, r.shape.headDim, true};
  SpecContext valueContext{false, r.shape.kvHeads, r.shape.headDim, true};
  KVS_RETURN_IF_ERROR(validatePlan(r.key, keyContext, r.shape.layers).withContext("--key"));
  KVS_RETURN_IF_ERROR(validatePlan(r.value, valueContext, r.shape.layers).withContext("--value"));

  CapacityReport report;
  report.request = r;
  report.availableBytes = std::max(0.0, r.memoryBytes - r.weightsBytes);
  if (r.weightsBytes >= r.memoryBytes) report.notes.push_back("the weights take all the memory");
  for (const Plan* p : {&r.key, &r.value}) {
    bool covered = false;
    for (int l = 0; l < r.shape.layers; ++l) {
      covered = covered || quantizedTokens(specForLayer(*p, l, r.shape.layers), r.context).count == 0;
    }
    if (covered) {
      report.notes.push_back(std::string(p == &r.key ? "key" : "value") +
                             ": kept tokens (sinks, residual or an unfilled chunk) cover the whole context, so it "
                             "is stored in fp16");
    }
  }
  report.fp16 = entryFor("fp16", defaultSpec(FormatId::Fp16), defaultSpec(FormatId::Fp16), r,
                         report.availableBytes);
  report.quantized = entryFor("quantized", r.key, r.value, r, report.availableBytes);
  return report;
}

std::vector<std::string> capacityFormulas() {
  return {
      "bytes_per_token = Σ_layers (K bits + V bits) / 8 / context, bits from storageFor at the "
      "context (payload + group metadata + outliers + kept tokens)",
      "available = memory − weights; tokens_fit = floor(available / bytes_per_token); "
      "sequences_fit = floor(available / (context · bytes_per_token))",
      "decode step: bytes_read = batch · context · bytes_per_token; dequant_ops = batch · "
      "Σ_layers,K,V (quantized_elements · ops_per_element + groups · ops_per_group [+ rotation, "
      "RoPE, outliers])",
      "time = max(bytes_read / bandwidth, dequant_ops / op_rate) (roofline; KV cache only, no "
      "weights or attention arithmetic)",
  };
}

}  // namespace kvscope
