// SPDX-License-Identifier: GPL-3.0-or-later
// Inside a Model: each weight by role and layer, pointing into a memory-mapped file, and the
// dequantization of its rows. Only core/model's loaders fill it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/model/architecture.h"
#include "core/util/status.h"

namespace kvscope {

/// One weight as its file stores it.
struct WeightSlot {
  std::string name;            ///< the file's name for it
  std::vector<int64_t> shape;  ///< row-major, slowest first ([rows, cols]; [n] for a vector)
  int type = 0;                ///< ggml type id (F32 0, F16 1, BF16 30, Q8_0 8, …)
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;

  [[nodiscard]] int64_t rows() const { return shape.size() >= 2 ? shape[0] : 1; }
  [[nodiscard]] int64_t cols() const { return shape.empty() ? 0 : shape.back(); }
};

class ModelWeights {
 public:
  /// Keeps what the slots point into (mappings) alive.
  std::vector<std::shared_ptr<const void>> holders;
  std::map<std::pair<TensorRole, int>, WeightSlot> slots;
  uint64_t fileBytes = 0;

  [[nodiscard]] const WeightSlot* find(TensorRole role, int layer) const;
  /// Rows [first, first + count) of `slot` as float32.
  Status rows(const WeightSlot& slot, int64_t first, int64_t count, float* out) const;
};

/// The ggml type's name ("f32", "q4_K"); "type N" when kvscope does not know it.
std::string weightTypeName(int type);
/// Whether rows of this ggml type can be dequantized.
bool weightTypeSupported(int type);
/// Bytes of one row of `cols` values of this type (0 when cols is not a whole number of blocks).
uint64_t weightRowBytes(int type, int64_t cols);

}  // namespace kvscope
