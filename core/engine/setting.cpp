// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/engine/setting.h"

#include "core/engine/engine.h"
#include "core/quant/plan.h"

namespace kvscope {
namespace {

std::string name(std::string_view flag) { return std::string(flag); }

bool givesPlans(const SettingText& t) { return !t.key.empty() || !t.value.empty(); }

/// How many of the three ways `t` gives (--key/--value count as one).
int waysGiven(const SettingText& t) {
  return (givesPlans(t) ? 1 : 0) + (t.preset.empty() ? 0 : 1) + (t.engine.empty() ? 0 : 1);
}

Status tooManyWays(const SettingFlags& f) {
  return Status::invalidArgument("give one of " + name(f.key) + " and " + name(f.value) + ", " + name(f.preset) +
                                 " or " + name(f.engine) + ", not both");
}

Expected<KvPlans> parsePlans(const SettingText& t, const SettingFlags& f) {
  if (t.key.empty() || t.value.empty())
    return Status::invalidArgument(name(f.key) + " and " + name(f.value) + " go together (or give " + name(f.preset) +
                                   " NAME or " + name(f.engine) + " \"ENGINE FLAGS\" instead)");
  auto key = parsePlan(t.key);
  if (!key) return key.status().withContext(f.key);
  auto value = parsePlan(t.value);
  if (!value) return value.status().withContext(f.value);
  return KvPlans{*key, *value};
}

}  // namespace

Expected<CheckedSetting> checkSetting(const SettingText& t, const SettingFlags& f) {
  if (waysGiven(t) > 1) return tooManyWays(f);
  CheckedSetting out;
  if (givesPlans(t)) {
    auto parsed = parsePlans(t, f);
    if (!parsed) return parsed.status();
    out.way = SettingWay::Plans;
    out.plans = std::move(*parsed);
  } else if (!t.preset.empty()) {
    // A known name is resolved once the dump's shape is known (some presets depend on it).
    if (findPreset(t.preset) == nullptr) return resolvePreset(t.preset, {}).status().withContext(f.preset);
    out.way = SettingWay::Preset;
  } else if (!t.engine.empty()) {
    auto check = resolveEngine(t.engine, {});
    if (!check) return check.status().withContext(f.engine);
    out.way = SettingWay::Engine;
  }
  return out;
}

Expected<ResolvedSetting> resolveSetting(const SettingText& t, const KvShape& shape, const SettingFlags& f) {
  const int ways = waysGiven(t);
  if (ways > 1) return tooManyWays(f);
  if (ways == 0)
    return Status::invalidArgument("give both " + name(f.key) + " SPEC and " + name(f.value) + " SPEC (a spec or a plan), " +
                                   name(f.preset) + " NAME (run 'kvscope-cli presets' for the list) or " + name(f.engine) +
                                   " \"ENGINE FLAGS\"");
  ResolvedSetting out;
  if (givesPlans(t)) {
    auto parsed = parsePlans(t, f);
    if (!parsed) return parsed.status();
    out.plans = std::move(*parsed);
    out.strings = ResolvedKv{t.key, t.value, {}};
    return out;
  }
  const bool isPreset = !t.preset.empty();
  auto r = isPreset ? resolvePreset(t.preset, shape) : resolveEngine(t.engine, shape);
  if (!r) return r.status().withContext(isPreset ? f.preset : f.engine);
  out.label = isPreset ? t.preset : t.engine;
  auto parsed = parseResolvedPlans(*r, isPreset ? "preset " + t.preset : name(f.engine) + " '" + t.engine + "'");
  if (!parsed) return parsed.status();
  out.plans = std::move(*parsed);
  out.strings = std::move(*r);
  return out;
}

}  // namespace kvscope
