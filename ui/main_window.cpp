// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QKeySequence>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QLineEdit>
#include <QScrollArea>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextBrowser>
#include <QToolButton>
#include <QUndoCommand>
#include <QUndoStack>
#include <QDialog>
#include <QDialogButtonBox>
#include <QSpinBox>
#include <QDoubleSpinBox>
#include <QSlider>
#include <QVBoxLayout>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <tuple>

#include "core/attention/attention.h"
#include "core/attention/detail.h"
#include "core/io/dataset_tree.h"
#include "core/model/e2e.h"
#include "core/model/model.h"
#include "core/engine/engine.h"
#include "core/engine/presets.h"
#include "core/quant/quantize.h"
#include "core/report/eval.h"
#include "core/report/report_format.h"
#include "core/synth/synth.h"
#include "core/util/atomic_file.h"
#include "ui/export/exporter.h"
#include "ui/views/budget_view.h"
#include "ui/views/diagnosis_view.h"
#include "ui/views/sensitivity_view.h"
#include "ui/views/drift_view.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/histogram_view.h"
#include "ui/views/summary_view.h"
#include "ui/views/view_registry.h"
#include "ui/widgets/dataset_panel.h"
#include "ui/widgets/export_dialog.h"
#include "ui/widgets/mapping_dialog.h"
#include "ui/widgets/plan_editor.h"
#include "ui/widgets/record_dialog.h"
#include "ui/widgets/spec_panel.h"
#include "ui/widgets/steady_tab_widget.h"
#include "ui/workers/dump_reader.h"
#include "ui/workers/job_runner.h"

// The manual (docs/gui.md and its images) is compiled into kvscope_ui, a static library: its
// resources must be registered by hand, and Q_INIT_RESOURCE may not sit inside a namespace.
static void initManualResource() { Q_INIT_RESOURCE(manual); }

namespace kvscope::ui {

namespace {

/// The setting a dump opens on: what llama.cpp users run most (q8_0 keys, q4_0 values).
constexpr const char* kDefaultEngine = "llama.cpp -ctk q8_0 -ctv q4_0";

constexpr int kMaxRecent = 8;
constexpr int kLayerCacheSize = 4;

/// Puts `tensors` in the layer cache (a whole layer is not replaced by a partial read of it) and
/// forgets the oldest layers beyond kLayerCacheSize, never `keep`.
void cacheLayer(std::map<int, LayerTensorsPtr>& cache, const LayerTensorsPtr& tensors, int keep) {
  LayerTensorsPtr& slot = cache[tensors->layer];
  if (!slot || !slot->whole() || tensors->whole()) slot = tensors;
  while (static_cast<int>(cache.size()) > kLayerCacheSize) {
    auto victim = cache.begin();
    if (victim->first == keep) ++victim;
    cache.erase(victim);
  }
}

struct Opened {
  std::shared_ptr<const Dump> dump;
  QStringList tokenText;
};

QString q(const std::string& s) { return QString::fromStdString(s); }

// One step of the K/V settings, undone and redone as a whole.
class SpecCommand : public QUndoCommand {
 public:
  SpecCommand(MainWindow* window, SpecState before, SpecState after, const QString& text, bool mergeable)
      : QUndoCommand(text), window_(window), before_(std::move(before)), after_(std::move(after)), mergeable_(mergeable) {}
  void undo() override { window_->applySpecState(before_); }
  void redo() override {
    // The first redo is the push: the change is already on screen.
    if (pushed_) window_->applySpecState(after_);
    pushed_ = true;
  }
  [[nodiscard]] int id() const override { return 1; }
  bool mergeWith(const QUndoCommand* other) override {
    // A slider drag is one step, not one per value it passed.
    const auto* o = static_cast<const SpecCommand*>(other);
    if (!mergeable_ || !o->mergeable_ || o->text() != text()) return false;
    after_ = o->after_;
    return true;
  }

 private:
  MainWindow* window_;
  SpecState before_, after_;
  bool mergeable_;
  bool pushed_ = false;
};

}  // namespace

MainWindow::MainWindow(bool interactive, QWidget* parent) : QMainWindow(parent), interactive_(interactive) {
  initManualResource();
  setObjectName(QStringLiteral("kvscopeMainWindow"));
  undo_ = new QUndoStack(this);
  setWindowTitle(QStringLiteral("kvscope"));
  setAcceptDrops(true);
  resize(1400, 900);

  tabs_ = new SteadyTabWidget(this);
  // The tabs are the registry's views, in its order; the window wires some of them by type.
  for (const ViewRegistration& r : viewRegistry()) {
    View* v = r.make(this);
    views_.push_back(v);
    tabs_->addTab(v->widget(), v->tabTitle());
  }
  histogram_ = dynamic_cast<HistogramView*>(view(QString::fromLatin1(HistogramView::kName)));
  heatmap_ = dynamic_cast<HeatmapView*>(view(QString::fromLatin1(HeatmapView::kName)));
  drift_ = dynamic_cast<DriftView*>(view(QString::fromLatin1(DriftView::kName)));
  summary_ = dynamic_cast<SummaryView*>(view(QString::fromLatin1(SummaryView::kName)));
  budget_ = dynamic_cast<BudgetView*>(view(QString::fromLatin1(BudgetView::kName)));
  sensitivity_ = dynamic_cast<SensitivityView*>(view(QString::fromLatin1(SensitivityView::kName)));
  diagnosis_ = dynamic_cast<DiagnosisView*>(view(QString::fromLatin1(DiagnosisView::kName)));
  setCentralWidget(buildComparison(tabs_));

  openRunner_ = new JobRunner(tr("opening"), this);
  layerRunner_ = new JobRunner(tr("quantizing layer"), this);
  fillRunner_ = new JobRunner(tr("reading layer"), this);
  fillRunner_->setNice(19);
  driftRunner_ = new JobRunner(tr("attention drift"), this);
  summaryRunner_ = new JobRunner(tr("layer summary"), this);
  searchRunner_ = new JobRunner(tr("budget search"), this);
  e2eRunner_ = new JobRunner(tr("end-to-end check"), this);
  planRunner_ = new JobRunner(tr("plan search"), this);

  statusText_ = new QLabel(this);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  // Wide enough for the longest lane's "name: 100%" on one line.
  progress_->setMinimumWidth(progress_->fontMetrics().horizontalAdvance(tr("end-to-end check: 100%")) + 40);
  progress_->setMaximumWidth(progress_->minimumWidth() + 60);
  progress_->setVisible(false);
  cancel_ = new QToolButton(this);
  cancel_->setText(tr("Cancel"));
  cancel_->setToolTip(tr("Stop the background computations; views keep their last results."));
  cancel_->setVisible(false);
  // One line that never widens the window: long messages are cut at the right, whole in the tooltip.
  statusText_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  statusText_->setObjectName(QStringLiteral("statusText"));
  statusBar()->addWidget(statusText_, 1);
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_);
  connect(cancel_, &QToolButton::clicked, this, [this] {
    for (JobRunner* r : runners_) r->cancel();
    showStatus(tr("Cancelled."));
  });
  for (JobRunner* r : {openRunner_, layerRunner_, fillRunner_, driftRunner_, summaryRunner_, searchRunner_, e2eRunner_,
                       planRunner_})
    trackBusy(r);
  trackBusy(sensitivity_->runner());
  trackBusy(diagnosis_->runner());

  buildDocks();
  buildMenus();

  // Slider drags arrive in bursts; one recomputation starts 40 ms after the last change. The
  // summary (every layer) waits until the visible views have their data, and stops meanwhile.
  recomputeTimer_.setSingleShot(true);
  recomputeTimer_.setInterval(40);
  connect(&recomputeTimer_, &QTimer::timeout, this, [this] {
    summaryRunner_->cancel();
    summaryPending_ = true;
    recomputeLayer();
  });
  connect(heatmap_->tensorBox(), &QComboBox::currentIndexChanged, this, &MainWindow::ensurePreRopeHat);
  connect(histogram_->tensorBox(), &QComboBox::currentIndexChanged, this, &MainWindow::ensurePreRopeHat);

