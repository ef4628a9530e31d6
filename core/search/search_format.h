// SPDX-License-Identifier: GPL-3.0-or-later
// Serializers of a SearchResult: JSON (`kvscope_search: 1`) and a readable summary.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/search/search.h"

namespace kvscope {

/// The whole result as JSON (docs/search-and-capacity.md lists the fields).
nlohmann::ordered_json searchJson(const SearchResult& result);
/// searchJson as text with a trailing newline.
std::string searchToJson(const SearchResult& result);
/// A readable summary: the choices, their margins, the candidate tables and the joint result.
std::string searchToText(const SearchResult& result);

}  // namespace kvscope
