// SPDX-License-Identifier: GPL-3.0-or-later
// The kvscope window: dataset panel, K and V spec panels, the views, and the background lanes
// that feed them. It is the one place where a failed Status becomes a dialog or status message.
#pragma once

#include <QMainWindow>
#include <QStringList>
#include <QTimer>

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <memory>
#include <optional>

#include "core/io/dump.h"
#include "core/io/mapping.h"
#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "core/sensitivity/plan_search.h"
#include "core/search/search.h"
#include "ui/model/comparison.h"
#include "core/metrics/drift.h"
#include "ui/model/layer_data.h"
#include "ui/model/selection.h"
#include "ui/views/drift_view.h"

class QLabel;
class QDialog;
class QLineEdit;
class QMenu;
class QUndoStack;
class QProgressBar;
class QToolButton;
class QTabWidget;

namespace kvscope::ui {

class DatasetPanel;
class DriftView;
class ExportableView;
struct ExportSize;
class HeatmapView;
class HistogramView;
class JobRunner;
class PlanEditor;
class SpecPanel;
class SummaryView;
class BudgetView;
class SensitivityView;
class DiagnosisView;
class ComparisonBar;
class View;
struct ViewContext;

/// The K and V settings as one undoable state.
struct SpecState {
  QuantSpec key;
  QuantSpec value;
  bool linked = false;  ///< the Value panel's "same as key"
  bool operator==(const SpecState& o) const { return key == o.key && value == o.value && linked == o.linked; }
};

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  /// `interactive` = false (tests, headless export): errors never open dialogs.
  explicit MainWindow(bool interactive = true, QWidget* parent = nullptr);
  ~MainWindow() override;

  /// Opens a dump in the background; dumpOpened() or an error follows.
  void openDump(const QString& path, std::optional<Mapping> mapping = std::nullopt);
  /// Opens the built-in sample (written once into the cache folder).
  void openSample();
  /// File → Record from model…: record a dump from a model file and open it.
  void recordFromModel();
  /// Sets both specs (as a preset or the command line does) and recomputes.
  /// `what` names the step in Edit ▸ Undo.
  void setSpecs(const QuantSpec& key, const QuantSpec& value, const QString& what = {});
  /// Puts both panels in `state` without recording an undo step (what undo and redo do).
  void applySpecState(const SpecState& state);
  /// The undo history of the K/V settings.
  QUndoStack* undoStack() { return undo_; }
  /// Opens Help ▸ Manual (docs/gui.md as shipped in the binary).
  void showManual();
  /// The dialog of Help ▸ Manual, once opened.
  QDialog* manualDialog() { return manual_; }
  /// Open Recent's files, without those that no longer exist (they are dropped from the settings).
  static QStringList recentFiles();
  /// Where Ctrl+S writes the session (the last one saved or loaded; empty: it asks).
  [[nodiscard]] const QString& sessionPath() const { return sessionPath_; }
  /// Applies a §9 preset by name, resolved for the open dump (or for the next one opened when
  /// none is open); false (and an error message) when unknown or not applicable to the dump.
  bool applyPreset(const QString& name);
  /// Applies an engine string (core/engine/engine.h), e.g. "llama.cpp -ctk q4_0 -ctv q8_0", the
  /// same way; the engine field shows the notes (ignored flags, the rotation rule) or the error.
  bool applyEngine(const QString& text);
  void select(int layer, int kvHead);
  /// Sets both plans (quantization.md §12): the panels get the defaults, the plan editor the
  /// overrides (setSpecs clears them).
  void setPlans(const Plan& key, const Plan& value);
  /// The plans in force: each panel's spec as the default, then the plan editor's overrides.
  [[nodiscard]] Plan keyPlan() const;
  [[nodiscard]] Plan valuePlan() const;
  /// Runs the budget search in the background; the budget view shows the result.
  void runSearch(const SearchOptions& options);
  /// Runs the plan search (sensitivity map, per-layer choice, joint eval) in the background.
  void runPlanSearch(const PlanSearchOptions& options);
  /// Runs the end-to-end check (core/model/e2e.h) for the current specs in the background; needs
  /// a dump written by `kvscope-cli record` whose model file exists. The budget view shows it.
  void runE2eCheck();
  /// Empty when the open dump can drive the end-to-end check, else what it lacks.
  [[nodiscard]] QString e2eUnavailableReason() const;
  /// Brings view tab `index` to the front (0 histogram … 4 budget, 5 sensitivity, 6 diagnosis).
  void showTab(int index);
  /// Brings the view named `name` (ui/views/view_registry.h) to the front; false when none is.
  bool showTab(const QString& name);
  /// The views of the tabs, in tab order (the registry's).
  [[nodiscard]] const std::vector<View*>& views() const { return views_; }
  /// The view named `name`, or nullptr.
  [[nodiscard]] View* view(const QString& name) const;

