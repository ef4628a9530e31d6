// SPDX-License-Identifier: GPL-3.0-or-later
// Unicode normalization forms for tokenizer.json normalizers, through ICU (Debian's libicu: the
// library Qt already depends on; Unicode 15.0 in Debian 12's ICU 72, near the Rust
// unicode-normalization tables Hugging Face uses; and it normalizes UTF-8 directly).
#pragma once

#include <string>
#include <string_view>

#include "core/util/status.h"

namespace kvscope::tok {

/// The normalization forms.
enum class NormalForm { Nfc, Nfd, Nfkc, Nfkd };

/// `text` (valid UTF-8) in the normal form.
Expected<std::string> normalizeText(std::string_view text, NormalForm form);

}  // namespace kvscope::tok
