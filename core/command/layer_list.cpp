// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/command/layer_list.h"

#include <stdexcept>

namespace kvscope {

Expected<std::vector<int>> parseLayerList(const std::string& text, int layers) {
  std::vector<int> out;
  if (text.empty() || text == "all") {
    for (int l = 0; l < layers; ++l) out.push_back(l);
    return out;
  }
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument("--layers '" + text + "': " + why +
                                   " (allowed: 'all' or a list like 0,2,5-7 with layers 0.." +
                                   std::to_string(layers - 1) + ")");
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) return bad("empty item");
    size_t dash = item.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        int l = std::stoi(item, &used);
        if (used != item.size()) return bad("'" + item + "' is not a number");
        if (l < 0 || l >= layers) return bad("layer " + item + " does not exist");
        out.push_back(l);
      } else {
        std::string a = item.substr(0, dash), b = item.substr(dash + 1);
        size_t ua = 0, ub = 0;
        int la = std::stoi(a, &ua), lb = std::stoi(b, &ub);
        if (ua != a.size() || ub != b.size()) return bad("'" + item + "' is not a range");
        if (la < 0 || lb >= layers || la > lb) return bad("range " + item + " is out of bounds");
        for (int l = la; l <= lb; ++l) out.push_back(l);
      }
    } catch (const std::exception&) {
      return bad("'" + item + "' is not a number or range");
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace kvscope
