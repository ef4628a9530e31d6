// SPDX-License-Identifier: GPL-3.0-or-later
// TEMPORARY: placeholder until the attention engine lands (its author deletes this file).
#include "core/attention/attention.h"

namespace kvscope {
Expected<std::vector<AttentionCases>> attentionMetrics(const AttentionInput&, const Progress&) {
  return Status::unsupported("attention metrics are not implemented yet");
}
}  // namespace kvscope
