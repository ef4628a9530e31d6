// SPDX-License-Identifier: GPL-3.0-or-later
// Immutable snapshots the workers hand to the views: one layer's tensors as read from the dump,
// and their reconstructions under the current K and V specs.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/io/dump.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope::ui {

/// One layer of one sequence, as read (float32).
struct LayerTensors {
  int layer = 0;
  Tensor3 key;
  Tensor3 value;
  std::optional<Tensor3> query;
  std::optional<Tensor3> keyPreRope;
};

/// The tensors a view can show: the dump's K (after RoPE), K before RoPE, V.
enum class ViewTensor { Key, KeyPreRope, Value };
/// "K", "pre-RoPE K", "V".
const char* viewTensorLabel(ViewTensor t);

/// A layer quantized under one (K spec, V spec) pair.
struct LayerQuant {
  std::shared_ptr<const LayerTensors> tensors;
  QuantSpec keySpec;
  QuantSpec valueSpec;
  Tensor3 keyHat;    ///< reconstruction of `key`
  Tensor3 valueHat;  ///< reconstruction of `value`
  std::optional<Tensor3> keyPreRopeHat;  ///< keyHat with RoPE undone, when the dump has pre-RoPE K
  StorageCount keyStorage;
  StorageCount valueStorage;

  /// The original of `t`, or nullptr when the dump lacks it.
  [[nodiscard]] const Tensor3* original(ViewTensor t) const;
  /// The reconstruction of `t`, or nullptr when the dump lacks it.
  [[nodiscard]] const Tensor3* reconstruction(ViewTensor t) const;
  /// The spec that applies to `t`.
  [[nodiscard]] const QuantSpec& spec(ViewTensor t) const {
    return t == ViewTensor::Value ? valueSpec : keySpec;
  }
};

using LayerTensorsPtr = std::shared_ptr<const LayerTensors>;
using LayerQuantPtr = std::shared_ptr<const LayerQuant>;

/// Reads every tensor of `layer` that the dump has.
Expected<LayerTensorsPtr> readLayer(const Dump& dump, int layer, const Progress& progress = {});

/// Quantizes K and V of a read layer (quantization.md §1).
Expected<LayerQuantPtr> quantizeLayer(const DumpInfo& info, LayerTensorsPtr tensors,
                                      const QuantSpec& keySpec, const QuantSpec& valueSpec,
                                      const Progress& progress = {});

/// The tensor that step 5 (the format) sees for `t` under `spec`: the chosen source (pre-RoPE
/// for prerope keys), quantized tokens [S, T-R) only, rotated, outliers zeroed. The histogram
/// asks core's describeGroup about a group of this tensor. `firstToken` receives S.
Tensor3 formatInput(const LayerTensors& tensors, ViewTensor t, const QuantSpec& spec,
                    int64_t* firstToken);

}  // namespace kvscope::ui
