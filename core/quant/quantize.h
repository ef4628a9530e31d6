// SPDX-License-Identifier: GPL-3.0-or-later
// The whole pipeline of quantization.md §1 for one tensor of one layer, and storage (§5). Its
// steps live in files of their own: RoPE (rope.h), kept tokens (quantizedTokens, spec.h),
// rotations (rotation.h, hadamard.h), outlier selection (outlier_select.h); the reference
// composition in pipeline_reference.h, the fast strategy in pipeline_fast.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant/hadamard.h"
#include "core/quant/outlier_select.h"
#include "core/quant/rope.h"
#include "core/quant/spec.h"
#include "core/quant/storage.h"
#include "core/util/status.h"
#include "core/util/tensor.h"
#include "core/util/vocabulary.h"

namespace kvscope {

/// Which implementation of §1 runs. Both give the same bits (tests/core/quant/pipeline/).
enum class QuantPath {
  Auto,       ///< the fast strategy where it covers the spec, else the reference
              ///< (KVSCOPE_QUANT_PATH=reference or =fast in the environment overrides it)
  Reference,  ///< the reference composition (pipeline_reference.h), whatever the spec
  Fast,       ///< the fast strategy (pipeline_fast.h) where it covers the spec, else the reference
};

/// Input of the pipeline for one tensor of one layer.
struct QuantInput {
  const Tensor3* tensor = nullptr;    ///< `key` or `value`: the reference
  const Tensor3* preRope = nullptr;   ///< `key_pre_rope` (needed when spec.prerope)
  RopeParams rope;
  QuantPath path = QuantPath::Auto;   ///< tests and benches force one
};

/// Result of the pipeline.
struct QuantOutput {
  Tensor3 reconstruction;  ///< same shape as the input tensor, comparable with it
  StorageCount storage;
  QuantPath path = QuantPath::Reference;  ///< the implementation that produced it (Reference or Fast)
};

/// The path QuantPath::Auto takes for `spec` on a [kvHeads, tokens, headDim] tensor, environment
/// ignored: Fast where the fast strategy covers the spec (it may still hand over to the reference
/// when its sampled outlier floor misjudges a head), else Reference.
QuantPath autoQuantPath(const QuantSpec& spec, int64_t kvHeads, int64_t tokens, int64_t headDim);

/// Runs §1 steps 1-6. Cancels between heads when `progress` returns false.
Expected<QuantOutput> quantizeTensor(const QuantInput& input, const QuantSpec& spec,
                                     const Progress& progress = {});
/// The same into `out`, reusing its reconstruction's buffer: loops over candidates (search, GUI
/// sliders) then allocate no layer-sized memory. On failure `out` holds no meaningful result.
Status quantizeTensorInto(const QuantInput& input, const QuantSpec& spec, QuantOutput& out,
                          const Progress& progress = {});

}  // namespace kvscope