  connect(heatmap_, &HeatmapView::cellClicked, this, [this](int channel, int token) {
    selection_.channel = channel;
    selection_.token = token;
    histogram_->setLayer(layerQuant_, selection_.kvHead, channel, token);
    showStatus(tr("Selected channel %1, token %2 for the histogram.").arg(channel).arg(token));
  });
  connect(summary_, &SummaryView::selected, this, &MainWindow::select);
  connect(sensitivity_, &SensitivityView::selected, this, &MainWindow::select);
  connect(diagnosis_, &DiagnosisView::evidenceSelected, this, [this](const Evidence& e) {
    if (!dump_) return;
    const DumpInfo& info = dump_->info();
    if (e.channel >= 0) selection_.channel = std::clamp(e.channel, 0, info.headDim - 1);
    if (e.token >= 0) selection_.token = static_cast<int>(std::clamp<int64_t>(e.token, 0, info.tokens - 1));
    pointViewsAt(e, *histogram_, *heatmap_, info.hasKeyPreRope);
    select(e.layer >= 0 ? e.layer : selection_.layer, e.kvHead >= 0 ? e.kvHead : selection_.kvHead);
    if (e.queryHead >= 0 && e.queryHead < info.heads) {
      selection_.queryHead = e.queryHead;
      publishSelection();
      recomputeDrift();
    }
    pushLayerToViews();
  });
  connect(diagnosis_, &DiagnosisView::applyRequested, this, [this](const SettingSuggestion& s) {
    if (!dump_) return;
    auto plans = applySuggestionToPlans(keyPlan(), valuePlan(), s, dump_->info());
    if (!plans) return showError(tr("diagnosis"), q(plans.status().message()));
    setPlans(plans->first, plans->second);
    showStatus(tr("Applied %1: K %2, V %3.").arg(q(s.option), q(toString(plans->first)), q(toString(plans->second))));
  });
  connect(summary_, &SummaryView::budgetsChanged, budget_, &BudgetView::setBudgetBounds);
  connect(budget_, &BudgetView::searchRequested, this, &MainWindow::runSearch);
  connect(budget_, &BudgetView::planSearchRequested, this, &MainWindow::runPlanSearch);
  connect(budget_, &BudgetView::planApplyRequested, this, [this](const Plan& key, const Plan& value) {
    setPlans(key, value);
    showStatus(tr("Applied the plan: K %1, V %2.").arg(q(toString(key)), q(toString(value))));
  });
  connect(budget_, &BudgetView::e2eRequested, this, &MainWindow::runE2eCheck);
  // The search's own progress (with the time left) and Cancel in the budget view.
  connect(searchRunner_, &JobRunner::progressed, budget_, &BudgetView::setSearchProgress);
  connect(searchRunner_, &JobRunner::busyChanged, budget_, &BudgetView::setSearchRunning);
  connect(searchRunner_, &JobRunner::failed, budget_, [this](const QString& message) {
    budget_->setSearchMessage(tr("The search failed: %1").arg(message));
  });
  connect(budget_, &BudgetView::searchCancelRequested, this, [this] {
    searchRunner_->cancel();
    budget_->setSearchMessage(tr("Search cancelled; the charts show the last finished search."));
    showStatus(tr("Budget search cancelled."));
  });
  connect(budget_, &BudgetView::candidateChosen, this, &MainWindow::applyCandidate);
  connect(budget_, &BudgetView::e2eExportRequested, this, &MainWindow::exportE2eTableInteractive);
  connect(planRunner_, &JobRunner::failed, this,
          [this] { budget_->setPlanMessage(tr("The plan search failed; see the status bar.")); });
  connect(e2eRunner_, &JobRunner::failed, this, [this] {
    e2eSpecs_.reset();
    budget_->setE2eMessage(tr("The end-to-end check failed; see the status bar."));
  });
  connect(dataset_, &DatasetPanel::selected, this, [this](int layer, int head) {
    select(layer, head < 0 ? selection_.kvHead : head);
  });
  connect(drift_, &DriftView::queryChanged, this, [this](int head, int row) {
    selection_.queryHead = head;
    selection_.queryIndex = row;
    if (dump_ && dump_->info().groupSize() > 0) {
      const int kvHead = head / dump_->info().groupSize();
      if (kvHead != selection_.kvHead) {
        selection_.kvHead = kvHead;
        publishSelection();
        if (!layerQuant_ || layerQuant_->hatHead(kvHead) < 0) {
          recomputeLayer();  // only the old head was quantized; the drift row follows the result
          return;
        }
        pushLayerToViews();
      }
    }
    recomputeDrift();
  });

  QSettings settings;
  restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
  restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
}

MainWindow::~MainWindow() {
  for (JobRunner* r : runners_) r->cancel();
  for (JobRunner* r : runners_) r->waitForIdle();
}

void MainWindow::trackBusy(JobRunner* runner) {
  runners_.append(runner);
  connect(runner, &JobRunner::progressed, this, [this, runner](double fraction, const QString& what) {
    progress_->setValue(static_cast<int>(fraction * 1000));
    progress_->setFormat(runner->name() + QStringLiteral(": %p%"));
    progress_->setToolTip(what);
  });
  connect(runner, &JobRunner::busyChanged, this, [this] {
    const bool any = busy();
    progress_->setVisible(any);
    cancel_->setVisible(any);
    if (!any) progress_->setValue(0);
  });
  connect(runner, &JobRunner::failed, this, [this, runner](const QString& message) {
    showError(runner->name(), message);
  });
}

bool MainWindow::busy() const {
  return std::any_of(runners_.begin(), runners_.end(), [](const JobRunner* r) { return r->busy(); });
}

void MainWindow::buildDocks() {
  dataset_ = new DatasetPanel(this);
  auto* datasetDock = new QDockWidget(tr("Dataset"), this);
  datasetDock->setObjectName(QStringLiteral("datasetDock"));
  datasetDock->setWidget(dataset_);
  addDockWidget(Qt::LeftDockWidgetArea, datasetDock);

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
    if (!engineField_->text().trimmed().isEmpty()) applyEngine(engineField_->text());
  });
  auto* specBox = new QWidget(this);
  auto* specLayout = new QVBoxLayout(specBox);
  specLayout->setContentsMargins(0, 0, 0, 0);
  specLayout->addWidget(engineField_);
  specLayout->addWidget(engineNotes_);
  specLayout->addWidget(specTabs);
  specLayout->addWidget(storage_);
  specLayout->addWidget(buildPlanEditor());
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(specBox);
  scroll->setWidgetResizable(true);
  auto* specDock = new QDockWidget(tr("Quantization"), this);
  specDock->setObjectName(QStringLiteral("specDock"));
  specDock->setWidget(scroll);
  addDockWidget(Qt::RightDockWidgetArea, specDock);

  valuePanel_->setLinkedToKey(false);
  connect(keyPanel_, &SpecPanel::specChanged, this, [this] {
    onKeySpecChanged();
    recordSpecChange(tr("key setting"), keyPanel_);
  });
  connect(valuePanel_, &SpecPanel::specChanged, this, [this] {
    updateStorage();
    scheduleRecompute();
    recordSpecChange(tr("value setting"), valuePanel_);
  });
  connect(valuePanel_, &SpecPanel::linkToggled, this, [this](bool linked) {
    if (linked) onKeySpecChanged();
    recordSpecChange(tr("same as key"), nullptr);
  });
  lastSpecs_ = currentSpecState();
  updateStorage();
}

SpecState MainWindow::currentSpecState() const {
  return SpecState{keyPanel_->spec(), valuePanel_->spec(), valuePanel_->linkedToKey()};
}

void MainWindow::recordSpecChange(const QString& what, SpecPanel* panel) {
  if (applyingUndo_) return;
  const SpecState now = currentSpecState();
  if (now == lastSpecs_) return;
  const bool dragging = panel && (panel->bitsSlider()->isSliderDown() || panel->clipSlider()->isSliderDown());
  undo_->push(new SpecCommand(this, lastSpecs_, now, what, dragging));
  lastSpecs_ = now;
}

void MainWindow::applySpecState(const SpecState& state) {
  applyingUndo_ = true;
  keyPanel_->setSpec(state.key);
  valuePanel_->setLinkedToKey(state.linked);
  valuePanel_->setSpec(state.value);
  lastSpecs_ = currentSpecState();
  applyingUndo_ = false;
  updateStorage();
  scheduleRecompute();
}

void MainWindow::onKeySpecChanged() {
  if (valuePanel_->linkedToKey()) {
    QuantSpec v = keyPanel_->spec();
    v.prerope = false;
    valuePanel_->setSpec(v);
  }
  updateStorage();
  scheduleRecompute();
}

