// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/metrics/dump_layer.h"

namespace kvscope {

AttentionInput AttentionLayer::input(double softmaxScale, int lastQueries) const {
  AttentionInput in;
  in.query = query ? &*query : nullptr;
  in.key = &key;
  in.value = &value;
  in.softmaxScale = softmaxScale;
  in.lastQueries = lastQueries;
  return in;
}

Status checkFinite(const Tensor3& tensor, const std::string& what, std::string_view purpose) {
  const NonFiniteReport r = scanNonFinite(tensor);
  if (r.allFinite()) return Status::ok();
  return Status::invalidData(what + ": " + std::to_string(r.nanCount) + " NaN and " +
                             std::to_string(r.infCount) + " Inf values (first at head " +
                             std::to_string(r.firstHead) + ", token " + std::to_string(r.firstToken) +
                             ", channel " + std::to_string(r.firstChannel) + "); " + std::string(purpose) +
                             " needs finite tensors");
}

Expected<AttentionLayer> readLayerForAttention(const Dump& dump, const LayerReadRequest& request) {
  const std::string where = dump.info().path + ": layer " + std::to_string(request.layer);
  AttentionLayer out;
  auto key = dump.read(request.layer, TensorKind::Key, request.sequence);
  if (!key) return key.status();
  KVS_RETURN_IF_ERROR(checkFinite(*key, where + ": key", request.purpose));
  out.key = std::move(*key);
  auto value = dump.read(request.layer, TensorKind::Value, request.sequence);
  if (!value) return value.status();
  KVS_RETURN_IF_ERROR(checkFinite(*value, where + ": value", request.purpose));
  out.value = std::move(*value);
  if (request.preRope) {
    auto p = dump.read(request.layer, TensorKind::KeyPreRope, request.sequence);
    if (!p) return p.status();
    KVS_RETURN_IF_ERROR(checkFinite(*p, where + ": key_pre_rope", request.purpose));
    out.preRope = std::move(*p);
  }
  if (request.query) {
    auto q = dump.read(request.layer, TensorKind::Query, request.sequence);
    if (!q) return q.status();
    KVS_RETURN_IF_ERROR(checkFinite(*q, where + ": query", request.purpose));
    out.query = std::move(*q);
  }
  return out;
}

}  // namespace kvscope
