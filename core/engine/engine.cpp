// SPDX-License-Identifier: GPL-3.0-or-later
// The engine table, the engine-string splitter and what every row shares: releases named with
// @VERSION and the options a release removed.
#include "core/engine/engine.h"

#include <array>
#include <cctype>

namespace kvscope {

// Each engine's row lives in its own file; adding an engine adds one declaration and one entry.
extern const EngineDef kLlamacppEngine;
extern const EngineDef kIkLlamacppEngine;
extern const EngineDef kVllmEngine;
extern const EngineDef kSglangEngine;
extern const EngineDef kLmdeployEngine;
extern const EngineDef kTransformersEngine;
extern const EngineDef kTrtllmEngine;

namespace {

const auto& table() {
  static const auto engines = std::to_array<const EngineDef*>({&kLlamacppEngine, &kIkLlamacppEngine, &kVllmEngine,
                                                                &kSglangEngine, &kLmdeployEngine, &kTransformersEngine,
                                                                &kTrtllmEngine});
  return engines;
}

bool isEnvName(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])) != 0) return false;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  }
  return true;
}

/// "0.18", "4.56", "0.5.14": one to four dot-separated whole numbers, optionally after a 'v'.
bool isRelease(std::string_view v) {
  if (v.empty() || v.size() > 24 || v.front() == '.' || v.back() == '.') return false;
  int parts = 1;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '.') {
      if (v[i - 1] == '.') return false;
      ++parts;
    } else if (std::isdigit(static_cast<unsigned char>(v[i])) == 0) {
      return false;
    }
  }
  return parts <= 4;
}

/// Whether `words` use `option` (a flag, "flag value" or a name=value pair), and how it was written.
bool usesOption(const std::vector<std::string>& words, std::string_view option, std::string& shown) {
  const auto space = option.find(' ');
  const std::string flag(option.substr(0, space));
  const std::string value = space == std::string_view::npos ? std::string() : std::string(option.substr(space + 1));
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (value.empty()) {
      if (w == flag || (flag.find('=') == std::string::npos && w.rfind(flag + "=", 0) == 0)) {
        shown = w;
        return true;
      }
    } else if ((w == flag && i + 1 < words.size() && words[i + 1] == value) || w == flag + "=" + value) {
      shown = w == flag ? w + " " + value : w;
      return true;
    }
  }
  return false;
}

/// The newest release before `release` among those the row was read at, for "write NAME@X".
std::string_view releaseBefore(const EngineDef& e, std::string_view release) {
  for (const EngineRelease& r : e.releases) {
    if (r.version != "main" && compareReleases(r.version, release) < 0) return r.version;
  }
  return {};
}

}  // namespace

int compareReleases(std::string_view a, std::string_view b) {
  auto next = [](std::string_view& s) {
    long v = 0;
    while (!s.empty() && s.front() != '.') {
      v = v * 10 + (s.front() - '0');
      s.remove_prefix(1);
    }
    if (!s.empty()) s.remove_prefix(1);
    return v;
  };
  if (!a.empty() && a.front() == 'v') a.remove_prefix(1);
  if (!b.empty() && b.front() == 'v') b.remove_prefix(1);
  while (!a.empty() || !b.empty()) {
    const long x = next(a), y = next(b);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

bool EngineArgs::atLeast(std::string_view release) const {
  return version.empty() || compareReleases(version, release) >= 0;
}

const char* planShapeName(PlanShape shape) {
  switch (shape) {
    case PlanShape::PerLayer: return "per-layer";
    case PlanShape::Uniform: return "uniform";
    case PlanShape::FirstLast: return "first-last";
    case PlanShape::SkipLayers: return "skip-layers";
  }
  return "?";
}

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

std::vector<const EngineDef*> planEngines() {
  std::vector<const EngineDef*> out;
  for (const EngineDef* e : table()) {
    if (e->planTypes != nullptr && e->planFlags != nullptr) out.push_back(e);
  }
  return out;
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
  // NAME@VERSION names a release: "vllm@0.18".
  if (const auto at = args.name.find('@'); at != std::string::npos) {
    args.version = args.name.substr(at + 1);
    args.name.resize(at);
    if (!isRelease(args.version)) {
      return Status::invalidArgument("engine string '" + std::string(text) + "': '" + args.version +
                                     "' after @ is not a release number (allowed: NAME@RELEASE, e.g. vllm@0.18 or "
                                     "sglang@0.5.14)");
    }
  }
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
  // Options the named release (or the newest read) no longer has.
  for (const EngineChange& c : e->changes) {
    if (!c.strict && args->version.empty()) continue;
    if (!args->atLeast(c.release)) continue;
    std::string shown;
    if (!usesOption(args->words, c.option, shown)) continue;
    const std::string_view before = releaseBefore(*e, c.release);
    return Status::invalidArgument(
        std::string(e->name) + ": " + shown + ": " + std::string(c.what) + " (" + std::string(e->name) + " " +
        std::string(c.release) + "); " + std::string(c.replacement) +
        (before.empty() ? std::string()
                        : "; for the releases before it write " + std::string(e->name) + "@" + std::string(before)));
  }
  auto r = e->resolve(*args, shape);
  if (!r) return r;
  // Which release the rules are: the one named, or the newest read.
  const EngineRelease* newest = e->releases.empty() ? nullptr : &e->releases.front();
  if (!args->version.empty() && newest != nullptr && newest->version != "main" &&
      compareReleases(args->version, newest->version) > 0) {
    r->notes.push_back(std::string(e->name) + "@" + args->version + " is newer than the newest release kvscope read (" +
                       std::string(newest->version) + "): its rules are applied");
  }
  if (!args->version.empty() && !e->releases.empty()) {
    const EngineRelease& oldest = e->releases.back();
    if (oldest.version != "main" && compareReleases(args->version, oldest.version) < 0) {
      r->notes.push_back(std::string(e->name) + "@" + args->version + " is older than the oldest release kvscope read (" +
                         std::string(oldest.version) + "): its rules are applied");
    }
  }
  return r;
}

}  // namespace kvscope
