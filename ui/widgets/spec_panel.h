// SPDX-License-Identifier: GPL-3.0-or-later
// The controls of one tensor's quantization setting (K or V), bound to a QuantSpec and to its
// canonical spec string: changing a control rewrites the string, typing a string sets the controls.
#pragma once

#include <QWidget>

#include "core/quant/plan.h"
#include "core/quant/spec.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSlider;
class QSpinBox;

namespace kvscope::ui {

/// One panel (Key or Value). Options that do not apply to the chosen format are disabled.
class SpecPanel : public QWidget {
  Q_OBJECT

 public:
  /// `isKey` decides the title and whether pre-RoPE may be offered.
  explicit SpecPanel(bool isKey, QWidget* parent = nullptr);

  [[nodiscard]] const QuantSpec& spec() const { return spec_; }
  /// Sets every control from `spec` without emitting specChanged.
  void setSpec(const QuantSpec& spec);
  /// What the spec is validated against (dump shape, pre-RoPE availability).
  void setContext(const SpecContext& context);
  /// The storage line under the controls (bits per element etc.).
  void setStorageText(const QString& text);
  /// Whether the spec is valid for the current context (validation message otherwise).
  [[nodiscard]] bool isValid() const { return valid_; }
  /// For the Value panel: the "same as key" link; its controls follow the key panel when on.
  [[nodiscard]] bool linkedToKey() const;
  void setLinkedToKey(bool linked);

  // Controls, for tests and for the main window's shortcuts.
  QComboBox* formatBox() { return format_; }
  QSlider* bitsSlider() { return bits_; }
  QComboBox* axisBox() { return axis_; }
  QSpinBox* groupBox() { return group_; }
  QLineEdit* specEdit() { return text_; }
  QLabel* messageLabel() { return message_; }
  QCheckBox* symmetricBox() { return symmetric_; }
  QCheckBox* preRopeBox() { return prerope_; }
  QCheckBox* hadamardBox() { return hadamard_; }
  QSlider* clipSlider() { return clipP_; }
  QComboBox* clipBox() { return clip_; }

 signals:
  /// The user changed the spec (through a control or the text field).
  void specChanged(const kvscope::QuantSpec& spec);
  /// The "same as key" link was toggled.
  void linkToggled(bool linked);
  /// A plan with overrides (`SPEC;LAYERS:SPEC…`) was typed in the text field. The panel keeps
  /// its spec: the receiver checks the plan and, when it applies, sets the panel to its base.
  void planEntered(const kvscope::Plan& plan);

 private:
  void fromControls(bool formatChanged);
  void toControls();
  void updateEnabled();
  void updateTextAndMessage();
  void applyText();
  /// Every error of a rejected string, presets it resembles, and the spec still in force.
  [[nodiscard]] QString rejectionText(const QString& typed) const;

  bool isKey_;
  QuantSpec spec_;
  SpecContext context_;
  bool updating_ = false;
  bool valid_ = true;

  QCheckBox* link_ = nullptr;
  QComboBox* format_;
  QSlider* bits_;
  QLabel* bitsLabel_;
  QCheckBox* symmetric_;
  QComboBox* axis_;
  QSpinBox* group_;
  QComboBox* clip_;
  QSlider* clipP_;
  QLabel* clipLabel_;
  QDoubleSpinBox* outliers_;
  QSpinBox* sinks_;
  QSpinBox* residual_;
  QCheckBox* hadamard_;
  QCheckBox* prerope_;
  QComboBox* meta_;
  QCheckBox* unitscale_;
  QLineEdit* text_;
  QLabel* message_;
  QLabel* storage_;
};

}  // namespace kvscope::ui
