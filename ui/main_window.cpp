// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QKeySequence>
#include <QClipboard>
#include <QMimeData>
#include <QLabel>
#include <QMenuBar>
#include <QPushButton>
#include <QMessageBox>
#include <QMimeData>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextBrowser>
#include <QUndoStack>
#include <QVBoxLayout>

#include <algorithm>

#include "core/io/dataset_tree.h"
#include "ui/export/exporter.h"
#include "ui/export_all.h"
#include "ui/views/view.h"
#include "ui/views/view_registry.h"
#include "ui/widgets/comparison_bar.h"
#include "ui/widgets/dataset_panel.h"
#include "ui/widgets/lane_status.h"
#include "ui/widgets/preset_menu.h"
#include "ui/widgets/recent_files.h"
#include "ui/widgets/shortcut_guard.h"
#include "ui/widgets/export_dialog.h"
#include "ui/widgets/mapping_dialog.h"
#include "ui/widgets/plan_editor.h"
#include "ui/widgets/quantization_dock.h"
#include "ui/widgets/record_dialog.h"
#include "ui/widgets/steady_tab_widget.h"
#include "ui/workers/job_runner.h"

// The manual (docs/gui.md and its images) is compiled into kvscope_ui, a static library: its
// resources must be registered by hand, and Q_INIT_RESOURCE may not sit inside a namespace.
static void initManualResource() { Q_INIT_RESOURCE(manual); }

namespace kvscope::ui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

MainWindow::MainWindow(bool interactive, QWidget* parent) : QMainWindow(parent), interactive_(interactive) {
  initManualResource();
  setObjectName(QStringLiteral("kvscopeMainWindow"));
  setWindowTitle(QStringLiteral("kvscope"));
  setAcceptDrops(true);
  resize(1400, 900);
  session_ = new Session(this);
  buildViews();
  // The window takes a new dump before the feed starts computing for it (connection order).
  connect(session_, &Session::dumpChanged, this, &MainWindow::onDumpChanged);
  feed_ = new ViewFeed(
      session_,
      [this] {
        ViewFeed::Needs needs;
        needs.request.kvHead = session_->selection().kvHead;
        const ViewContext context = viewContext();
        for (const View* v : views_) {
          v->fillRequest(needs.request, context);
          needs.showsPreRope = needs.showsPreRope || v->showsPreRope();
        }
        return needs;
      },
      this);
  // Announced once the views and the feed have both taken the dump.
  connect(session_, &Session::dumpChanged, this, &MainWindow::dumpOpened);
  buildDocks();
  buildStatusBar();
  buildMenus();
  connectSession();
  // Ctrl+E and Ctrl+Shift+E export even while a spin box or a text field has the focus.
  qApp->installEventFilter(new ShortcutGuard(this, {QKeySequence(tr("Ctrl+E")), QKeySequence(tr("Ctrl+Shift+E"))}, this));
  QSettings settings;
  restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
  restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
}

MainWindow::~MainWindow() {
  for (JobRunner* r : status_->lanes()) r->cancel();
  for (JobRunner* r : status_->lanes()) r->waitForIdle();
}

void MainWindow::buildViews() {
  tabs_ = new SteadyTabWidget(this);
  // The tabs are the registry's views, in its order; each is attached to the session it shows.
  for (const ViewRegistration& r : viewRegistry()) {
    View* v = r.make(this);
    v->attach(session_, View::Hooks{[this] { feed_->viewsChanged(); }, [this] { emit exportReady(); }});
    views_.push_back(v);
    tabs_->addTab(v->widget(), v->tabTitle());
  }
  abBar_ = new ComparisonBar(this);
  auto* central = new QWidget(this);
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(abBar_);
  layout->addWidget(tabs_, 1);
  setCentralWidget(central);
  connect(abBar_, &ComparisonBar::pinRequested, session_, &Session::pinAsA);
  connect(abBar_, &ComparisonBar::unpinRequested, session_, &Session::unpinA);
  connect(abBar_, &ComparisonBar::swapRequested, session_, &Session::swapAB);
}

