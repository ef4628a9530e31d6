// SPDX-License-Identifier: GPL-3.0-or-later
// argparse-style flags and config-style pairs of an engine string (engine_words.h).
#include "core/engine/engine_words.h"

namespace kvscope {

std::string joinNames(std::span<const std::string_view> names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

bool isOneOf(std::string_view name, std::span<const std::string_view> names) {
  for (std::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

Expected<std::vector<EngineOption>> readDashOptions(std::string_view engine, const std::vector<std::string>& words,
                                                    std::span<const std::string_view> switches,
                                                    std::vector<std::string>& positional) {
  std::vector<EngineOption> out;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.rfind("--", 0) != 0 || w.size() == 2) {
      positional.push_back(w);
      continue;
    }
    EngineOption o;
    const auto eq = w.find('=');
    o.name = w.substr(0, eq);
    o.shown = w;
    if (eq != std::string::npos) {
      if (isOneOf(o.name, switches)) {
        return Status::invalidArgument(std::string(engine) + ": " + o.name + " takes no value (given as '" + w + "')");
      }
      o.value = w.substr(eq + 1);
    } else if (!isOneOf(o.name, switches) && i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0) {
      o.value = words[++i];
      o.shown += " " + *o.value;
    }
    out.push_back(std::move(o));
  }
  return out;
}

Expected<std::vector<EngineOption>> readConfigPairs(std::string_view engine, const std::vector<std::string>& words,
                                                    std::string_view example) {
  std::vector<EngineOption> out;
  for (const std::string& w : words) {
    const auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::invalidArgument(std::string(engine) + ": '" + w +
                                     "' is not a name=value pair (engine strings look like \"" + std::string(example) +
                                     "\")");
    }
    out.push_back({w.substr(0, eq), w.substr(eq + 1), w});
  }
  return out;
}

}  // namespace kvscope
