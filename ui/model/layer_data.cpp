// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/model/layer_data.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvscope::ui {

const char* viewTensorLabel(ViewTensor t) {
  switch (t) {
    case ViewTensor::Key: return "K";
    case ViewTensor::KeyPreRope: return "pre-RoPE K";
    case ViewTensor::Value: return "V";
  }
  return "?";
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

Expected<LayerQuantPtr> quantizeLayer(const DumpInfo& info, LayerTensorsPtr tensors,
                                      const QuantSpec& keySpec, const QuantSpec& valueSpec,
                                      const Progress& progress) {
  auto out = std::make_shared<LayerQuant>();
  out->keySpec = keySpec;
  out->valueSpec = valueSpec;
  const RopeParams rope{info.ropeTheta, info.ropeStyle};

  const auto half = [&](double base) {
    return Progress([&progress, base](double f, std::string_view what) {
      return report(progress, base + 0.5 * f, what);
    });
  };
  QuantInput keyInput{&tensors->key, tensors->keyPreRope ? &*tensors->keyPreRope : nullptr, rope};
  auto key = quantizeTensor(keyInput, keySpec, half(0.0));
  if (!key) return key.status().withContext("K");
  QuantInput valueInput{&tensors->value, nullptr, rope};
  auto value = quantizeTensor(valueInput, valueSpec, half(0.5));
  if (!value) return value.status().withContext("V");

  out->keyHat = std::move(key->reconstruction);
  out->keyStorage = key->storage;
  out->valueHat = std::move(value->reconstruction);
  out->valueStorage = value->storage;
  if (tensors->keyPreRope) {
    Tensor3 pre = out->keyHat;
    applyInverseRope(pre, rope);
    out->keyPreRopeHat = std::move(pre);
  }
  out->tensors = std::move(tensors);
  return LayerQuantPtr(std::move(out));
}

Tensor3 formatInput(const LayerTensors& tensors, ViewTensor t, const QuantSpec& spec,
                    int64_t* firstToken) {
  const Tensor3* source = &tensors.value;
  if (t != ViewTensor::Value) {
    source = (spec.prerope && tensors.keyPreRope) ? &*tensors.keyPreRope : &tensors.key;
  }
  const int64_t s = std::clamp<int64_t>(spec.sinks, 0, source->tokens);
  const int64_t r = std::clamp<int64_t>(spec.residual, 0, source->tokens - s);
  const int64_t n = source->tokens - s - r;
  if (firstToken) *firstToken = s;
  Tensor3 x(source->heads, n, source->dim);
  for (int64_t h = 0; h < source->heads; ++h) {
    for (int64_t j = 0; j < n; ++j) {
      std::copy_n(source->row(h, s + j), source->dim, x.row(h, j));
    }
  }
  if (spec.hadamard && x.dim > 0 && (x.dim & (x.dim - 1)) == 0) hadamardInPlace(x);
  if (spec.outliers > 0) {
    // §1 step 4: per kv head, the ceil(f·N) largest |x| (ties: lower flat index) are zeroed.
    const int64_t perHead = n * x.dim;
    const auto count = static_cast<int64_t>(std::ceil(spec.outliers * static_cast<double>(perHead)));
    std::vector<int64_t> order(static_cast<size_t>(perHead));
    for (int64_t h = 0; h < x.heads; ++h) {
      float* base = x.row(h, 0);
      std::iota(order.begin(), order.end(), 0);
      const auto k = std::min(count, perHead);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [base](int64_t a, int64_t b) {
        const float fa = std::fabs(base[a]), fb = std::fabs(base[b]);
        return fa != fb ? fa > fb : a < b;
      });
      for (int64_t i = 0; i < k; ++i) base[order[static_cast<size_t>(i)]] = 0.0f;
    }
  }
  return x;
}

}  // namespace kvscope::ui
