// SPDX-License-Identifier: GPL-3.0-or-later
// Named K/V settings that approximate published systems (quantization.md §9, §10), in one table
// read by the CLI (`--preset`, `presets`), the GUI, search and the tests. A preset may depend on
// the dump's shape (llama.cpp rotates only when the head dim is a multiple of 64): it resolves,
// for a shape, to K and V spec strings and the notes that say why.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "core/util/status.h"

namespace kvscope {

/// The part of a dump's shape a preset or an engine rule reads (§9). 0 = unknown.
struct KvShape {
  int headDim = 0;    ///< D
  int layers = 0;     ///< layer count
  int kvHeads = 0;    ///< kv heads
  std::string model;  ///< the dump's `model` attribute (an engine may read an architecture name from it); empty = unknown

  /// An unknown shape.
  KvShape() = default;
  /// D, layers, kv heads and (optionally) the model's name; 0 = unknown.
  KvShape(int d, int l = 0, int h = 0, std::string m = {})
      : headDim(d), layers(l), kvHeads(h), model(std::move(m)) {}
};

/// What a preset or an engine string resolves to for one shape: spec strings (a plan's syntax,
/// §12, is allowed where plans are accepted) and, in words, why.
struct ResolvedKv {
  std::string key;                 ///< spec string for keys
  std::string value;               ///< spec string for values
  std::vector<std::string> notes;  ///< the rule applied, e.g. "D = 96 is not a multiple of 64: …"
  /// What the engine rounds each query to before the scores, as a spec string ("q8_0", "fp16"),
  /// after the rotation K gets; empty = exact. Only `e2e` applies it (docs/engines.md).
  std::string query;

  /// Nothing resolved yet.
  ResolvedKv() = default;
  /// Specs and notes (the query exact).
  ResolvedKv(std::string k, std::string v, std::vector<std::string> n = {})
      : key(std::move(k)), value(std::move(v)), notes(std::move(n)) {}
};

/// A shape-dependent preset's rule: the specs for `shape`, or an error naming what the shape lacks.
using PresetRule = Expected<ResolvedKv> (*)(const KvShape& shape);

/// One row of the preset table.
struct Preset {
  std::string_view name;         ///< e.g. "kivi-2"
  std::string_view keySpec;      ///< spec string for keys; for a shape-dependent preset, its rule in words
  std::string_view valueSpec;    ///< spec string for values; for a shape-dependent preset, its rule in words
  std::string_view description;  ///< the system it approximates, and from which code
  PresetRule rule = nullptr;     ///< set when the specs depend on the shape
};

/// All presets, in the order §9 lists them.
std::span<const Preset> presetTable();
/// Looks a preset up by name; nullptr when unknown.
const Preset* findPreset(std::string_view name);
/// "kivi-2, kivi-4, …": every preset name, for error messages.
std::string presetNameList();

/// A preset's spec strings for `shape`; an unknown name is an error listing the known ones, and
/// a shape-dependent preset needs the shape fields its rule reads.
Expected<ResolvedKv> resolvePreset(std::string_view name, const KvShape& shape);

/// A preset's parsed key and value specs.
struct PresetSpecs {
  QuantSpec key;
  QuantSpec value;
};
/// Parses a preset's specs for `shape` (see resolvePreset).
Expected<PresetSpecs> presetSpecs(std::string_view name, const KvShape& shape);
/// Parses resolved spec strings; errors name `origin` (a preset or an engine string). For callers
/// that hold one spec per tensor (the GUI's panels); where plans are accepted use parseResolvedPlans.
Expected<PresetSpecs> parseResolved(const ResolvedKv& resolved, std::string_view origin);

/// K and V plans (§12; a plain spec is a one-part plan).
struct KvPlans {
  Plan key;
  Plan value;
};
/// Parses resolved strings as plans, so a preset or engine may store a spec per layer; errors
/// name `origin` as parseResolved's do.
Expected<KvPlans> parseResolvedPlans(const ResolvedKv& resolved, std::string_view origin);

}  // namespace kvscope
