// SPDX-License-Identifier: GPL-3.0-or-later
// The window's side of the A/B comparison (docs/gui.md, "A/B comparison"): the bar, pin, unpin
// and swap as undo steps, feeding A's results to the views, sessions and comparison.json. What
// A is and how it is computed lives in ui/model/comparison.h; the numbers in core.
#include <QAction>
#include <QDir>
#include <QMenu>
#include <QPushButton>
#include <QUndoCommand>
#include <QUndoStack>
#include <QVBoxLayout>

#include <nlohmann/json.hpp>

#include "core/report/comparison.h"
#include "ui/export/exporter.h"
#include "ui/main_window.h"
#include "ui/views/drift_view.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/histogram_view.h"
#include "ui/views/summary_view.h"
#include "ui/widgets/comparison_bar.h"
#include "ui/widgets/plan_editor.h"
#include "ui/widgets/spec_panel.h"
#include "ui/workers/job_runner.h"

namespace kvscope::ui {

namespace {

// Pinning, replacing or unpinning A, undone and redone as a whole.
class PinCommand : public QUndoCommand {
 public:
  PinCommand(MainWindow* window, std::optional<PinnedSetting> before, std::optional<PinnedSetting> after,
             const QString& text)
      : QUndoCommand(text), window_(window), before_(std::move(before)), after_(std::move(after)) {}
  void undo() override { window_->applyPinned(before_); }
  void redo() override {
    if (pushed_) window_->applyPinned(after_);  // the first redo is the push: already applied
    pushed_ = true;
  }

