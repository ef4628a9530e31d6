// SPDX-License-Identifier: GPL-3.0-or-later
// Inside a Model: each weight by role and layer, a view into a memory-mapped file
// (core/modelfile/weights.h), and what keeps the files mapped. Only core/model's loaders fill it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/model/architecture.h"
#include "core/modelfile/weights.h"

namespace kvscope {

class ModelWeights {
 public:
  /// Keeps what the views point into (mappings) alive.
  std::vector<std::shared_ptr<const void>> holders;
  std::map<std::pair<TensorRole, int>, WeightTensor> tensors;
  uint64_t fileBytes = 0;

  [[nodiscard]] const WeightTensor* find(TensorRole role, int layer) const {
    auto it = tensors.find({role, isLayerRole(role) ? layer : 0});
    return it == tensors.end() ? nullptr : &it->second;
  }
};

}  // namespace kvscope