void MainWindow::buildDocks() {
  dataset_ = new DatasetPanel(this);
  auto* datasetDock = new QDockWidget(tr("Dataset"), this);
  datasetDock->setObjectName(QStringLiteral("datasetDock"));
  datasetDock->setWidget(dataset_);
  addDockWidget(Qt::LeftDockWidgetArea, datasetDock);
  connect(dataset_, &DatasetPanel::selected, this, [this](int layer, int head) {
    session_->select(layer, head < 0 ? session_->selection().kvHead : head);
  });

  quantization_ = new QuantizationDock(this);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(quantization_);
  scroll->setWidgetResizable(true);
  // Notes and errors wrap in the dock's width; nothing is cut and nothing scrolls sideways.
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  // ... so the dock is never narrower than the controls: at the default 1400x900 they were cut
  // at the right edge. Combo boxes and fields shrink to a few characters; labels wrap.
  scroll->setMinimumWidth(quantization_->minimumSizeHint().width() + scroll->verticalScrollBar()->sizeHint().width() +
                          2 * scroll->frameWidth());
  auto* specDock = new QDockWidget(tr("Quantization"), this);
  specDock->setObjectName(QStringLiteral("specDock"));
  specDock->setWidget(scroll);
  addDockWidget(Qt::RightDockWidgetArea, specDock);
  connect(quantization_, &QuantizationDock::edited, session_,
          [this](const Setting& s, const QString& what, bool mergeable) { session_->edit(s, what, mergeable); });
  connect(quantization_, &QuantizationDock::engineEntered, session_, &Session::applyEngine);
  quantization_->showSetting(session_->setting(), {}, nullptr, session_->valuePlan());
}

void MainWindow::buildStatusBar() {
  status_ = new LaneStatus(statusBar());
  connect(status_, &LaneStatus::cancelled, this, [this] { showStatus(tr("Cancelled.")); });
  connect(status_, &LaneStatus::failed, this, &MainWindow::showError);
  status_->track(session_->openRunner());
  status_->track(session_->pinRunner());
  for (JobRunner* r : feed_->runners()) status_->track(r);
  for (View* v : views_) {
    for (JobRunner* r : v->lanes()) status_->track(r);
  }
}

bool MainWindow::busy() const { return status_->busy(); }

bool MainWindow::comparisonComplete() const {
  return !session_->pinRunner()->busy() && feed_->comparisonComplete();
}

void MainWindow::connectSession() {
  connect(session_, &Session::settingChanged, this, &MainWindow::onSettingChanged);
  connect(session_, &Session::pinnedChanged, this, &MainWindow::showComparison);
  connect(session_, &Session::selectionChanged, this, &MainWindow::onSelectionChanged);
  connect(session_, &Session::pointedAt, this, [this](const Evidence& e) {
    const bool preRope = session_->dump() && session_->dump()->info().hasKeyPreRope;
    for (View* v : views_) v->takeFocus(e, preRope);
  });
  connect(session_, &Session::errorReported, this, &MainWindow::showError);
  connect(session_, &Session::statusReported, this, &MainWindow::showStatus);
  connect(feed_, &ViewFeed::cleared, this, [this](const QString& reason) {
    if (reason.isEmpty()) return;  // a new dump: the views took it already
    for (View* v : views_) v->clearResults(tr("The setting does not fit this dump: %1").arg(reason));
  });
  connect(feed_, &ViewFeed::layerShown, this, [this](const LayerQuantPtr& layer) {
    const ViewContext context = viewContext();
    for (View* v : views_) v->takeLayer(layer, context);
  });
  connect(feed_, &ViewFeed::layerReady, this, &MainWindow::layerReady);
  connect(feed_, &ViewFeed::driftShown, this, [this](const DriftDataPtr& drift, const QString& message) {
    for (View* v : views_) v->takeDrift(drift, message);
  });
  connect(feed_, &ViewFeed::driftReady, this, &MainWindow::driftReady);
  connect(feed_, &ViewFeed::summaryChanged, this, [this] {
    const int layers = session_->dump() ? session_->dump()->info().layers : 0;
    for (View* v : views_) v->takeSummary(feed_->current()->summary(), layers);
  });
  connect(feed_, &ViewFeed::summaryFinished, this, &MainWindow::summaryFinished);
  connect(feed_, &ViewFeed::comparisonChanged, this, &MainWindow::showComparison);
  connect(feed_, &ViewFeed::comparisonReady, this, &MainWindow::comparisonReady);
}

ViewContext MainWindow::viewContext() const {
  ViewContext context;
  context.selection = session_->selection();
  context.tokenText = session_->tokenText();
  if (const auto& dump = session_->dump()) {
    const DumpInfo& info = dump->info();
    context.info = &info;
    context.key = specForLayer(session_->keyPlan(), context.selection.layer, info.layers);
    context.value = specForLayer(session_->valuePlan(), context.selection.layer, info.layers);
  }
  return context;
}

