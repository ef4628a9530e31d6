// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli sensitivity`: per (layer, kv head) and per side, the attention damage of each
// candidate spec (docs/sensitivity.md).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "app/cli/command.h"
#include "core/report/eval.h"
#include "core/search/search.h"
#include "core/sensitivity/sensitivity.h"
#include "core/util/atomic_file.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string dump, mapping;
  std::string candidates = "default";
  std::string metric = "kl_mean";
  std::string side = "both";
  std::string layers = "all";
  std::string queries = "all";
  int sequence = 0;
  std::string json, csv;
  bool progress = false;
};

// 'default', 'search' (the budget search's whole set), a file of specs, or specs joined by ';'.
Expected<std::vector<std::string>> candidateList(const std::string& text, const DumpInfo& info) {
  if (text == "default") return sensitivityCandidates();
  if (text == "search") return defaultCandidates(KvShape{info.headDim, info.layers, info.kvHeads});
  std::error_code ec;
  if (text.find(';') == std::string::npos && std::filesystem::is_regular_file(text, ec)) {
    auto content = readTextFile(text);
    if (!content) return content.status().withContext("--candidates");
    return parseCandidateList(*content, text);
  }
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t semi = text.find(';', pos);
    const std::string item = text.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    if (item.empty()) {
      return Status::invalidArgument("--candidates '" + text + "': an empty candidate (allowed: default, search, a "
                                     "file of specs, or SPEC;SPEC;… with a spec between every two ';')");
    }
    {
      auto spec = parseSpec(item);
      if (!spec) {
        return Status::invalidArgument("--candidates '" + text + "': '" + item +
                                       "' is neither a file nor a spec (" + spec.status().message() +
                                       "); allowed: default, search, a file of specs, or SPEC;SPEC;…");
      }
      out.push_back(item);
    }
    if (semi == std::string::npos) break;
    pos = semi + 1;
  }
  if (out.empty()) return Status::invalidArgument("--candidates '" + text + "': no specs");
  return out;
}

Expected<SensitivityOptions> sensitivityOptions(const Options& o, const DumpInfo& info) {
  SensitivityOptions s;
  auto cands = candidateList(o.candidates, info);
  if (!cands) return cands.status();
  s.candidates = *cands;
  if (o.side == "both") {
    s.keys = s.values = true;
  } else if (o.side == "key") {
    s.values = false;
  } else if (o.side == "value") {
    s.keys = false;
  } else {
    return Status::invalidArgument("--side '" + o.side + "': allowed: key, value, both");
  }
  auto layers = parseLayerList(o.layers, info.layers);
  if (!layers) return layers.status();
  s.layers = *layers;
  auto queries = parseQueryCount(o.queries);
  if (!queries) return queries.status();
  s.lastQueries = *queries;
  s.sequence = o.sequence;
  return s;
}

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  addInputOption(sub, "dump", o->dump, "the KV dump (HDF5, with queries)")->required();
  addInputOption(sub, "--candidates", o->candidates,
                 "default (an 8-to-2-bit ladder), search (the budget search's set), a file of "
                 "specs (one per line, # comments) or SPEC;SPEC;…");
  sub.add_option("--metric", o->metric,
                 "field shown in the text grid: kl_mean (default), kl_max, score_mae, score_max, "
                 "top1_agreement, output_rel_error (V always shows output_rel_error)");
  sub.add_option("--side", o->side, "key, value or both (default)");
  sub.add_option("--layers", o->layers, "layers to map: all (default) or a list like 0,2,5-7");
  sub.add_option("--queries", o->queries, "queries for the metrics: all (default) or last:N");
  sub.add_option("--sequence", o->sequence, "sequence (batch index), default 0");
  addInputOption(sub, "--mapping", o->mapping, "mapping file for a non-canonical dump");
  addOutputOption(sub, "--json", o->json, "write the map as JSON to FILE ('-' = standard output)");
  addOutputOption(sub, "--csv", o->csv, "write one CSV row per (side, layer, kv head, candidate) to FILE ('-' = standard output)");
  sub.add_flag("--progress", o->progress, "print the fraction done to standard error");
  return [o]() -> int {
    if (o->json == "-" && o->csv == "-") {
      return fail(Status::invalidArgument("--json - and --csv - cannot both use standard output"));
    }
    auto field = parseAttentionField(o->metric);
    if (!field) return fail(field.status().withContext("--metric"));
    auto dump = openDump(o->dump, o->mapping);
    if (!dump) return fail(dump.status());
    auto options = sensitivityOptions(*o, (*dump)->info());
    if (!options) return fail(options.status());
    Progress progress = cancellationProgress();
    if (o->progress) {
      auto last = std::make_shared<int>(-1);
      progress = [last](double f, std::string_view) {
        const int percent = static_cast<int>(f * 100);
        if (percent != *last) {
          *last = percent;
          std::fprintf(stderr, "\rsensitivity: %3d%%", percent);
          if (percent >= 100) std::fprintf(stderr, "\n");
        }
        return !interrupted();
      };
    }
    auto map = sensitivityMap(**dump, *options, progress);
    if (!map) return fail(map.status());
    // Files are written only after the whole map: a cancelled run leaves none behind.
    if (!o->json.empty()) {
      if (Status s = writeOutput(o->json, sensitivityToJson(*map)); !s.isOk()) return fail(s);
    }
    if (!o->csv.empty()) {
      if (Status s = writeOutput(o->csv, sensitivityToCsv(*map)); !s.isOk()) return fail(s);
    }
    if (o->json.empty() && o->csv.empty()) {
      std::cout << sensitivityToText(*map, *field);
    } else {
      for (const std::string& note : map->notes) std::cerr << "kvscope-cli: note: " << note << "\n";
    }
    return kExitOk;
  };
};

const Registrar registrar{"sensitivity",
                          "per layer, kv head and side, the attention damage of each candidate spec",
                          setup};

}  // namespace
}  // namespace kvscope::cli
