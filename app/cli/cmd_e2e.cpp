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
#include "core/model/e2e.h"
#include "core/model/model.h"
#include "core/engine/presets.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string model;
  std::string dump;
  SpecChoice spec;
  std::string sweep;
  std::string json;
  int scoreFrom = 0;
};

std::string fmt(double v, const char* f = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string textReport(const E2eResult& r) {
  std::ostringstream os;
  os << "model " << (r.model.empty() ? "?" : r.model) << " (" << r.architecture << ", " << r.modelFormat << "), "
     << r.tokens << " tokens replayed\n";
  if (!r.preset.empty()) os << "preset " << r.preset << "\n";
  if (!r.engine.empty()) os << "engine " << r.engine << "\n";
  os << "key:   " << r.key.specText << " (" << fmt(r.key.bitsPerElement, "%.3f") << " bits/element; "
     << r.key.storage << ")\n";
  os << "value: " << r.value.specText << " (" << fmt(r.value.bitsPerElement, "%.3f") << " bits/element; "
     << r.value.storage << ")\n";
  if (!r.querySpec.empty()) os << "query: converted as " << r.querySpec << " before the scores (the engine's attention)\n";
  const E2eSummary& s = r.summary;
  os << "\n" << s.scored << " positions scored (from position " << s.scoreFrom << ")\n";
  os << "Mean PPL(Q)          : " << fmt(s.pplQuant, "%.6f") << "\nMean PPL(base)       : " << fmt(s.pplFp, "%.6f")
     << "\nMean PPL(Q)/PPL(base): " << fmt(s.pplRatio, "%.6f") << "\n";
  os << "Mean    KLD: " << fmt(s.klMean, "%.6f") << "\nMaximum KLD: " << fmt(s.klMax, "%.6f")
     << "\n99.0%   KLD: " << fmt(s.klP99, "%.6f") << "\n95.0%   KLD: " << fmt(s.klP95, "%.6f")
     << "\n90.0%   KLD: " << fmt(s.klP90, "%.6f") << "\nMedian  KLD: " << fmt(s.klMedian, "%.6f") << "\n";
  os << "Mean    Δp: " << fmt(100 * s.meanDeltaP, "%.3f") << " %\nRMS Δp    : " << fmt(100 * s.rmsDeltaP, "%.3f")
     << " %\nSame top p: " << fmt(100 * s.top1Agreement, "%.3f") << " %\n";
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
  return os.str();
}

std::string sweepTable(const std::vector<E2eResult>& results, const std::vector<std::string>& labels) {
  std::ostringstream os;
  size_t width = 4;
  for (const std::string& l : labels) width = std::max(width, l.size());
  char head[200];
  std::snprintf(head, sizeof(head), "%-*s  %6s  %6s  %11s  %11s  %11s  %7s  %8s  %9s\n", static_cast<int>(width),
                "spec", "K_bpe", "V_bpe", "kl_mean", "kl_p99", "kl_max", "top1", "rms_dp%", "ppl_ratio");
  os << head;
  for (size_t i = 0; i < results.size(); ++i) {
    const E2eResult& r = results[i];
    char line[400];
    std::snprintf(line, sizeof(line), "%-*s  %6.3f  %6.3f  %11.4g  %11.4g  %11.4g  %7.4f  %8.3f  %9.5f\n",
                  static_cast<int>(width), labels[i].c_str(), r.key.bitsPerElement, r.value.bitsPerElement,
                  r.summary.klMean, r.summary.klP99, r.summary.klMax, r.summary.top1Agreement,
                  100 * r.summary.rmsDeltaP, r.summary.pplRatio);
    os << line;
  }
  return os.str();
}

/// The settings to replay with, for the model's shape (presets and engines depend on it).
/// `resolved` receives the single setting's resolution (for --explain and notes).
Expected<std::vector<E2eSetting>> settingsFrom(const Options& o, const KvShape& shape, ResolvedPlans& resolved) {
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
  E2eSetting e;
  e.label = r->label;
  e.key = r->plans.key;
  e.value = r->plans.value;
  e.preset = c.preset;
  e.engine = c.engine;
  e.querySpec = r->strings.query;  // what the engine's attention does to Q (llama.cpp: q8_0 for quantized K)
  resolved = std::move(*r);
  return std::vector<E2eSetting>{e};
}

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model,
                 "the model the dump was recorded from: a GGUF file, a Hugging Face folder or a llama2.c checkpoint")
      ->required();
  sub.add_option("dump", o->dump, "a dump written by 'kvscope-cli record' (its tokens are replayed)")->required();
  sub.add_option("--key", o->spec.key, "spec or plan for keys, e.g. q8_0 or q4_0;last1:q8_0");
  sub.add_option("--value", o->spec.value, "spec or plan for values");
  sub.add_option("--preset", o->spec.preset, "a named K/V setting (see 'kvscope-cli presets')");
  addEngineOptions(sub, o->spec);
  sub.add_option("--sweep", o->sweep,
                 "several settings: 'KEY:VALUE;KEY:VALUE;…' (a preset name or one spec for both also works), "
                 "or a file with one entry per line");
  sub.add_option("--score-from", o->scoreFrom,
                 "first position whose next token is scored (default 0; llama-perplexity scores from T/2)");
  sub.add_option("--json", o->json, "write the JSON result to FILE ('-' = standard output)");
  return [o]() -> int {
    auto model = Model::load(o->model);
    if (!model) return fail(model.status());
    const ModelHparams& hp = (*model)->hparams();
    const KvShape shape{hp.headDim, hp.layers, hp.kvHeads};
    ResolvedPlans resolved;
    auto settings = settingsFrom(*o, shape, resolved);
    if (!settings) return fail(settings.status());
    if (o->spec.explain) {
      if (!o->sweep.empty()) return fail(Status::invalidArgument("--explain explains --preset or --engine, not --sweep"));
      std::cout << explainText(o->spec, resolved, shape);
      return kExitOk;
    }
    if (!o->spec.engine.empty()) printNotes(resolved);
    auto dump = openDump(o->dump, "");
    if (!dump) return fail(dump.status());
    E2eOptions options;
    options.scoreFrom = o->scoreFrom;
    auto results = runE2e(*model, **dump, *settings, options, cliProgress("e2e"));
    if (!results) return fail(results.status());
    std::vector<std::string> labels;
    for (const E2eResult& r : *results)
      labels.push_back(r.label.empty() ? r.key.specText + " : " + r.value.specText : r.label);
    for (const std::string& w : results->front().warnings) std::cerr << "kvscope-cli: warning: " << w << "\n";
    const bool isSweep = !o->sweep.empty();
    if (!o->json.empty()) {
      std::string text;
      if (isSweep) {
        nlohmann::json arr = nlohmann::json::array();
        for (size_t i = 0; i < results->size(); ++i) {
          nlohmann::json one = nlohmann::json::parse(e2eToJson((*results)[i]));
          one["label"] = labels[i];
          arr.push_back(std::move(one));
        }
        text = nlohmann::json{{"kvscope_e2e_sweep", 2}, {"results", arr}}.dump(2) + "\n";
      } else {
        text = e2eToJson(results->front());
      }
      if (Status s = writeOutput(o->json, text); !s.isOk()) return fail(s);
    }
    if (o->json != "-") std::cout << (isSweep ? sweepTable(*results, labels) : textReport(results->front()));
    return kExitOk;
  };
};

const Registrar registrar{"e2e",
                          "replay a recorded sequence with a quantized KV cache and measure the next-token damage (KL, top-1, Δp, perplexity)",
                          setup};

}  // namespace
}  // namespace kvscope::cli
