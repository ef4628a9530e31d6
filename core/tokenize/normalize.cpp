// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/tokenize/normalize.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

namespace kvscope::tok {

Expected<std::string> normalizeText(std::string_view text, NormalForm form) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormalForm::Nfc: n = icu::Normalizer2::getNFCInstance(err); break;
    case NormalForm::Nfd: n = icu::Normalizer2::getNFDInstance(err); break;
    case NormalForm::Nfkc: n = icu::Normalizer2::getNFKCInstance(err); break;
    case NormalForm::Nfkd: n = icu::Normalizer2::getNFKDInstance(err); break;
  }
  if (U_FAILURE(err) || n == nullptr)
    return Status::internal(std::string("ICU has no normalizer: ") + u_errorName(err));
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  n->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, err);
  if (U_FAILURE(err)) return Status::invalidArgument(std::string("Unicode normalization failed: ") + u_errorName(err));
  return out;
}

}  // namespace kvscope::tok
