// SPDX-License-Identifier: GPL-3.0-or-later
// Diagnosis panel: core's diagnose (docs/diagnose.md) as a list of findings with their severity,
// evidence (layer, head, channel or token, the numbers) and advice; a click on a finding or its
// evidence selects that place in the other views, and the settings a finding suggests
// (core/diagnose/suggest.h) can be applied to the K/V settings with one click. Computed on its
// own background lane when the view is shown for a new dump.
#pragma once

#include <QWidget>

#include <memory>
#include <utility>
#include <vector>

#include "core/diagnose/diagnose.h"
#include "core/diagnose/suggest.h"
#include "core/io/dump.h"
#include "core/quant/plan.h"
#include "ui/views/view.h"

class QLabel;
class QPushButton;
class QTreeWidget;
class QTreeWidgetItem;
class QHBoxLayout;

namespace kvscope::ui {

class JobRunner;

using DiagnosisPtr = std::shared_ptr<const Diagnosis>;

class DiagnosisView : public QWidget, public View {
  Q_OBJECT

 public:
  explicit DiagnosisView(QWidget* parent = nullptr);
  ~DiagnosisView() override;

  /// A new dump: the diagnosis is stale and runs when the view is shown (or compute()).
  void setDump(std::shared_ptr<const Dump> dump);
  /// Starts the diagnosis unless it is current or running.
  void compute();
  [[nodiscard]] bool upToDate() const { return dump_ && diagnosis_ && diagnosisDump_ == dump_; }
  JobRunner* runner() { return runner_; }
  [[nodiscard]] const DiagnosisPtr& diagnosis() const { return diagnosis_; }
  QTreeWidget* tree() { return tree_; }
  QLabel* adviceLabel() { return advice_; }
  /// The Apply buttons of the finding shown (object names "apply:OPTION").
  [[nodiscard]] QList<QPushButton*> applyButtons() const;
  /// The finding index of a tree item (-1: none), and the evidence index (-1: the finding's row).
  [[nodiscard]] static std::pair<int, int> indexOf(const QTreeWidgetItem* item);

  static constexpr const char* kName = "diagnosis";
  [[nodiscard]] QString exportName() const override { return QString::fromLatin1(kName); }
  QWidget* widget() override { return this; }
  [[nodiscard]] QString tabTitle() const override;
  void takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) override {
    (void)context;
    setDump(dump);
  }
  [[nodiscard]] QList<JobRunner*> lanes() const override { return {runner_}; }
  bool prepareExport() override {
    if (!dump_ || upToDate()) return true;
    compute();
    return false;
  }
  void renderTo(QPainter& painter, const QRectF& target) override;
  /// One row per evidence entry: kind, severity, matches, place, tensor, numbers, summary, advice.
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] bool hasContent() const override { return diagnosis_ != nullptr; }

 signals:
  /// A finding (its strongest evidence) or one evidence entry was clicked.
  void evidenceSelected(const kvscope::Evidence& evidence);
  /// An Apply button was pressed.
  void applyRequested(const kvscope::SettingSuggestion& suggestion);
  /// A diagnosis reached the view.
  void computed();

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void fill();
  void showFinding(int finding);
  void onClicked(QTreeWidgetItem* item);
  /// Applies `s` to the session's plans (one undo step), or reports why it does not fit.
  void applySuggestion(const SettingSuggestion& s);

  JobRunner* runner_;
  QTreeWidget* tree_;
  QLabel* status_;
  QLabel* advice_;
  QWidget* applyBox_;
  QHBoxLayout* applyLayout_;
  std::shared_ptr<const Dump> dump_;
  DiagnosisPtr diagnosis_;
  std::shared_ptr<const Dump> diagnosisDump_, runningDump_;
  int shownFinding_ = -1;
};

/// The K and V plans with `suggestion` applied to the sides it names (applySuggestion on every
/// part of each plan), checked against the dump's shape; the error names the spec.
Expected<std::pair<Plan, Plan>> applySuggestionToPlans(const Plan& key, const Plan& value,
                                                       const SettingSuggestion& suggestion, const DumpInfo& info);

}  // namespace kvscope::ui
