// SPDX-License-Identifier: GPL-3.0-or-later
// The in-memory tensor every core module exchanges: one layer's [heads, tokens, dim] float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvscope {

/// A dense row-major float32 tensor of shape [heads, tokens, dim] (KVH,T,D for K/V; H,Tq,D for Q).
struct Tensor3 {
  int64_t heads = 0;
  int64_t tokens = 0;
  int64_t dim = 0;
  std::vector<float> data;  ///< size heads*tokens*dim, index ((h*tokens)+t)*dim+d

  Tensor3() = default;
  Tensor3(int64_t h, int64_t t, int64_t d, float fill = 0.0f)
      : heads(h), tokens(t), dim(d), data(static_cast<size_t>(h * t * d), fill) {}

  [[nodiscard]] size_t size() const { return data.size(); }
  [[nodiscard]] size_t index(int64_t h, int64_t t, int64_t d) const {
    return static_cast<size_t>((h * tokens + t) * dim + d);
  }
  float& at(int64_t h, int64_t t, int64_t d) { return data[index(h, t, d)]; }
  [[nodiscard]] float at(int64_t h, int64_t t, int64_t d) const { return data[index(h, t, d)]; }
  /// Pointer to the D values of token t of head h.
  float* row(int64_t h, int64_t t) { return data.data() + index(h, t, 0); }
  [[nodiscard]] const float* row(int64_t h, int64_t t) const { return data.data() + index(h, t, 0); }
  [[nodiscard]] bool sameShape(const Tensor3& o) const {
    return heads == o.heads && tokens == o.tokens && dim == o.dim;
  }
};

}  // namespace kvscope
