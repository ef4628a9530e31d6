// SPDX-License-Identifier: GPL-3.0-or-later
// Capacity and decode-cost planning: how many tokens a KV cache format fits into the memory
// left after weights, and what one decode step costs in bytes read and dequantization work
// (docs/search-and-capacity.md states the model).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "core/util/status.h"

namespace kvscope {

/// The KV-cache shape of a model: what bytes per token depend on.
struct ModelShape {
  int layers = 0;
  int kvHeads = 0;
  int headDim = 0;
};

/// Dequantization work of one format, per element and per scale group / block.
struct DequantOps {
  double perElement = 0;  ///< unpack + decode + scale (+ min)
  double perGroup = 0;    ///< turning the group's stored metadata into a float scale (and min)
};

/// The op-count model of a spec's format (docs/search-and-capacity.md has the table).
DequantOps dequantOps(const QuantSpec& spec);

/// Vendor datasheet figures of an accelerator.
struct DeviceInfo {
  std::string_view name;          ///< "h100", "h200", "a100", "l4", "rtx4090"
  std::string_view description;   ///< the exact product the figures are for
  double bandwidth;               ///< memory bandwidth, bytes/s
  double fp16Dense;               ///< dense FP16 tensor throughput, FLOP/s (no sparsity)
  double int8Dense;               ///< dense INT8 tensor throughput, OP/s (no sparsity)
  std::string_view source;        ///< the datasheet the figures come from
};
/// Every known device, in the order `--device` lists them.
std::span<const DeviceInfo> deviceTable();
/// Looks a device up by name; nullptr when unknown.
const DeviceInfo* findDevice(std::string_view name);

/// The hardware a decode estimate uses.
struct DecodeHardware {
  std::string name;        ///< device name or "custom"
  double bandwidth = 0;    ///< bytes/s
  double opsPerSecond = 0; ///< dequantization ops/s (devices: the dense FP16 tensor figure)
  std::string opsSource;   ///< which figure opsPerSecond is
};

/// What to plan for.
struct CapacityRequest {
  ModelShape shape;
  Plan key;     ///< a spec or a plan (§12): each layer costs what its own spec stores
  Plan value;
  double memoryBytes = 80.0 * (1ull << 30);  ///< accelerator memory
  double weightsBytes = 0;                   ///< memory the weights (and anything else) take
  int64_t context = 4096;                    ///< tokens per sequence; sets per-group metadata
  int64_t batch = 1;                         ///< sequences decoded together
  std::optional<DecodeHardware> decode;      ///< set for decode cost
};

/// Decode cost of one step (one new token for each of `batch` sequences of `context` tokens).
struct DecodeCost {
  double bytesRead = 0;       ///< KV bytes read: batch · context · bytes_per_token
  double dequantOps = 0;      ///< batch · Σ layers (K and V) of element and group ops
  double memorySeconds = 0;   ///< bytesRead / bandwidth
  double computeSeconds = 0;  ///< dequantOps / opsPerSecond
  double seconds = 0;         ///< roofline: max of the two
  bool memoryBound = true;
};

/// One K/V choice (fp16 baseline or the requested specs).
struct CapacityEntry {
  std::string name;            ///< "fp16" or "quantized"
  std::string keySpec;         ///< canonical spec (or plan) strings
  std::string valueSpec;
  double keyBitsPerElement = 0;    ///< a plan's: storage over all layers / all elements
  double valueBitsPerElement = 0;
  double bytesPerToken = 0;    ///< Σ layers of K and V bits / 8 / context
  double tokensFit = 0;        ///< floor(available / bytes_per_token)
  int64_t sequencesFit = 0;    ///< floor(available / (context · bytes_per_token))
  bool batchFits = false;      ///< batch sequences of context tokens fit
  std::optional<DecodeCost> decode;
};

/// The plan.
struct CapacityReport {
  CapacityRequest request;
  double availableBytes = 0;   ///< memory − weights (≥ 0)
  CapacityEntry fp16;
  CapacityEntry quantized;
  std::vector<std::string> notes;  ///< e.g. kept tokens that exceed the context
};

/// Computes the plan; errors name the bad field.
Expected<CapacityReport> planCapacity(const CapacityRequest& request);

/// The formulas, one line each, as reports print them.
std::vector<std::string> capacityFormulas();

}  // namespace kvscope
