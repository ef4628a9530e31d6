// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/headless.h"

#include <QCoreApplication>
#include <QEventLoop>
#include <QBuffer>
#include <QFileInfo>
#include <QImage>
#include <QTimer>

#include <cstdio>
#include <functional>

#include "core/engine/setting.h"
#include "core/util/atomic_file.h"
#include "ui/main_window.h"
#include "ui/views/view.h"
#include "ui/views/view_registry.h"

namespace kvscope::ui {

Expected<Launch> resolveLaunch(const LaunchOptions& options) {
  Launch out;
  out.dump = options.dump;
  out.session = options.session;
  out.exportDir = options.exportDir;
  out.screenshot = options.screenshot;
  const QStringList viewList = viewNames();
  if (!options.tab.isEmpty()) {
    bool isIndex = false;
    const int index = options.tab.toInt(&isIndex);
    if (isIndex && index >= 0 && index < viewList.size()) out.tab = viewList[index];
    else if (viewList.contains(options.tab.trimmed())) out.tab = options.tab.trimmed();
    else
      return Status::invalidArgument("--tab: unknown view '" + options.tab.toStdString() + "' (allowed: " +
                                     viewList.join(QLatin1Char(',')).toStdString() + ", or 0-" +
                                     std::to_string(viewList.size() - 1) + ")");
  }
  if (!options.mapping.isEmpty()) {
    auto mapping = loadMapping(options.mapping.toStdString());
    if (!mapping) return mapping.status();
    out.mapping = *mapping;
  }
  // Setting A: checked now (one way, plans parsed, names known, flags accepted); a preset or an
  // engine string is resolved for the dump's shape once it is open.
  auto setting = checkSetting(SettingText{options.key.toStdString(), options.value.toStdString(),
                                          options.preset.toStdString(), options.engine.toStdString()});
  if (!setting) return setting.status();
  if (setting->way == SettingWay::Plans) {
    out.key = setting->plans.key;
    out.value = setting->plans.value;
  }
  if (setting->way == SettingWay::Preset) out.preset = options.preset;
  if (setting->way == SettingWay::Engine) out.engine = options.engine;
  for (const QString& v : options.views) {
    if (!viewList.contains(v.trimmed())) {
      return Status::invalidArgument("--views: unknown view '" + v.toStdString() + "' (allowed: " +
                                     viewList.join(QLatin1Char(',')).toStdString() + ")");
    }
    out.views << v.trimmed();
  }
  const QStringList parts = options.size.toLower().split(QLatin1Char('x'));
  bool okW = false, okH = false;
  if (parts.size() == 2) out.size = QSize(parts[0].toInt(&okW), parts[1].toInt(&okH));
  if (!okW || !okH || out.size.width() < 16 || out.size.height() < 16 || out.size.width() > 20000 ||
      out.size.height() > 20000) {
    return Status::invalidArgument("--size: expected WxH between 16 and 20000, e.g. 1600x1000; got '" +
                                   options.size.toStdString() + "'");
  }
  out.exportSize.pixels = out.size;
  if (!options.exportSize.isEmpty()) {
    auto size = parseExportSize(options.exportSize, "--export-size");
    if (!size) return size.status();
    out.exportSize = *size;
  }
  if (!options.exportDpi.isEmpty()) {
    auto dpi = parseExportDpi(options.exportDpi, "--export-dpi");
    if (!dpi) return dpi.status();
    if (!out.exportSize.physical()) {
      return Status::invalidArgument("--export-dpi: applies to a physical --export-size (e.g. 3.5inx2.4in), not to pixels");
    }
    out.exportSize.dpi = *dpi;
  }
  if ((!options.exportSize.isEmpty() || !options.exportDpi.isEmpty()) && out.exportDir.isEmpty()) {
    return Status::invalidArgument("--export-size and --export-dpi go with --export-dir");
  }
  KVS_RETURN_IF_ERROR(resolveCompareLaunch(options, out));
  if (!out.exportDir.isEmpty() && !out.key && out.preset.isEmpty() && out.engine.isEmpty() &&
      out.session.isEmpty() && out.screenshot.isEmpty()) {
    return Status::invalidArgument("--export-dir needs --key and --value, --preset, --engine or --load-session");
  }
  if (!out.dump.isEmpty() && !QFileInfo::exists(out.dump)) {
    return Status::ioError(out.dump.toStdString() + ": no such file");
  }
  return out;
}

Status startInteractive(MainWindow& window, const Launch& launch) {
  startComparison(window, launch);
  Status session;
  if (!launch.session.isEmpty()) {
    session = window.loadSession(launch.session);
    if (!session.isOk()) std::fprintf(stderr, "kvscope: %s\n", session.message().c_str());
  }
  if (launch.key) window.setPlans(*launch.key, *launch.value);
  if (!launch.preset.isEmpty()) window.applyPreset(launch.preset);
  if (!launch.engine.isEmpty()) window.applyEngine(launch.engine);
  if (!launch.dump.isEmpty()) window.openDump(launch.dump, launch.mapping);
  else if (launch.session.isEmpty()) window.openSample();
  return session;
}

namespace {

// Runs the event loop until the window's views are all computed, then calls `done`.
int waitUntilReady(MainWindow& window, const Launch& launch, const std::function<Status()>& done) {
  QEventLoop loop;
  int exitCode = 0;
  bool layerSeen = false, driftSeen = false;
  // Views exported, or shown (a screenshot), compute what they compute on demand (the sensitivity
  // map, the diagnosis, the budget search), one after the other once the rest is done.
  const auto wanted = [&](const View* v) {
    const bool exported = !launch.exportDir.isEmpty() && (launch.views.isEmpty() || launch.views.contains(v->exportName()));
    return exported || const_cast<View*>(v)->widget()->isVisible();
  };
  const auto finishIfReady = [&] {
    if (!layerSeen || !driftSeen || !window.summaryComplete() || !window.comparisonComplete()) return;
    for (View* v : window.views()) {
      if (wanted(v) && !v->prepareExport()) return;  // exportReady() calls again
    }
    const Status s = done();
    if (!s.isOk()) {
      std::fprintf(stderr, "kvscope: %s\n", s.message().c_str());
      exitCode = 2;
    }
    loop.quit();
  };
  QObject::connect(&window, &MainWindow::layerReady, &loop, [&] { layerSeen = true; finishIfReady(); });
  QObject::connect(&window, &MainWindow::driftReady, &loop, [&] { driftSeen = true; finishIfReady(); });
  QObject::connect(&window, &MainWindow::summaryFinished, &loop, [&] { finishIfReady(); });
  QObject::connect(&window, &MainWindow::comparisonReady, &loop, [&] { finishIfReady(); });
  QObject::connect(&window, &MainWindow::exportReady, &loop, [&] { finishIfReady(); });
  QObject::connect(&window, &MainWindow::errorShown, &loop, [&](const QString& message) {
    std::fprintf(stderr, "kvscope: %s\n", message.toUtf8().constData());
    exitCode = 2;
    loop.quit();
  });
  // A session that does not load opens nothing, so no view would ever be ready: exit 2 (the
  // message is printed) instead of waiting forever.
  if (!startInteractive(window, launch).isOk()) return 2;
  if (exitCode == 0) loop.exec();
  return exitCode;
}

}  // namespace

int runScreenshot(const Launch& launch) {
  MainWindow window(false);
  window.resize(launch.size);
  window.show();
  if (!launch.tab.isEmpty()) window.showTab(launch.tab);
  return waitUntilReady(window, launch, [&]() -> Status {
    // Charts lay themselves out on posted events; let the event loop run them before grabbing.
    QEventLoop settle;
    QTimer::singleShot(400, &settle, &QEventLoop::quit);
    settle.exec();
    const QImage image = window.grab().toImage();
    QByteArray png;
    QBuffer buffer(&png);
    buffer.open(QIODevice::WriteOnly);
    image.save(&buffer, "PNG");
    return writeFileAtomic(launch.screenshot.toStdString(), std::string_view(png.constData(), static_cast<size_t>(png.size())));
  });
}

int runHeadless(const Launch& launch) {
  MainWindow window(false);
  window.resize(launch.size);
  return waitUntilReady(window, launch, [&] { return window.exportAll(launch.exportDir, launch.views, launch.exportSize); });
}

}  // namespace kvscope::ui