  /// Writes every view (PNG, SVG, PDF, CSV), the JSON/CSV report and the spec strings into
  /// `folder`. `views` empty = all. Needs the summary to be complete for the report.
  Status exportAll(const QString& folder, const QStringList& views, QSize size);
  /// The same at a physical or pixel size (ui/export/exporter.h), each figure with its caption
  /// and each CSV with the metadata header.
  Status exportAll(const QString& folder, const QStringList& views, const ExportSize& size);
  /// The caption line under exported figures: dump, layer, kv head, K and V specs.
  [[nodiscard]] QString exportCaption() const;
  /// The lines every exported CSV starts with ("dump: …", "layer: …", "key: …", …).
  [[nodiscard]] QStringList exportMetadata() const;
  /// The budget search's lane (for tests: cancel, wait).
  JobRunner* searchRunner() { return searchRunner_; }
  /// Session JSON: dump, mapping, specs, selection, view settings.
  [[nodiscard]] std::string sessionJson() const;
  Status loadSession(const QString& path);
  Status saveSession(const QString& path);

  // State, for tests and headless mode.
  [[nodiscard]] const std::shared_ptr<const Dump>& dump() const { return dump_; }
  [[nodiscard]] const LayerQuantPtr& layerQuant() const { return layerQuant_; }
  [[nodiscard]] const Selection& selection() const { return selection_; }
  [[nodiscard]] const QString& lastError() const { return lastError_; }
  [[nodiscard]] bool summaryComplete() const;
  [[nodiscard]] bool busy() const;
  /// A switch to a layer not in the cache, whose K is at least `bytes` as float32, reads only the kv
  /// head in view first (when the specs quantize per head) and the rest of the layer after the views
  /// are drawn. 16 MiB unless set; tests lower it to take that path on small dumps.
  void setHeadFirstBytes(int64_t bytes) { headFirstBytes_ = bytes; }
  SpecPanel* keyPanel() { return keyPanel_; }
  SpecPanel* valuePanel() { return valuePanel_; }
  PlanEditor* planEditor() { return planEditor_; }
  HistogramView* histogramView() { return histogram_; }
  HeatmapView* heatmapView() { return heatmap_; }
  DriftView* driftView() { return drift_; }
  SummaryView* summaryView() { return summary_; }
  DatasetPanel* datasetPanel() { return dataset_; }
  BudgetView* budgetView() { return budget_; }
  /// The views' tab widget (the central widget holds it under the A/B bar).
  QTabWidget* viewTabs() { return tabs_; }
  SensitivityView* sensitivityView() { return sensitivity_; }
  DiagnosisView* diagnosisView() { return diagnosis_; }
  // A/B comparison (docs/gui.md; the definitions are in ui/main_window_compare.cpp).
  /// Pins the current K/V setting (the plans in force) as A; the controls go on setting B. An undo step.
  void pinAsA();
  /// Stops comparing (an undo step).
  void unpinA();
  /// Makes A the current setting and pins the current one as A (one undo step).
  void swapAB();
  /// Puts the pin in `setting` without recording an undo step (what undo, redo and sessions do).
  void applyPinned(const std::optional<PinnedSetting>& setting);
  Comparison* comparison() { return comparison_; }
  ComparisonBar* comparisonBar() { return abBar_; }
  /// Nothing pinned, or A's summary and A's data of the layer in view are computed.
  [[nodiscard]] bool comparisonComplete() const;
  /// comparison.json (core/report/comparison.h) of A and B; needs both summaries complete.
  [[nodiscard]] Expected<std::string> comparisonReportJson() const;
  /// The views that can be exported, in menu order.
  [[nodiscard]] std::vector<ExportableView*> exportableViews() const;

