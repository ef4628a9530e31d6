// SPDX-License-Identifier: GPL-3.0-or-later
// The Quantization dock's contents: the engine field and its notes, the Key and Value panels, the
// storage line and the layer plan editor. It shows the session's setting (showSetting) and sends
// the user's edits back as whole settings (edited); the controls hold only what is being edited.
#pragma once

#include <QWidget>

#include "core/io/dump.h"
#include "ui/state/session.h"

class QLabel;
class QLineEdit;

namespace kvscope::ui {

class PlanEditor;
class SpecPanel;

class QuantizationDock : public QWidget {
  Q_OBJECT

 public:
  explicit QuantizationDock(QWidget* parent = nullptr);

  /// Shows `setting` in every control (emitting nothing), its notes or `engineRefusal` under the
  /// engine field, and the storage lines for `info` (null: no dump open).
  void showSetting(const Setting& setting, const QString& engineRefusal, const DumpInfo* info, const Plan& valuePlan);
  /// The open dump's shape, which the controls check specs against (null: none).
  void setDump(const DumpInfo* info);
  /// The layer in view (the plan editor proposes it and says which specs it gets).
  void setCurrentLayer(int layer);

  SpecPanel* keyPanel() { return keyPanel_; }
  SpecPanel* valuePanel() { return valuePanel_; }
  PlanEditor* planEditor() { return planEditor_; }
  QLineEdit* engineField() { return engineField_; }
  QLabel* engineNotes() { return engineNotes_; }

 signals:
  /// The user changed the setting; `mergeable` while a slider is dragged (one undo step).
  void edited(const kvscope::ui::Setting& setting, const QString& what, bool mergeable);
  /// The user entered an engine string.
  void engineEntered(const QString& text);

 private:
  /// The setting the controls show now, when every control is valid.
  void commit(const QString& what, bool mergeable);
  void showStorage(const DumpInfo* info, const Plan& key, const Plan& value);

  SpecPanel* keyPanel_;
  SpecPanel* valuePanel_;
  PlanEditor* planEditor_;
  QLabel* storage_;
  QLineEdit* engineField_;
  QLabel* engineNotes_;
  bool showing_ = false;
};

}  // namespace kvscope::ui
