// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope-cli subcommands register themselves here; each lives in its own cmd_<name>.cpp and
// stays thin: parse arguments, call core, print.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/io/dump.h"
#include "core/engine/engine.h"
#include "core/quant/plan.h"
#include "core/engine/presets.h"
#include "core/engine/setting.h"
#include "core/util/status.h"

namespace kvscope::cli {

/// Exit statuses: 0 success, 2 bad input (file, spec, arguments), 1 internal error, 130 cancelled.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitCancelled = 130;

/// Sets up a subcommand's options on `sub` and returns what runs it.
using CommandSetup = std::function<std::function<int()>(CLI::App& sub)>;

struct CommandDef {
  std::string name;
  std::string help;
  CommandSetup setup;
};

/// All registered commands.
std::vector<CommandDef>& commandRegistry();

/// Static registration helper: `static Registrar reg{"info", "…", setupFn};`
struct Registrar {
  Registrar(std::string name, std::string help, CommandSetup setup) {
    commandRegistry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

/// Prints `status` to standard error as "kvscope-cli: <message>" and returns its exit status.
int fail(const Status& status);

/// The exit status for a Status (0 when ok).
int exitCodeFor(const Status& status);

/// Opens a dump with an optional mapping file (empty = canonical).
Expected<std::shared_ptr<const Dump>> openDump(const std::string& path, const std::string& mappingPath,
                                               bool allowExternal = false);

/// Writes `text` to `path`: "-" is standard output, anything else is written atomically.
Status writeOutput(const std::string& path, const std::string& text);

/// Where a command's K and V plans come from: `--key PLAN --value PLAN`, `--preset NAME` or
/// `--engine "ENGINE FLAGS…"` (exactly one way), and `--explain`.
struct SpecChoice {
  std::string key, value, preset, engine;
  bool explain = false;  ///< print what the choice resolves to for the dump, and why, then stop
};
/// Adds `--engine` and `--explain` to a subcommand (its --key/--value/--preset stay its own).
void addEngineOptions(CLI::App& sub, SpecChoice& choice);

/// The K and V plans a SpecChoice resolves to for a dump's shape, with the resolution's notes.
using ResolvedPlans = ResolvedSetting;
/// Resolves `choice` for `shape` (presets and engines depend on it), every string parsed as a
/// plan; errors name the flag ("--key: plan '…': part 2 '…': …") and what is allowed.
Expected<ResolvedPlans> resolvePlans(const SpecChoice& choice, const KvShape& shape);
/// The --explain text: what the choice resolved to at `shape`, and every note.
std::string explainText(const SpecChoice& choice, const ResolvedPlans& resolved, const KvShape& shape);
/// Prints the resolution's notes to standard error ("kvscope-cli: note: …").
void printNotes(const ResolvedPlans& resolved);

/// Parses a layer list "0,2,5-7" or "all" against `layers`; errors say what is allowed.
Expected<std::vector<int>> parseLayerList(const std::string& text, int layers);

/// True once SIGINT was received; long commands pass cancellationProgress() to core.
bool interrupted();
/// A Progress that returns false after SIGINT (and prints nothing).
Progress cancellationProgress();
/// A Progress that also shows the work on standard error ("record: layer 3 of 24 12%"): one
/// rewritten line on a terminal, a line per phase or tenth elsewhere.
Progress cliProgress(const std::string& command);

}  // namespace kvscope::cli
