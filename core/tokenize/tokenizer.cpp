// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/tokenize/tokenizer.h"

namespace kvscope {

std::string Tokenizer::tokenText(int id) const { return displayableText(tokenBytes(id)); }

std::vector<std::string> Tokenizer::tokenTexts(const std::vector<int>& ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int id : ids) out.push_back(tokenText(id));
  return out;
}

}  // namespace kvscope
