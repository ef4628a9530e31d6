// SPDX-License-Identifier: GPL-3.0-or-later
// The A/B options of the command line: `kvscope DUMP --preset A --compare-preset B
// [--export-dir DIR]` (also --compare-key/--compare-value, --compare-engine). A is the setting the
// launch gives as usual; it is pinned once the dump is open, then B is applied.
#include <QObject>

#include <memory>

#include "core/engine/engine.h"
#include "core/engine/presets.h"
#include "ui/headless.h"
#include "ui/main_window.h"

namespace kvscope::ui {

Status resolveCompareLaunch(const LaunchOptions& options, Launch& out) {
  const bool byKey = !options.compareKey.isEmpty() || !options.compareValue.isEmpty();
  const bool byPreset = !options.comparePreset.isEmpty();
  const bool byEngine = !options.compareEngine.isEmpty();
  if (!byKey && !byPreset && !byEngine) return Status::ok();
  if (static_cast<int>(byKey) + static_cast<int>(byPreset) + static_cast<int>(byEngine) > 1) {
    return Status::invalidArgument(
        "give setting B once: --compare-key with --compare-value, --compare-preset or --compare-engine (one of them)");
  }
  if (out.session.isEmpty() && !out.key && out.preset.isEmpty() && out.engine.isEmpty()) {
    return Status::invalidArgument(std::string(byKey ? "--compare-key/--compare-value" : byPreset ? "--compare-preset" : "--compare-engine") +
                                   " needs setting A: give --key and --value, --preset, --engine or --load-session "
                                   "(A is pinned, the --compare-* setting is B)");
  }
  CompareLaunch c;
  if (byKey) {
    if (options.compareKey.isEmpty() || options.compareValue.isEmpty()) {
      return Status::invalidArgument("--compare-key and --compare-value go together (or use --compare-preset or --compare-engine)");
    }
    auto key = parsePlan(options.compareKey.toStdString());
    if (!key) return key.status().withContext("--compare-key");
    auto value = parsePlan(options.compareValue.toStdString());
    if (!value) return value.status().withContext("--compare-value");
    c.key = *key;
    c.value = *value;
  } else if (byPreset) {
    // Checked now; resolved for the dump's shape once it is open.
    if (findPreset(options.comparePreset.toStdString()) == nullptr) {
      return resolvePreset(options.comparePreset.toStdString(), {}).status().withContext("--compare-preset");
    }
    c.preset = options.comparePreset;
  } else {
    auto check = resolveEngine(options.compareEngine.toStdString(), {});
    if (!check) return check.status().withContext("--compare-engine");
    c.engine = options.compareEngine;
  }
  out.compare = c;
  return Status::ok();
}

void startComparison(MainWindow& window, const Launch& launch) {
  if (!launch.compare) return;
  // Once, when the first dump is open and setting A (a preset or engine string resolves then) is in force.
  auto connection = std::make_shared<QMetaObject::Connection>();
  *connection = QObject::connect(&window, &MainWindow::dumpOpened, &window, [&window, b = *launch.compare, connection] {
    QObject::disconnect(*connection);
    window.pinAsA();
    if (b.key) window.setPlans(*b.key, *b.value);
    else if (!b.preset.isEmpty()) window.applyPreset(b.preset);
    else window.applyEngine(b.engine);
  });
}

}  // namespace kvscope::ui