// The dialog records on its own lane; the finished dump opens like any other.
void MainWindow::recordFromModel() {
  auto* dialog = new RecordDialog(this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &RecordDialog::recorded, this, [this](const QString& path) { openDump(path); });
  dialog->open();
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open…"), this, &MainWindow::openInteractive);
  open->setShortcut(QKeySequence::Open);
  open->setToolTip(tr("Open a KV dump (HDF5)."));
  file->addAction(tr("Open with &mapping…"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a non-canonical HDF5 file"));
    if (!path.isEmpty()) openWithMappingInteractive(path);
  });
  file->addAction(tr("Open the built-in &sample"), this, &MainWindow::openSample);
  QAction* recordAction = file->addAction(tr("Recor&d from model…"), this, &MainWindow::recordFromModel);
  recordAction->setObjectName(QStringLiteral("recordFromModel"));
  recordAction->setToolTip(tr("Run a GGUF, Hugging Face or llama2.c model on a text and open its cache as a dump."));
  recentMenu_ = file->addMenu(tr("Open &Recent"));
  rebuildRecentMenu();
  file->addSeparator();
  file->addAction(tr("&Load session…"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Load session"), {}, tr("Sessions (*.json)"));
    if (path.isEmpty()) return;
    const Status s = loadSession(path);
    if (!s.isOk()) showError(tr("session"), q(s.message()));
  });
  const auto saveAs = [this] {
    if (!interactive_) return;
    const QString path = QFileDialog::getSaveFileName(this, tr("Save session"),
                                                      sessionPath_.isEmpty() ? QStringLiteral("session.json") : sessionPath_,
                                                      tr("Sessions (*.json)"));
    if (path.isEmpty()) return;
    const Status s = saveSession(path);
    if (!s.isOk()) showError(tr("session"), q(s.message()));
    else showStatus(tr("Session saved to %1.").arg(path));
  };
  QAction* save = file->addAction(tr("&Save session"), this, [this, saveAs] {
    // Ctrl+S writes the session last loaded or saved; the first time it asks where.
    if (sessionPath_.isEmpty()) {
      saveAs();
      return;
    }
    const Status s = saveSession(sessionPath_);
    if (!s.isOk()) showError(tr("session"), q(s.message()));
    else showStatus(tr("Session saved to %1.").arg(sessionPath_));
  });
  save->setShortcut(QKeySequence::Save);
  save->setObjectName(QStringLiteral("saveSessionAction"));
  QAction* saveAsAction = file->addAction(tr("Save session &as…"), this, saveAs);
  saveAsAction->setShortcut(QKeySequence(tr("Ctrl+Shift+S")));
  file->addSeparator();
  QAction* exportView = file->addAction(tr("&Export view…"), this, &MainWindow::exportCurrentView);
  exportView->setShortcut(QKeySequence(tr("Ctrl+E")));
  QAction* exportAllAction = file->addAction(tr("Export &All…"), this, &MainWindow::exportAllInteractive);
  exportAllAction->setShortcut(QKeySequence(tr("Ctrl+Shift+E")));
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  // Undo and redo the K/V settings (controls, typed specs, presets, the "same as key" link).
  QAction* undo = undo_->createUndoAction(this, tr("&Undo"));
  undo->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Z)});
  undo->setObjectName(QStringLiteral("undoAction"));
  QAction* redo = undo_->createRedoAction(this, tr("&Redo"));
  redo->setShortcuts({QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Z), QKeySequence(Qt::CTRL | Qt::Key_Y)});
  redo->setObjectName(QStringLiteral("redoAction"));
  edit->addAction(undo);
  edit->addAction(redo);
  addComparisonActions(edit);

  presetMenu_ = menuBar()->addMenu(tr("&Presets"));
  for (const Preset& p : presetTable()) {
    const QString name = QString::fromUtf8(p.name.data(), static_cast<qsizetype>(p.name.size()));
    QAction* a = presetMenu_->addAction(name, this, [this, name] { applyPreset(name); });
    a->setData(name);
  }
  presetMenu_->setToolTipsVisible(true);
  refreshPresetMenu();

  QMenu* nav = menuBar()->addMenu(tr("&Navigate"));
  nav->addAction(tr("Next layer"), QKeySequence(tr("Alt+Down")), this, [this] { stepLayer(1); });
  nav->addAction(tr("Previous layer"), QKeySequence(tr("Alt+Up")), this, [this] { stepLayer(-1); });
  nav->addAction(tr("Next kv head"), QKeySequence(tr("Alt+Right")), this, [this] { stepHead(1); });
  nav->addAction(tr("Previous kv head"), QKeySequence(tr("Alt+Left")), this, [this] { stepHead(-1); });

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  QAction* manual = help->addAction(tr("&Manual"), this, &MainWindow::showManual);
  manual->setShortcut(QKeySequence::HelpContents);
  manual->setObjectName(QStringLiteral("manualAction"));
  help->addSeparator();
  help->addAction(tr("&About kvscope"), this, &MainWindow::about);
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

void MainWindow::showManual() {
  if (!manual_) {
    manual_ = new QDialog(this);
    manual_->setWindowTitle(tr("kvscope manual"));
    manual_->resize(900, 760);
    auto* browser = new QTextBrowser(manual_);
    browser->setObjectName(QStringLiteral("manualBrowser"));
    browser->setOpenExternalLinks(true);
    // The manual is docs/gui.md as shipped in the binary; its images resolve beside it.
    browser->setSearchPaths({QStringLiteral(":/manual")});
    browser->setSource(QUrl(QStringLiteral("qrc:/manual/gui.md")), QTextDocument::MarkdownResource);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, manual_);
    connect(buttons, &QDialogButtonBox::rejected, manual_, &QDialog::close);
    auto* layout = new QVBoxLayout(manual_);
    layout->addWidget(browser);
    layout->addWidget(buttons);
  }
  manual_->show();
  manual_->raise();
  manual_->activateWindow();
}

