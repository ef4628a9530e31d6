// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope: the desktop app. `kvscope [DUMP] [--mapping M] [--key S --value S | --preset P | --engine FLAGS]`
// opens a window; with --export-dir it writes the chosen views and exits without one.
#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QSettings>
#include <QTemporaryDir>
#include <QTimer>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "core/io/mapping.h"
#include "core/engine/presets.h"
#include "ui/headless.h"
#include "core/inspect/layer_data.h"
#include "ui/main_window.h"

int main(int argc, char** argv) {
  // The window runs several OpenMP teams at once (the layer, drift and summary lanes of B and A,
  // the sensitivity map, the budget search) on however few cores there are. With libgomp's
  // default, each team's idle threads spin at its barriers and take the cores the other teams
  // need; sleeping instead made a search beside an evaluation 13-18 % faster on 2 cores and cost
  // nothing alone (docs/performance.md §4). libgomp reads OMP_WAIT_POLICY when it is loaded,
  // before main, so the process starts again with it set. A value the user set is kept.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    ::execv("/proc/self/exe", argv);
    // No /proc (or exec refused): go on with libgomp's default.
  }
  // kvscope_ui is a static library: its resources must be registered by hand.
  Q_INIT_RESOURCE(kvscope);
  kvscope::keepFreedMemoryForReuse();
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("kvscope"));
  QApplication::setOrganizationName(QStringLiteral("kvscope"));
  QApplication::setApplicationVersion(QStringLiteral(KVSCOPE_VERSION));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/kvscope/kvscope.svg")));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Explore KV-cache quantization of transformer dumps."));
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument(QStringLiteral("dump"), QStringLiteral("KV dump (HDF5); the built-in sample when absent."),
                               QStringLiteral("[dump]"));
  const QCommandLineOption mapping(QStringLiteral("mapping"), QStringLiteral("Mapping file for a non-canonical dump."),
                                   QStringLiteral("file"));
  const QCommandLineOption key(QStringLiteral("key"), QStringLiteral("Key spec or plan, e.g. int4,axis=channel or q4_0;first2+last2:q8_0."), QStringLiteral("spec"));
  const QCommandLineOption value(QStringLiteral("value"), QStringLiteral("Value spec or plan."), QStringLiteral("spec"));
  const QCommandLineOption preset(QStringLiteral("preset"), QStringLiteral("Preset name (see kvscope-cli presets)."),
                                  QStringLiteral("name"));
  const QCommandLineOption engine(QStringLiteral("engine"),
                                  QStringLiteral("An engine's KV cache flags, e.g. \"llama.cpp -ctk q4_0 -ctv q8_0\"."),
                                  QStringLiteral("flags"));
  // Not "--session": QGuiApplication takes -session for X11 session management.
  const QCommandLineOption session(QStringLiteral("load-session"), QStringLiteral("Session file to restore."),
                                   QStringLiteral("file"));
  const QCommandLineOption exportDir(QStringLiteral("export-dir"),
                                     QStringLiteral("Write the views into this folder and exit (no window)."),
                                     QStringLiteral("dir"));
  const QCommandLineOption views(QStringLiteral("views"),
                                 QStringLiteral("Views to export: histogram,heatmap,drift,summary,budget,sensitivity,diagnosis (default: all)."),
                                 QStringLiteral("list"));
  const QCommandLineOption size(QStringLiteral("size"), QStringLiteral("Image size for exports, WxH (default 1600x1000)."),
                                QStringLiteral("WxH"), QStringLiteral("1600x1000"));
  const QCommandLineOption exportSize(
      QStringLiteral("export-size"),
      QStringLiteral("Physical size of exported figures, e.g. 3.5in, 7in, 89mm or 3.5inx2.4in (text at 8 pt on the page); "
                     "WxH without a unit is pixels. Default: --size."),
      QStringLiteral("size"));
  const QCommandLineOption exportDpi(QStringLiteral("export-dpi"),
                                     QStringLiteral("PNG resolution of a physical --export-size (36-2400, default 300)."),
                                     QStringLiteral("dpi"));
  const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                     QStringLiteral("Grab the whole window into this PNG once ready, then exit."),
                                     QStringLiteral("file"));
  const QCommandLineOption tab(QStringLiteral("tab"), QStringLiteral("View tab to show first, by name (histogram, heatmap, drift, summary, budget, sensitivity, diagnosis) or index (0-6)."),
                               QStringLiteral("view"));
  parser.addOptions({mapping, key, value, preset, engine, session, exportDir, views, size, exportSize, exportDpi, screenshot, tab});
  // A/B comparison: the setting above is pinned as A, these give B (docs/gui.md).
  const QCommandLineOption compareKey(QStringLiteral("compare-key"), QStringLiteral("Setting B's key spec or plan (with --compare-value)."), QStringLiteral("spec"));
  const QCommandLineOption compareValue(QStringLiteral("compare-value"), QStringLiteral("Setting B's value spec or plan."), QStringLiteral("spec"));
  const QCommandLineOption comparePreset(QStringLiteral("compare-preset"), QStringLiteral("Setting B as a preset name."), QStringLiteral("name"));
  const QCommandLineOption compareEngine(QStringLiteral("compare-engine"), QStringLiteral("Setting B as an engine's KV cache flags."), QStringLiteral("flags"));
  const QCommandLineOption compareDump(QStringLiteral("compare-dump"),
                                      QStringLiteral("Pin this dump as A, under the setting above; the dump given first is B."),
                                      QStringLiteral("file"));
  parser.addOptions({compareKey, compareValue, comparePreset, compareEngine, compareDump});
  parser.process(app);

  kvscope::ui::LaunchOptions options;
  const QStringList positional = parser.positionalArguments();
  if (positional.size() > 1) {
    std::fprintf(stderr, "kvscope: expected at most one dump, got %lld\n", static_cast<long long>(positional.size()));
    return 2;
  }
  options.dump = positional.value(0);
  options.mapping = parser.value(mapping);
  options.key = parser.value(key);
  options.value = parser.value(value);
  options.preset = parser.value(preset);
  options.engine = parser.value(engine);
  options.session = parser.value(session);
  options.exportDir = parser.value(exportDir);
  options.views = parser.value(views).split(QLatin1Char(','), Qt::SkipEmptyParts);
  options.size = parser.value(size);
  options.exportSize = parser.value(exportSize);
  options.exportDpi = parser.value(exportDpi);
  options.screenshot = parser.value(screenshot);
  options.tab = parser.value(tab);
  options.compareKey = parser.value(compareKey);
  options.compareValue = parser.value(compareValue);
  options.comparePreset = parser.value(comparePreset);
  options.compareEngine = parser.value(compareEngine);
  options.compareDump = parser.value(compareDump);

  // Headless and screenshot runs (tests, docs) must not touch the user's settings: no recent
  // files, no window layout. Their QSettings live in a folder that goes away with the process.
  QTemporaryDir isolatedSettings;
  if (!options.screenshot.isEmpty() || !options.exportDir.isEmpty()) {
    for (QSettings::Format f : {QSettings::NativeFormat, QSettings::IniFormat}) {
      QSettings::setPath(f, QSettings::UserScope, isolatedSettings.path());
    }
  }

  auto resolved = kvscope::ui::resolveLaunch(options);
  if (!resolved) {
    std::fprintf(stderr, "kvscope: %s\n", resolved.status().message().c_str());
    return 2;
  }
  if (!options.screenshot.isEmpty()) return kvscope::ui::runScreenshot(*resolved);
  if (!options.exportDir.isEmpty()) return kvscope::ui::runHeadless(*resolved);

  kvscope::ui::MainWindow window;
  window.show();
  if (!resolved->tab.isEmpty()) window.showTab(resolved->tab);
  kvscope::ui::startInteractive(window, *resolved);
  return QApplication::exec();
}