void MainWindow::onDumpChanged() {
  // One transaction: every view drops the old dump's results and takes the new one's shape
  // before anything of the new dump is shown; then the docks follow.
  const auto& dump = session_->dump();
  const DumpInfo& info = dump->info();
  const ViewContext context = viewContext();
  for (View* v : views_) v->takeDump(dump, context);
  if (!session_->settingProblem().isEmpty()) {
    for (View* v : views_) v->clearResults(tr("The setting does not fit this dump: %1").arg(session_->settingProblem()));
  }
  dataset_->setDump(info);
  quantization_->setDump(&info);
  setWindowTitle(QStringLiteral("kvscope — %1").arg(QFileInfo(q(info.path)).fileName()));
  recent_->add(q(info.path));
  presets_->refresh(KvShape{info.headDim, info.layers, info.kvHeads});
  onSettingChanged();
  onSelectionChanged();
  showComparison();
}

void MainWindow::onSettingChanged() {
  const auto& dump = session_->dump();
  const DumpInfo* info = dump ? &dump->info() : nullptr;
  const Plan key = session_->keyPlan(), value = session_->valuePlan();
  quantization_->showSetting(session_->setting(), session_->engineRefusal(), info, value);
  if (info) dataset_->setLayerSpecs(layerSpecsOf(key, info->layers), layerSpecsOf(value, info->layers), key.base, value.base);
  abBar_->setSettings(session_->describePinned(), describeSetting(key, value));
  if (!info) return;
  const ViewContext context = viewContext();
  for (View* v : views_) v->takeSetting(context);
}

void MainWindow::onSelectionChanged() {
  const Selection& s = session_->selection();
  dataset_->setSelection(s.layer, s.kvHead);
  quantization_->setCurrentLayer(s.layer);
  for (View* v : views_) v->takeSelection(s);
}

void MainWindow::showComparison() {
  const ComparisonData a = feed_->comparison();
  for (View* v : views_) v->takeComparison(a);
  abBar_->setSettings(session_->describePinned(), describeSetting(session_->keyPlan(), session_->valuePlan()));
  // Swapping swaps two settings of one dump (Session::swapAB refuses it for A on another dump).
  const bool other = session_->pinnedOnOtherDump();
  abBar_->swapButton()->setEnabled(!other);
  abBar_->swapButton()->setToolTip(other ? tr("A is on another dump: swapping swaps two settings of one dump")
                                         : tr("Make A the current setting (the controls) and pin the current one as A."));
}

