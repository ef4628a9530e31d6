// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/quantization_dock.h"

#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QSlider>
#include <QVBoxLayout>

#include "core/quant/storage.h"
#include "ui/widgets/plan_editor.h"
#include "ui/widgets/spec_panel.h"
#include "ui/widgets/steady_tab_widget.h"

namespace kvscope::ui {

QuantizationDock::QuantizationDock(QWidget* parent) : QWidget(parent) {
  keyPanel_ = new SpecPanel(true, this);
  valuePanel_ = new SpecPanel(false, this);
  storage_ = new QLabel(this);
  storage_->setWordWrap(true);
  storage_->setObjectName(QStringLiteral("storageSummary"));
  storage_->setToolTip(tr("Bits per element of K and V, KV bytes per token over all layers, and the compression against fp16."));
  auto* specTabs = new SteadyTabWidget(this);
  specTabs->addTab(keyPanel_, tr("Key"));
  specTabs->addTab(valuePanel_, tr("Value"));
  // An engine's own flags (docs/engines.md) as another way to set both specs.
  engineField_ = new QLineEdit(this);
  engineField_->setObjectName(QStringLiteral("engineField"));
  engineField_->setPlaceholderText(tr("engine flags, e.g. llama.cpp -ctk q4_0 -ctv q8_0"));
  engineField_->setToolTip(tr("An engine's KV cache flags: Enter sets the key and value specs to what that "
                              "engine stores for this dump (docs/engines.md)."));
  engineField_->setClearButtonEnabled(true);
  engineNotes_ = new QLabel(this);
  engineNotes_->setObjectName(QStringLiteral("engineNotes"));
  engineNotes_->setWordWrap(true);
  engineNotes_->setVisible(false);
  connect(engineField_, &QLineEdit::returnPressed, this, [this] {
    if (!engineField_->text().trimmed().isEmpty()) emit engineEntered(engineField_->text());
  });
  // Per-layer overrides (quantization.md §12) under the spec panels, which edit the defaults.
  planEditor_ = new PlanEditor(keyPanel_, valuePanel_, this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(engineField_);
  layout->addWidget(engineNotes_);
  layout->addWidget(specTabs);
  layout->addWidget(storage_);
  layout->addWidget(planEditor_);
  // Narrow enough for the dock at the default window size: a combo box or a text field needs a
  // few characters, not its longest entry (the full text shows when it opens, and in tooltips).
  for (QComboBox* box : findChildren<QComboBox*>()) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(8);
  }
  for (QLineEdit* field : findChildren<QLineEdit*>()) field->setMinimumWidth(field->fontMetrics().averageCharWidth() * 12);

  valuePanel_->setLinkedToKey(false);
  const auto dragging = [](SpecPanel* panel) {
    return panel->bitsSlider()->isSliderDown() || panel->clipSlider()->isSliderDown();
  };
  connect(keyPanel_, &SpecPanel::specChanged, this, [this, dragging] {
    if (valuePanel_->linkedToKey()) {
      QuantSpec v = keyPanel_->spec();
      v.prerope = false;
      valuePanel_->setSpec(v);
    }
    commit(tr("key setting"), dragging(keyPanel_));
  });
  connect(valuePanel_, &SpecPanel::specChanged, this,
          [this, dragging] { commit(tr("value setting"), dragging(valuePanel_)); });
  connect(valuePanel_, &SpecPanel::linkToggled, this, [this](bool linked) {
    if (linked) {
      QuantSpec v = keyPanel_->spec();
      v.prerope = false;
      valuePanel_->setSpec(v);
    }
    commit(tr("same as key"), false);
  });
  connect(planEditor_, &PlanEditor::overridesChanged, this, [this] { commit(tr("layer plan"), false); });
  connect(planEditor_, &PlanEditor::planEntered, this, [this](bool isKey, const QuantSpec& base) {
    (isKey ? keyPanel_ : valuePanel_)->setSpec(base);
    commit(isKey ? tr("key plan") : tr("value plan"), false);
  });
  // A plan typed in a panel's spec field: the editor checks it against the dump first.
  for (SpecPanel* panel : {keyPanel_, valuePanel_}) {
    const bool isKey = panel == keyPanel_;
    connect(panel, &SpecPanel::planEntered, this, [this, panel, isKey](const Plan& plan) {
      const QString error = planEditor_->enterPlan(isKey, plan);
      if (!error.isEmpty()) {
        panel->messageLabel()->setText(error + tr("\nThe plan in force is unchanged."));
        return;
      }
      panel->setSpec(plan.base);
      commit(isKey ? tr("key plan") : tr("value plan"), false);
    });
  }
}

void QuantizationDock::commit(const QString& what, bool mergeable) {
  if (showing_) return;
  // An invalid control keeps its message; the setting in force stays the last valid one.
  if (!keyPanel_->isValid() || !valuePanel_->isValid() || !planEditor_->isValid()) return;
  Setting s;
  s.key = planEditor_->keyPlan();
  s.linked = valuePanel_->linkedToKey();
  s.value = Plan(valuePanel_->spec());
  s.value.overrides = planEditor_->overrides(false);
  s.source.kind = SettingSource::Kind::Plans;
  emit edited(s, what, mergeable);
}

void QuantizationDock::setDump(const DumpInfo* info) {
  SpecContext context;
  if (info) {
    context.kvHeads = info->kvHeads;
    context.headDim = info->headDim;
    context.hasKeyPreRope = info->hasKeyPreRope;
  }
  showing_ = true;
  keyPanel_->setContext(context);
  valuePanel_->setContext(context);
  planEditor_->setContext(context, info ? info->layers : 0);
  showing_ = false;
}

void QuantizationDock::setCurrentLayer(int layer) { planEditor_->setCurrentLayer(layer); }

void QuantizationDock::showSetting(const Setting& setting, const QString& engineRefusal, const DumpInfo* info,
                                   const Plan& valuePlan) {
  showing_ = true;
  keyPanel_->setSpec(setting.key.base);
  valuePanel_->setLinkedToKey(setting.linked);
  valuePanel_->setSpec(valuePlan.base);
  planEditor_->setOverrides(true, setting.key.overrides);
  planEditor_->setOverrides(false, setting.value.overrides);
  planEditor_->refresh();
  showing_ = false;
  // The notes belong to the setting shown: an engine's (or a preset's) rule, or why it was refused.
  const QStringList notes = engineRefusal.isEmpty() ? setting.notes : QStringList{engineRefusal};
  // The field shows the engine string in force; a refused one stays to be corrected, and any
  // other setting (a preset, the panels) empties it.
  if (setting.source.kind == SettingSource::Kind::Engine && engineField_->text() != setting.source.text)
    engineField_->setText(setting.source.text);
  else if (setting.source.kind != SettingSource::Kind::Engine && engineRefusal.isEmpty())
    engineField_->clear();
  engineNotes_->setText(notes.join(QLatin1Char('\n')));
  engineNotes_->setVisible(!notes.isEmpty());
  showStorage(info, setting.key, valuePlan);
}

void QuantizationDock::showStorage(const DumpInfo* info, const Plan& keys, const Plan& values) {
  if (!info) {
    storage_->setText(tr("Open a dump to see storage."));
    keyPanel_->setStorageText({});
    valuePanel_->setStorageText({});
    return;
  }
  // §5, §12: each layer stores under its own spec; a plan's bits per element are its storage over
  // all layers / all elements, and bytes per token sum the layers.
  std::vector<StorageCount> keyCounts, valueCounts;
  for (const QuantSpec& spec : layerSpecsOf(keys, info->layers))
    keyCounts.push_back(storageFor(spec, info->kvHeads, info->tokens, info->headDim));
  for (const QuantSpec& spec : layerSpecsOf(values, info->layers))
    valueCounts.push_back(storageFor(spec, info->kvHeads, info->tokens, info->headDim));
  const StorageCount k = sumStorage(keyCounts);
  const StorageCount v = sumStorage(valueCounts);
  const double bytesPerToken = kvscope::bytesPerToken(keyCounts, valueCounts, info->tokens);
  const double baseline = static_cast<double>(info->bytesPerTokenFp16());
  // The panel edits the default: with overrides, say both the default's and the plan's figure.
  const auto panelStorage = [&](const QString& side, const Plan& plan, const StorageCount& all) {
    if (isUniform(plan)) {
      return tr("%1: %2 bits per element at %3 tokens").arg(side).arg(all.bitsPerElement(), 0, 'f', 3).arg(info->tokens);
    }
    const StorageCount base = storageFor(plan.base, info->kvHeads, info->tokens, info->headDim);
    return tr("%1: %2 bits per element for the default; %3 over the plan's layers, at %4 tokens")
        .arg(side)
        .arg(base.bitsPerElement(), 0, 'f', 3)
        .arg(all.bitsPerElement(), 0, 'f', 3)
        .arg(info->tokens);
  };
  keyPanel_->setStorageText(panelStorage(tr("K"), keys, k));
  valuePanel_->setStorageText(panelStorage(tr("V"), values, v));
  // Kept tokens and per-sequence metadata make these depend on the length: say which one.
  storage_->setText(tr("At the dump's %6 tokens:<br><b>K</b> %1 bpe · <b>V</b> %2 bpe<br>%3 bytes/token (fp16: %4) · "
                       "%5× smaller")
                        .arg(k.bitsPerElement(), 0, 'f', 3)
                        .arg(v.bitsPerElement(), 0, 'f', 3)
                        .arg(bytesPerToken, 0, 'f', 1)
                        .arg(baseline, 0, 'f', 0)
                        .arg(bytesPerToken > 0 ? baseline / bytesPerToken : 0.0, 0, 'f', 2)
                        .arg(info->tokens));
  storage_->setToolTip(tr("Bits per element of K and V and KV bytes per token over all layers at the open dump's length "
                          "(%1 tokens), and the compression against fp16. The capacity table computes them at its own "
                          "context length.")
                           .arg(info->tokens));
}

}  // namespace kvscope::ui
