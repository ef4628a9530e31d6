// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli presets`: the named K/V settings of quantization.md §9 with their canonical specs
// and storage at a stated reference shape.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/command.h"
#include "core/quant/presets.h"
#include "core/quant/quantize.h"

namespace kvscope::cli {
namespace {

// Reference shape for bits per element: a Llama-3-8B-like layer (8 kv heads, head dim 128) at a
// 32k-token context. Kept tokens and group remainders make bits per element depend on the shape.
constexpr int kRefKvHeads = 8;
constexpr int kRefTokens = 32768;
constexpr int kRefHeadDim = 128;

std::string fixed4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

CommandSetup setup = [](CLI::App& sub) {
  auto json = std::make_shared<bool>(false);
  sub.add_flag("--json", *json, "print JSON instead of a table");
  return [json]() -> int {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    std::string text = "bits per element at the reference shape KVH=" + std::to_string(kRefKvHeads) +
                       ", T=" + std::to_string(kRefTokens) + ", D=" + std::to_string(kRefHeadDim) + "\n\n";
    for (const Preset& p : presetTable()) {
      auto specs = presetSpecs(p.name);
      if (!specs) return fail(specs.status());
      const double kb = storageFor(specs->key, kRefKvHeads, kRefTokens, kRefHeadDim).bitsPerElement();
      const double vb = storageFor(specs->value, kRefKvHeads, kRefTokens, kRefHeadDim).bitsPerElement();
      rows.push_back({{"name", p.name},
                      {"key", toString(specs->key)},
                      {"value", toString(specs->value)},
                      {"key_bits_per_element", kb},
                      {"value_bits_per_element", vb},
                      {"description", p.description}});
      text += std::string(p.name) + "\n  key:   " + toString(specs->key) + "  (" + fixed4(kb) +
              " bits/element)\n  value: " + toString(specs->value) + "  (" + fixed4(vb) +
              " bits/element)\n  " + std::string(p.description) + "\n";
    }
    if (*json) {
      nlohmann::ordered_json doc;
      doc["reference_shape"] = {{"kv_heads", kRefKvHeads}, {"tokens", kRefTokens}, {"head_dim", kRefHeadDim}};
      doc["presets"] = std::move(rows);
      std::cout << doc.dump(2) << "\n";
    } else {
      std::cout << text;
    }
    return kExitOk;
  };
};

const Registrar registrar{"presets", "list the named K/V settings with their specs and bits per element", setup};

}  // namespace
}  // namespace kvscope::cli