// ---- Menus -------------------------------------------------------------------------------------

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open…"), this, &MainWindow::openInteractive);
  open->setShortcut(QKeySequence::Open);
  open->setToolTip(tr("Open a KV dump (HDF5)."));
  file->addAction(tr("Open with &mapping…"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a non-canonical HDF5 file"),
                                                      QSettings().value(QStringLiteral("lastFolder")).toString());
    if (!path.isEmpty()) openWithMappingInteractive(path);
  });
  file->addAction(tr("Open the built-in &sample"), this, &MainWindow::openSample);
  QAction* recordAction = file->addAction(tr("Recor&d from model…"), this, &MainWindow::recordFromModel);
  recordAction->setObjectName(QStringLiteral("recordFromModel"));
  recordAction->setToolTip(tr("Run a GGUF, Hugging Face or llama2.c model on a text and open its cache as a dump."));
  recent_ = new RecentFilesMenu(this);
  connect(recent_, &RecentFilesMenu::fileChosen, this, [this](const QString& path) { openDump(path); });
  file->addMenu(recent_);
  file->addSeparator();
  file->addAction(tr("&Load session…"), this, &MainWindow::loadSessionInteractive);
  QAction* save = file->addAction(tr("&Save session"), this, [this] { saveSessionInteractive(false); });
  save->setShortcut(QKeySequence::Save);
  save->setObjectName(QStringLiteral("saveSessionAction"));
  QAction* saveAs = file->addAction(tr("Save session &as…"), this, [this] { saveSessionInteractive(true); });
  saveAs->setShortcut(QKeySequence(tr("Ctrl+Shift+S")));
  file->addSeparator();
  QAction* exportView = file->addAction(tr("&Export view…"), this, &MainWindow::exportCurrentView);
  exportView->setShortcut(QKeySequence(tr("Ctrl+E")));
  exportView->setObjectName(QStringLiteral("exportViewAction"));
  QAction* exportAllAction = file->addAction(tr("Export &All…"), this, &MainWindow::exportAllInteractive);
  exportAllAction->setShortcut(QKeySequence(tr("Ctrl+Shift+E")));
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  // Undo and redo the K/V settings (controls, typed specs, presets, the link) and the pin.
  QAction* undo = session_->undoStack()->createUndoAction(this, tr("&Undo"));
  undo->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Z)});
  undo->setObjectName(QStringLiteral("undoAction"));
  QAction* redo = session_->undoStack()->createRedoAction(this, tr("&Redo"));
  redo->setShortcuts({QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Z), QKeySequence(Qt::CTRL | Qt::Key_Y)});
  redo->setObjectName(QStringLiteral("redoAction"));
  edit->addAction(undo);
  edit->addAction(redo);
  edit->addSeparator();
  QAction* copyImage = edit->addAction(tr("&Copy view as image"), this, [this] { copyCurrentView(false); });
  copyImage->setShortcut(QKeySequence(tr("Ctrl+Shift+C")));
  copyImage->setObjectName(QStringLiteral("copyImageAction"));
  QAction* copyData = edit->addAction(tr("Copy view's &data (CSV)"), this, [this] { copyCurrentView(true); });
  copyData->setShortcut(QKeySequence(tr("Ctrl+Alt+C")));
  copyData->setObjectName(QStringLiteral("copyDataAction"));
  edit->addSeparator();
  QAction* pin = edit->addAction(tr("&Pin current setting as A"), session_, &Session::pinAsA);
  pin->setShortcut(QKeySequence(tr("Ctrl+Shift+A")));
  pin->setObjectName(QStringLiteral("pinAction"));
  QAction* pinDump = edit->addAction(tr("Pin an&other dump as A…"), this, &MainWindow::pinDumpInteractive);
  pinDump->setObjectName(QStringLiteral("pinDumpAction"));
  pinDump->setToolTip(tr("Compare two dumps side by side (the same model at two lengths, two models, two texts): "
                         "A is the chosen dump under the setting in force, B the open dump under the controls."));
  QAction* swap = edit->addAction(tr("S&wap A and B"), session_, &Session::swapAB);
  QAction* unpin = edit->addAction(tr("U&npin A"), session_, &Session::unpinA);
  const auto updatePinActions = [this, swap, unpin] {
    swap->setEnabled(session_->pinned().has_value() && !session_->pinnedOnOtherDump());
    unpin->setEnabled(session_->pinned().has_value());
  };
  connect(session_, &Session::pinnedChanged, this, updatePinActions);
  updatePinActions();

  presets_ = new PresetMenu(this);
  connect(presets_, &PresetMenu::presetChosen, session_, &Session::applyPreset);
  menuBar()->addMenu(presets_);

  QMenu* nav = menuBar()->addMenu(tr("&Navigate"));
  nav->addAction(tr("Next layer"), QKeySequence(tr("Alt+Down")), session_, [this] { session_->stepLayer(1); });
  nav->addAction(tr("Previous layer"), QKeySequence(tr("Alt+Up")), session_, [this] { session_->stepLayer(-1); });
  nav->addAction(tr("Next kv head"), QKeySequence(tr("Alt+Right")), session_, [this] { session_->stepHead(1); });
  nav->addAction(tr("Previous kv head"), QKeySequence(tr("Alt+Left")), session_, [this] { session_->stepHead(-1); });

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

void MainWindow::showStatus(const QString& message) { status_->showText(message); }

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

// ---- What the menus and tests call ---------------------------------------------------------------

void MainWindow::openDump(const QString& path, std::optional<Mapping> mapping) { session_->openDump(path, std::move(mapping)); }
void MainWindow::openSample() { session_->openSample(); }
// The dialog records on its own lane; the finished dump opens like any other.
void MainWindow::recordFromModel() {
  auto* dialog = new RecordDialog(this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &RecordDialog::recorded, this, [this](const QString& path) { openDump(path); });
  dialog->open();
}
void MainWindow::setSpecs(const QuantSpec& key, const QuantSpec& value, const QString& what) {
  session_->setPlans(Plan(key), Plan(value), what);
}
void MainWindow::setPlans(const Plan& key, const Plan& value) { session_->setPlans(key, value); }
bool MainWindow::applyPreset(const QString& name) { return session_->applyPreset(name); }
bool MainWindow::applyEngine(const QString& text) { return session_->applyEngine(text); }
void MainWindow::select(int layer, int kvHead) { session_->select(layer, kvHead); }
void MainWindow::pinAsA() { session_->pinAsA(); }
void MainWindow::unpinA() { session_->unpinA(); }
void MainWindow::swapAB() { session_->swapAB(); }
SpecPanel* MainWindow::keyPanel() { return quantization_->keyPanel(); }
SpecPanel* MainWindow::valuePanel() { return quantization_->valuePanel(); }
PlanEditor* MainWindow::planEditor() { return quantization_->planEditor(); }

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

