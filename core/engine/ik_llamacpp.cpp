// SPDX-License-Identifier: GPL-3.0-or-later
// ik_llama.cpp: llama.cpp's cache types without its rotation, and per side the first N and the
// last M layers overridden (-ctk-first/-ctk-last TYPE,N; ikawrakow/ik_llama.cpp common/common.cpp
// lines 1849-1892 and src/llama.cpp lines 1487-1501 at 8337e4cd; docs/engines.md).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <tuple>

#include "core/engine/engine.h"
#include "core/engine/llamacpp.h"

namespace kvscope {

namespace {

Status refuse(const std::string& message) { return Status::invalidArgument("ik_llama.cpp: " + message); }

/// One side's types: the base and the first/last overrides (count 0: none).
struct IkSide {
  std::string base = "f16";
  std::string first, last;
  int nFirst = 0, nLast = 0;
};

/// "q8_0,2" → type and count.
Status parseOverride(const std::string& flag, const std::string& value, std::string& type, int& count) {
  const auto comma = value.find(',');
  const std::string t = value.substr(0, comma);
  const std::string n = comma == std::string::npos ? std::string() : value.substr(comma + 1);
  char* end = nullptr;
  const long v = n.empty() ? 0 : std::strtol(n.c_str(), &end, 10);
  if (!isLlamacppCacheType(t) || n.empty() || end != n.c_str() + n.size() || v <= 0 || v > 100000) {
    return refuse(flag + " " + value + ": takes TYPE,N with TYPE one of " + llamacppCacheTypeList() +
                  " and N > 0 layers (e.g. " + flag + " q8_0,2)");
  }
  type = t;
  count = static_cast<int>(v);
  return Status::ok();
}

/// The side's plan: base, then the first N, then the last M layers (the last-N override is
/// applied after the first-N one, src/llama.cpp, so it wins where they meet).
std::string sidePlan(const IkSide& s, bool isKey, int headDim) {
  auto spec = [&](const std::string& t) { return llamacppTensor(t, isKey, headDim > 0 ? headDim : 64, true).spec; };
  std::string out = spec(s.base);
  if (s.nFirst > 0) out += ";first" + std::to_string(s.nFirst) + ":" + spec(s.first);
  if (s.nLast > 0) out += ";last" + std::to_string(s.nLast) + ":" + spec(s.last);
  return out;
}

Expected<ResolvedKv> resolveIk(const EngineArgs& args, const KvShape& shape) {
  IkSide k, v;
  ResolvedKv r;
  for (const auto& [name, value] : args.env) {
    r.notes.push_back("ignored " + name + "=" + value + ": it does not change what the KV cache stores");
  }
  const std::vector<std::string>& w = args.words;
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string& flag = w[i];
    const bool isK = flag == "-ctk" || flag == "--cache-type-k";
    const bool isV = flag == "-ctv" || flag == "--cache-type-v";
    const bool over = flag == "-ctk-first" || flag == "-ctk-last" || flag == "-ctv-first" || flag == "-ctv-last";
    if (flag == "-khad" || flag == "-vhad") {
      return refuse(flag + ": ik_llama.cpp's Hadamard transform of the " + (flag == "-khad" ? "K" : "V") +
                    " cache was not read; kvscope models ik_llama.cpp's cache types without it (its default)");
    }
    if (isK || isV || over) {
      if (i + 1 >= w.size()) return refuse(flag + " needs a value");
      const std::string value = w[++i];
      IkSide& side = flag.find("ctk") != std::string::npos ? k : v;
      if (over) {
        const bool first = flag.ends_with("-first");
        KVS_RETURN_IF_ERROR(parseOverride(flag, value, first ? side.first : side.last, first ? side.nFirst : side.nLast));
      } else {
        if (!isLlamacppCacheType(value)) {
          return refuse(flag + " " + value + " is not a cache type kvscope models for ik_llama.cpp (it models the types "
                        "ik_llama.cpp shares with llama.cpp: " + llamacppCacheTypeList() + ")");
        }
        side.base = value;
      }
      continue;
    }
    std::string shown = flag;
    if (i + 1 < w.size() && (w[i + 1].empty() || w[i + 1][0] != '-')) shown += " " + w[++i];
    r.notes.push_back("ignored " + shown + ": it does not change what the KV cache stores");
  }
  // Every type a layer stores must hold whole blocks per head (K types checked with an f16 V and
  // the other way round).
  for (const std::string* t : {&k.base, &k.first, &k.last}) {
    if (!t->empty()) KVS_RETURN_IF_ERROR(llamacppCheckBlocks(*t, "f16", shape.headDim, "ik_llama.cpp"));
  }
  for (const std::string* t : {&v.base, &v.first, &v.last}) {
    if (!t->empty()) KVS_RETURN_IF_ERROR(llamacppCheckBlocks("f16", *t, shape.headDim, "ik_llama.cpp"));
  }
  r.key = sidePlan(k, true, shape.headDim);
  r.value = sidePlan(v, false, shape.headDim);
  r.notes.insert(r.notes.begin(), "ggml's blocks as they are: ik_llama.cpp rotates a cache only with -khad/-vhad "
                                  "(common/common.cpp at 8337e4cd, off by default)");
  if (k.nFirst > 0 || k.nLast > 0 || v.nFirst > 0 || v.nLast > 0) {
    r.notes.push_back("-ctk-first/-ctk-last (-ctv-…) TYPE,N override the first/last N layers, the last after the "
                      "first: a plan part firstN/lastN");
  }
  return r;
}

std::vector<EngineType> planTypes(const KvShape& shape, std::vector<std::string>* notes) {
  return llamacppPlanTypes(shape, true, notes);
}

/// Per side: runs of equal specs: one is a base, two a base and an override, three first/base/last.
EngineFlags planFlags(const std::vector<std::string>& ks, const std::vector<std::string>& vs, const KvShape& shape) {
  EngineFlags f;
  f.engine = "ik_llama.cpp";
  const std::vector<EngineType> types = llamacppPlanTypes(shape, true, nullptr);
  std::string words, why;
  bool ok = true;
  for (int pass = 0; pass < 2 && ok; ++pass) {
    const bool isKey = pass == 0;
    const std::vector<std::string>& s = isKey ? ks : vs;
    auto typeOf = [&](const std::string& spec) {
      for (const EngineType& t : types) {
        if ((isKey ? t.key : t.value) == spec) return t.name;
      }
      return std::string();
    };
    std::vector<std::pair<std::string, int>> runs;
    for (const std::string& spec : s) {
      if (runs.empty() || runs.back().first != spec) runs.push_back({spec, 0});
      ++runs.back().second;
    }
    std::string first, base, last;
    int nFirst = 0, nLast = 0;
    if (runs.size() == 1) {
      base = runs[0].first;
    } else if (runs.size() == 2) {
      if (runs[0].second >= runs[1].second) {
        base = runs[0].first;
        last = runs[1].first;
        nLast = runs[1].second;
      } else {
        base = runs[1].first;
        first = runs[0].first;
        nFirst = runs[0].second;
      }
    } else if (runs.size() == 3) {
      first = runs[0].first;
      nFirst = runs[0].second;
      base = runs[1].first;
      last = runs[2].first;
      nLast = runs[2].second;
    } else {
      ok = false;
      why = std::string(isKey ? "K" : "V") + " changes spec " + std::to_string(runs.empty() ? 0 : runs.size() - 1) +
            " times along the layers";
      break;
    }
    const char* side = isKey ? "-ctk" : "-ctv";
    const std::string tb = typeOf(base);
    if (tb.empty()) {
      ok = false;
      why = (isKey ? "K " : "V ") + base + " is not an ik_llama.cpp cache type at this head dim";
      break;
    }
    words += std::string(" ") + side + " " + tb;
    for (auto [spec, count, suffix] : {std::tuple{first, nFirst, "-first"}, std::tuple{last, nLast, "-last"}}) {
      if (count == 0) continue;
      const std::string t = typeOf(spec);
      if (t.empty()) {
        ok = false;
        why = (isKey ? "K " : "V ") + spec + " is not an ik_llama.cpp cache type at this head dim";
        break;
      }
      words += std::string(" ") + side + suffix + " " + t + "," + std::to_string(count);
    }
  }
  f.expressible = ok;
  if (ok) {
    f.flags = "ik_llama.cpp" + words;
    f.statement = "-ctk-first/-ctk-last TYPE,N override the first/last N layers (ggml types, no -khad/-vhad)";
  } else {
    f.statement = "ik_llama.cpp cannot express this plan: " + why +
                  " (it has one type per side with first-N and last-N overrides)";
  }
  return f;
}

constexpr std::array<ModelledOption, 4> kOptions{{
    {"-ctk, --cache-type-k; -ctv, --cache-type-v", "the K and V cache types (f16 by default), of the types ik_llama.cpp "
                                                   "shares with llama.cpp"},
    {"-ctk-first, -ctk-last, -ctv-first, -ctv-last", "TYPE,N: the first (last) N layers store TYPE instead; the "
                                                     "last-N override is applied after the first-N one"},
    {"-khad, -vhad", "refused: ik_llama.cpp's Hadamard transform of the cache was not read"},
    {"other flags", "ignored with a note"},
}};
constexpr std::array<std::string_view, 3> kRefusals{
    "a cache type outside the types shared with llama.cpp (ik_llama.cpp has more; kvscope did not read them)",
    "a quantized type whose block size 32 does not divide D (a head's row holds no whole block; llama.cpp's "
    "llama_init_from_model refuses it by name, ik_llama.cpp's own check was not read)",
    "-khad, -vhad (not read)"};
constexpr std::array<EngineRelease, 1> kReleases{{
    {"main", "2026", "ikawrakow/ik_llama.cpp 8337e4cd: common/common.cpp (-ctk-first/-ctk-last, -khad/-vhad), "
                     "src/llama.cpp (the per-layer overrides)"},
}};

Expected<ResolvedKv> resolve(const EngineArgs& args, const KvShape& shape) { return resolveIk(args, shape); }

}  // namespace

extern const EngineDef kIkLlamacppEngine;
constinit const EngineDef kIkLlamacppEngine{
    "ik_llama.cpp",
    {"ik-llama.cpp", "ik_llama"},
    "ik_llama.cpp: llama.cpp's ggml cache types as they are (no rotation), with first/last layer overrides",
    kLlamacppCacheTypes,
    kOptions,
    kRefusals,
    kReleases,
    {},
    resolve,
    PlanShape::FirstLast,
    "per side a type, the first N and the last M layers overridden",
    planTypes,
    planFlags};

}  // namespace kvscope
