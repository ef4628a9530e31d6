// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope-cli: batch access to everything kvscope computes.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <csignal>
#include <cstring>
#include <iostream>

#include "app/cli/command.h"
#include "core/io/isolated_reader.h"
#include "core/util/atomic_file.h"

namespace kvscope::cli {

std::vector<CommandDef>& commandRegistry() {
  static std::vector<CommandDef> registry;
  return registry;
}

int exitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::Ok: return kExitOk;
    case StatusCode::Cancelled: return kExitCancelled;
    case StatusCode::Internal: return kExitInternal;
    default: return kExitBadInput;
  }
}

int fail(const Status& status) {
  std::cerr << "kvscope-cli: " << status.message() << "\n";
  return exitCodeFor(status);
}

namespace {

/// This executable, for starting it again as the reader; empty when unknown (read in-process).
std::string selfPath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

Expected<std::shared_ptr<const Dump>> openDump(const std::string& path, const std::string& mappingPath,
                                               bool allowExternal) {
  OpenOptions options;
  options.allowExternalStorage = allowExternal;
  if (!mappingPath.empty()) {
    auto mapping = loadMapping(mappingPath);
    if (!mapping) return mapping.status();
    options.mapping = std::move(*mapping);
  }
  // libhdf5 1.10 is not memory-safe on crafted files: some segfault or loop forever while their
  // metadata is parsed (tests/fuzz/hdf5-findings), a lying chunk index only when the data is
  // read, possibly an hour into an eval. So the dump is opened and read by a reader process
  // (core/io/isolated_reader.h): this executable again, in its reader mode.
  options.isolation = isolationFromEnvironment(selfPath());
  options.isolation.cancelled = [] { return interrupted(); };
  return Dump::open(path, options);
}

Status writeOutput(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return std::cout ? Status::ok() : Status::ioError("standard output: write failed");
  }
  return writeFileAtomic(path, text);
}

void addEngineOptions(CLI::App& sub, SpecChoice& choice) {
  sub.add_option("--engine", choice.engine,
                 "an engine's own flags instead of --key/--value, e.g. \"llama.cpp -ctk q4_0 -ctv q8_0\" "
                 "(docs/engines.md)");
  sub.add_flag("--explain", choice.explain,
               "print what --preset or --engine resolves to for this dump, and why, then stop");
}

Expected<ResolvedPlans> resolvePlans(const SpecChoice& c, const KvShape& shape) {
  return resolveSetting(SettingText{c.key, c.value, c.preset, c.engine}, shape);
}

std::string explainText(const SpecChoice& c, const ResolvedPlans& r, const KvShape& shape) {
  std::string out;
  if (!c.engine.empty()) {
    out += "engine: " + c.engine + "\n";
  } else if (!c.preset.empty()) {
    out += "preset: " + c.preset + "\n";
  }
  out += "for D = " + std::to_string(shape.headDim) + ", " + std::to_string(shape.kvHeads) + " kv heads, " +
         std::to_string(shape.layers) + " layers:\n";
  out += "key:   " + toString(r.plans.key) + "\n";
  out += "value: " + toString(r.plans.value) + "\n";
  if (!r.strings.query.empty()) out += "query: " + r.strings.query + " (what the engine rounds Q to; e2e applies it, eval keeps Q exact)\n";
  for (const std::string& n : r.strings.notes) out += "  " + n + "\n";
  return out;
}

void printNotes(const ResolvedPlans& r) {
  for (const std::string& n : r.strings.notes) std::cerr << "kvscope-cli: note: " << n << "\n";
}

Expected<std::vector<int>> parseLayerList(const std::string& text, int layers) {
  std::vector<int> out;
  if (text.empty() || text == "all") {
    for (int l = 0; l < layers; ++l) out.push_back(l);
    return out;
  }
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument("--layers '" + text + "': " + why +
                                   " (allowed: 'all' or a list like 0,2,5-7 with layers 0.." +
                                   std::to_string(layers - 1) + ")");
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) return bad("empty item");
    size_t dash = item.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        int l = std::stoi(item, &used);
        if (used != item.size()) return bad("'" + item + "' is not a number");
        if (l < 0 || l >= layers) return bad("layer " + item + " does not exist");
        out.push_back(l);
      } else {
        std::string a = item.substr(0, dash), b = item.substr(dash + 1);
        size_t ua = 0, ub = 0;
        int la = std::stoi(a, &ua), lb = std::stoi(b, &ub);
        if (ua != a.size() || ub != b.size()) return bad("'" + item + "' is not a range");
        if (la < 0 || lb >= layers || la > lb) return bad("range " + item + " is out of bounds");
        for (int l = la; l <= lb; ++l) out.push_back(l);
      }
    } catch (const std::exception&) {
      return bad("'" + item + "' is not a number or range");
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

namespace {
volatile std::sig_atomic_t gInterrupted = 0;
// The first SIGINT/SIGTERM asks long work to stop cleanly (it checks interrupted() through its
// Progress callback, removes temporary files and exits 130). A second one, for work stuck where
// no callback runs (inside libhdf5 on a hostile file), ends the process at once.
extern "C" void onSigint(int sig) {
  if (gInterrupted) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  gInterrupted = 1;
}
}  // namespace

bool interrupted() { return gInterrupted != 0; }

Progress cancellationProgress() {
  return [](double, std::string_view) { return !interrupted(); };
}

Progress cliProgress(const std::string& command) {
  // On a terminal one line, rewritten as the work goes on; elsewhere one line each time the
  // phase or the tenth of the work changes, so a log shows progress without flooding.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  auto last = std::make_shared<std::pair<std::string, int>>("", -1);
  return [command, tty, last](double fraction, std::string_view what) {
    if (interrupted()) return false;
    if (fraction < 0) return true;
    const int percent = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * 100));
    const int tenth = percent / 10;
    if (tty) {
      std::cerr << "\r\033[K" << command << ": " << what << " " << percent << "%" << (percent >= 100 ? "\n" : "")
                << std::flush;
    } else if (last->first != what || last->second != tenth) {
      std::cerr << command << ": " << what << " " << percent << "%\n";
    }
    last->first = std::string(what);
    last->second = tenth;
    return true;
  };
}

}  // namespace kvscope::cli

int main(int argc, char** argv) {
  using namespace kvscope::cli;
  if (argc == 2 && std::strcmp(argv[1], kvscope::kReaderArgument) == 0) return kvscope::serveDumpReader();
  std::signal(SIGINT, onSigint);
  std::signal(SIGTERM, onSigint);
  CLI::App app{"kvscope-cli: measure what KV-cache quantization does to attention", "kvscope-cli"};
  app.set_version_flag("--version", std::string("kvscope ") + KVSCOPE_VERSION);
  app.require_subcommand(1);
  std::function<int()> run;
  auto& registry = commandRegistry();
  std::sort(registry.begin(), registry.end(),
            [](const CommandDef& a, const CommandDef& b) { return a.name < b.name; });
  for (auto& def : registry) {
    CLI::App* sub = app.add_subcommand(def.name, def.help);
    auto runner = def.setup(*sub);
    sub->callback([&run, runner] { run = runner; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "kvscope-cli: " << e.what() << "\n(run 'kvscope-cli --help' for usage)\n";
    return kExitBadInput;
  }
  if (!run) return kExitInternal;
  try {
    return run();
  } catch (const std::bad_alloc&) {
    std::cerr << "kvscope-cli: out of memory\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "kvscope-cli: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}
