// SPDX-License-Identifier: GPL-3.0-or-later
// The kvscope window: it shows the Session (ui/state/session.h) and what the ViewFeed computes
// for it. Docks (dataset, quantization), the A/B bar and the views' tabs mirror the session and
// send it the user's edits; the views are reached through their interface (ui/views/view.h) only.
// It is the one place where an error becomes a dialog or a status message.
#pragma once

#include <QMainWindow>
#include <QStringList>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/io/dump.h"
#include "core/io/mapping.h"
#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "ui/export/exporter.h"
#include "ui/state/session.h"
#include "ui/state/view_feed.h"

class QDialog;
class QTabWidget;
class QUndoStack;

namespace kvscope::ui {

class ComparisonBar;
class DatasetPanel;
class ExportableView;
struct ExportSize;
class JobRunner;
class LaneStatus;
class PlanEditor;
class PresetMenu;
class RecentFilesMenu;
class QuantizationDock;
class SpecPanel;
class View;
struct ViewContext;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  /// `interactive` = false (tests, headless export): errors never open dialogs.
  explicit MainWindow(bool interactive = true, QWidget* parent = nullptr);
  ~MainWindow() override;

  /// The document the window shows, and the lanes that compute for it.
  Session* session() { return session_; }
  [[nodiscard]] const Session* session() const { return session_; }
  ViewFeed* feed() { return feed_; }
  [[nodiscard]] const ViewFeed* feed() const { return feed_; }

  // What a user does, as the menus do it (the session does the work).
  void openDump(const QString& path, std::optional<Mapping> mapping = std::nullopt);
  void openSample();
  /// File → Record from model…: record a dump from a model file and open it.
  void recordFromModel();
  /// Sets both specs (as a preset or the command line does); `what` names the undo step.
  void setSpecs(const QuantSpec& key, const QuantSpec& value, const QString& what = {});
  /// Sets both plans (quantization.md §12).
  void setPlans(const Plan& key, const Plan& value);
  bool applyPreset(const QString& name);
  bool applyEngine(const QString& text);
  void select(int layer, int kvHead);
  void pinAsA();
  void unpinA();
  void swapAB();
  /// Asks for a dump file and pins it as A (Session::pinDumpAsA).
  void pinDumpInteractive();
  /// The file dialog for a dump, starting in (and remembering) the last folder; empty: cancelled.
  QString askForDumpFile(const QString& title);
  [[nodiscard]] Plan keyPlan() const { return session_->keyPlan(); }
  [[nodiscard]] Plan valuePlan() const { return session_->valuePlan(); }
  QUndoStack* undoStack() { return session_->undoStack(); }
  /// Opens Help ▸ Manual (docs/gui.md as shipped in the binary).
  void showManual();
  QDialog* manualDialog() { return manual_; }
  /// Open Recent's files, without those that no longer exist (they are dropped from the settings).
  static QStringList recentFiles();

  // Views.
  /// Brings view tab `index` to the front (the registry's order).
  void showTab(int index);
  /// Brings the view named `name` (ui/views/view_registry.h) to the front; false when none is.
  bool showTab(const QString& name);
  [[nodiscard]] const std::vector<View*>& views() const { return views_; }
  /// The view named `name`, or nullptr.
  [[nodiscard]] View* view(const QString& name) const;
  [[nodiscard]] std::vector<ExportableView*> exportableViews() const;

  // Export and sessions.
  /// Writes every view (PNG, SVG, PDF, CSV), report.json/csv, comparison.json and specs.txt into
  /// `folder` (ui/export_all.h). `views` empty = all.
  Status exportAll(const QString& folder, const QStringList& views, QSize size);
  Status exportAll(const QString& folder, const QStringList& views, const ExportSize& size);
  [[nodiscard]] QString exportCaption() const { return session_->exportCaption(); }
  [[nodiscard]] QStringList exportMetadata() const { return session_->exportMetadata(); }
  /// comparison.json (core/report/comparison.h) of A and B; needs both summaries complete.
  [[nodiscard]] Expected<std::string> comparisonReportJson() const;
  /// Session JSON with every view's state.
  [[nodiscard]] std::string sessionJson() const;
  Status loadSession(const QString& path);
  Status saveSession(const QString& path);
  [[nodiscard]] const QString& sessionPath() const { return session_->path(); }

  // State, for tests and headless mode.
  [[nodiscard]] const std::shared_ptr<const Dump>& dump() const { return session_->dump(); }
  [[nodiscard]] const LayerQuantPtr& layerQuant() const { return feed_->layer(); }
  [[nodiscard]] const Selection& selection() const { return session_->selection(); }
  [[nodiscard]] const QString& lastError() const { return lastError_; }
  [[nodiscard]] bool summaryComplete() const { return feed_->summaryComplete(); }
  /// A's results are computed, or nothing is pinned (a dump being read to pin as A counts as pinned).
  [[nodiscard]] bool comparisonComplete() const;
  [[nodiscard]] bool busy() const;
  void setHeadFirstBytes(int64_t bytes) { feed_->setHeadFirstBytes(bytes); }
  SpecPanel* keyPanel();
  SpecPanel* valuePanel();
  PlanEditor* planEditor();
  QuantizationDock* quantizationDock() { return quantization_; }
  DatasetPanel* datasetPanel() { return dataset_; }
  ComparisonBar* comparisonBar() { return abBar_; }
  QTabWidget* viewTabs() { return tabs_; }

 signals:
  /// A dump was opened and every view took it.
  void dumpOpened();
  /// The selected layer's data reached the views.
  void layerReady();
  /// The drift view got its series (or the message that there is none).
  void driftReady();
  /// Every layer of the summary is evaluated.
  void summaryFinished();
  /// Setting A's data of the layer in view, or A's whole summary, reached the views.
  void comparisonReady();
  /// A view finished what prepareExport started.
  void exportReady();
  /// An error reached the user (message as shown).
  void errorShown(const QString& message);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildViews();
  void buildDocks();
  void buildMenus();
  void buildStatusBar();
  void connectSession();
  void showError(const QString& context, const QString& message);
  void showStatus(const QString& message);
  /// What the views read when they fill the layer request or take a result.
  [[nodiscard]] ViewContext viewContext() const;
  /// The dump transaction: every view drops the old dump's results and takes the new shape.
  void onDumpChanged();
  /// The setting (or whether it fits) changed: the docks, the bar and the views follow.
  void onSettingChanged();
  void onSelectionChanged();
  void showComparison();
  void exportCurrentView();
  /// Edit ▸ Copy view as image (asCsv false) or its data as CSV text (asCsv true).
  void copyCurrentView(bool asCsv);
  [[nodiscard]] View* currentView() const;
  /// What the export dialog previews for `view` (nothing when it has no content).
  [[nodiscard]] std::function<QImage(const ExportSize&)> previewOf(View* view) const;
  void exportAllInteractive();
  void openInteractive();
  void openWithMappingInteractive(const QString& path);
  void loadSessionInteractive();
  void saveSessionInteractive(bool ask);
  void about();

  bool interactive_;
  Session* session_;
  ViewFeed* feed_;
  QString lastError_;
  DatasetPanel* dataset_ = nullptr;
  QuantizationDock* quantization_ = nullptr;
  ComparisonBar* abBar_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  /// Every view, in tab order (ui/views/view_registry.h).
  std::vector<View*> views_;
  PresetMenu* presets_ = nullptr;
  RecentFilesMenu* recent_ = nullptr;
  QDialog* manual_ = nullptr;
  LaneStatus* status_ = nullptr;
};

}  // namespace kvscope::ui
