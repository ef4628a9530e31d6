// SPDX-License-Identifier: GPL-3.0-or-later
// A hash map from token strings that string_views can look up without a copy.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kvscope::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/// Token string → id.
using StringMap = std::unordered_map<std::string, int, StringHash, std::equal_to<>>;

}  // namespace kvscope::tok
