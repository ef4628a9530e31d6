// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/command/layer_list.h"

#include <algorithm>
#include <limits>

namespace kvscope {

Expected<std::vector<int>> parseLayerList(const std::string& text, int layers) {
  std::vector<int> out;
  if (text == "all") {
    for (int l = 0; l < layers; ++l) out.push_back(l);
    return out;
  }
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument("--layers '" + text + "': " + why +
                                   " (allowed: 'all' or a list like 0,2,5-7 with layers 0.." +
                                   std::to_string(layers - 1) + ")");
  };
  if (text.empty()) return bad("no layers");
  // A set: "0,0,0" or "0-3,0-3" is layers 0..3 once each (the work runs once per listed layer).
  std::vector<bool> chosen(static_cast<size_t>(std::max(layers, 0)), false);
  // Digits only; more than 9 of them is beyond any layer count (and beyond an int).
  auto number = [](const std::string& s, int& into) {
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
    into = s.size() > 9 ? std::numeric_limits<int>::max() : std::stoi(s);
    return true;
  };
  size_t pos = 0;
  for (;;) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) return bad("empty item");
    const size_t dash = item.find('-');
    int first = 0, last = 0;
    if (dash == std::string::npos) {
      if (!number(item, first)) return bad("'" + item + "' is not a layer number");
      if (first >= layers) return bad("layer " + item + " does not exist");
      last = first;
    } else {
      if (!number(item.substr(0, dash), first) || !number(item.substr(dash + 1), last))
        return bad("'" + item + "' is not a range of layer numbers");
      if (last >= layers || first > last) return bad("range " + item + " is out of bounds");
    }
    for (int l = first; l <= last; ++l) chosen[static_cast<size_t>(l)] = true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  for (int l = 0; l < layers; ++l)
    if (chosen[static_cast<size_t>(l)]) out.push_back(l);
  return out;
}

}  // namespace kvscope