 signals:
  void dumpOpened();
  /// The selected layer's quantization reached the views.
  void layerReady();
  /// The drift view got new data (or a message).
  void driftReady();
  /// Every layer of the summary is evaluated.
  void summaryFinished();
  /// The budget search delivered its result.
  void searchFinished();
  /// A plan search finished and the budget view shows its plan.
  void planSearchFinished();
  /// The end-to-end check delivered its result.
  void e2eFinished();
  /// Setting A's data of the layer in view, or A's whole summary, reached the views.
  void comparisonReady();
  /// An error reached the user (message as shown).
  void errorShown(const QString& message);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildMenus();
  void buildDocks();
  /// The plan editor (per-layer overrides), shown under the spec panels.
  QWidget* buildPlanEditor();
  void showError(const QString& context, const QString& message);
  void showStatus(const QString& message);
  void onDumpOpened(std::shared_ptr<const Dump> dump, QStringList tokenText, std::optional<Mapping> mapping);
  void scheduleRecompute();
  void recomputeLayer();
  void recomputeSummary();
  void recomputeDrift();
  void pushLayerToViews();
  /// What the views read when they fill the layer request or take its result.
  [[nodiscard]] ViewContext viewContext() const;
  /// Gives the one Selection to the dataset panel and every view.
  void publishSelection();
  /// Recomputes the layer when a view now shows pre-RoPE K′ (the reconstruction) that the current result lacks.
  void ensurePreRopeHat();
  /// What the layer in view must hold for `request` under the specs, plans and pinned setting now.
  struct LayerNeeds {
    bool preRope = false;  ///< pre-RoPE K: a view shows it, or B's or the pinned A's K spec is prerope
    bool perHead = false;  ///< one kv head suffices: every spec in force quantizes per head
    /// Whether `tensors` (the whole layer, or the heads it holds) is enough for kv head `kvHead`.
    [[nodiscard]] bool metBy(const LayerTensors& tensors, int kvHead) const;
  };
  [[nodiscard]] LayerNeeds layerNeeds(const ViewRequest& request) const;
  /// The layer worker's request as the visible views fill it now, for the selected kv head.
  [[nodiscard]] ViewRequest viewRequest() const;
  void updateStorage();
  void onKeySpecChanged();
  [[nodiscard]] SpecState currentSpecState() const;
  /// Pushes an undo step when the settings differ from the last recorded ones (slider drags merge).
  void recordSpecChange(const QString& what, SpecPanel* panel);
  void stepLayer(int delta);
  void stepHead(int delta);
  void exportCurrentView();
  void exportAllInteractive();
  void exportE2eTableInteractive();
  /// Puts the Pareto chart's candidate `spec` on the K (`key`) or V panel as the whole setting.
  void applyCandidate(bool key, const QString& spec);
  void openInteractive();
  void openWithMappingInteractive(const QString& path);
  void addRecent(const QString& path);
  void rebuildRecentMenu();
  void about();
  void trackBusy(JobRunner* runner);
  /// The A/B bar over `tabs` and the comparison's lanes; returns the central widget.
  QWidget* buildComparison(QWidget* tabs);
  void pushComparisonToViews();
  /// Edit ▸ Pin as A, Swap A and B, Unpin A.
  void addComparisonActions(QMenu* edit);
  void updateComparisonBar();
  void writeComparisonSession(nlohmann::ordered_json& session) const;
  Status readComparisonSession(const nlohmann::json& session, const std::string& origin);
  /// Export All's comparison.json when a setting is pinned and both summaries are complete.
  Status exportComparison(const QString& folder, const QString& protectedPath);

