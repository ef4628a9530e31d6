// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/model/layer_data.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace kvscope::ui {

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

Expected<LayerTensorsPtr> readLayer(const Dump& dump, int layer, const Progress& progress) {
  const DumpInfo& info = dump.info();
  auto out = std::make_shared<LayerTensors>();
  out->layer = layer;
  if (!report(progress, 0.0, "reading keys")) return Status::cancelled();
  auto key = dump.read(layer, TensorKind::Key);
  if (!key) return key.status();
  out->key = std::move(key).value();
  if (!report(progress, 0.3, "reading values")) return Status::cancelled();
  auto value = dump.read(layer, TensorKind::Value);
  if (!value) return value.status();
  out->value = std::move(value).value();
  if (info.hasQuery) {
    if (!report(progress, 0.6, "reading queries")) return Status::cancelled();
    auto query = dump.read(layer, TensorKind::Query);
    if (!query) return query.status();
    out->query = std::move(query).value();
  }
  if (info.hasKeyPreRope) {
    if (!report(progress, 0.8, "reading pre-RoPE keys")) return Status::cancelled();
    auto pre = dump.read(layer, TensorKind::KeyPreRope);
    if (!pre) return pre.status();
    out->keyPreRope = std::move(pre).value();
  }
  return LayerTensorsPtr(std::move(out));
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
  LayerViewInput input;
  input.key = &tensors->key;
  input.value = &tensors->value;
  input.query = tensors->query ? &*tensors->query : nullptr;
  input.keyPreRope = tensors->keyPreRope ? &*tensors->keyPreRope : nullptr;
  input.rope = RopeParams{info.ropeTheta, info.ropeStyle};
  input.softmaxScale = info.softmaxScale;
  const Status s = computeViewData(input, tensors, keySpec, valueSpec, request, workspace_, *out, progress);
  if (!s.isOk()) {
    out->tensors.reset();
    return s;
  }
  return LayerQuantPtr(out);
}

}  // namespace kvscope::ui
