// SPDX-License-Identifier: GPL-3.0-or-later
// The engine table and the engine-string splitter.
#include "core/engine/engine.h"

#include <array>
#include <cctype>

namespace kvscope {

// Each engine's row lives in its own file; adding an engine adds one declaration and one entry.
extern const EngineDef kLlamacppEngine;
extern const EngineDef kVllmEngine;
extern const EngineDef kSglangEngine;
extern const EngineDef kLmdeployEngine;
extern const EngineDef kTransformersEngine;
extern const EngineDef kTrtllmEngine;

namespace {

const std::array<const EngineDef*, 6>& table() {
  static const std::array<const EngineDef*, 6> engines{&kLlamacppEngine,     &kVllmEngine,         &kSglangEngine,
                                                       &kLmdeployEngine,     &kTransformersEngine, &kTrtllmEngine};
  return engines;
}

bool isEnvName(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])) != 0) return false;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  }
  return true;
}

}  // namespace

std::span<const EngineDef* const> engineTable() { return table(); }

std::string engineNameList() {
  std::string out;
  for (const EngineDef* e : table()) {
    if (!out.empty()) out += ", ";
    out += e->name;
  }
  return out;
}

const EngineDef* findEngine(std::string_view name) {
  for (const EngineDef* e : table()) {
    if (e->name == name) return e;
    for (std::string_view a : e->aliases) {
      if (!a.empty() && a == name) return e;
    }
  }
  return nullptr;
}

Expected<EngineArgs> splitEngineString(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  bool inWord = false;
  char quote = 0;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        cur += c;
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      inWord = true;
    } else if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      if (inWord) words.push_back(std::move(cur));
      cur.clear();
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (quote != 0) {
    return Status::invalidArgument("engine string '" + std::string(text) + "': unclosed " +
                                   std::string(1, quote) + " quote");
  }
  if (inWord) words.push_back(std::move(cur));
  EngineArgs args;
  size_t i = 0;
  for (; i < words.size(); ++i) {
    const auto eq = words[i].find('=');
    if (eq == std::string::npos || !isEnvName(std::string_view(words[i]).substr(0, eq))) break;
    args.env.emplace_back(words[i].substr(0, eq), words[i].substr(eq + 1));
  }
  if (i == words.size()) {
    return Status::invalidArgument("engine string '" + std::string(text) +
                                   "': no engine name (e.g. \"llama.cpp -ctk q4_0 -ctv q8_0\"; engines: " +
                                   engineNameList() + ")");
  }
  args.name = words[i];
  args.words.assign(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
  return args;
}

Expected<ResolvedKv> resolveEngine(std::string_view text, const KvShape& shape) {
  auto args = splitEngineString(text);
  if (!args) return args.status();
  const EngineDef* e = findEngine(args->name);
  if (e == nullptr) {
    return Status::invalidArgument("unknown engine '" + args->name + "' (known engines: " + engineNameList() +
                                   ")");
  }
  return e->resolve(*args, shape);
}

}  // namespace kvscope
