// SPDX-License-Identifier: GPL-3.0-or-later
// The per-layer part of the K and V plans (quantization.md §12, `SPEC(;LAYERS:SPEC)*`): each
// side's default spec is what its SpecPanel edits; this widget edits the overrides (LAYERS:SPEC
// rows) and shows each whole plan as text. Only plans that parse and fit the open dump are applied.
#pragma once

#include <QWidget>

#include <vector>

#include "core/quant/plan.h"
#include "core/quant/spec.h"

class QLabel;
class QLineEdit;
class QPushButton;
class QTableWidget;

namespace kvscope::ui {

class SpecPanel;

/// Every layer's spec under `plan` for a model of `layers` layers (specForLayer, which never fails).
std::vector<QuantSpec> layerSpecsOf(const Plan& plan, int layers);

class PlanEditor : public QWidget {
  Q_OBJECT

 public:
  /// The panels hold the default specs and the "same as key" link; the editor reads them.
  PlanEditor(SpecPanel* keyPanel, SpecPanel* valuePanel, QWidget* parent = nullptr);

  /// The applied plans: the panel's spec as the base, then the applied overrides. A linked V
  /// side takes K's overrides (pre-RoPE dropped), as its default follows K's.
  [[nodiscard]] Plan keyPlan() const;
  [[nodiscard]] Plan valuePlan() const;
  /// The applied overrides of one side (V's own, even while linked).
  [[nodiscard]] const std::vector<PlanOverride>& overrides(bool isKey) const;
  /// Replaces one side's applied overrides without emitting (presets, sessions, the command line).
  void setOverrides(bool isKey, std::vector<PlanOverride> overrides);
  /// What plans are checked against: the dump's spec context and layer count (0 = no dump).
  void setContext(const SpecContext& context, int layers);
  /// The layer in view: Add proposes it, and the editor says which specs it gets.
  void setCurrentLayer(int layer);
  /// Re-reads the panels (their specs or link changed) and re-checks the applied plans.
  void refresh();
  /// Checks a whole plan (typed in the plan field or in a spec panel's text field) against the
  /// dump; when it fits, applies its overrides (the caller sets the panel to its base) and
  /// returns an empty string, else shows and returns the error and applies nothing.
  QString enterPlan(bool isKey, const Plan& plan);
  /// False when the applied plans do not fit the open dump (e.g. a dump with fewer layers).
  [[nodiscard]] bool isValid() const;
  /// The first side's error (empty when valid).
  [[nodiscard]] QString errorText() const;

  // Controls, for tests.
  QTableWidget* table(bool isKey) { return side(isKey).table; }
  QLineEdit* planEdit(bool isKey) { return side(isKey).plan; }
  QLabel* messageLabel(bool isKey) { return side(isKey).message; }
  QPushButton* addButton(bool isKey) { return side(isKey).add; }
  QPushButton* removeButton(bool isKey) { return side(isKey).remove; }
  QLabel* layerLabel() { return layerLabel_; }

 signals:
  /// The user changed the applied overrides in the list.
  void overridesChanged();
  /// The user entered a whole plan in a plan field and it was applied: set the panel to `base`.
  void planEntered(bool isKey, const kvscope::QuantSpec& base);

 private:
  struct Side {
    bool isKey = true;
    QTableWidget* table = nullptr;
    QLineEdit* plan = nullptr;
    QLabel* message = nullptr;
    QPushButton* add = nullptr;
    QPushButton* remove = nullptr;
    std::vector<PlanOverride> applied;
    QString pending;  ///< why the last edit was not applied (shown until an edit applies)
  };
  Side& side(bool isKey) { return isKey ? key_ : value_; }
  [[nodiscard]] const Side& side(bool isKey) const { return isKey ? key_ : value_; }
  QWidget* buildSide(Side& s);
  [[nodiscard]] QuantSpec base(bool isKey) const;
  [[nodiscard]] bool linked() const;
  /// Why `plan` does not fit the dump (empty when it does).
  [[nodiscard]] QString check(bool isKey, const Plan& plan) const;
  void fillTable(Side& s);
  void fitTable(Side& s);
  void onRowsEdited(Side& s);
  void onPlanTyped(Side& s);
  void updateTexts();

  SpecPanel* keyPanel_;
  SpecPanel* valuePanel_;
  SpecContext context_;
  int layers_ = 0;
  int currentLayer_ = 0;
  bool filling_ = false;
  Side key_, value_;
  QLabel* layerLabel_ = nullptr;
};

}  // namespace kvscope::ui
