// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/inspect/layer_data.h"

#include <algorithm>
#include <new>
#include <optional>
#include <string>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace kvscope {

const char* viewTensorLabel(ViewTensor t) {
  switch (t) {
    case ViewTensor::Key: return "K";
    case ViewTensor::KeyPreRope: return "pre-RoPE K";
    case ViewTensor::Value: return "V";
  }
  return "?";
}

TensorKind tensorKindOf(ViewTensor t) {
  switch (t) {
    case ViewTensor::Key: return TensorKind::Key;
    case ViewTensor::KeyPreRope: return TensorKind::KeyPreRope;
    case ViewTensor::Value: return TensorKind::Value;
  }
  return TensorKind::Key;
}

const Tensor3* LayerQuant::original(ViewTensor t) const {
  switch (t) {
    case ViewTensor::Key: return &tensors->key;
    case ViewTensor::KeyPreRope: return tensors->keyPreRope ? &*tensors->keyPreRope : nullptr;
    case ViewTensor::Value: return &tensors->value;
  }
  return nullptr;
}

const Tensor3* LayerQuant::reconstruction(ViewTensor t) const {
  switch (t) {
    case ViewTensor::Key: return &keyHat;
    case ViewTensor::KeyPreRope: return keyPreRopeHat ? &*keyPreRopeHat : nullptr;
    case ViewTensor::Value: return &valueHat;
  }
  return nullptr;
}

namespace {

// What readLayer and readLayerHead share: every tensor of `layer` the dump has, whole (no kvHead)
// or only kv head *kvHead (its query group; pre-RoPE K only when `keyPreRope`).
Expected<LayerTensorsPtr> readLayerTensors(const Dump& dump, int layer, std::optional<int64_t> kvHead, bool keyPreRope,
                                           const Progress& progress) {
  const DumpInfo& info = dump.info();
  const int64_t group = info.groupSize();
  auto out = std::make_shared<LayerTensors>();
  out->layer = layer;
  out->firstHead = kvHead.value_or(0);
  out->kvHeads = info.kvHeads;
  const std::string of = kvHead ? " of the head" : "";
  // Heads [first, first + count) of `kind`, or the whole tensor.
  const auto read = [&](TensorKind kind, int64_t first, int64_t count) {
    return kvHead ? dump.readHeads(layer, kind, first, count) : dump.read(layer, kind);
  };
  const int64_t h = kvHead.value_or(0);
  if (!report(progress, 0.0, "reading keys" + of)) return Status::cancelled();
  auto key = read(TensorKind::Key, h, 1);
  if (!key) return key.status();
  out->key = std::move(key).value();
  if (!report(progress, 0.3, "reading values" + of)) return Status::cancelled();
  auto value = read(TensorKind::Value, h, 1);
  if (!value) return value.status();
  out->value = std::move(value).value();
  if (info.hasQuery && (!kvHead || group > 0)) {
    if (!report(progress, 0.6, "reading queries" + of)) return Status::cancelled();
    auto query = read(TensorKind::Query, h * group, group);
    if (!query) return query.status();
    out->query = std::move(query).value();
  }
  if (info.hasKeyPreRope && keyPreRope) {
    if (!report(progress, 0.8, "reading pre-RoPE keys" + of)) return Status::cancelled();
    auto pre = read(TensorKind::KeyPreRope, h, 1);
    if (!pre) return pre.status();
    out->keyPreRope = std::move(pre).value();
  }
  out->keyPreRopeSkipped = info.hasKeyPreRope && !keyPreRope;
  return LayerTensorsPtr(std::move(out));
}

}  // namespace

Expected<LayerTensorsPtr> readLayer(const Dump& dump, int layer, const Progress& progress) {
  return readLayerTensors(dump, layer, std::nullopt, true, progress);
}

Expected<LayerTensorsPtr> readLayerHead(const Dump& dump, int layer, int64_t kvHead, bool keyPreRope,
                                        const Progress& progress) {
  return readLayerTensors(dump, layer, kvHead, keyPreRope, progress);
}

Expected<LayerTensorsPtr> completeLayer(const Dump& dump, const LayerTensors& part, const Progress& progress) {
  const DumpInfo& info = dump.info();
  const int64_t group = info.groupSize();
  auto out = std::make_shared<LayerTensors>();
  out->layer = part.layer;
  out->kvHeads = info.kvHeads;
  std::vector<std::pair<TensorKind, Tensor3*>> kinds;
  try {
    out->key = Tensor3(info.kvHeads, info.tokens, info.headDim);
    out->value = Tensor3(info.kvHeads, info.tokens, info.headDim);
    kinds = {{TensorKind::Key, &out->key}, {TensorKind::Value, &out->value}};
    if (info.hasQuery && group > 0) {
      out->query.emplace(info.heads, info.queries, info.headDim);
      kinds.emplace_back(TensorKind::Query, &*out->query);
    }
    if (info.hasKeyPreRope) {
      out->keyPreRope.emplace(info.kvHeads, info.tokens, info.headDim);
      kinds.emplace_back(TensorKind::KeyPreRope, &*out->keyPreRope);
    }
  } catch (const std::bad_alloc&) {
    return Status::resourceLimit(info.path + ": not enough memory to read layer " + std::to_string(part.layer));
  }
  const auto partOf = [&](TensorKind kind) -> const Tensor3* {
    switch (kind) {
      case TensorKind::Key: return &part.key;
      case TensorKind::Value: return &part.value;
      case TensorKind::Query: return part.query ? &*part.query : nullptr;
      case TensorKind::KeyPreRope: return part.keyPreRope ? &*part.keyPreRope : nullptr;
    }
    return nullptr;
  };
  const int64_t steps = static_cast<int64_t>(kinds.size()) * info.kvHeads;
  int64_t done = 0;
  for (const auto& [kind, full] : kinds) {
    // Heads of a [heads, tokens, dim] tensor are contiguous: head h of a kv head's group starts at
    // h * tokens * dim, for K, V, pre-RoPE K (one head per kv head) and Q (`group` heads).
    const int64_t perKv = kind == TensorKind::Query ? group : 1;
    const int64_t headSize = full->tokens * full->dim * perKv;
    const Tensor3* have = partOf(kind);
    for (int64_t h = 0; h < info.kvHeads; ++h, ++done) {
      if (!report(progress, static_cast<double>(done) / static_cast<double>(steps), "reading the rest of the layer"))
        return Status::cancelled();
      float* dest = full->data.data() + h * headSize;
      const int64_t index = part.headIndex(h);
      if (have && index >= 0) {
        std::copy_n(have->data.data() + index * headSize, headSize, dest);
        continue;
      }
      auto read = dump.readHeadsInto(part.layer, kind, h * perKv, perKv, 0, dest, headSize);
      if (!read) return read.status();
    }
  }
  return LayerTensorsPtr(std::move(out));
}