 private:
  MainWindow* window_;
  std::optional<PinnedSetting> before_, after_;
  bool pushed_ = false;
};

}  // namespace

QWidget* MainWindow::buildComparison(QWidget* tabs) {
  comparison_ = new Comparison(this);
  abBar_ = new ComparisonBar(this);
  auto* central = new QWidget(this);
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(abBar_);
  layout->addWidget(tabs, 1);
  connect(abBar_, &ComparisonBar::pinRequested, this, &MainWindow::pinAsA);
  connect(abBar_, &ComparisonBar::unpinRequested, this, &MainWindow::unpinA);
  connect(abBar_, &ComparisonBar::swapRequested, this, &MainWindow::swapAB);
  connect(comparison_, &Comparison::layerReady, this, [this] {
    pushComparisonToViews();
    emit comparisonReady();
  });
  connect(comparison_, &Comparison::summaryChanged, this, [this] {
    summary_->setComparison(comparison_->pinned().has_value(), comparison_->summary());
  });
  connect(comparison_, &Comparison::summaryFinished, this, [this] { emit comparisonReady(); });
  trackBusy(comparison_->layerRunner());
  trackBusy(comparison_->summaryRunner());
  return central;
}

void MainWindow::addComparisonActions(QMenu* edit) {
  edit->addSeparator();
  QAction* pin = edit->addAction(tr("&Pin current setting as A"), this, &MainWindow::pinAsA);
  pin->setShortcut(QKeySequence(tr("Ctrl+Shift+A")));
  pin->setObjectName(QStringLiteral("pinAction"));
  QAction* swap = edit->addAction(tr("S&wap A and B"), this, &MainWindow::swapAB);
  QAction* unpin = edit->addAction(tr("U&npin A"), this, &MainWindow::unpinA);
  const auto update = [this, swap, unpin] {
    swap->setEnabled(comparison_->pinned().has_value());
    unpin->setEnabled(comparison_->pinned().has_value());
  };
  connect(comparison_, &Comparison::pinnedChanged, this, update);
  update();
}

void MainWindow::pushComparisonToViews() {
  const bool pinned = comparison_->pinned().has_value();
  // A is shown where it is for the layer in view; the views check the layer and head themselves.
  histogram_->setComparison(pinned ? comparison_->layer() : nullptr);
  heatmap_->setComparison(pinned, pinned ? comparison_->layer() : nullptr);
  drift_->setComparison(pinned, pinned ? comparison_->drift() : nullptr);
  summary_->setComparison(pinned, comparison_->summary());
}

void MainWindow::updateComparisonBar() {
  if (!abBar_) return;
  const auto& a = comparison_->pinned();
  abBar_->setSettings(a ? describeSetting(a->key, a->value) : QString(), describeSetting(keyPlan(), valuePlan()));
}

void MainWindow::applyPinned(const std::optional<PinnedSetting>& setting) {
  comparison_->setPinned(setting);
  pushComparisonToViews();
  updateComparisonBar();
  if (setting && layerQuant_) {
    // A layer read head first serves A only when A quantizes per head; else read it whole.
    const DumpInfo& info = dump_->info();
    const int layer = layerQuant_->tensors->layer;
    if (!layerQuant_->tensors->whole() &&
        !(quantizesPerHead(specForLayer(setting->key, layer, info.layers), info.headDim) &&
          quantizesPerHead(specForLayer(setting->value, layer, info.layers), info.headDim))) {
      recomputeLayer();
      return;
    }
    comparison_->follow(layerQuant_, selection_.queryHead, selection_.queryIndex);
  }
}

void MainWindow::pinAsA() {
  if (!keyPanel_->isValid() || !valuePanel_->isValid() || !planEditor_->isValid()) {
    showError(tr("pin as A"), tr("the current setting is not valid; fix it first"));
    return;
  }
  const std::optional<PinnedSetting> before = comparison_->pinned();
  const PinnedSetting now{keyPlan(), valuePlan()};
  if (before == now) return;
  applyPinned(now);
  undo_->push(new PinCommand(this, before, now, before ? tr("pin the current setting as A") : tr("pin as A")));
  showStatus(tr("Pinned as A: %1. Change the controls to set B.").arg(describeSetting(now.key, now.value)));
}

void MainWindow::unpinA() {
  const std::optional<PinnedSetting> before = comparison_->pinned();
  if (!before) return;
  applyPinned(std::nullopt);
  undo_->push(new PinCommand(this, before, std::nullopt, tr("unpin A")));
}

void MainWindow::swapAB() {
  const std::optional<PinnedSetting> a = comparison_->pinned();
  if (!a || !keyPanel_->isValid() || !valuePanel_->isValid() || !planEditor_->isValid()) return;
  const PinnedSetting b{keyPlan(), valuePlan()};
  undo_->beginMacro(tr("swap A and B"));
  applyPinned(b);
  undo_->push(new PinCommand(this, a, b, tr("swap A and B")));
  setPlans(a->key, a->value);  // records its own step inside the macro
  undo_->endMacro();
}

bool MainWindow::comparisonComplete() const {
  if (!comparison_->pinned()) return true;
  if (!comparison_->summaryComplete() || !comparison_->matches(layerQuant_)) return false;
  // The drift view draws A's row once its lane has delivered it (dumps with queries only).
  return !dump_ || !dump_->info().hasQuery || comparison_->drift() != nullptr;
}

Expected<std::string> MainWindow::comparisonReportJson() const {
  const auto& a = comparison_->pinned();
  if (!dump_ || !a) return Status::invalidArgument("comparison: no setting is pinned as A");
  if (!summaryComplete() || !comparison_->summaryComplete()) {
    return Status::invalidArgument("comparison: the layer summaries of A and B are not complete yet");
  }
  auto reportA = reportOf(dump_->info(), a->key, a->value, comparison_->summary());
  if (!reportA) return reportA.status();
  auto reportB = reportOf(dump_->info(), keyPlan(), valuePlan(), summary_->layers());
  if (!reportB) return reportB.status();
  KVS_RETURN_IF_ERROR(checkComparable(*reportA, *reportB));
  return toComparisonJson(*reportA, *reportB);
}

Status MainWindow::exportComparison(const QString& folder, const QString& protectedPath) {
  if (!comparison_->pinned() || !summaryComplete() || !comparison_->summaryComplete()) return Status::ok();
  auto text = comparisonReportJson();
  if (!text) return text.status();
  return exportText(QDir(folder).filePath(QStringLiteral("comparison.json")), QByteArray::fromStdString(*text), protectedPath);
}

void MainWindow::writeComparisonSession(nlohmann::ordered_json& session) const {
  const auto& a = comparison_->pinned();
  if (a) session["compare"] = {{"key", toString(a->key)}, {"value", toString(a->value)}};
}

Status MainWindow::readComparisonSession(const nlohmann::json& session, const std::string& origin) {
  // A session is the whole state: one without "compare" unpins.
  if (!session.contains("compare") || !session["compare"].is_object()) {
    applyPinned(std::nullopt);
    return Status::ok();
  }
  const auto& c = session["compare"];
  auto key = parsePlan(c.value("key", std::string()));
  if (!key) return key.status().withContext(origin + ": compare.key");
  auto value = parsePlan(c.value("value", std::string()));
  if (!value) return value.status().withContext(origin + ": compare.value");
  applyPinned(PinnedSetting{*key, *value});
  return Status::ok();
}

}  // namespace kvscope::ui
