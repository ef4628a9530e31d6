// SPDX-License-Identifier: GPL-3.0-or-later
// Command-line launch: checking the options, opening the window with them, or exporting the
// views without a window (`--export-dir`).
#pragma once

#include <QSize>
#include <QString>
#include <QStringList>

#include <optional>

#include "core/io/mapping.h"
#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "core/util/status.h"
#include "ui/export/exporter.h"

namespace kvscope::ui {

class MainWindow;

/// The options as typed.
struct LaunchOptions {
  QString dump;
  QString mapping;
  QString key, value, preset;
  QString engine;  ///< an engine string (core/engine/engine.h), another way to give both specs
  QString session;
  QString exportDir;
  QStringList views;
  QString size = QStringLiteral("1600x1000");
  QString exportSize;  ///< --export-size: physical (3.5inx2.4in) or pixels; empty = --size
  QString exportDpi;   ///< --export-dpi: PNG resolution of a physical size; empty = 300
  QString screenshot;  ///< grab the whole window into this PNG once every view is ready, then exit
  QString tab;         ///< the view tab shown first: a view name or its index in tab order; empty = none
  /// A/B comparison: `--compare-key/--compare-value/--compare-preset/--compare-engine` give B;
  /// the setting of --key/--value, --preset or --engine is pinned as A.
  QString compareKey, compareValue, comparePreset, compareEngine;
  /// `--compare-dump`: A is this dump under the launch's setting (resolved for its shape), B the
  /// dump opened under --compare-* (or the same setting when none is given).
  QString compareDump;
};

/// The B setting of an A/B launch, checked.
struct CompareLaunch {
  std::optional<Plan> key, value;
  QString preset;  ///< resolved for the dump once it is open
  QString engine;
};

/// The options checked and parsed.
struct Launch {
  QString dump;  ///< empty = the built-in sample
  std::optional<Mapping> mapping;
  std::optional<Plan> key, value;  ///< specs or plans (§12)
  QString preset;  ///< resolved for the dump once it is open (presets depend on its shape)
  QString engine;  ///< the same for an engine string
  QString session;
  QString exportDir;
  QStringList views;
  QSize size;
  ExportSize exportSize;  ///< what the export writes: --export-size (and --export-dpi), else --size in pixels
  QString screenshot;
  QString tab;  ///< a view name (ui/views/view_registry.h); empty = none
  std::optional<CompareLaunch> compare;  ///< B, when the launch compares (A is the setting above)
  QString compareDump;  ///< A's own dump (two dumps side by side); empty: A is on the dump opened
};

/// Checks the options: spec (or plan) strings parse, --preset excludes --key/--value, views and size are valid.
Expected<Launch> resolveLaunch(const LaunchOptions& options);

/// Checks the --compare-* options of `options` into `out.compare` (ui/comparison_launch.cpp):
/// one of --compare-key with --compare-value, --compare-preset, --compare-engine, and a setting A.
Status resolveCompareLaunch(const LaunchOptions& options, Launch& out);
/// With `launch.compare` or `launch.compareDump`: once the dump is open, pins the launch's setting
/// as A (on the compare dump when one is given) and applies B.
void startComparison(MainWindow& window, const Launch& launch);

/// Applies `launch` to a shown window (session, specs, then the dump or the sample). Returns the
/// session's load status (also printed to stderr when it failed).
Status startInteractive(MainWindow& window, const Launch& launch);

/// Opens the dump without showing a window, waits for every view, exports, returns the exit code
/// (0 ok, 2 error, with the message on stderr).
int runHeadless(const Launch& launch);

/// Shows the window at `launch.size`, waits for every view, grabs it into `launch.screenshot`
/// (for the documentation's images) and returns the exit code.
int runScreenshot(const Launch& launch);

}  // namespace kvscope::ui