bool LayerNeeds::metBy(const LayerTensors& tensors, int64_t kvHead) const {
  if (tensors.whole()) return !(preRope && tensors.keyPreRopeSkipped);
  return perHead && tensors.headIndex(kvHead) >= 0 && !(preRope && tensors.keyPreRopeSkipped);
}

LayerNeeds layerNeeds(const DumpInfo& info, const ViewRequest& request, const std::vector<LayerSpecs>& settings,
                      bool showsPreRope) {
  LayerNeeds needs;
  needs.preRope = showsPreRope || request.keyPreRopeHat;
  needs.perHead = !request.wholeLayer;
  for (const LayerSpecs& s : settings) {
    needs.preRope = needs.preRope || s.key.prerope;
    needs.perHead = needs.perHead && quantizesPerHead(s.key, info.headDim) && quantizesPerHead(s.value, info.headDim);
  }
  needs.preRope = needs.preRope && info.hasKeyPreRope;
  return needs;
}

void LayerCache::put(const LayerTensorsPtr& tensors, int keep) {
  LayerTensorsPtr& slot = layers_[tensors->layer];
  if (!slot || !slot->whole() || tensors->whole()) slot = tensors;
  while (static_cast<int>(layers_.size()) > capacity_) {
    auto victim = layers_.begin();
    if (victim->first == keep) ++victim;
    layers_.erase(victim);
  }
}

LayerTensorsPtr LayerCache::find(int layer) const {
  const auto it = layers_.find(layer);
  return it == layers_.end() ? nullptr : it->second;
}

void keepFreedMemoryForReuse() {
#ifdef __GLIBC__
  // Blocks above 32 MiB (a layer tensor) still come from and go back to mmap directly.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

Expected<LayerQuantPtr> LayerQuantPool::compute(const DumpInfo& info, const LayerTensorsPtr& tensors,
                                                const QuantSpec& keySpec, const QuantSpec& valueSpec,
                                                const ViewRequest& request, const Progress& progress) {
  // A result only this pool holds is free: no view or worker can still read it.
  std::shared_ptr<LayerQuant> out;
  for (const auto& r : results_) {
    if (r.use_count() == 1) {
      out = r;
      break;
    }
  }
  if (!out) {
    out = std::make_shared<LayerQuant>();
    // Two or three alive at once (shown, being computed, read by the drift lane) is the norm;
    // beyond that, forget the oldest rather than grow.
    if (results_.size() >= 3) results_.erase(results_.begin());
    results_.push_back(out);
  }
  out->tensors = tensors;
  out->keySpec = keySpec;
  out->valueSpec = valueSpec;
  // A partial read holds the kv head in view only: its views are computed on that head as the
  // layer's first head, then labelled with the layer's indices (quantizesPerHead: the same numbers).
  ViewRequest local = request;
  const int64_t group = info.groupSize();
  if (!tensors->whole()) {
    const int64_t index = tensors->headIndex(request.kvHead);
    if (index < 0 || request.wholeLayer || !quantizesPerHead(keySpec, info.headDim) ||
        !quantizesPerHead(valueSpec, info.headDim)) {
      out->tensors.reset();
      return Status::internal(info.path + ": layer " + std::to_string(tensors->layer) + ": the views of kv head " +
                              std::to_string(request.kvHead) + " need " +
                              (index < 0 ? std::string("that head") : std::string("the whole layer")) +
                              ", but only kv head " + std::to_string(tensors->firstHead) + " is read");
    }
    local.kvHead = index;
    if (request.queryHead >= 0) local.queryHead = request.queryHead - static_cast<int>(tensors->firstHead * group);
  }
  LayerViewInput input;
  input.key = &tensors->key;
  input.value = &tensors->value;
  input.query = tensors->query ? &*tensors->query : nullptr;
  input.keyPreRope = tensors->keyPreRope ? &*tensors->keyPreRope : nullptr;
  input.rope = info.rope();
  input.softmaxScale = info.softmaxScale;
  const Status s = computeViewData(input, tensors, keySpec, valueSpec, local, workspace_, *out, progress);
  if (!s.isOk()) {
    out->tensors.reset();
    return s;
  }
  if (!tensors->whole()) {
    out->request = request;
    out->keyStorage = storageFor(keySpec, info.kvHeads, info.tokens, info.headDim);
    out->valueStorage = storageFor(valueSpec, info.kvHeads, info.tokens, info.headDim);
    if (out->row) {
      out->row->queryHead = request.queryHead;
      out->row->kvHead = static_cast<int>(request.kvHead);
    }
  }
  return LayerQuantPtr(out);
}

}  // namespace kvscope
