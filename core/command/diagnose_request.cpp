// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/command/diagnose_request.h"

#include "core/command/layer_list.h"

namespace kvscope {

Expected<DiagnoseOptions> diagnoseOptionsFor(const DiagnoseRequest& request, const DumpInfo& info) {
  DiagnoseOptions options;
  auto layers = parseLayerList(request.layers, info.layers);
  if (!layers) return layers.status();
  options.layers = *layers;
  options.sequence = request.sequence;
  return options;
}

}  // namespace kvscope