std::vector<ExportableView*> MainWindow::exportableViews() const { return {views_.begin(), views_.end()}; }

// ---- Export ------------------------------------------------------------------------------------

Status MainWindow::exportAll(const QString& folder, const QStringList& views, QSize size) {
  ExportSize pixels;
  pixels.pixels = size;
  return exportAll(folder, views, pixels);
}

Status MainWindow::exportAll(const QString& folder, const QStringList& views, const ExportSize& size) {
  return ui::exportAll(*session_, *feed_, views_, folder, views, size);
}

Expected<std::string> MainWindow::comparisonReportJson() const { return ui::comparisonReportJson(*session_, *feed_); }

View* MainWindow::currentView() const {
  for (View* v : views_) {
    if (v->widget() == tabs_->currentWidget()) return v;
  }
  return nullptr;
}

std::function<QImage(const ExportSize&)> MainWindow::previewOf(View* view) const {
  if (!view || !view->hasContent()) return {};
  const QString caption = session_->exportCaption();
  return [view, caption](const ExportSize& size) {
    ExportOptions options;
    options.size = size;
    options.caption = caption;
    const QSizeF layout = size.layoutSize();
    return renderImage(*view, options, QSize(qRound(layout.width()), qRound(layout.height())));
  };
}

void MainWindow::copyCurrentView(bool asCsv) {
  View* view = currentView();
  if (!view || !view->hasContent()) {
    showError(tr("copy"), tr("this view has nothing to copy yet"));
    return;
  }
  if (asCsv) {
    // The CSV as Export view writes it (metadata comments, then its tables), as text.
    auto* mime = new QMimeData;
    const QString csv = csvHeaderComment(session_->exportMetadata()) + view->toCsv();
    mime->setText(csv);
    mime->setData(QStringLiteral("text/csv"), csv.toUtf8());
    QGuiApplication::clipboard()->setMimeData(mime);
    showStatus(tr("Copied the %1 view's data (CSV) to the clipboard.").arg(view->exportName()));
    return;
  }
  // The view as it is on screen, with the caption line exports carry.
  ExportOptions options;
  options.caption = session_->exportCaption();
  options.size.pixels = view->widget()->size();
  QGuiApplication::clipboard()->setImage(renderImage(*view, options));
  showStatus(tr("Copied the %1 view as an image (%2 × %3 pixels) to the clipboard.")
                 .arg(view->exportName())
                 .arg(options.size.pixels.width())
                 .arg(options.size.pixels.height()));
}

void MainWindow::exportCurrentView() {
  View* view = currentView();
  if (!view) return;
  if (!view->hasContent()) {
    showError(tr("export"), tr("this view has nothing to export yet"));
    return;
  }
  QSettings settings;
  const QString folder = settings.value(QStringLiteral("exportFolder")).toString();
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Export view"), QDir(folder).filePath(view->exportName() + QStringLiteral(".png")),
      tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf);;CSV data (*.csv)"));
  if (path.isEmpty()) return;
  settings.setValue(QStringLiteral("exportFolder"), QFileInfo(path).absolutePath());
  const auto format = exportFormatFor(path);
  if (!format) {
    showError(tr("export"), tr("%1: use a .png, .svg, .pdf or .csv file name").arg(path));
    return;
  }
  ExportOptions options;
  options.caption = session_->exportCaption();
  options.metadata = session_->exportMetadata();
  if (*format != ExportFormat::Csv && interactive_) {
    ExportSizeDialog dialog(tr("Export size"), this);
    dialog.setPreview(previewOf(view));
    if (dialog.exec() != QDialog::Accepted) return;
    auto size = dialog.exportSize();
    if (!size) return;
    options.size = *size;
  }
  const Status s = exportView(*view, path, *format, options, session_->dump() ? q(session_->dump()->info().path) : QString());
  if (!s.isOk()) showError(tr("export"), q(s.message()));
  else showStatus(tr("Wrote %1.").arg(path));
}

