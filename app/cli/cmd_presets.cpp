// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli presets`: the named K/V settings of quantization.md §9. With --dump, what each
// resolves to for that dump (llama.cpp's rotation depends on the head dim) and its storage at
// the dump's shape; without, each rule as written and storage at a stated reference shape.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/command.h"
#include "core/engine/engine.h"
#include "core/engine/presets.h"
#include "core/quant/quantize.h"

namespace kvscope::cli {
namespace {

// Reference shape for bits per element without a dump: a Llama-3-8B-like layer (8 kv heads,
// head dim 128) at a 32k-token context. Kept tokens and group remainders make bits per element
// depend on the shape.
constexpr int kRefKvHeads = 8;
constexpr int kRefTokens = 32768;
constexpr int kRefHeadDim = 128;

std::string fixed4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

struct Options {
  bool json = false;
  bool engines = false;
  std::string dump;
  std::string mapping;
};

/// `presets --engines`: every engine row (core/engine/engine.h) with the releases it was read at.
int runEngines(const Options& o) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::string text;
  auto list = [](auto items) {
    std::vector<std::string> out;
    for (std::string_view x : items) {
      if (!x.empty()) out.emplace_back(x);
    }
    return out;
  };
  for (const EngineDef* e : engineTable()) {
    nlohmann::ordered_json row;
    row["name"] = e->name;
    row["aliases"] = list(e->aliases);
    row["summary"] = e->summary;
    row["cache_types"] = list(e->cacheTypes);
    auto options = nlohmann::ordered_json::array();
    for (const ModelledOption& m : e->options) options.push_back({{"option", m.name}, {"meaning", m.meaning}});
    row["options"] = options;
    row["refusals"] = list(e->refusals);
    row["plan_shape"] = planShapeName(e->planShape);
    row["plan"] = e->planSummary;
    row["plan_flags"] = e->planFlags != nullptr;
    auto releases = nlohmann::ordered_json::array();
    for (const EngineRelease& r : e->releases) {
      releases.push_back({{"version", r.version}, {"date", r.date}, {"read", r.read}});
    }
    row["releases"] = releases;
    auto changes = nlohmann::ordered_json::array();
    for (const EngineChange& c : e->changes) {
      changes.push_back({{"option", c.option},
                         {"release", c.release},
                         {"what", c.what},
                         {"replacement", c.replacement},
                         {"refused_without_version", c.strict}});
    }
    row["changes"] = changes;
    rows.push_back(std::move(row));

    std::string names;
    for (const std::string& a : list(e->aliases)) names += ", " + a;
    text += std::string(e->name) + (names.empty() ? "" : " (also " + names.substr(2) + ")") + "\n  " +
            std::string(e->summary) + "\n  cache types: ";
    std::string types;
    for (const std::string& t : list(e->cacheTypes)) types += (types.empty() ? "" : ", ") + t;
    text += types + "\n  options:\n";
    for (const ModelledOption& m : e->options) text += "    " + std::string(m.name) + ": " + std::string(m.meaning) + "\n";
    text += "  refuses:\n";
    for (std::string_view r : e->refusals) text += "    " + std::string(r) + "\n";
    text += "  plans: " + std::string(planShapeName(e->planShape)) + ", " + std::string(e->planSummary) + "\n";
    text += "  read at (" + std::string(e->name) + "@RELEASE names one; without it the first):\n";
    for (const EngineRelease& r : e->releases) {
      text += "    " + std::string(r.version) + " (" + std::string(r.date) + "): " + std::string(r.read) + "\n";
    }
    for (const EngineChange& c : e->changes) {
      text += "  changed in " + std::string(c.release) + ": " + std::string(c.option) + ": " + std::string(c.what) +
              "; " + std::string(c.replacement) + (c.strict ? "" : " (accepted without @RELEASE)") + "\n";
    }
    text += "\n";
  }
  if (o.json) {
    nlohmann::ordered_json doc;
    doc["engines"] = std::move(rows);
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << text;
  }
  return kExitOk;
}

int run(const Options& o) {
  if (o.engines) {
    if (!o.dump.empty()) {
      return fail(Status::invalidArgument("--engines lists the engine rows; it takes no --dump (use eval DUMP --engine "
                                          "\"…\" --explain for what an engine string stores for a dump)"));
    }
    return runEngines(o);
  }
  int kvHeads = kRefKvHeads, tokens = kRefTokens, headDim = kRefHeadDim;
  KvShape shape;  // unknown without a dump: shape-dependent rows print their rule
  std::shared_ptr<const Dump> dump;
  if (!o.dump.empty()) {
    auto d = openDump(o.dump, o.mapping);
    if (!d) return fail(d.status());
    dump = *d;
    const DumpInfo& info = dump->info();
    kvHeads = info.kvHeads;
    tokens = info.tokens;
    headDim = info.headDim;
    shape = {info.headDim, info.layers, info.kvHeads};
  }
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::string text = dump ? "for " + o.dump + ": D = " + std::to_string(headDim) + ", " + std::to_string(kvHeads) +
                                " kv heads, " + std::to_string(shape.layers) + " layers, T = " +
                                std::to_string(tokens) + "\n\n"
                          : "bits per element at the reference shape KVH=" + std::to_string(kRefKvHeads) +
                                ", T=" + std::to_string(kRefTokens) + ", D=" + std::to_string(kRefHeadDim) +
                                "; presets marked 'depends on D' resolve per dump (presets --dump FILE)\n\n";
  for (const Preset& p : presetTable()) {
    nlohmann::ordered_json row;
    row["name"] = p.name;
    text += std::string(p.name) + "\n";
    const bool shaped = p.rule != nullptr;
    if (shaped && !dump) {
      // The rule in words: no single spec describes it.
      row["depends_on_shape"] = true;
      row["key_rule"] = p.keySpec;
      row["value_rule"] = p.valueSpec;
      text += "  key:   " + std::string(p.keySpec) + "  (depends on D)\n  value: " + std::string(p.valueSpec) +
              "  (depends on D)\n";
    } else {
      auto resolved = resolvePreset(p.name, dump ? shape : KvShape{kRefHeadDim, 0, kRefKvHeads});
      auto specs = resolved ? parseResolved(*resolved, std::string("preset ").append(p.name))
                            : Expected<PresetSpecs>(resolved.status());
      row["depends_on_shape"] = shaped;
      if (!specs) {
        // Not applicable to this dump (e.g. quarot-4 on a head dim that is not a power of two).
        row["error"] = specs.status().message();
        text += "  not applicable: " + specs.status().message() + "\n";
      } else {
        const double kb = storageFor(specs->key, kvHeads, tokens, headDim).bitsPerElement();
        const double vb = storageFor(specs->value, kvHeads, tokens, headDim).bitsPerElement();
        row["key"] = toString(specs->key);
        row["value"] = toString(specs->value);
        row["key_bits_per_element"] = kb;
        row["value_bits_per_element"] = vb;
        if (resolved && !resolved->notes.empty()) row["notes"] = resolved->notes;
        text += "  key:   " + toString(specs->key) + "  (" + fixed4(kb) + " bits/element)\n  value: " +
                toString(specs->value) + "  (" + fixed4(vb) + " bits/element)\n";
        if (dump && resolved) {
          for (const std::string& n : resolved->notes) text += "  " + n + "\n";
        }
      }
    }
    row["description"] = p.description;
    text += "  " + std::string(p.description) + "\n";
    rows.push_back(std::move(row));
  }
  if (o.json) {
    nlohmann::ordered_json doc;
    if (dump) {
      doc["dump"] = {{"path", o.dump}, {"kv_heads", kvHeads}, {"tokens", tokens}, {"head_dim", headDim},
                     {"layers", shape.layers}};
    } else {
      doc["reference_shape"] = {{"kv_heads", kRefKvHeads}, {"tokens", kRefTokens}, {"head_dim", kRefHeadDim}};
    }
    doc["presets"] = std::move(rows);
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << text;
  }
  return kExitOk;
}

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.add_flag("--json", o->json, "print JSON instead of a table");
  sub.add_flag("--engines", o->engines,
               "list the engines of --engine instead: cache types, options, refusals, plans and the releases read");
  sub.add_option("--dump", o->dump, "resolve each preset for this dump (head dim, kv heads, layers)");
  sub.add_option("--mapping", o->mapping, "mapping file for a non-canonical dump");
  return [o]() -> int { return run(*o); };
};

const Registrar registrar{"presets", "list the named K/V settings (--engines: the engines); with --dump, what each "
                          "resolves to for it",
                          setup};

}  // namespace
}  // namespace kvscope::cli
