// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/command/sensitivity_request.h"

#include <filesystem>

#include "core/command/layer_list.h"
#include "core/quant/spec.h"
#include "core/report/eval.h"
#include "core/search/search.h"
#include "core/util/atomic_file.h"

namespace kvscope {

// 'default', 'search' (the budget search's whole set), a file of specs, or specs joined by ';'.
Expected<std::vector<std::string>> sensitivityCandidateList(const std::string& text, const DumpInfo& info) {
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
        return Status::invalidArgument("--candidates '" + text + "': '" + item + "' is neither a file nor a spec (" +
                                       spec.status().message() +
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

Expected<SensitivityOptions> sensitivityOptionsFor(const SensitivityRequest& request, const DumpInfo& info) {
  SensitivityOptions s;
  auto cands = sensitivityCandidateList(request.candidates, info);
  if (!cands) return cands.status();
  s.candidates = *cands;
  if (request.side == "both") {
    s.keys = s.values = true;
  } else if (request.side == "key") {
    s.values = false;
  } else if (request.side == "value") {
    s.keys = false;
  } else {
    return Status::invalidArgument("--side '" + request.side + "': allowed: key, value, both");
  }
  auto layers = parseLayerList(request.layers, info.layers);
  if (!layers) return layers.status();
  s.layers = *layers;
  auto queries = parseQueryCount(request.queries);
  if (!queries) return queries.status();
  s.lastQueries = *queries;
  s.sequence = request.sequence;
  return s;
}

}  // namespace kvscope
