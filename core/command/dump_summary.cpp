// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/command/dump_summary.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace kvscope {

namespace {

std::string humanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  std::ostringstream os;
  os << std::fixed << std::setprecision(u == 0 ? 0 : 1) << bytes << " " << units[u];
  return os.str();
}

int64_t totalBytesFp16(const DumpInfo& info) {
  return info.bytesPerTokenFp16() * info.tokens * info.sequences;
}

}  // namespace

Expected<DumpSummary> summarizeDump(const Dump& dump, bool scan, const Progress& progress) {
  DumpSummary out;
  out.info = dump.info();
  out.warnings = out.info.warnings;
  out.scanned = scan;
  if (!scan) return out;
  const DumpInfo& info = out.info;
  std::vector<TensorKind> kinds = {TensorKind::Key, TensorKind::Value};
  if (info.hasQuery) kinds.push_back(TensorKind::Query);
  if (info.hasKeyPreRope) kinds.push_back(TensorKind::KeyPreRope);
  for (int l = 0; l < info.layers; ++l) {
    // A tiny file may declare a huge batch whose chunks were never written (they read as the
    // fill value): scan the sequences the file stores, so the time is bounded by the file's
    // size, and say what was left out.
    std::vector<StoredData> stored;
    bool anyEverySequence = false;
    std::vector<int> candidates;
    for (TensorKind kind : kinds) {
      auto s = dump.storedData(l, kind);
      if (!s) return s.status();
      anyEverySequence = anyEverySequence || s->everySequence;
      if (!s->everySequence) {
        candidates.insert(candidates.end(), s->sequences.begin(), s->sequences.end());
        std::ostringstream w;
        w << "/layers/" << l << "/" << tensorKindName(kind) << ": declares " << info.sequences << " sequence"
          << (info.sequences == 1 ? "" : "s") << " (" << humanBytes(double(s->declaredBytes))
          << ") but stores only " << humanBytes(double(s->storedBytes));
        if (s->chunks > 0) w << " (" << s->storedChunks << " of " << s->chunks << " chunks)";
        w << "; unwritten chunks read as the fill value, so only the " << s->sequences.size() << " sequence"
          << (s->sequences.size() == 1 ? "" : "s") << " with stored data "
          << (s->listTruncated ? "in the first " + std::to_string(StoredData::kMaxChunksListed) + " stored chunks "
                               : std::string())
          << "were scanned";
        out.warnings.push_back(w.str());
      }
      stored.push_back(std::move(*s));
    }
    if (anyEverySequence) {
      candidates.clear();
      for (int b = 0; b < info.sequences; ++b) candidates.push_back(b);
    }
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    for (int b : candidates) {
      for (size_t k = 0; k < kinds.size(); ++k) {
        const TensorKind kind = kinds[k];
        const StoredData& s = stored[k];
        if (!s.everySequence && !std::binary_search(s.sequences.begin(), s.sequences.end(), b)) continue;
        if (!report(progress, static_cast<double>(l) / static_cast<double>(info.layers), "layer " + std::to_string(l)))
          return Status::cancelled();
        auto t = dump.read(l, kind, b);
        if (!t) return t.status();
        ScanRow row{l, b, kind, scanNonFinite(*t)};
        if (!row.report.allFinite()) {
          std::ostringstream w;
          w << "/layers/" << l << "/" << tensorKindName(kind);
          if (info.sequences > 1) w << " (sequence " << b << ")";
          w << ": " << row.report.nanCount << " NaN, " << row.report.infCount << " Inf; first at head "
            << row.report.firstHead << ", token " << row.report.firstToken << ", channel " << row.report.firstChannel;
          out.warnings.push_back(w.str());
        }
        out.scan.push_back(row);
      }
    }
  }
  return out;
}

