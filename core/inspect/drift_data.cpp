// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/inspect/drift_data.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace kvscope {

namespace {

bool hasRow(const LayerQuant& layer, int queryHead, int queryIndex) {
  return layer.row && layer.row->queryHead == queryHead && layer.row->queryIndex == queryIndex;
}

}  // namespace

DriftDataPtr rowOnlyDrift(const LayerQuantPtr& layer, int queryHead, int queryIndex) {
  if (!layer || !hasRow(*layer, queryHead, queryIndex)) return nullptr;
  auto drift = std::make_shared<DriftData>();
  drift->layer = layer->tensors->layer;
  drift->kvHead = layer->request.kvHead;
  drift->tensors = layer->tensors;
  drift->keySpec = layer->keySpec;
  drift->valueSpec = layer->valueSpec;
  drift->row = std::shared_ptr<const AttentionRowDetail>(layer, &*layer->row);  // keeps `layer` alive
  return drift;
}

Expected<DriftDataPtr> computeDriftData(const LayerQuantPtr& layer, int queryHead, int queryIndex, double softmaxScale,
                                        const DriftDataPtr& previous, DriftWorkspace& workspace,
                                        const Progress& progress) {
  if (!layer || !layer->tensors) return Status::invalidArgument("drift: no layer result");
  const LayerTensors& t = *layer->tensors;
  if (!t.query) {
    return Status::invalidArgument("drift: layer " + std::to_string(t.layer) + " has no queries");
  }
  const int64_t group = t.key.heads > 0 ? t.query->heads / t.key.heads : 0;
  const int64_t kvHead = group > 0 ? queryHead / group : 0;
  const int64_t hatHead = layer->hatHead(kvHead);
  if (hatHead < 0 || t.headIndex(kvHead) < 0) {
    return Status::invalidArgument("drift: layer " + std::to_string(t.layer) + ": kv head " + std::to_string(kvHead) +
                                   " of query head " + std::to_string(queryHead) + " was not computed");
  }
  const bool haveRow = hasRow(*layer, queryHead, queryIndex);
  const bool sameSeries = previous && previous->hasSeries && previous->tensors == layer->tensors &&
                          previous->kvHead == kvHead && previous->keySpec == layer->keySpec &&
                          previous->valueSpec == layer->valueSpec;
  auto drift = std::make_shared<DriftData>();
  drift->layer = t.layer;
  drift->kvHead = kvHead;
  drift->tensors = layer->tensors;
  drift->keySpec = layer->keySpec;
  drift->valueSpec = layer->valueSpec;
  drift->hasSeries = true;
  if (haveRow) drift->row = std::shared_ptr<const AttentionRowDetail>(layer, &*layer->row);
  if (haveRow && sameSeries) {
    drift->series = previous->series;
    return DriftDataPtr(std::move(drift));
  }
  // core's computeDrift slices the kv head (the workspace's copies, kept while the layer and head
  // stay) and computes the row, unless the layer worker has it, and the series unless kept.
  DriftInput input;
  input.key = &t.key;
  input.value = &t.value;
  input.query = &*t.query;
  input.keyHat = &layer->keyHat;
  input.valueHat = &layer->valueHat;
  input.hatHead = hatHead;
  input.queryHead = queryHead;
  input.queryIndex = queryIndex;
  input.firstHead = t.firstHead;  // a layer read head first holds only that head
  input.kvHeads = t.kvHeads;
  input.softmaxScale = softmaxScale;
  input.row = !haveRow;
  input.owner = layer->tensors;
  input.series = !sameSeries;  // only the row is missing: the series is the previous one
  auto computed = computeDrift(input, workspace, progress);
  if (!computed) return computed.status();
  if (!haveRow) drift->row = std::make_shared<const AttentionRowDetail>(std::move(*computed->row));
  drift->series = sameSeries ? previous->series : std::move(computed->series);
  return DriftDataPtr(std::move(drift));
}

std::vector<int64_t> topIndices(const std::vector<double>& values, int k) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  const auto keep = static_cast<std::ptrdiff_t>(std::clamp<size_t>(k < 0 ? 0 : static_cast<size_t>(k), 0, order.size()));
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&values](int64_t a, int64_t b) {
    const double va = values[static_cast<size_t>(a)], vb = values[static_cast<size_t>(b)];
    return va > vb || (va == vb && a < b);
  });
  order.resize(static_cast<size_t>(keep));
  return order;
}

}  // namespace kvscope
