// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/command/tensor_spec.h"

namespace kvscope {

Expected<QuantSpec> tensorSpec(const Plan& plan, int layer, int layers, const SpecContext& context) {
  if (!isUniform(plan)) {
    if (layers <= 0) {
      return Status::invalidArgument("plan '" + toString(plan) +
                                     "' stores a spec per layer: give the layer and the model's layer count");
    }
    if (layer < 0 || layer >= layers) {
      return Status::invalidArgument("layer " + std::to_string(layer) + " is outside the model's " +
                                     std::to_string(layers) + " layers");
    }
  }
  KVS_RETURN_IF_ERROR(validatePlan(plan, context, isUniform(plan) ? 0 : layers));
  return isUniform(plan) ? plan.base : specForLayer(plan, layer, layers);
}

}  // namespace kvscope
