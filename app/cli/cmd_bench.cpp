// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli bench`: measures kvscope on this machine against its targets (docs/performance.md).
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/command.h"
#include "core/bench/suite.h"

namespace kvscope::cli {
namespace {

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string gigabytes(double bytesPerSecond) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytesPerSecond / 1e9);
  return buf;
}

// Pads `s` to `width` display columns (UTF-8 aware: ≥, ≤ and × are one column each).
std::string pad(const std::string& s, size_t width) {
  size_t columns = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++columns;
  }
  return columns >= width ? s + " " : s + std::string(width - columns, ' ');
}

std::string table(const bench::SuiteResult& r) {
  std::ostringstream out;
  const bench::MachineFigures& m = r.machine;
  out << "machine: " << m.cpu << ", " << m.threads << " threads" << (r.quick ? " (quick shapes)" : "")
      << "\n";
  if (m.copyBytes > 0) {
    out << "  copy bandwidth (STREAM copy of " << static_cast<long long>(m.copyBytes / (1 << 20))
        << " MiB, read+write): " << gigabytes(m.copyBytesPerSecond)
        << "; into a fresh vector each run: " << gigabytes(m.copyFreshBytesPerSecond) << "\n";
  }
  if (m.gemmN > 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "  float32 GEMM (Eigen, %dx%d): %.1f GFLOP/s\n", m.gemmN, m.gemmN,
                  m.gemmFlopsPerSecond / 1e9);
    out << buf;
  }
  out << "\n"
      << pad("group", 12) << pad("name", 34) << pad("best s", 10) << pad("median s", 10)
      << pad("cpu s", 10)
      << pad("measured", 28) << pad("target", 22) << "verdict\n";
  for (const bench::SuiteRow& row : r.rows) {
    char best[32], median[32], cpu[32];
    std::snprintf(cpu, sizeof cpu, "%.4f", row.cpuSeconds);
    std::snprintf(best, sizeof best, "%.4f", row.seconds);
    std::snprintf(median, sizeof median, "%.4f", row.medianSeconds);
    const bool ran = row.verdict != bench::Verdict::NotRun;
    const bool timed = ran && row.runs > 0;  // memory rows carry no time of their own
    out << pad(row.group, 12) << pad(row.name, 34) << pad(timed ? best : "-", 10)
        << pad(timed ? median : "-", 10) << pad(timed ? cpu : "-", 10) << pad(ran ? row.measured : "-", 28) << pad(row.target, 22)
        << bench::verdictName(row.verdict) << "\n";
    if (!row.note.empty()) out << "    note: " << row.note << "\n";
  }
  out << "\n(best/median: wall clock; cpu: least process CPU time of a run, all threads)\nshapes:\n";
  std::string lastGroup;
  for (const bench::SuiteRow& row : r.rows) {
    if (row.group == lastGroup) continue;
    lastGroup = row.group;
    out << "  " << pad(row.group, 12) << row.shape << "\n";
  }
  return out.str();
}

CommandSetup setup = [](CLI::App& sub) {
  struct Options {
    std::string only;
    bool quick = false;
    std::string json;
    std::string tempDir;
    std::string llamaCpp;
  };
  auto o = std::make_shared<Options>();
  sub.add_option("--only", o->only,
                 "comma-separated groups: quantize, attention, interactive, eval, open, sensitivity, record "
                 "(default: all)");
  sub.add_flag("--quick", o->quick, "small shapes: a smoke test of a few seconds, not a measurement");
  sub.add_option("--json", o->json, "also write the figures as JSON to FILE ('-' = standard output)");
  sub.add_option("--temp-dir", o->tempDir,
                 "folder for the generated dumps and models (default: $TMPDIR or /tmp)");
  sub.add_option("--llamacpp", o->llamaCpp,
                 "record group: tests/conformance with node-llama-cpp installed (scripts/conformance.sh "
                 "--install), to time llama.cpp's prompt processing of the same model");
  return [o]() -> int {
    bench::SuiteOptions options;
    options.only = splitList(o->only);
    options.quick = o->quick;
    options.tempDir = o->tempDir;
    options.llamaCppDir = o->llamaCpp;
    // One line per step: repeated phrases (one per layer) are printed once.
    auto last = std::make_shared<std::string>();
    options.progress = [last](double, std::string_view what) {
      if (what != *last) {
        *last = std::string(what);
        std::cerr << "bench: " << what << "\n";
      }
      return !interrupted();
    };
    auto result = bench::runSuite(options);
    if (!result) return fail(result.status());
    // With --json -, standard output carries the JSON alone and the table goes to stderr.
    (o->json == "-" ? std::cerr : std::cout) << table(*result);
    if (!o->json.empty()) {
      Status s = writeOutput(o->json, bench::suiteToJson(*result));
      if (!s.isOk()) return fail(s);
    }
    return kExitOk;
  };
};

const Registrar registrar{"bench", "measure kvscope's speed and memory on this machine", setup};

}  // namespace
}  // namespace kvscope::cli
