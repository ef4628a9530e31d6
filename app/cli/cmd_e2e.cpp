// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli e2e`: replay a recorded sequence through the model with a quantized KV cache and
// report the damage to the next-token distribution (docs/real-models.md).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "app/cli/command.h"
#include "core/model/checkpoint.h"
#include "core/model/e2e.h"
#include "core/model/record.h"
#include "core/engine/presets.h"
#include "core/util/json_text.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string model;
  std::string dump;
  SpecChoice spec;
  std::string sweep;
  std::string json;
};

std::string fmt(double v, const char* f = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string textReport(const E2eResult& r) {
  std::ostringstream os;
  os << "model " << (r.model.empty() ? "?" : r.model) << ", " << r.tokens << " tokens replayed\n";
  if (!r.preset.empty()) os << "preset " << r.preset << "\n";
  if (!r.engine.empty()) os << "engine " << r.engine << "\n";
  os << "key:   " << r.key.specText << " (" << fmt(r.key.bitsPerElement, "%.3f") << " bits/element; "
     << r.key.storage << ")\n";
  os << "value: " << r.value.specText << " (" << fmt(r.value.bitsPerElement, "%.3f") << " bits/element; "
     << r.value.storage << ")\n";
  os << "next-token KL(fp||quant): mean " << fmt(r.summary.klMean) << " nats, max " << fmt(r.summary.klMax)
     << "\ntop-1 agreement " << fmt(r.summary.top1Agreement, "%.4f") << "\nNLL of the recorded tokens: fp "
     << fmt(r.summary.nllFp, "%.5f") << ", quantized " << fmt(r.summary.nllQuant, "%.5f")
     << ", perplexity ratio " << fmt(r.summary.pplRatio, "%.5f") << "\n";
  if (r.dumpLogitsMaxAbsDiff)
    os << "dump /logits vs exact replay: max abs diff " << fmt(*r.dumpLogitsMaxAbsDiff, "%.3g") << "\n";
  os << "\nlayer  attn_kl_mean  attn_kl_max  attn_top1  attn_out_rel_err  hidden_rel_err\n";
  for (const E2eLayer& l : r.layers) {
    char line[160];
    std::snprintf(line, sizeof(line), "%5d  %12.4g  %11.4g  %9.4f  %16.4g  %14.4g\n", l.layer, l.attentionKlMean,
                  l.attentionKlMax, l.attentionTop1, l.outputRelError, l.hiddenRelError);
    os << line;
  }
  for (const std::string& n : r.notes) os << "note: " << n << "\n";
  for (const std::string& w : r.warnings) os << "warning: " << w << "\n";
  return os.str();
}

std::string sweepTable(const std::vector<E2eResult>& results, const std::vector<std::string>& labels) {
  std::ostringstream os;
  size_t width = 4;
  for (const std::string& l : labels) width = std::max(width, l.size());
  char head[200];
  std::snprintf(head, sizeof(head), "%-*s  %6s  %6s  %11s  %11s  %7s  %9s\n", static_cast<int>(width), "spec",
                "K_bpe", "V_bpe", "kl_mean", "kl_max", "top1", "ppl_ratio");
  os << head;
  for (size_t i = 0; i < results.size(); ++i) {
    const E2eResult& r = results[i];
    char line[400];
    std::snprintf(line, sizeof(line), "%-*s  %6.3f  %6.3f  %11.4g  %11.4g  %7.4f  %9.5f\n", static_cast<int>(width),
                  labels[i].c_str(), r.key.bitsPerElement, r.value.bitsPerElement, r.summary.klMean,
                  r.summary.klMax, r.summary.top1Agreement, r.summary.pplRatio);
    os << line;
  }
  if (!results.empty())
    for (const std::string& w : results.front().warnings) os << "warning: " << w << "\n";
  return os.str();
}

/// The settings to replay with, for the model's shape (presets and engines depend on it).
/// `resolved` receives the single setting's resolution (for --explain and notes).
Expected<std::vector<SweepEntry>> entriesFrom(const Options& o, const KvShape& shape, ResolvedPlans& resolved) {
  const SpecChoice& c = o.spec;
  const bool specs = !c.key.empty() || !c.value.empty();
  const int ways = (specs ? 1 : 0) + (c.preset.empty() ? 0 : 1) + (c.engine.empty() ? 0 : 1) +
                   (o.sweep.empty() ? 0 : 1);
  if (ways != 1)
    return Status::invalidArgument(
        "give exactly one of: --key SPEC --value SPEC, --preset NAME, --engine \"ENGINE FLAGS\", or --sweep LIST");
  if (!o.sweep.empty()) return parseSweep(o.sweep, shape);
  auto r = resolvePlans(c, shape);
  if (!r) return r.status();
  SweepEntry e;
  e.label = r->label;
  e.key = r->plans.key;
  e.value = r->plans.value;
  resolved = std::move(*r);
  return std::vector<SweepEntry>{e};
}

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  addInputOption(sub, "model", o->model, "llama2.c float32 checkpoint the dump was recorded from")->required();
  addInputOption(sub, "dump", o->dump, "a dump written by 'kvscope-cli record' (its tokens are replayed)")->required();
  sub.add_option("--key", o->spec.key, "spec or plan for keys, e.g. q8_0 or q4_0;last1:q8_0");
  sub.add_option("--value", o->spec.value, "spec or plan for values");
  sub.add_option("--preset", o->spec.preset, "a named K/V setting (see 'kvscope-cli presets')");
  addEngineOptions(sub, o->spec);
  addInputOption(sub, "--sweep", o->sweep,
                 "several settings: 'KEY:VALUE;KEY:VALUE;…' (a preset name or one spec for both also works), "
                 "or a file with one entry per line");
  addOutputOption(sub, "--json", o->json, "write the JSON result to FILE ('-' = standard output)");
  return [o]() -> int {
    auto model = Checkpoint::load(o->model);
    if (!model) return fail(model.status());
    const ModelConfig& cfg = (*model)->config();
    const KvShape shape{cfg.headDim(), cfg.layers, cfg.kvHeads};
    ResolvedPlans resolved;
    auto entries = entriesFrom(*o, shape, resolved);
    if (!entries) return fail(entries.status());
    if (o->spec.explain) {
      if (!o->sweep.empty()) return fail(Status::invalidArgument("--explain explains --preset or --engine, not --sweep"));
      std::cout << explainText(o->spec, resolved, shape);
      return kExitOk;
    }
    if (!o->spec.engine.empty()) printNotes(resolved);
    auto dump = openDump(o->dump, "");
    if (!dump) return fail(dump.status());
    auto rec = readRecording(**dump, cancellationProgress());
    if (!rec) return fail(rec.status());
    auto baseline = e2eBaseline(*model, *rec, cancellationProgress());
    if (!baseline) return fail(baseline.status().withContext(o->dump));
    std::vector<E2eResult> results;
    std::vector<std::string> labels;
    for (const SweepEntry& e : *entries) {
      auto r = runE2e(*model, *rec, *baseline, e.key, e.value, cancellationProgress());
      if (!r) return fail(r.status().withContext(e.label.empty() ? o->dump : e.label));
      if (!o->spec.preset.empty()) r->preset = o->spec.preset;
      if (!o->spec.engine.empty()) r->engine = o->spec.engine;
      labels.push_back(e.label.empty() ? r->key.specText + " : " + r->value.specText : e.label);
      results.push_back(std::move(*r));
    }
    for (const std::string& w : baseline->warnings) std::cerr << "kvscope-cli: warning: " << w << "\n";
    const bool isSweep = !o->sweep.empty();
    if (!o->json.empty()) {
      std::string text;
      if (isSweep) {
        nlohmann::json arr = nlohmann::json::array();
        for (size_t i = 0; i < results.size(); ++i) {
          nlohmann::json one = nlohmann::json::parse(e2eToJson(results[i]));
          one["label"] = labels[i];
          arr.push_back(std::move(one));
        }
        text = jsonText(nlohmann::json{{"kvscope_e2e_sweep", 1}, {"results", arr}});
      } else {
        text = e2eToJson(results.front());
      }
      if (Status s = writeOutput(o->json, text); !s.isOk()) return fail(s);
    }
    if (o->json != "-") std::cout << (isSweep ? sweepTable(results, labels) : textReport(results.front()));
    return kExitOk;
  };
};

const Registrar registrar{"e2e",
                          "replay a recorded sequence with a quantized KV cache and measure the next-token damage",
                          setup};

}  // namespace
}  // namespace kvscope::cli