nlohmann::json dumpSummaryJson(const DumpSummary& s) {
  const DumpInfo& info = s.info;
  nlohmann::json j;
  j["file"] = info.path;
  j["model"] = info.model;
  j["layers"] = info.layers;
  j["kv_heads"] = info.kvHeads;
  j["heads"] = info.heads;
  j["tokens"] = info.tokens;
  j["queries"] = info.queries;
  j["head_dim"] = info.headDim;
  j["sequences"] = info.sequences;
  j["dtype"] = info.dtype;
  j["canonical"] = info.canonical;
  j["has_query"] = info.hasQuery;
  j["has_key_pre_rope"] = info.hasKeyPreRope;
  j["has_tokens"] = info.hasTokens;
  j["has_token_text"] = info.hasTokenText;
  j["has_logits"] = info.hasLogits;
  j["rope_style"] = ropeStyleName(info.ropeStyle);
  j["rope_theta"] = info.ropeTheta;
  if (!info.ropeInvFreq.empty()) j["rope_inv_freq"] = info.ropeInvFreq;
  j["softmax_scale"] = info.softmaxScale;
  j["model_path"] = info.modelPath;
  j["bytes_per_token_fp16"] = info.bytesPerTokenFp16();
  j["bytes_total_fp16"] = totalBytesFp16(info);
  j["warnings"] = s.warnings;
  if (s.scanned) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : s.scan)
      rows.push_back({{"layer", r.layer},
                      {"sequence", r.sequence},
                      {"tensor", tensorKindName(r.kind)},
                      {"nan", r.report.nanCount},
                      {"inf", r.report.infCount}});
    j["scan"] = rows;
  }
  return j;
}

std::string dumpSummaryText(const DumpSummary& s) {
  const DumpInfo& info = s.info;
  std::ostringstream out;
  auto line = [&](const std::string& k, const std::string& v) {
    out << std::left << std::setw(16) << (k + ":") << v << "\n";
  };
  line("file", info.path);
  line("model", info.model.empty() ? "(not named)" : info.model);
  line("layers", std::to_string(info.layers));
  line("kv heads", std::to_string(info.kvHeads));
  line("query heads", std::to_string(info.heads) + (info.hasQuery
                                                        ? " (group size " + std::to_string(info.groupSize()) + ")"
                                                        : " (no queries)"));
  line("tokens", std::to_string(info.tokens));
  line("queries", std::to_string(info.queries));
  line("head dim", std::to_string(info.headDim));
  line("sequences", std::to_string(info.sequences));
  line("element type", info.dtype);
  std::string datasets = "key, value";
  if (info.hasQuery) datasets += ", query";
  if (info.hasKeyPreRope) datasets += ", key_pre_rope";
  if (info.hasTokens) datasets += ", tokens";
  if (info.hasTokenText) datasets += ", token_text";
  if (info.hasLogits) datasets += ", logits";
  line("datasets", datasets + (info.canonical ? "" : " (through a mapping)"));
  std::ostringstream rope;
  rope << ropeStyleName(info.ropeStyle) << ", theta " << info.ropeTheta;
  if (!info.ropeInvFreq.empty()) rope << ", the model's frequencies (rope_inv_freq)";
  line("rope", rope.str());
  std::ostringstream scale;
  scale << info.softmaxScale;
  line("softmax scale", scale.str());
  if (!info.modelPath.empty()) line("model path", info.modelPath);
  line("fp16 KV size", std::to_string(info.bytesPerTokenFp16()) + " bytes per token, " +
                           humanBytes(double(totalBytesFp16(info))) + " in total");
  if (s.scanned) {
    int64_t nan = 0, inf = 0;
    for (const auto& r : s.scan) {
      nan += r.report.nanCount;
      inf += r.report.infCount;
    }
    line("scan", std::to_string(s.scan.size()) + " tensors read: " + std::to_string(nan) + " NaN, " +
                     std::to_string(inf) + " Inf");
  }
  if (s.warnings.empty()) line("warnings", "none");
  for (const auto& w : s.warnings) line("warning", w);
  return out.str();
}

}  // namespace kvscope
