// SPDX-License-Identifier: GPL-3.0-or-later
// The spec one layer tensor is stored under, from a spec or plan string, for `read --spec` and
// Python's quantize (both then run quantizeTensor on it).
#pragma once

#include <string>

#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "core/util/status.h"

namespace kvscope {

/// The spec of layer `layer` under `plan` in a model of `layers` layers (0 = unknown: the plan
/// must give every layer the same spec), checked against the tensor (`context`: key or value,
/// its kv heads and head dim, whether pre-RoPE keys exist). Errors say what is wrong and allowed.
Expected<QuantSpec> tensorSpec(const Plan& plan, int layer, int layers, const SpecContext& context);

}  // namespace kvscope
