// SPDX-License-Identifier: GPL-3.0-or-later
// The A/B options of the command line: `kvscope DUMP --preset A --compare-preset B
// [--export-dir DIR]` (also --compare-key/--compare-value, --compare-engine). A is the setting the
// launch gives as usual; it is pinned once the dump is open, then B is applied. `--compare-dump
// OTHER` puts A on a dump of its own (two dumps side by side).
#include <QFileInfo>
#include <QObject>

#include <memory>

#include "core/engine/setting.h"
#include "ui/headless.h"
#include "ui/main_window.h"

namespace kvscope::ui {

Status resolveCompareLaunch(const LaunchOptions& options, Launch& out) {
  // Setting B: the same rules as setting A and the CLI's, in the --compare-* flag names.
  static constexpr SettingFlags kFlags{"--compare-key", "--compare-value", "--compare-preset", "--compare-engine"};
  auto setting = checkSetting(SettingText{options.compareKey.toStdString(), options.compareValue.toStdString(),
                                          options.comparePreset.toStdString(), options.compareEngine.toStdString()},
                              kFlags);
  if (!setting) return setting.status();
  if (!options.compareDump.isEmpty()) {
    if (!QFileInfo::exists(options.compareDump)) {
      return Status::ioError("--compare-dump " + options.compareDump.toStdString() + ": no such file");
    }
    if (options.dump.isEmpty()) {
      return Status::invalidArgument("--compare-dump needs a dump to compare it with (B): give it as the first argument");
    }
    out.compareDump = options.compareDump;
  }
  if (setting->way == SettingWay::None) return Status::ok();
  if (out.session.isEmpty() && !out.key && out.preset.isEmpty() && out.engine.isEmpty()) {
    const SettingWay way = setting->way;
    return Status::invalidArgument(std::string(way == SettingWay::Plans    ? "--compare-key/--compare-value"
                                               : way == SettingWay::Preset ? "--compare-preset"
                                                                           : "--compare-engine") +
                                   " needs setting A: give --key and --value, --preset, --engine or --load-session "
                                   "(A is pinned, the --compare-* setting is B)");
  }
  CompareLaunch c;
  if (setting->way == SettingWay::Plans) {
    c.key = setting->plans.key;
    c.value = setting->plans.value;
  }
  if (setting->way == SettingWay::Preset) c.preset = options.comparePreset;
  if (setting->way == SettingWay::Engine) c.engine = options.compareEngine;
  out.compare = c;
  return Status::ok();
}

void startComparison(MainWindow& window, const Launch& launch) {
  if (!launch.compare && launch.compareDump.isEmpty()) return;
  // Once, when the first dump is open and setting A (a preset or engine string resolves then) is in force.
  auto connection = std::make_shared<QMetaObject::Connection>();
  *connection = QObject::connect(&window, &MainWindow::dumpOpened, &window,
                                 [&window, b = launch.compare, other = launch.compareDump, connection] {
    QObject::disconnect(*connection);
    // A: the setting in force, on the compare dump (resolved for it when it is read) or on this one.
    if (other.isEmpty()) window.pinAsA();
    else window.session()->pinDumpAsA(other);
    if (!b) return;
    if (b->key) window.setPlans(*b->key, *b->value);
    else if (!b->preset.isEmpty()) window.applyPreset(b->preset);
    else window.applyEngine(b->engine);
  });
}

}  // namespace kvscope::ui
