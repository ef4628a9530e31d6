// SPDX-License-Identifier: GPL-3.0-or-later
// TEMPORARY: placeholders until the format engine lands (its author deletes this file).
#include "core/quant/format_table.h"
#include "core/quant/formats.h"

namespace kvscope {
std::span<const FormatInfo> formatTable() { return {}; }
const FormatInfo& formatInfo(FormatId) {
  static const FormatInfo none{FormatId::None, "none", FormatKind::Elementwise, 0, 16, 0, 0,
                               false, false, "", "", ""};
  return none;
}
const FormatInfo* findFormat(std::string_view) { return nullptr; }
Status quantizeFormatInPlace(Tensor3&, const QuantSpec&) {
  return Status::unsupported("formats are not implemented yet");
}
Status quantizeFormatReference(Tensor3&, const QuantSpec&) {
  return Status::unsupported("formats are not implemented yet");
}
int64_t groupCount(const QuantSpec&, int64_t, int64_t, int64_t) { return 0; }
Expected<GroupDetail> describeGroup(const Tensor3&, const QuantSpec&, int64_t, int64_t, int64_t) {
  return Status::unsupported("formats are not implemented yet");
}
}  // namespace kvscope
