// SPDX-License-Identifier: GPL-3.0-or-later
// What the GUI's views inspect: one layer's tensors as read from the dump (whole, or the kv head in
// view first), the views' data of one kv head under one (K spec, V spec) setting, and which reads a
// request needs. Immutable snapshots (shared_ptr<const …>) that the GUI's lanes hand to its views;
// plain core code, so the GUI's data path runs and is benchmarked without Qt (core/bench).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "core/io/dump.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"
#include "core/util/status.h"
#include "core/util/tensor.h"
#include "core/inspect/view_data.h"

namespace kvscope {

/// One layer of one sequence, as read (float32): the whole layer (readLayer), or only the kv head
/// in view (readLayerHead), which a switch to a layer not in the cache reads first.
struct LayerTensors {
  int layer = 0;
  /// key, value and keyPreRope hold the layer's kv heads [firstHead, firstHead + key.heads), query
  /// the query heads of those kv heads; index them with headIndex, never with a layer head.
  int64_t firstHead = 0;
  int64_t kvHeads = 0;  ///< the layer's kv heads (KVH)
  Tensor3 key;
  Tensor3 value;
  std::optional<Tensor3> query;
  std::optional<Tensor3> keyPreRope;
  /// The dump has pre-RoPE K but this partial read left it out (no view showed it).
  bool keyPreRopeSkipped = false;

  /// Every kv head of the layer is here.
  [[nodiscard]] bool whole() const { return firstHead == 0 && key.heads == kvHeads; }
  /// Index in key/value/keyPreRope of layer kv head `kvHead`; -1 when it was not read.
  [[nodiscard]] int64_t headIndex(int64_t kvHead) const {
    return kvHead >= firstHead && kvHead < firstHead + key.heads ? kvHead - firstHead : -1;
  }
};

/// The tensors a view can show: the dump's K (after RoPE), K before RoPE, V.
enum class ViewTensor { Key, KeyPreRope, Value };
/// "K", "pre-RoPE K", "V".
const char* viewTensorLabel(ViewTensor t);
/// The dump's name for the same tensor.
TensorKind tensorKindOf(ViewTensor t);

/// A layer quantized under one (K spec, V spec) pair, as far as the views need it: usually only
/// the selected kv head (ViewData::wholeLayer says which), with the views' data computed off the
/// GUI thread (core's computeViewData).
struct LayerQuant : ViewData {
  std::shared_ptr<const LayerTensors> tensors;
  QuantSpec keySpec;
  QuantSpec valueSpec;

  /// The original of `t`, or nullptr when the dump lacks it (or a partial read left it out);
  /// index its heads with originalHead: it may hold only the kv head in view.
  [[nodiscard]] const Tensor3* original(ViewTensor t) const;
  /// Index in original() of layer kv head `head`; -1 when that head was not read.
  [[nodiscard]] int64_t originalHead(int64_t head) const { return tensors ? tensors->headIndex(head) : -1; }
  /// The reconstruction of `t`, or nullptr when it was not computed; index its heads with hatHead.
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
/// Reads kv head `kvHead` of `layer` only (Dump::readHeads): K, V, the head's query heads and, when
/// `keyPreRope` and the dump has it, pre-RoPE K.
Expected<LayerTensorsPtr> readLayerHead(const Dump& dump, int layer, int64_t kvHead, bool keyPreRope,
                                        const Progress& progress = {});
/// The whole layer of `part` (a readLayerHead result): its heads copied, the others read one kv head
/// at a time, so that a cancel (or a read of another lane through the same reader) waits for at most
/// one head's read.
Expected<LayerTensorsPtr> completeLayer(const Dump& dump, const LayerTensors& part, const Progress& progress = {});

/// What the layer in view must hold for a view request under the settings in force.
struct LayerNeeds {
  bool preRope = false;  ///< pre-RoPE K: a view shows it, or a setting's K spec is prerope
  bool perHead = false;  ///< one kv head suffices: every spec in force quantizes per head
  /// Whether `tensors` (the whole layer, or the heads it holds) is enough for kv head `kvHead`.
  [[nodiscard]] bool metBy(const LayerTensors& tensors, int64_t kvHead) const;
};

/// One setting's specs of the layer in view.
struct LayerSpecs {
  QuantSpec key;
  QuantSpec value;
};

/// What `request` needs of the layer under `settings` (B's specs of the layer, then A's when a
/// setting is pinned); `showsPreRope`: a view shows pre-RoPE K or its reconstruction.
[[nodiscard]] LayerNeeds layerNeeds(const DumpInfo& info, const ViewRequest& request,
                                    const std::vector<LayerSpecs>& settings, bool showsPreRope);

/// The last layers read, so that stepping back to one reads nothing. A whole layer is never
/// replaced by a partial read of it.
class LayerCache {
 public:
  explicit LayerCache(int capacity = 4) : capacity_(capacity) {}
  /// Keeps `tensors`, forgetting the lowest-numbered layers beyond the capacity, never `keep`.
  void put(const LayerTensorsPtr& tensors, int keep);
  /// The layer's tensors, or nullptr.
  [[nodiscard]] LayerTensorsPtr find(int layer) const;
  void clear() { layers_.clear(); }

 private:
  std::map<int, LayerTensorsPtr> layers_;
  int capacity_;
};

/// Keeps freed blocks of up to 32 MiB in the process (glibc): an attention row or a histogram's
/// scratch freed and allocated again on every slider step would otherwise be returned to the
/// kernel and page-faulted back (~10-60 µs per 4 KiB page on a VM). Call once at startup.
void keepFreedMemoryForReuse();

/// The layer lane's reused memory: results the GUI no longer holds are recomputed in place, so a
/// slider drag does not allocate (and page-fault) a layer's worth of memory per step.
class LayerQuantPool {
 public:
  /// Computes the views' data of `request` (core's computeViewData) into a free pooled result.
  /// Call from one thread at a time (the layer lane).
  Expected<LayerQuantPtr> compute(const DumpInfo& info, const LayerTensorsPtr& tensors,
                                  const QuantSpec& keySpec, const QuantSpec& valueSpec,
                                  const ViewRequest& request, const Progress& progress = {});

 private:
  std::vector<std::shared_ptr<LayerQuant>> results_;
  ViewWorkspace workspace_;
};

}  // namespace kvscope
