// SPDX-License-Identifier: GPL-3.0-or-later
// The reference composition of quantization.md §1 (core/quant/pipeline_reference.cpp): steps 1–6
// as the contract writes them, one after the other, on the whole tensor. The fast strategy
// (core/quant/pipeline_fast.h) must give its bits; quantize.cpp chooses between the two.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant/outlier_select.h"
#include "core/quant/rope.h"
#include "core/quant/spec.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// How formatInputInto ended.
enum class FormatInputEnd { Done, NonFinite, Cancelled };

/// The format's input (§1 steps 2–4, what step 5 sees) for kv heads [firstHead, firstHead +
/// heads) of `source`: each head's quantized tokens (quantizedTokens: [S, S + count)), rotated
/// (x·R of spec.rotation, which must suit the head dim: checkRotation), with each head's
/// ceil(f·N) outliers set to 0. `out` becomes [heads, count, D], reusing its buffer; the outliers
/// are appended to `setAside` when given (indices into `out`, head by head, ascending). Every
/// copied value is checked: NonFinite (out then holds no meaningful result) when one is NaN or
/// infinite. Cancels between heads when `progress` returns false (reported from 0 to
/// 0.5). The pipeline and the histogram's format space (core/inspect/view_data.h) both use it.
FormatInputEnd formatInputInto(const Tensor3& source, const QuantSpec& spec, int64_t firstHead, int64_t heads,
                               Tensor3& out, std::vector<Outlier>* setAside = nullptr, const Progress& progress = {});

/// §1 steps 1–6 on the whole tensor: `tensor`, or `preRope` for a prerope spec (present and of
/// the same shape: the caller validates, as it validates the spec against the shape), into
/// `recon` (reusing its buffer). Sets `nonFinite` when the input holds a non-finite value (recon
/// then holds no meaningful result). Cancels between steps when `progress` returns false.
Status quantizeReference(const Tensor3& tensor, const Tensor3* preRope, const RopeParams& rope, const QuantSpec& spec,
                         Tensor3& recon, const Progress& progress, bool& nonFinite);

}  // namespace kvscope