void MainWindow::exportAllInteractive() {
  ExportSizeDialog dialog(tr("Export all views"), this);
  dialog.setPreview(previewOf(currentView()));
  if (dialog.exec() != QDialog::Accepted) return;
  const auto size = dialog.exportSize();
  if (!size) return;
  QSettings settings;
  const QString folder = QFileDialog::getExistingDirectory(this, tr("Export all views into"),
                                                           settings.value(QStringLiteral("exportFolder")).toString());
  if (folder.isEmpty()) return;
  settings.setValue(QStringLiteral("exportFolder"), folder);
  const Status s = exportAll(folder, {}, *size);
  if (!s.isOk()) showError(tr("export"), q(s.message()));
  else showStatus(tr("Exported every view into %1.").arg(folder));
}

// ---- Sessions and files ------------------------------------------------------------------------

std::string MainWindow::sessionJson() const {
  // Each view's state under its name, by name (ui/views/view.h); the tab by its view's name.
  nlohmann::ordered_json views;
  for (View* v : views_) {
    if (v->widget() == tabs_->currentWidget()) views["tab"] = v->exportName().toStdString();
  }
  for (const View* v : views_) {
    const nlohmann::json state = v->saveState();
    if (!state.empty()) views[v->exportName().toStdString()] = nlohmann::ordered_json::parse(state.dump());
  }
  return session_->toJson(views);
}

Status MainWindow::saveSession(const QString& path) {
  return session_->save(path, nlohmann::ordered_json::parse(sessionJson()).value("views", nlohmann::ordered_json::object()));
}

Status MainWindow::loadSession(const QString& path) {
  auto views = session_->load(path);
  if (!views) return views.status();
  const nlohmann::json v = viewStatesByName(*views);
  if (v.contains("tab") && v["tab"].is_string()) showTab(q(v["tab"].get<std::string>()));
  for (View* view : views_) {
    const std::string name = view->exportName().toStdString();
    if (v.contains(name) && v[name].is_object()) view->loadState(v[name]);
  }
  return Status::ok();
}

void MainWindow::loadSessionInteractive() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Load session"),
                                                    QSettings().value(QStringLiteral("sessionFolder")).toString(),
                                                    tr("Sessions (*.json)"));
  if (path.isEmpty()) return;
  QSettings().setValue(QStringLiteral("sessionFolder"), QFileInfo(path).absolutePath());
  const Status s = loadSession(path);
  if (!s.isOk()) showError(tr("session"), q(s.message()));
}

void MainWindow::saveSessionInteractive(bool ask) {
  // Ctrl+S writes the session last loaded or saved; the first time it asks where.
  QString path = session_->path();
  if (ask || path.isEmpty()) {
    if (!interactive_) return;
    path = QFileDialog::getSaveFileName(this, tr("Save session"), path.isEmpty() ? QStringLiteral("session.json") : path,
                                        tr("Sessions (*.json)"));
    if (path.isEmpty()) return;
  }
  const Status s = saveSession(path);
  if (!s.isOk()) showError(tr("session"), q(s.message()));
  else showStatus(tr("Session saved to %1.").arg(path));
}

void MainWindow::pinDumpInteractive() {
  if (!session_->dump()) {
    showError(tr("pin dump as A"), tr("open a dump first: it is B, the dump pinned next to it is A"));
    return;
  }
  const QString path = askForDumpFile(tr("Pin a dump as A"));
  if (!path.isEmpty()) session_->pinDumpAsA(path);
}

QString MainWindow::askForDumpFile(const QString& title) {
  QSettings settings;
  const QString path = QFileDialog::getOpenFileName(this, title, settings.value(QStringLiteral("lastFolder")).toString(),
                                                    tr("HDF5 files (*.h5 *.hdf5 *.hdf);;All files (*)"));
  if (!path.isEmpty()) settings.setValue(QStringLiteral("lastFolder"), QFileInfo(path).absolutePath());
  return path;
}

void MainWindow::openInteractive() {
  const QString path = askForDumpFile(tr("Open KV dump"));
  if (path.isEmpty()) return;
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
  connect(dialog, &MappingDialog::mappingAccepted, this, [this, path](const Mapping& mapping) { openDump(path, mapping); });
  dialog->open();
}

QStringList MainWindow::recentFiles() { return RecentFilesMenu::files(); }

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls() && event->mimeData()->urls().value(0).isLocalFile()) event->acceptProposedAction();
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
  for (JobRunner* r : status_->lanes()) r->cancel();
  QMainWindow::closeEvent(event);
}

}  // namespace kvscope::ui
