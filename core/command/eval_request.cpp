// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/command/eval_request.h"

#include "core/command/layer_list.h"

namespace kvscope {

KvShape kvShapeOf(const DumpInfo& info) { return KvShape{info.headDim, info.layers, info.kvHeads}; }

Expected<EvalOptions> evalOptionsFor(const EvalRequest& request, const DumpInfo& info,
                                     const ResolvedSetting& resolved) {
  EvalOptions options;
  // A range beyond the dump's layers is the flag's error, named as such.
  if (auto k = resolve(resolved.plans.key, info.layers); !k) return k.status().withContext("--key");
  if (auto v = resolve(resolved.plans.value, info.layers); !v) return v.status().withContext("--value");
  options.key = resolved.plans.key;
  options.value = resolved.plans.value;
  options.preset = request.setting.preset;
  options.engine = request.setting.engine;
  auto layers = parseLayerList(request.layers, info.layers);
  if (!layers) return layers.status();
  options.layers = *layers;
  options.sequence = request.sequence;
  auto queries = parseQueryCount(request.queries);
  if (!queries) return queries.status();
  options.lastQueries = *queries;
  auto policy = parseNonFinitePolicy(request.nonfinite);
  if (!policy) return policy.status().withContext("--nonfinite");
  options.nonFinite = *policy;
  return options;
}

}  // namespace kvscope