void MainWindow::about() {
  QFile notice(QStringLiteral(":/kvscope/LICENSE-NOTICE.txt"));
  QString licenses;
  if (notice.open(QIODevice::ReadOnly)) licenses = QString::fromUtf8(notice.readAll()).toHtmlEscaped();
  auto* box = new QMessageBox(this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->setWindowTitle(tr("About kvscope"));
  box->setTextFormat(Qt::RichText);
  box->setText(tr("<h3>kvscope %1</h3><p>Explore how quantizing a transformer's KV cache changes its keys, "
                  "values and attention.</p><p>kvscope is free software under the GNU General Public License, "
                  "version 3 or later (GPL-3.0-or-later). It uses Qt %2 (LGPLv3/GPLv3) and Qt Charts (GPLv3).</p>")
                   .arg(QStringLiteral(KVSCOPE_VERSION), QString::fromLatin1(qVersion())));
  box->setDetailedText(licenses);
  box->open();
}

void MainWindow::showStatus(const QString& message) {
  // Core's messages may span lines; the status bar has one.
  QString line = message;
  line.replace(QLatin1Char('\n'), QStringLiteral(" · "));
  statusText_->setText(line);
  statusText_->setToolTip(message);
}

void MainWindow::showError(const QString& context, const QString& message) {
  const QString text = context.isEmpty() ? message : context + QStringLiteral(": ") + message;
  lastError_ = text;
  showStatus(QStringLiteral("⚠ ") + text);
  emit errorShown(text);
  if (interactive_) {
    auto* box = new QMessageBox(QMessageBox::Warning, tr("kvscope"), text, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();  // not exec(): the window stays responsive behind it
  }
}

void MainWindow::openSample() {
  const QString folder = QStandardPaths::writableLocation(QStandardPaths::CacheLocation);
  showStatus(tr("Preparing the built-in sample…"));
  openRunner_->start<std::string>(
      [folder](const Progress&) -> Expected<std::string> { return ensureSampleDump(folder.toStdString()); },
      [this](std::string path) { openDump(q(path)); });
}

void MainWindow::openDump(const QString& path, std::optional<Mapping> mapping) {
  showStatus(tr("Opening %1…").arg(path));
  const std::string file = path.toStdString();
  openRunner_->start<std::shared_ptr<Opened>>(
      [file, mapping](const Progress& progress) -> Expected<std::shared_ptr<Opened>> {
        OpenOptions options;
        options.mapping = mapping;
        // A file that crashes or hangs libhdf5 must not take the window with it: the dump is
        // opened, and every read of it served, by a kvscope-cli reader process.
        options.isolation = readerIsolation();
        if (!report(progress, 0.2, "opening")) return Status::cancelled();
        auto dump = Dump::open(file, options);
        if (!dump) return dump.status();
        if (!report(progress, 0.5, "reading token text")) return Status::cancelled();
        auto opened = std::make_shared<Opened>();
        opened->dump = *dump;
        if ((*dump)->info().hasTokenText) {
          auto text = (*dump)->tokenText();
          if (text) {
            for (const std::string& t : *text) opened->tokenText << QString::fromStdString(t);
          }
        }
        return opened;
      },
      [this, mapping](std::shared_ptr<Opened> opened) {
        onDumpOpened(opened->dump, opened->tokenText, mapping);
      });
}

void MainWindow::onDumpOpened(std::shared_ptr<const Dump> dump, QStringList tokenText,
                              std::optional<Mapping> mapping) {
  for (JobRunner* r : {layerRunner_, fillRunner_, driftRunner_, summaryRunner_, searchRunner_, e2eRunner_, planRunner_})
    r->cancel();
  budget_->setSearchResult(nullptr);
  budget_->setPlanResult(nullptr);
  dump_ = std::move(dump);
  comparison_->setDump(dump_);
  mapping_ = std::move(mapping);
  tokenText_ = std::move(tokenText);
  layerCache_.clear();
  layerQuant_.reset();
  const DumpInfo& info = dump_->info();
  selection_.layer = std::clamp(selection_.layer, 0, info.layers - 1);
  selection_.kvHead = std::clamp(selection_.kvHead, 0, info.kvHeads - 1);
  selection_.queryHead = std::clamp(selection_.queryHead, 0, std::max(0, info.heads - 1));
  if (selection_.queryIndex >= info.queries) selection_.queryIndex = -1;
  selection_.channel = std::clamp(selection_.channel, 0, info.headDim - 1);
  selection_.token = std::clamp(selection_.token, 0, info.tokens - 1);
  dataset_->setDump(info);
  dataset_->setSelection(selection_.layer, selection_.kvHead);
  SpecContext context;
  context.kvHeads = info.kvHeads;
  context.headDim = info.headDim;
  context.hasKeyPreRope = info.hasKeyPreRope;
  keyPanel_->setContext(context);
  valuePanel_->setContext(context);
  QString fallbackNote;
  if (undo_->count() == 0) {
    // The untouched defaults are what llama.cpp stores for `-ctk q8_0 -ctv q4_0` on this dump
    // (its rotation included where the head dim takes one: docs/engines.md).
    const KvShape shape{info.headDim, info.layers, info.kvHeads};
    auto resolved = resolveEngine(kDefaultEngine, shape);
    auto specs = resolved ? parseResolved(*resolved, kDefaultEngine) : Expected<PresetSpecs>(resolved.status());
    if (specs && validateSpec(specs->key, context).isOk() && validateSpec(specs->value, context).isOk()) {
      applySpecState(SpecState{specs->key, specs->value, false});
    }
  }
  if (undo_->count() == 0 && (!keyPanel_->isValid() || !valuePanel_->isValid())) {
    // The opening defaults (q8_0 / q4_0: blocks of 32 channels) do not fit every dump (head dim 8
    // in stories260K). Untouched, they give way to per-token int8 / int4, which fit any shape.
    const QString why = !keyPanel_->isValid() ? keyPanel_->messageLabel()->text() : valuePanel_->messageLabel()->text();
    const QuantSpec key = keyPanel_->isValid() ? keyPanel_->spec() : *parseSpec("int8");
    const QuantSpec value = valuePanel_->isValid() ? valuePanel_->spec() : *parseSpec("int4");
    applySpecState(SpecState{key, value, false});
    fallbackNote = tr(" The default specs do not fit this dump (%1); showing K %2, V %3.")
                       .arg(why, q(toString(key)), q(toString(value)));
  }
  heatmap_->setHasPreRope(info.hasKeyPreRope);
  histogram_->setHasPreRope(info.hasKeyPreRope);
  planEditor_->setContext(context, info.layers);
  planEditor_->setCurrentLayer(selection_.layer);
  drift_->setShape(info.hasQuery ? info.heads : 0, info.queries, info.tokens);
  selection_.queryIndex = selection_.queryRow(info.queries);  // "the last row" becomes that row
  summary_->reset(info.layers);
  sensitivity_->setDump(dump_);
  diagnosis_->setDump(dump_);
  publishSelection();
  setWindowTitle(QStringLiteral("kvscope — %1").arg(QFileInfo(q(info.path)).fileName()));
  addRecent(q(info.path));
  QString status = tr("Opened %1.").arg(q(info.path)) + fallbackNote;
  for (const std::string& w : info.warnings) status += QStringLiteral(" ⚠ ") + q(w);
  if (!pendingSessionMessage_.isEmpty()) {
    status += QStringLiteral(" ") + pendingSessionMessage_;
    pendingSessionMessage_.clear();
  }
  showStatus(status);
  e2eSpecs_.reset();
  const QString e2eWhy = e2eUnavailableReason();
  budget_->setE2eAvailable(e2eWhy.isEmpty(), e2eWhy);
  refreshPresetMenu();
  if (pendingSetting_) {
    const PendingSetting setting = *pendingSetting_;
    pendingSetting_.reset();
    applySetting(setting);
  }
  updateStorage();
  emit dumpOpened();
  recomputeTimer_.stop();
  recomputeLayer();
  recomputeSummary();
}

void MainWindow::setSpecs(const QuantSpec& key, const QuantSpec& value, const QString& what) {
  keyPanel_->setSpec(key);
  valuePanel_->setLinkedToKey(false);
  valuePanel_->setSpec(value);
  planEditor_->setOverrides(true, {});  // a preset or a spec pair is the whole setting
  planEditor_->setOverrides(false, {});
  updateStorage();
  scheduleRecompute();
  recordSpecChange(what.isEmpty() ? tr("K and V settings") : what, nullptr);
}

void MainWindow::refreshPresetMenu() {
  if (presetMenu_ == nullptr) return;
  std::optional<KvShape> shape;
  if (dump_) shape = KvShape{dump_->info().headDim, dump_->info().layers, dump_->info().kvHeads};
  for (QAction* a : presetMenu_->actions()) {
    const std::string name = a->data().toString().toStdString();
    const Preset* p = findPreset(name);
    if (p == nullptr) continue;
    QString tip = QString::fromUtf8(p->description.data(), static_cast<qsizetype>(p->description.size()));
    QString label = q(name);
    if (shape) {
      // What the preset stores for this dump, as `kvscope-cli presets --dump` prints it.
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

bool MainWindow::applySetting(const PendingSetting& setting) {
  const DumpInfo& info = dump_->info();
  const KvShape shape{info.headDim, info.layers, info.kvHeads};
  const std::string text = setting.text.toStdString();
  auto r = setting.isEngine ? resolveEngine(text, shape) : resolvePreset(text, shape);
  // A preset or engine may store a spec per layer (vLLM's skipped layers): parsed as plans.
  auto specs = r ? parseResolvedPlans(*r, setting.isEngine ? "engine '" + text + "'" : "preset " + text)
                 : Expected<KvPlans>(r.status());
  if (setting.isEngine) {
    QStringList lines;
    if (specs) {
      for (const std::string& n : r->notes) lines << q(n);
    } else {
      lines << q(specs.status().message());
    }
    engineNotes_->setText(lines.join(QLatin1Char('\n')));
    engineNotes_->setVisible(!lines.isEmpty());
  }
  if (!specs) {
    showError(setting.isEngine ? tr("engine") : tr("preset"), q(specs.status().message()));
    return false;
  }
  const QString what = (setting.isEngine ? tr("engine %1") : tr("preset %1")).arg(setting.text);
  setSpecs(specs->key.base, specs->value.base, what);
  if (!specs->key.overrides.empty() || !specs->value.overrides.empty()) {
    // setSpecs cleared the overrides; the setting's follow, as a loaded session's do.
    planEditor_->setOverrides(true, specs->key.overrides);
    planEditor_->setOverrides(false, specs->value.overrides);
    updateStorage();
    scheduleRecompute();
  }
  showStatus(tr("%1: K %2, V %3.")
                 .arg(setting.text, q(toString(specs->key)), q(toString(specs->value))));
  return true;
}

bool MainWindow::applyPreset(const QString& name) {
  if (findPreset(name.toStdString()) == nullptr) {
    showError(tr("preset"), q(resolvePreset(name.toStdString(), {}).status().message()));
    return false;
  }
  const PendingSetting setting{false, name};
  if (!dump_) {
    pendingSetting_ = setting;  // resolved for the dump once it is open
    // A preset is the whole setting: the plan's overrides go now, not only once it resolves.
    planEditor_->setOverrides(true, {});
    planEditor_->setOverrides(false, {});
    return true;
  }
  return applySetting(setting);
}

bool MainWindow::applyEngine(const QString& text) {
  if (engineField_->text() != text) engineField_->setText(text);
  // Flags are checked now; what they store depends on the dump's head dim.
  auto check = resolveEngine(text.toStdString(), {});
  if (!check) {
    engineNotes_->setText(q(check.status().message()));
    engineNotes_->setVisible(true);
    showError(tr("engine"), q(check.status().message()));
    return false;
  }
  const PendingSetting setting{true, text};
  if (!dump_) {
    pendingSetting_ = setting;
    planEditor_->setOverrides(true, {});
    planEditor_->setOverrides(false, {});
    return true;
  }
  return applySetting(setting);
}

void MainWindow::select(int layer, int kvHead) {
  if (!dump_) return;
  const DumpInfo& info = dump_->info();
  layer = std::clamp(layer, 0, info.layers - 1);
  kvHead = std::clamp(kvHead, 0, info.kvHeads - 1);
  planEditor_->setCurrentLayer(layer);
  const bool layerChanged = layer != selection_.layer;
  const bool headChanged = kvHead != selection_.kvHead;
  selection_.layer = layer;
  selection_.kvHead = kvHead;
  if (headChanged && info.groupSize() > 0) selection_.queryHead = kvHead * info.groupSize();
  publishSelection();
  if (layerChanged || (headChanged && (!layerQuant_ || layerQuant_->hatHead(kvHead) < 0))) {
    recomputeLayer();
  } else if (headChanged) {
    pushLayerToViews();
    recomputeDrift();
  }
}

void MainWindow::runSearch(const SearchOptions& options) {
  if (!dump_) {
    showError(tr("budget search"), tr("open a dump first"));
    return;
  }
  budget_->setSearchMessage(tr("Searching…"));
  auto dump = dump_;
  searchRunner_->start<std::shared_ptr<const SearchResult>>(
      [dump, options](const Progress& progress) -> Expected<std::shared_ptr<const SearchResult>> {
        auto result = searchBudgets(*dump, options, progress);
        if (!result) return result.status();
        return std::make_shared<const SearchResult>(std::move(result).value());
      },
      [this](std::shared_ptr<const SearchResult> result) {
        budget_->setSearchResult(std::move(result));
        emit searchFinished();
      });
}

void MainWindow::runPlanSearch(const PlanSearchOptions& options) {
  if (!dump_) {
    showError(tr("plan search"), tr("open a dump first"));
    return;
  }
  budget_->setPlanMessage(tr("Mapping every candidate per layer, then choosing the plan…"));
  auto dump = dump_;
  planRunner_->start<std::shared_ptr<const PlanSearchResult>>(
      [dump, options](const Progress& progress) -> Expected<std::shared_ptr<const PlanSearchResult>> {
        auto result = planSearch(*dump, options, progress);
        if (!result) return result.status();
        return std::make_shared<const PlanSearchResult>(std::move(result).value());
      },
      [this](std::shared_ptr<const PlanSearchResult> result) {
        budget_->setPlanResult(std::move(result));
        emit planSearchFinished();
      });
}

QString MainWindow::e2eUnavailableReason() const {
  if (!dump_) return tr("Open a dump written by kvscope-cli record to run the end-to-end check.");
  const DumpInfo& info = dump_->info();
  const QString model = q(info.modelPath);
  if (!info.hasTokens || model.isEmpty())
    return tr("The end-to-end check needs a dump written by kvscope-cli record (with /tokens and model_path); "
              "this one has %1.")
        .arg(info.hasTokens ? tr("no model_path attribute") : tr("no /tokens"));
  if (!QFileInfo::exists(model))
    return tr("The end-to-end check needs a dump written by kvscope-cli record and its model file at %1, "
              "which is missing.")
        .arg(model);
  return {};
}

void MainWindow::runE2eCheck() {
  const QString why = e2eUnavailableReason();
  if (!why.isEmpty()) {
    showError(tr("end-to-end check"), why);
    return;
  }
  const Plan key = keyPlan();
  const Plan value = valuePlan();
  e2eSpecs_ = std::make_pair(key, value);
  budget_->setE2eResult(nullptr);
  budget_->setE2eMessage(tr("Replaying the recording through the model…"));
  auto dump = dump_;
  // start() cancels a run still going for older specs: newest request wins.
  e2eRunner_->start<std::shared_ptr<const E2eResult>>(
      [dump, key, value](const Progress& progress) -> Expected<std::shared_ptr<const E2eResult>> {
        const std::string& path = dump->info().modelPath;
        auto model = Model::load(path);
        if (!model) return model.status();
        E2eSetting setting;
        setting.key = key;
        setting.value = value;
        auto results = runE2e(*model, *dump, {setting}, {}, progress);
        if (!results) return results.status();
        return std::make_shared<const E2eResult>(std::move(results->front()));
      },
      [this](std::shared_ptr<const E2eResult> result) {
        budget_->setE2eResult(std::move(result));
        showStatus(tr("End-to-end check done."));
        emit e2eFinished();
      });
}

QWidget* MainWindow::buildPlanEditor() {
  // Per-layer overrides (quantization.md §12) under the spec panels, which edit the defaults.
  planEditor_ = new PlanEditor(keyPanel_, valuePanel_, this);
  const auto specChangedOn = [this](bool isKey) {
    if (isKey) {
      onKeySpecChanged();
    } else {
      updateStorage();
      scheduleRecompute();
    }
  };
  connect(planEditor_, &PlanEditor::overridesChanged, this, [this] {
    updateStorage();
    scheduleRecompute();
  });
  connect(planEditor_, &PlanEditor::planEntered, this, [this, specChangedOn](bool isKey, const QuantSpec& base) {
    (isKey ? keyPanel_ : valuePanel_)->setSpec(base);
    specChangedOn(isKey);
  });
  // A plan typed in a panel's spec field: the editor checks it against the dump first.
  for (SpecPanel* panel : {keyPanel_, valuePanel_}) {
    const bool isKey = panel == keyPanel_;
    connect(panel, &SpecPanel::planEntered, this, [this, panel, isKey, specChangedOn](const Plan& plan) {
      const QString error = planEditor_->enterPlan(isKey, plan);
      if (!error.isEmpty()) {
        panel->messageLabel()->setText(error + tr("\nThe plan in force is unchanged."));
        return;
      }
      panel->setSpec(plan.base);
      specChangedOn(isKey);
    });
  }
  return planEditor_;
}

Plan MainWindow::keyPlan() const { return planEditor_->keyPlan(); }

Plan MainWindow::valuePlan() const { return planEditor_->valuePlan(); }

void MainWindow::setPlans(const Plan& key, const Plan& value) {
  setSpecs(key.base, value.base);
  planEditor_->setOverrides(true, key.overrides);
  planEditor_->setOverrides(false, value.overrides);
  updateStorage();
  scheduleRecompute();
}

void MainWindow::showTab(int index) { tabs_->setCurrentIndex(index); }

bool MainWindow::showTab(const QString& name) {
  View* v = view(name);
  if (!v) return false;
  tabs_->setCurrentWidget(v->widget());
  return true;
}

View* MainWindow::view(const QString& name) const {
  for (View* v : views_) {
    if (v->exportName() == name) return v;
  }
  return nullptr;
}

void MainWindow::stepLayer(int delta) {
  if (dump_) select((selection_.layer + delta + dump_->info().layers) % dump_->info().layers, selection_.kvHead);
}

void MainWindow::stepHead(int delta) {
  if (dump_) select(selection_.layer, (selection_.kvHead + delta + dump_->info().kvHeads) % dump_->info().kvHeads);
}

void MainWindow::scheduleRecompute() {
  if (dump_) recomputeTimer_.start();
}

void MainWindow::updateStorage() {
  planEditor_->refresh();
  updateComparisonBar();
  if (!dump_) {
    storage_->setText(tr("Open a dump to see storage."));
    keyPanel_->setStorageText({});
    valuePanel_->setStorageText({});
    return;
  }
  const DumpInfo& info = dump_->info();
  const Plan keys = keyPlan(), values = valuePlan();
  budget_->setInputs(info, keys, values);
  const std::vector<QuantSpec> keyLayers = layerSpecsOf(keys, info.layers);
  const std::vector<QuantSpec> valueLayers = layerSpecsOf(values, info.layers);
  dataset_->setLayerSpecs(keyLayers, valueLayers, keys.base, values.base);
  if (e2eSpecs_ && (e2eSpecs_->first != keys || e2eSpecs_->second != values)) {
    // The shown (or running) end-to-end check is for other specs.
    e2eRunner_->cancel();
    e2eSpecs_.reset();
    budget_->setE2eResult(nullptr);
    budget_->setE2eMessage(tr("The specs changed; press Run to check these."));
  }
  // §5, §12: each layer stores under its own spec; a plan's bits per element are its storage over
  // all layers / all elements, and bytes per token sum the layers.
  std::vector<StorageCount> keyCounts, valueCounts;
  for (const QuantSpec& spec : keyLayers) keyCounts.push_back(storageFor(spec, info.kvHeads, info.tokens, info.headDim));
  for (const QuantSpec& spec : valueLayers) valueCounts.push_back(storageFor(spec, info.kvHeads, info.tokens, info.headDim));
  const StorageCount k = sumStorage(keyCounts);
  const StorageCount v = sumStorage(valueCounts);
  const double bytesPerToken = kvscope::bytesPerToken(keyCounts, valueCounts, info.tokens);
  const double baseline = static_cast<double>(info.bytesPerTokenFp16());
  // The panel edits the default: with overrides, say both the default's and the plan's figure.
  const auto panelStorage = [&](const QString& side, const Plan& plan, const StorageCount& all) {
    if (isUniform(plan)) {
      return tr("%1: %2 bits per element at %3 tokens").arg(side).arg(all.bitsPerElement(), 0, 'f', 3).arg(info.tokens);
    }
    const StorageCount base = storageFor(plan.base, info.kvHeads, info.tokens, info.headDim);
    return tr("%1: %2 bits per element for the default; %3 over the plan's layers, at %4 tokens")
        .arg(side)
        .arg(base.bitsPerElement(), 0, 'f', 3)
        .arg(all.bitsPerElement(), 0, 'f', 3)
        .arg(info.tokens);
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
                        .arg(info.tokens));
  storage_->setToolTip(tr("Bits per element of K and V and KV bytes per token over all layers at the open dump's length "
                          "(%1 tokens), and the compression against fp16. The capacity table computes them at its own "
                          "context length.")
                           .arg(info.tokens));
}

void MainWindow::recomputeLayer() {
  if (!dump_) return;
  if (!keyPanel_->isValid() || !valuePanel_->isValid()) {
    showStatus(tr("Fix the spec first: %1").arg(!keyPanel_->isValid() ? keyPanel_->messageLabel()->text()
                                                                       : valuePanel_->messageLabel()->text()));
    return;
  }
  if (!planEditor_->isValid()) {
    showStatus(tr("Fix the plan first: %1").arg(planEditor_->errorText()));
    return;
  }
  const DumpInfo& info = dump_->info();
  const int layer = selection_.layer;
  LayerTensorsPtr cached;
  if (auto it = layerCache_.find(layer); it != layerCache_.end()) cached = it->second;
  auto dump = dump_;
  // The layer in view is quantized with its own specs under the plans (§12).
  const QuantSpec key = specForLayer(keyPlan(), layer, info.layers);
  const QuantSpec value = specForLayer(valuePlan(), layer, info.layers);
  // Everything the visible views show is computed in the worker, for the selected kv head only
  // where the specs allow (core's computeViewData); the GUI thread then only draws.
  const ViewRequest request = viewRequest();
  // A layer not read yet, or read only for another head: when the views of one kv head need only
  // that head (both specs quantize per head, and A's too when a setting is pinned), read that head
  // first (K, V, its queries, pre-RoPE K when a view or a K spec uses it), show it, and read the
  // rest of the layer afterwards on the fill lane; else read the whole layer.
  const LayerNeeds needs = layerNeeds(request);
  if (cached && !cached->whole() && !needs.metBy(*cached, request.kvHead)) cached.reset();
  const int64_t keyBytes = int64_t{info.kvHeads} * info.tokens * info.headDim * int64_t{sizeof(float)};
  const bool headFirst = !cached && needs.perHead && info.kvHeads > 1 && keyBytes >= headFirstBytes_;
  if (!cached) {
    fillRunner_->cancel();  // this read outranks the rest of another layer
    fillingLayer_ = -1;
  }
  const int64_t kvHead = request.kvHead;
  auto pool = layerPool_;
  layerRunner_->start<LayerQuantPtr>(
      [dump, cached, key, value, layer, request, pool, headFirst, kvHead,
       preRope = needs.preRope](const Progress& progress) -> Expected<LayerQuantPtr> {
        LayerTensorsPtr tensors = cached;
        if (!tensors) {
          auto read = headFirst ? readLayerHead(*dump, layer, kvHead, preRope, progress)
                                : readLayer(*dump, layer, progress);
          if (!read) return read.status();
          tensors = *read;
        }
        return pool->compute(dump->info(), tensors, key, value, request, progress);
      },
      [this](LayerQuantPtr result) {
        cacheLayer(layerCache_, result->tensors, selection_.layer);
        if (result->tensors->layer != selection_.layer || result->hatHead(selection_.kvHead) < 0) return;
        layerQuant_ = std::move(result);
        pushLayerToViews();
        recomputeDrift();
        if (!layerQuant_->tensors->whole()) {
          // What was read for one head may no longer be enough: while it was read, a setting that
          // needs the whole layer was pinned again (undo), or a view switched to pre-RoPE K. Then
          // read again for what is asked now (a layer in the cache that falls short is dropped).
          const ViewRequest now = viewRequest();
          if (!layerNeeds(now).metBy(*layerQuant_->tensors, now.kvHead)) {
            recomputeLayer();
            return;
          }
          // The views have their data; the rest of the layer follows on the fill lane (nice 19, so
          // their paint gets the CPU first), so that other heads and specs of it read nothing. A
          // fill of this layer already under way goes on (a new one would start again at head 0).
          auto part = layerQuant_->tensors;
          auto source = dump_;
          const bool filling = fillRunner_->busy() && fillingLayer_ == part->layer;
          if (auto it = layerCache_.find(part->layer);
              !filling && (it == layerCache_.end() || !it->second->whole())) {
            fillingLayer_ = part->layer;
            fillRunner_->start<LayerTensorsPtr>(
                [source, part](const Progress& progress) { return completeLayer(*source, *part, progress); },
                [this](LayerTensorsPtr whole) {
                  fillingLayer_ = -1;
                  cacheLayer(layerCache_, whole, selection_.layer);
                });
          }
        }
        emit layerReady();
        if (summaryPending_) {
          summaryPending_ = false;
          recomputeSummary();
        }
      });
}

ViewRequest MainWindow::viewRequest() const {
  ViewRequest request;
  request.kvHead = selection_.kvHead;
  const ViewContext context = viewContext();
  for (const View* v : views_) v->fillRequest(request, context);
  return request;
}

MainWindow::LayerNeeds MainWindow::layerNeeds(const ViewRequest& request) const {
  LayerNeeds needs;
  if (!dump_) return needs;
  const DumpInfo& info = dump_->info();
  const int layer = selection_.layer;
  const QuantSpec key = specForLayer(keyPlan(), layer, info.layers);
  const QuantSpec value = specForLayer(valuePlan(), layer, info.layers);
  const auto& pinned = comparison_->pinned();
  const bool pinnedPreRope = pinned && specForLayer(pinned->key, layer, info.layers).prerope;
  needs.preRope = info.hasKeyPreRope && (key.prerope || pinnedPreRope || request.keyPreRopeHat ||
                                         heatmap_->tensor() == ViewTensor::KeyPreRope ||
                                         histogram_->tensor() == ViewTensor::KeyPreRope);
  needs.perHead = !request.wholeLayer && quantizesPerHead(key, info.headDim) && quantizesPerHead(value, info.headDim);
  if (pinned) {
    needs.perHead = needs.perHead && quantizesPerHead(specForLayer(pinned->key, layer, info.layers), info.headDim) &&
                    quantizesPerHead(specForLayer(pinned->value, layer, info.layers), info.headDim);
  }
  return needs;
}

bool MainWindow::LayerNeeds::metBy(const LayerTensors& tensors, int kvHead) const {
  if (tensors.whole()) return !(preRope && tensors.keyPreRopeSkipped);
  return perHead && tensors.headIndex(kvHead) >= 0 && !(preRope && tensors.keyPreRopeSkipped);
}

void MainWindow::ensurePreRopeHat() {
  if (!layerQuant_ || layerQuant_->keyPreRopeHat) return;
  if (!layerQuant_->tensors->keyPreRope && !layerQuant_->tensors->keyPreRopeSkipped) return;
  if (heatmap_->tensor() == ViewTensor::KeyPreRope || histogram_->tensor() == ViewTensor::KeyPreRope) {
    recomputeLayer();
  }
}

void MainWindow::pushLayerToViews() {
  if (!layerQuant_) return;
  const ViewContext context = viewContext();
  for (View* v : views_) v->takeLayer(layerQuant_, context);
}

ViewContext MainWindow::viewContext() const {
  ViewContext context;
  if (dump_) {
    const DumpInfo& info = dump_->info();
    context.info = &info;
    context.key = specForLayer(keyPlan(), selection_.layer, info.layers);
    context.value = specForLayer(valuePlan(), selection_.layer, info.layers);
  }
  context.selection = selection_;
  context.tokenText = tokenText_;
  return context;
}

void MainWindow::publishSelection() {
  dataset_->setSelection(selection_.layer, selection_.kvHead);
  for (View* v : views_) v->takeSelection(selection_);
}

void MainWindow::recomputeDrift() {
  if (!dump_ || !layerQuant_) return;
  comparison_->follow(layerQuant_, selection_.queryHead, selection_.queryIndex);
  const DumpInfo& info = dump_->info();
  if (!info.hasQuery || !layerQuant_->tensors->query) {
    drift_->setMessage(tr("This dump has no queries, so attention cannot be reconstructed."));
    emit driftReady();
    return;
  }
  auto layer = layerQuant_;
  const int queryHead = std::clamp(selection_.queryHead, 0, info.heads - 1);
  const int queryIndex = selection_.queryRow(info.queries);
  const int kvHead = queryHead / std::max(1, info.groupSize());
  const int64_t hatHead = layer->hatHead(kvHead);
  // The layer lane is computing that head (or reading it, for a layer read head first); it calls back.
  if (hatHead < 0 || layer->tensors->headIndex(kvHead) < 0) return;
  const double scale = info.softmaxScale;
  // The row the layer worker computed shows at once; the position series (one kv head's
  // attention over every query, much longer) follows from the drift lane.
  const bool haveRow = layer->row && layer->row->queryHead == queryHead && layer->row->queryIndex == queryIndex;
  if (haveRow) {
    auto rowOnly = std::make_shared<DriftData>();
    rowOnly->layer = layer->tensors->layer;
    rowOnly->row = std::shared_ptr<const AttentionRowDetail>(layer, &*layer->row);  // shares, keeps `layer` alive
    drift_->setData(std::move(rowOnly), tokenText_);
  }
  auto slices = driftSlices_;
  driftRunner_->start<DriftDataPtr>(
      [layer, queryHead, queryIndex, hatHead, haveRow, scale, slices](const Progress& progress) -> Expected<DriftDataPtr> {
        const LayerTensors& t = *layer->tensors;
        // core's computeDrift slices the kv head (this lane's own copies, kept while the layer
        // and head stay) and computes the row, unless the layer worker has it, and the series.
        DriftInput input;
        input.key = &t.key;
        input.value = &t.value;
        input.query = &*t.query;
        input.keyHat = &layer->keyHat;
        input.valueHat = &layer->valueHat;
        input.hatHead = hatHead;
        input.queryHead = queryHead;
        input.queryIndex = queryIndex;
        // A layer read head first holds only that head (LayerTensors::firstHead).
        input.firstHead = t.firstHead;
        input.kvHeads = t.kvHeads;
        input.softmaxScale = scale;
        input.row = !haveRow;
        input.owner = layer->tensors;
        auto computed = computeDrift(input, *slices, progress);
        if (!computed) return computed.status();
        auto drift = std::make_shared<DriftData>();
        drift->layer = t.layer;
        drift->row = haveRow ? std::shared_ptr<const AttentionRowDetail>(layer, &*layer->row)
                             : std::make_shared<const AttentionRowDetail>(std::move(*computed->row));
        drift->series = std::move(computed->series);
        return DriftDataPtr(std::move(drift));
      },
      [this, layer](DriftDataPtr drift) {
        if (layer != layerQuant_) return;
        drift_->setData(std::move(drift), tokenText_);
        emit driftReady();
      });
}

void MainWindow::recomputeSummary() {
  if (!dump_ || !keyPanel_->isValid() || !valuePanel_->isValid() || !planEditor_->isValid()) return;
  auto dump = dump_;
  const DumpInfo& info = dump->info();
  summary_->reset(info.layers);
  EvalOptions options;
  options.key = keyPlan();
  options.value = valuePlan();
  // The selected layer first, so its row appears before the rest.
  std::vector<int> order{selection_.layer};
  for (int l = 0; l < info.layers; ++l) {
    if (l != selection_.layer) order.push_back(l);
  }
  options.layers = order;
  options.keepLayerOrder = true;
  // eval's own loop (core/report/eval.h), each layer's row posted as soon as it is done.
  summaryRunner_->startStreaming(
      [this, dump, options](const Progress& progress, const JobRunner::Post& post) -> Status {
        EvalOptions streamed = options;
        streamed.onLayer = [this, &post](const LayerResult& result) {
          post([this, result] { summary_->addLayer(result); });
        };
        auto evaluated = evaluate(*dump, streamed, progress);
        return evaluated ? Status::ok() : evaluated.status();
      },
      [this] { emit summaryFinished(); });
}

bool MainWindow::summaryComplete() const {
  return dump_ && static_cast<int>(summary_->layers().size()) == dump_->info().layers && !summaryRunner_->busy();
}

std::vector<ExportableView*> MainWindow::exportableViews() const { return {views_.begin(), views_.end()}; }

void MainWindow::exportCurrentView() {
  auto* view = dynamic_cast<ExportableView*>(tabs_->currentWidget());
  if (!view) return;
  if (!view->hasContent()) {
    showError(tr("export"), tr("this view has nothing to export yet"));
    return;
  }
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Export view"), view->exportName() + QStringLiteral(".png"),
      tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf);;CSV data (*.csv)"));
  if (path.isEmpty()) return;
  const auto format = exportFormatFor(path);
  if (!format) {
    showError(tr("export"), tr("%1: use a .png, .svg, .pdf or .csv file name").arg(path));
    return;
  }
  ExportOptions options;
  options.caption = exportCaption();
  options.metadata = exportMetadata();
  if (*format != ExportFormat::Csv && interactive_) {
    ExportSizeDialog dialog(tr("Export size"), this);
    if (dialog.exec() != QDialog::Accepted) return;
    auto size = dialog.exportSize();
    if (!size) return;
    options.size = *size;
  }
  const Status s = exportView(*view, path, *format, options, dump_ ? q(dump_->info().path) : QString());
  if (!s.isOk()) showError(tr("export"), q(s.message()));
  else showStatus(tr("Wrote %1.").arg(path));
}

void MainWindow::exportAllInteractive() {
  ExportSizeDialog dialog(tr("Export all views"), this);
  if (dialog.exec() != QDialog::Accepted) return;
  const auto size = dialog.exportSize();
  if (!size) return;
  const QString folder = QFileDialog::getExistingDirectory(this, tr("Export all views into"));
  if (folder.isEmpty()) return;
  const Status s = exportAll(folder, {}, *size);
  if (!s.isOk()) showError(tr("export"), q(s.message()));
  else showStatus(tr("Exported every view into %1.").arg(folder));
}

void MainWindow::exportE2eTableInteractive() {
  if (!budget_->e2eResult()) return;
  const QString path = QFileDialog::getSaveFileName(this, tr("Export the end-to-end table"), QStringLiteral("e2e-layers.csv"),
                                                    tr("CSV data (*.csv)"));
  if (path.isEmpty()) return;
  const Status s = exportText(path, (csvHeaderComment(exportMetadata()) + budget_->e2eCsv()).toUtf8(),
                              dump_ ? q(dump_->info().path) : QString());
  if (!s.isOk()) showError(tr("export"), q(s.message()));
  else showStatus(tr("Wrote %1.").arg(path));
}

void MainWindow::applyCandidate(bool key, const QString& text) {
  auto spec = parseSpec(text.toStdString());
  if (!spec) {
    showError(tr("Pareto chart"), q(spec.status().message()));
    return;
  }
  // The candidate was measured on every layer: it replaces that side's plan overrides too.
  planEditor_->setOverrides(key, {});
  if (key) {
    keyPanel_->setSpec(*spec);
    onKeySpecChanged();
  } else {
    valuePanel_->setLinkedToKey(false);
    valuePanel_->setSpec(*spec);
    updateStorage();
    scheduleRecompute();
  }
  recordSpecChange(key ? tr("key from the Pareto chart") : tr("value from the Pareto chart"), nullptr);
  showStatus(tr("Applied %1 to %2 from the Pareto chart.").arg(text, key ? tr("K") : tr("V")));
}

QString MainWindow::exportCaption() const {
  if (!dump_) return {};
  return tr("%1 · layer %2 · kv head %3 · K %4 · V %5")
      .arg(QFileInfo(q(dump_->info().path)).fileName())
      .arg(selection_.layer)
      .arg(selection_.kvHead)
      .arg(q(toString(keyPlan())), q(toString(valuePlan())));
}

QStringList MainWindow::exportMetadata() const {
  QStringList lines;
  if (dump_) {
    const DumpInfo& info = dump_->info();
    lines << QStringLiteral("dump: ") + q(info.path);
    if (!info.model.empty()) lines << QStringLiteral("model: ") + q(info.model);
    lines << QStringLiteral("layer: %1").arg(selection_.layer) << QStringLiteral("kv head: %1").arg(selection_.kvHead);
  }
  lines << QStringLiteral("key: ") + q(toString(keyPlan())) << QStringLiteral("value: ") + q(toString(valuePlan()));
  lines << QStringLiteral("kvscope: ") + QStringLiteral(KVSCOPE_VERSION);
  return lines;
}

Status MainWindow::exportAll(const QString& folder, const QStringList& views, QSize size) {
  ExportSize pixels;
  pixels.pixels = size;
  return exportAll(folder, views, pixels);
}

Status MainWindow::exportAll(const QString& folder, const QStringList& views, const ExportSize& size) {
  if (!dump_) return Status::invalidArgument("export: no dump is open");
  if (!QDir().mkpath(folder)) return Status::ioError(folder.toStdString() + ": cannot create the folder");
  const QString protectedPath = q(dump_->info().path);
  const QDir dir(folder);
  ExportOptions options;
  options.size = size;
  options.caption = exportCaption();
  options.metadata = exportMetadata();
  for (ExportableView* view : exportableViews()) {
    if (!views.isEmpty() && !views.contains(view->exportName())) continue;
    if (!view->hasContent()) continue;
    for (ExportFormat f : {ExportFormat::Png, ExportFormat::Svg, ExportFormat::Pdf, ExportFormat::Csv}) {
      const QString path = dir.filePath(view->exportName() + QLatin1Char('.') + exportSuffix(f));
      KVS_RETURN_IF_ERROR(exportView(*view, path, f, options, protectedPath));
    }
  }
  const QString specs = QStringLiteral("key: %1\nvalue: %2\n")
                            .arg(q(toString(keyPlan())), q(toString(valuePlan())));
  KVS_RETURN_IF_ERROR(exportText(dir.filePath(QStringLiteral("specs.txt")), specs.toUtf8(), protectedPath));
  if (summaryComplete()) {
    const DumpInfo& info = dump_->info();
    EvalReport report;
    report.dump = info;
    report.key = keyPlan();
    report.value = valuePlan();
    // As kvscope-cli eval reports a plan (§8, §12): planStorage, and bytes per token over the layers.
    report.keyStorage = planStorage(report.key, info.layers, info.kvHeads, info.tokens, info.headDim);
    report.valueStorage = planStorage(report.value, info.layers, info.kvHeads, info.tokens, info.headDim);
    report.bytesPerTokenBaseline = static_cast<double>(info.bytesPerTokenFp16());
    auto keyLayers = planLayerStorage(report.key, info.layers, info.kvHeads, info.tokens, info.headDim);
    if (!keyLayers) return keyLayers.status();
    auto valueLayers = planLayerStorage(report.value, info.layers, info.kvHeads, info.tokens, info.headDim);
    if (!valueLayers) return valueLayers.status();
    report.bytesPerTokenQuantized = bytesPerToken(*keyLayers, *valueLayers, info.tokens);
    report.layers = summary_->layers();
    report.summary = summarize(report.layers);
    KVS_RETURN_IF_ERROR(exportText(dir.filePath(QStringLiteral("report.json")), QByteArray::fromStdString(toJson(report)),
                                   protectedPath));
    // kvscope-cli eval's CSV, after the same metadata comment as every exported CSV.
    KVS_RETURN_IF_ERROR(exportText(dir.filePath(QStringLiteral("report.csv")),
                                   csvHeaderComment(options.metadata).toUtf8() + QByteArray::fromStdString(toCsv(report)),
                                   protectedPath));
  }
  KVS_RETURN_IF_ERROR(exportComparison(folder, protectedPath));
  return Status::ok();
}

std::string MainWindow::sessionJson() const {
  nlohmann::ordered_json j;
  j["kvscope_session"] = 1;
  j["dump"] = dump_ ? dump_->info().path : std::string();
  if (mapping_) j["mapping"] = nlohmann::json::parse(mappingToJson(*mapping_), nullptr, false);
  j["key"] = toString(keyPlan());  // plan strings (§12); a plain spec is a one-part plan
  j["value"] = toString(valuePlan());
  j["value_same_as_key"] = valuePanel_->linkedToKey();
  j["selection"] = {{"layer", selection_.layer},       {"kv_head", selection_.kvHead},
                    {"query_head", selection_.queryHead}, {"query_index", selection_.queryIndex},
                    {"channel", selection_.channel},   {"token", selection_.token}};
  // Each view's state under its name, by name (ui/views/view.h); the tab by its view's name.
  nlohmann::ordered_json views;
  for (View* v : views_) {
    if (v->widget() == tabs_->currentWidget()) views["tab"] = v->exportName().toStdString();
  }
  for (const View* v : views_) {
    const nlohmann::json state = v->saveState();
    if (!state.empty()) views[v->exportName().toStdString()] = nlohmann::ordered_json::parse(state.dump());
  }
  j["views"] = views;
  writeComparisonSession(j);
  return j.dump(2) + "\n";
}

Status MainWindow::saveSession(const QString& path) {
  Status s = writeFileAtomic(path.toStdString(), sessionJson());
  if (s.isOk()) sessionPath_ = path;  // Ctrl+S writes here from now on
  return s;
}

Status MainWindow::loadSession(const QString& path) {
  auto text = readTextFile(path.toStdString());
  if (!text) return text.status();
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  const std::string origin = path.toStdString();
  if (j.is_discarded() || !j.is_object() || j.value("kvscope_session", 0) != 1) {
    return Status::invalidData(origin + ": not a kvscope session (no \"kvscope_session\": 1)");
  }
  try {
    // Plans (§12); sessions written before plans hold plain specs, which are one-part plans.
    auto keyParsed = parsePlan(j.value("key", std::string("none")));
    if (!keyParsed) return keyParsed.status().withContext(origin + ": key");
    auto valueParsed = parsePlan(j.value("value", std::string("none")));
    if (!valueParsed) return valueParsed.status().withContext(origin + ": value");
    const QuantSpec* key = &keyParsed->base;
    const QuantSpec* value = &valueParsed->base;
    setSpecs(*key, *value, tr("load session"));
    valuePanel_->setLinkedToKey(j.value("value_same_as_key", false));
    sessionPath_ = path;
    if (j.contains("selection")) {
      const auto& s = j["selection"];
      selection_.layer = s.value("layer", 0);
      selection_.kvHead = s.value("kv_head", 0);
      selection_.queryHead = s.value("query_head", 0);
      selection_.queryIndex = s.value("query_index", -1);
      selection_.channel = s.value("channel", 0);
      selection_.token = s.value("token", 0);
    }
    // setSpecs above set the defaults and cleared the overrides; the session's follow.
    planEditor_->setOverrides(true, keyParsed->overrides);
    planEditor_->setOverrides(false, valueParsed->overrides);
    KVS_RETURN_IF_ERROR(readComparisonSession(j, origin));
    updateStorage();
    if (j.contains("views") && j["views"].is_object()) {
      const nlohmann::json v = viewStatesByName(j["views"]);
      if (v.contains("tab") && v["tab"].is_string()) showTab(q(v["tab"].get<std::string>()));
      for (View* view : views_) {
        const std::string name = view->exportName().toStdString();
        if (v.contains(name) && v[name].is_object()) view->loadState(v[name]);
      }
    }
    std::optional<Mapping> mapping;
    if (j.contains("mapping") && j["mapping"].is_object()) {
      auto parsed = parseMapping(j["mapping"].dump(), origin + ": mapping");
      if (!parsed) return parsed.status();
      mapping = *parsed;
    }
    const std::string dumpPath = j.value("dump", std::string());
    if (!dumpPath.empty()) {
      if (!QFileInfo::exists(q(dumpPath))) {
        // The rest of the session still applies; say plainly what is missing.
        showError(tr("session"), tr("%1: the dump %2 was moved or deleted; specs and view settings were restored, "
                                    "open the dump from its new place")
                                     .arg(path, q(dumpPath)));
        return Status::ok();
      }
      pendingSessionMessage_ = tr("(session %1)").arg(QFileInfo(path).fileName());
      openDump(q(dumpPath), mapping);
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::invalidData(origin + ": " + e.what());
  }
  return Status::ok();
}

void MainWindow::openInteractive() {
  QSettings settings;
  const QString path = QFileDialog::getOpenFileName(this, tr("Open KV dump"),
                                                    settings.value(QStringLiteral("lastFolder")).toString(),
                                                    tr("HDF5 files (*.h5 *.hdf5 *.hdf);;All files (*)"));
  if (path.isEmpty()) return;
  settings.setValue(QStringLiteral("lastFolder"), QFileInfo(path).absolutePath());
  // A file without kvdump_version goes through the mapping dialog.
  auto tree = listDatasets(path.toStdString());
  if (tree && !tree->canonical) {
    openWithMappingInteractive(path);
    return;
  }
  openDump(path);
}

void MainWindow::openWithMappingInteractive(const QString& path) {
  auto tree = listDatasets(path.toStdString());
  if (!tree) {
    showError(tr("open"), q(tree.status().message()));
    return;
  }
  auto* dialog = new MappingDialog(path, *tree, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &MappingDialog::mappingAccepted, this, [this, path](const Mapping& mapping) {
    openDump(path, mapping);
  });
  dialog->open();
}

void MainWindow::addRecent(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value(QStringLiteral("recentFiles")).toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecent) recent.removeLast();
  settings.setValue(QStringLiteral("recentFiles"), recent);
  rebuildRecentMenu();
}

QStringList MainWindow::recentFiles() {
  // Files that were moved or deleted (a test's temporary folder) leave the list.
  QSettings settings;
  const QStringList stored = settings.value(QStringLiteral("recentFiles")).toStringList();
  QStringList kept;
  for (const QString& path : stored) {
    if (QFileInfo::exists(path)) kept << path;
  }
  if (kept != stored) settings.setValue(QStringLiteral("recentFiles"), kept);
  return kept;
}

void MainWindow::rebuildRecentMenu() {
  if (!recentMenu_) return;
  recentMenu_->clear();
  const QStringList recent = recentFiles();
  for (const QString& path : recent) {
    recentMenu_->addAction(path, this, [this, path] { openDump(path); });
  }
  recentMenu_->setEnabled(!recent.isEmpty());
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls() && event->mimeData()->urls().value(0).isLocalFile()) {
    event->acceptProposedAction();
  }
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QString path = event->mimeData()->urls().value(0).toLocalFile();
  if (path.isEmpty()) return;
  event->acceptProposedAction();
  if (path.endsWith(QStringLiteral(".json"), Qt::CaseInsensitive)) {
    const Status s = loadSession(path);
    if (!s.isOk()) showError(tr("session"), q(s.message()));
    return;
  }
  auto tree = listDatasets(path.toStdString());
  if (tree && !tree->canonical && interactive_) openWithMappingInteractive(path);
  else openDump(path);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("window/state"), saveState());
  for (JobRunner* r : runners_) r->cancel();
  QMainWindow::closeEvent(event);
}

}  // namespace kvscope::ui