  bool interactive_;
  std::shared_ptr<const Dump> dump_;
  std::optional<Mapping> mapping_;
  QStringList tokenText_;
  Selection selection_;
  /// Layers read so far: whole, or only the kv head read first (LayerTensors::whole).
  std::map<int, LayerTensorsPtr> layerCache_;
  /// A layer whose K is at least this many bytes as float32 is read head first (setHeadFirstBytes).
  int64_t headFirstBytes_ = int64_t{16} << 20;
  LayerQuantPtr layerQuant_;
  /// The layer lane's reused results and slices (used on that lane's thread only).
  std::shared_ptr<LayerQuantPool> layerPool_ = std::make_shared<LayerQuantPool>();
  /// The drift lane's slices of the visible kv head (used on that lane's thread only).
  std::shared_ptr<DriftWorkspace> driftSlices_ = std::make_shared<DriftWorkspace>();
  /// The summary waits for the visible views after a spec change, so that they get the cores first.
  bool summaryPending_ = false;
  QString lastError_;
  QString pendingSessionMessage_;
  /// A preset or engine string applied before a dump was open: resolved when one opens.
  struct PendingSetting {
    bool isEngine = false;
    QString text;
  };
  std::optional<PendingSetting> pendingSetting_;
  /// Resolves a preset or engine string for the open dump and applies it.
  bool applySetting(const PendingSetting& setting);
  /// Shows what each preset resolves to for the open dump in the Presets menu.
  void refreshPresetMenu();
  QMenu* presetMenu_ = nullptr;
  QLineEdit* engineField_ = nullptr;
  QLabel* engineNotes_ = nullptr;

  DatasetPanel* dataset_;
  SpecPanel* keyPanel_;
  SpecPanel* valuePanel_;
  PlanEditor* planEditor_;
  QLabel* storage_;
  QTabWidget* tabs_;
  /// Every view, in tab order (ui/views/view_registry.h); the typed pointers below are some of them.
  std::vector<View*> views_;
  HistogramView* histogram_;
  HeatmapView* heatmap_;
  DriftView* drift_;
  SummaryView* summary_;
  BudgetView* budget_;
  SensitivityView* sensitivity_;
  DiagnosisView* diagnosis_;
  QMenu* recentMenu_ = nullptr;
  QUndoStack* undo_;
  Comparison* comparison_ = nullptr;
  ComparisonBar* abBar_ = nullptr;
  SpecState lastSpecs_;
  bool applyingUndo_ = false;
  QString sessionPath_;
  QDialog* manual_ = nullptr;

  JobRunner* openRunner_;
  JobRunner* layerRunner_;
  /// Reads the rest of a layer read head first, at the lowest priority; a layer read outranks it.
  JobRunner* fillRunner_;
  int fillingLayer_ = -1;  ///< the layer the fill lane is completing, -1 when none
  JobRunner* driftRunner_;
  JobRunner* summaryRunner_;
  JobRunner* searchRunner_;
  JobRunner* e2eRunner_;
  JobRunner* planRunner_;
  /// The specs of the end-to-end result shown (or running); a change makes it stale.
  std::optional<std::pair<Plan, Plan>> e2eSpecs_;
  QList<JobRunner*> runners_;
  QTimer recomputeTimer_;
  QLabel* statusText_;
  QProgressBar* progress_;
  QToolButton* cancel_;
};

}  // namespace kvscope::ui
