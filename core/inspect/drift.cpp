// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/inspect/drift.h"

#include <string>

#include "core/attention/attention.h"
#include "core/inspect/view_data.h"

namespace kvscope {

Expected<DriftResult> computeDrift(const DriftInput& in, DriftWorkspace& ws, const Progress& progress) {
  if (!in.key || !in.value || !in.query || !in.keyHat || !in.valueHat) {
    return Status::invalidArgument("attention drift: needs K, V, the queries and both reconstructions");
  }
  const Tensor3& key = *in.key;
  const Tensor3& query = *in.query;
  if (key.heads <= 0 || query.heads <= 0 || query.heads % key.heads != 0) {
    return Status::invalidArgument("attention drift: " + std::to_string(query.heads) + " query heads are not a multiple of " +
                                   std::to_string(key.heads) + " kv heads");
  }
  const int64_t layerKvHeads = in.kvHeads > 0 ? in.kvHeads : key.heads;
  if (in.firstHead < 0 || in.firstHead + key.heads > layerKvHeads) {
    return Status::invalidArgument("attention drift: kv heads [" + std::to_string(in.firstHead) + ", " +
                                   std::to_string(in.firstHead + key.heads) + ") are not heads of a layer of " +
                                   std::to_string(layerKvHeads));
  }
  const int64_t group = query.heads / key.heads;
  const int64_t layerQueryHeads = layerKvHeads * group;
  if (in.queryHead < 0 || in.queryHead >= layerQueryHeads) {
    return Status::invalidArgument("attention drift: query head " + std::to_string(in.queryHead) + " out of range (0-" +
                                   std::to_string(layerQueryHeads - 1) + ")");
  }
  if (in.queryIndex < 0 || in.queryIndex >= query.tokens) {
    return Status::invalidArgument("attention drift: query row " + std::to_string(in.queryIndex) + " out of range (0-" +
                                   std::to_string(query.tokens - 1) + ")");
  }
  const int64_t kvHead = in.queryHead / group;
  const int64_t held = kvHead - in.firstHead;  // its index in key, value (its group's in query)
  if (held < 0 || held >= key.heads) {
    return Status::invalidArgument("attention drift: kv head " + std::to_string(kvHead) + " is not read (the tensors hold [" +
                                   std::to_string(in.firstHead) + ", " + std::to_string(in.firstHead + key.heads) + "))");
  }
  for (const Tensor3* hat : {in.keyHat, in.valueHat}) {
    if (in.hatHead < 0 || in.hatHead >= hat->heads || hat->tokens != key.tokens || hat->dim != key.dim) {
      return Status::invalidArgument("attention drift: the reconstruction holds no kv head " + std::to_string(in.hatHead) +
                                     " of " + std::to_string(key.tokens) + " tokens × " + std::to_string(key.dim));
    }
  }
  // The kv head's originals and its group's queries, sliced once per layer and head.
  if (!in.owner || ws.owner != in.owner || ws.head != kvHead) {
    copyHeads(key, held, 1, ws.key);
    copyHeads(*in.value, held, 1, ws.value);
    copyHeads(query, held * group, group, ws.query);
    ws.owner = in.owner;
    ws.head = kvHead;
  }
  // One head's reconstruction is used as it is; a whole layer's is sliced.
  const Tensor3* keyHat = in.keyHat;
  const Tensor3* valueHat = in.valueHat;
  if (in.keyHat->heads != 1) {
    copyHeads(*in.keyHat, in.hatHead, 1, ws.keyHat);
    keyHat = &ws.keyHat;
  }
  if (in.valueHat->heads != 1) {
    copyHeads(*in.valueHat, in.hatHead, 1, ws.valueHat);
    valueHat = &ws.valueHat;
  }
  AttentionInput oneHead;
  oneHead.query = &ws.query;
  oneHead.key = &ws.key;
  oneHead.value = &ws.value;
  oneHead.keyHat = keyHat;
  oneHead.valueHat = valueHat;
  oneHead.softmaxScale = in.softmaxScale;
  DriftResult out;
  out.kvHead = static_cast<int>(kvHead);
  if (in.row) {
    auto row = attentionRowDetail(oneHead, static_cast<int>(in.queryHead - kvHead * group), in.queryIndex);
    if (!row) return row.status();
    row->queryHead = in.queryHead;
    row->kvHead = static_cast<int>(kvHead);
    out.row = std::move(row).value();
  }
  if (in.series) {
    auto series = kvHeadPositionSeries(oneHead, kvHead, layerKvHeads, progress);
    if (!series) return series.status();
    out.series = std::move(series).value();
  }
  return out;
}

}  // namespace kvscope
