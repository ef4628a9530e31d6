// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/preset_menu.h"

#include <QAction>

namespace kvscope::ui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

PresetMenu::PresetMenu(QWidget* parent) : QMenu(tr("&Presets"), parent) {
  for (const Preset& p : presetTable()) {
    const QString name = QString::fromUtf8(p.name.data(), static_cast<qsizetype>(p.name.size()));
    QAction* a = addAction(name, this, [this, name] { emit presetChosen(name); });
    a->setData(name);
  }
  setToolTipsVisible(true);
  refresh(std::nullopt);
}

void PresetMenu::refresh(const std::optional<KvShape>& shape) {
  for (QAction* a : actions()) {
    const std::string name = a->data().toString().toStdString();
    const Preset* p = findPreset(name);
    if (p == nullptr) continue;
    QString tip = QString::fromUtf8(p->description.data(), static_cast<qsizetype>(p->description.size()));
    QString label = q(name);
    if (shape) {
      auto r = resolvePreset(name, *shape);
      auto specs = r ? parseResolved(*r, "preset " + name) : Expected<PresetSpecs>(r.status());
      if (specs) {
        label += QStringLiteral("  —  K %1 · V %2").arg(q(toString(specs->key)), q(toString(specs->value)));
        for (const std::string& n : r->notes) tip += QStringLiteral("\n") + q(n);
      } else {
        label += tr("  —  not applicable to this dump");
        tip += QStringLiteral("\n") + q(specs.status().message());
      }
      a->setEnabled(specs.hasValue());
    } else if (p->rule != nullptr) {
      tip += QStringLiteral("\nK: %1\nV: %2").arg(q(std::string(p->keySpec)), q(std::string(p->valueSpec)));
    }
    a->setText(label);
    a->setToolTip(tip);
    a->setStatusTip(tip);
  }
}

}  // namespace kvscope::ui
