// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/budget_view.h"

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPushButton>
#include <QScatterSeries>
#include <QSplitter>
#include <QTabWidget>
#include <QGraphicsSimpleTextItem>
#include <QValueAxis>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMouseEvent>
#include <QProgressBar>
#include <QScrollArea>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <tuple>

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QSettings>

#include "core/capacity/units.h"
#include "core/engine/engine.h"
#include "core/model/e2e.h"
#include "core/model/model.h"
#include "core/sensitivity/sensitivity.h"
#include "ui/export/exporter.h"
#include "ui/state/session.h"
#include "ui/workers/job_runner.h"
#include "ui/export/chart_render.h"
#include "ui/export/chart_ticks.h"
#include "ui/views/table_text.h"
#include "ui/widgets/chart_view.h"

namespace kvscope::ui {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
QString q(const std::string& s) { return QString::fromStdString(s); }
constexpr int kHoverPixels = 8;  // how near the cursor a candidate's marker must be
}  // namespace

// The engine-specific part of the plan search group (defined under "Engines" below).
void fillPlanEngines(QComboBox* box);
QString engineFlagsText(const PlanSearchResult& result, QString* why);

QString timeLeftText(double elapsedSeconds, double fraction) {
  // Too early to say: the first steps (reading layers) are not like the rest.
  if (!(fraction > 0.02) || !(elapsedSeconds >= 0.5) || fraction >= 1) return {};
  const double left = elapsedSeconds * (1 - fraction) / fraction;
  if (left < 60) return QObject::tr("about %1 s left").arg(std::max(1.0, std::round(left)), 0, 'f', 0);
  if (left < 3600) return QObject::tr("about %1 min left").arg(std::round(left / 60), 0, 'f', 0);
  return QObject::tr("about %1 h left").arg(left / 3600, 0, 'f', 1);
}

BudgetView::BudgetView(QWidget* parent) : QWidget(parent) {
  // The view's own lanes, as the sensitivity and diagnosis views have theirs.
  searchRunner_ = new JobRunner(tr("budget search"), this);
  planRunner_ = new JobRunner(tr("plan search"), this);
  e2eRunner_ = new JobRunner(tr("end-to-end check"), this);
  // The search's own progress (with the time left) and Cancel beside "Run search".
  connect(searchRunner_, &JobRunner::progressed, this, &BudgetView::setSearchProgress);
  connect(searchRunner_, &JobRunner::busyChanged, this, &BudgetView::setSearchRunning);
  connect(searchRunner_, &JobRunner::failed, this,
          [this](const QString& message) { setSearchMessage(tr("The search failed: %1").arg(message)); });
  connect(planRunner_, &JobRunner::failed, this,
          [this] { setPlanMessage(tr("The plan search failed; see the status bar.")); });
  connect(e2eRunner_, &JobRunner::failed, this, [this] {
    e2ePlans_.reset();
    setE2eMessage(tr("The end-to-end check failed; see the status bar."));
  });
  memory_ = new QDoubleSpinBox(this);
  memory_->setRange(0.1, 4096);
  memory_->setValue(80);
  memory_->setSuffix(QStringLiteral(" GiB"));
  memory_->setToolTip(tr("Accelerator memory the model and its KV cache share."));
  weights_ = new QDoubleSpinBox(this);
  weights_->setRange(0, 4096);
  weights_->setValue(16);
  weights_->setSuffix(QStringLiteral(" GiB"));
  weights_->setToolTip(tr("Memory taken by the weights and anything else that is not KV cache."));
  context_ = new QSpinBox(this);
  context_->setRange(1, 1 << 24);
  context_->setValue(4096);
  context_->setToolTip(tr("Tokens per sequence; it fixes how many scale groups a sequence stores, so bits per "
                          "element and bytes/token here are at this context, not at the dump's length."));
  batch_ = new QSpinBox(this);
  batch_->setRange(1, 1 << 16);
  batch_->setValue(1);
  batch_->setToolTip(tr("Sequences decoded together; the plan says whether they fit."));
  device_ = new QComboBox(this);
  device_->addItem(tr("(no decode estimate)"));
  for (const DeviceInfo& d : deviceTable()) {
    device_->addItem(QString::fromUtf8(d.name.data(), static_cast<qsizetype>(d.name.size())));
    device_->setItemData(device_->count() - 1,
                         QString::fromUtf8(d.description.data(), static_cast<qsizetype>(d.description.size())),
                         Qt::ToolTipRole);
  }
  device_->setToolTip(tr("A datasheet device for the decode-step roofline estimate."));

  auto* form = new QFormLayout;
  form->addRow(tr("Memory"), memory_);
  form->addRow(tr("Weights"), weights_);
  form->addRow(tr("Context"), context_);
  form->addRow(tr("Batch"), batch_);
  form->addRow(tr("Device"), device_);
  table_ = new QTableWidget(this);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setToolTip(tr("fp16 against the current K and V specs, for a model of the open dump's shape."));
  notes_ = new QLabel(this);
  notes_->setWordWrap(true);
  searchInfo_ = new QLabel(tr("Run the budget search to see every candidate's bits per element against its worst "
                              "metric over layers."), this);
  searchInfo_->setWordWrap(true);
  searchInfo_->setObjectName(QStringLiteral("searchInfo"));
  const auto fieldBox = [this](const QString& tip) {
    auto* box = new QComboBox(this);
    for (AttentionField f : {AttentionField::OutputRelError, AttentionField::KlMean, AttentionField::KlMax,
                             AttentionField::ScoreMae, AttentionField::ScoreMax, AttentionField::Top1Agreement}) {
      box->addItem(QString::fromUtf8(attentionFieldName(f)), static_cast<int>(f));
    }
    box->setToolTip(tip);
    return box;
  };
  const auto boundBox = [this](const QString& tip) {
    auto* box = new QDoubleSpinBox(this);
    box->setDecimals(5);
    box->setRange(0, 1000);
    box->setSingleStep(0.005);
    box->setValue(0.05);
    box->setToolTip(tip);
    return box;
  };
  keyField_ = fieldBox(tr("The key_only metric the K budget bounds."));
  keyBound_ = boundBox(tr("The K budget: the worst layer's key_only metric must stay within it."));
  valueField_ = fieldBox(tr("The value_only metric the V budget bounds."));
  valueBound_ = boundBox(tr("The V budget: the worst layer's value_only metric must stay within it."));
  run_ = new QPushButton(tr("Run search"), this);
  run_->setToolTip(tr("Quantize the dump with every candidate spec in the background and pick the cheapest within each budget."));
  cancelSearch_ = new QPushButton(tr("Cancel"), this);
  cancelSearch_->setToolTip(tr("Stop the search; the charts keep the last finished result."));
  cancelSearch_->setVisible(false);
  searchProgress_ = new QProgressBar(this);
  searchProgress_->setRange(0, 1000);
  searchProgress_->setMinimumWidth(searchProgress_->fontMetrics().horizontalAdvance(QStringLiteral("100% · about 59 min left")) + 40);
  searchProgress_->setVisible(false);
  paretoReadout_ = new QLabel(paretoHint(), this);
  paretoReadout_->setObjectName(QStringLiteral("paretoReadout"));
  paretoReadout_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  paretoReadout_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // a long readout never widens the view
  keyChart_ = new QChart;
  valueChart_ = new QChart;
  for (QChart* c : {keyChart_, valueChart_}) {
    applyPaletteTheme(c);
    c->setAnimationOptions(QChart::NoAnimation);
    c->legend()->setAlignment(Qt::AlignBottom);
    // Four entries under a chart a third of the window wide: a smaller font keeps them whole.
    QFont legendFont = c->legend()->font();
    legendFont.setPointSizeF(legendFont.pointSizeF() * 0.85);
    c->legend()->setFont(legendFont);
  }
  keyView_ = new InteractiveChartView(keyChart_, this);
  valueView_ = new InteractiveChartView(valueChart_, this);
  // Room for the plots at the default window size (issue 32 defect 11): the charts take the
  // splitter's upper part; these minima keep a plot and its axis titles whole.
  for (QChartView* v : {keyView_, valueView_}) {
    v->setMinimumSize(280, 220);
    v->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  }
  for (InteractiveChartView* v : {static_cast<InteractiveChartView*>(keyView_), static_cast<InteractiveChartView*>(valueView_)}) {
    v->setHint(tr("click a candidate: apply its spec"));
    v->viewport()->installEventFilter(this);
  }

  auto* searchRow = new QHBoxLayout;
  searchRow->addWidget(new QLabel(tr("K budget"), this));
  searchRow->addWidget(keyField_);
  searchRow->addWidget(keyBound_);
  searchRow->addWidget(new QLabel(tr("V budget"), this));
  searchRow->addWidget(valueField_);
  searchRow->addWidget(valueBound_);
  searchRow->addWidget(run_);
  searchRow->addWidget(searchProgress_);
  searchRow->addWidget(cancelSearch_);
  searchRow->addStretch(1);
  e2eGroup_ = new QGroupBox(tr("End-to-end check (model)"), this);
  e2eRun_ = new QPushButton(tr("Run"), e2eGroup_);
  e2eRun_->setToolTip(tr("Replay the recorded tokens through the model with the current K and V specs and "
                         "compare its next-token distribution with the exact replay."));
  e2eInfo_ = new QLabel(e2eGroup_);
  e2eInfo_->setWordWrap(true);
  e2eKlMean_ = new QLabel(QStringLiteral("–"), e2eGroup_);
  e2eKlMax_ = new QLabel(QStringLiteral("–"), e2eGroup_);
  e2eTop1_ = new QLabel(QStringLiteral("–"), e2eGroup_);
  e2ePpl_ = new QLabel(QStringLiteral("–"), e2eGroup_);
  e2eKlMean_->setObjectName(QStringLiteral("kl_mean"));
  e2eKlMax_->setObjectName(QStringLiteral("kl_max"));
  e2eTop1_->setObjectName(QStringLiteral("top1"));
  e2ePpl_->setObjectName(QStringLiteral("ppl_ratio"));
  e2eNotes_ = new QLabel(e2eGroup_);
  e2eNotes_->setWordWrap(true);
  // The per-layer table kvscope-cli e2e prints; headers shortened, the CLI's names in the tooltips.
  e2eTable_ = new QTableWidget(0, 6, e2eGroup_);
  e2eTable_->setObjectName(QStringLiteral("e2eLayers"));
  e2eTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  e2eTable_->verticalHeader()->setVisible(false);
  const QStringList e2eHeaders{tr("layer"), tr("attn KL\nmean"), tr("attn KL\nmax"), tr("attn\ntop-1"),
                               tr("attn out\nrel err"), tr("hidden\nrel err")};
  const QStringList e2eTips{
      tr("layer"),
      tr("attn_kl_mean: mean over positions and heads of KL(P_exact ‖ P_stored) of this layer's attention"),
      tr("attn_kl_max: the largest of those KLs"),
      tr("attn_top1: fraction of (position, head) whose most-attended token agrees"),
      tr("attn_out_rel_err: mean ‖o′ − o‖₂ / ‖o‖₂ of the attention output"),
      tr("hidden_rel_err: mean ‖h′ − h‖₂ / ‖h‖₂ of the residual stream after the layer")};
  for (int c = 0; c < 6; ++c) {
    auto* item = new QTableWidgetItem(e2eHeaders[c]);
    item->setToolTip(e2eTips[c]);
    e2eTable_->setHorizontalHeaderItem(c, item);
  }
  // Two-line headers and short numbers: the six columns fit beside the figures without scrolling.
  setUpFigureTable(e2eTable_);
  e2eExport_ = new QPushButton(tr("Export table…"), e2eGroup_);
  e2eExport_->setToolTip(tr("Write the per-layer table as CSV (the columns kvscope-cli e2e prints)."));
  e2eExport_->setEnabled(false);
  connect(e2eExport_, &QPushButton::clicked, this, &BudgetView::exportE2eTable);
  auto* e2eForm = new QFormLayout;
  e2eForm->addRow(tr("next-token KL mean (nats)"), e2eKlMean_);
  e2eForm->addRow(tr("next-token KL max (nats)"), e2eKlMax_);
  e2eForm->addRow(tr("top-1 agreement"), e2eTop1_);
  e2eForm->addRow(tr("perplexity ratio"), e2ePpl_);
  auto* e2eLeft = new QVBoxLayout;
  e2eLeft->addWidget(e2eRun_);
  e2eLeft->addWidget(e2eInfo_);
  e2eLeft->addLayout(e2eForm);
  e2eLeft->addWidget(e2eNotes_);
  e2eLeft->addWidget(e2eExport_);
  e2eLeft->addStretch(1);
  auto* e2eLayout = new QHBoxLayout(e2eGroup_);
  e2eLayout->addLayout(e2eLeft, 2);
  e2eLayout->addWidget(e2eTable_, 3);
  setE2eAvailable(false, tr("Open a dump written by kvscope-cli record to run the end-to-end check."));
  connect(e2eRun_, &QPushButton::clicked, this, &BudgetView::runE2eCheck);

  // The search's candidates, one row each: sortable; a row rings its point, a point's click selects its row.
  candidatesTable_ = new QTableWidget(0, 8, this);
  candidatesTable_->setObjectName(QStringLiteral("searchCandidates"));
  candidatesTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  candidatesTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
  candidatesTable_->setSelectionMode(QAbstractItemView::SingleSelection);
  candidatesTable_->verticalHeader()->setVisible(false);
  setUpFigureTable(candidatesTable_);
  candidatesTable_->setToolTip(tr("Every candidate of the budget search; click a header to sort, a row to ring its point "
                                  "on the chart."));
  connect(candidatesTable_, &QTableWidget::itemSelectionChanged, this, &BudgetView::showSelected);

  // The capacity calculator: its inputs beside the table, every row of it shown.
  setUpFigureTable(table_);
  table_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* capacityPage = new QWidget(this);
  auto* capacityRight = new QVBoxLayout;
  capacityRight->addWidget(table_);
  capacityRight->addWidget(notes_);
  capacityRight->addStretch(1);
  auto* capacityLayout = new QHBoxLayout(capacityPage);
  capacityLayout->addLayout(form);
  capacityLayout->addLayout(capacityRight, 1);

  lowerTabs_ = new QTabWidget(this);
  lowerTabs_->setObjectName(QStringLiteral("budgetTabs"));
  lowerTabs_->addTab(candidatesTable_, tr("Candidates"));
  lowerTabs_->addTab(buildPlanGroup(), tr("Plan search"));
  lowerTabs_->addTab(capacityPage, tr("Capacity"));
  lowerTabs_->addTab(e2eGroup_, tr("End-to-end check"));
  lowerTabs_->setCurrentWidget(capacityPage);

  auto* chartsPane = new QWidget(this);
  auto* charts = new QHBoxLayout;
  charts->addWidget(keyView_);
  charts->addWidget(valueView_);
  auto* chartsLayout = new QVBoxLayout(chartsPane);
  chartsLayout->setContentsMargins(0, 0, 0, 0);
  chartsLayout->addLayout(charts, 1);
  chartsLayout->addWidget(paretoReadout_);
  splitter_ = new QSplitter(Qt::Vertical, this);
  splitter_->setObjectName(QStringLiteral("budgetSplitter"));
  splitter_->addWidget(chartsPane);
  splitter_->addWidget(lowerTabs_);
  splitter_->setChildrenCollapsible(false);
  splitter_->setStretchFactor(0, 1);
  splitter_->setStretchFactor(1, 0);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(searchRow);
  layout->addWidget(searchInfo_);
  layout->addWidget(splitter_, 1);
  connect(run_, &QPushButton::clicked, this, [this] { runSearch(searchOptions()); });
  connect(cancelSearch_, &QPushButton::clicked, this, [this] {
    searchRunner_->cancel();
    setSearchMessage(tr("Search cancelled; the charts show the last finished search."));
    if (session()) session()->reportStatus(tr("Budget search cancelled."));
  });
  rebuildPareto();

  connect(memory_, &QDoubleSpinBox::valueChanged, this, &BudgetView::recompute);
  connect(weights_, &QDoubleSpinBox::valueChanged, this, &BudgetView::recompute);
  connect(context_, &QSpinBox::valueChanged, this, &BudgetView::recompute);
  connect(batch_, &QSpinBox::valueChanged, this, &BudgetView::recompute);
  connect(device_, &QComboBox::currentIndexChanged, this, &BudgetView::recompute);
  recompute();
}

BudgetView::~BudgetView() {
  // The charts outlive this object's members while QWidget deletes its children: no label relayout then.
  for (QChart* c : {keyChart_, valueChart_}) {
    c->disconnect(this);
    for (QAbstractAxis* a : c->axes()) a->disconnect(this);
  }
  for (JobRunner* r : lanes()) r->cancel();
  for (JobRunner* r : lanes()) r->waitForIdle();
}

void BudgetView::attached() {
  // The search's budgets follow the summary's (output_rel_error) unless another field is chosen.
  connect(session(), &Session::budgetsChanged, this, &BudgetView::setBudgetBounds);
}

void BudgetView::takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) {
  (void)context;
  for (JobRunner* r : lanes()) r->cancel();
  dump_ = dump;
  // Nothing of the previous dump stays: its search, plan, readout and end-to-end check.
  setSearchResult(nullptr);
  setSearchMessage(tr("Run the budget search to see every candidate's bits per element against its worst metric "
                      "over layers."));
  planCandidatesNote_.clear();
  setPlanResult(nullptr);
  paretoReadout_->setText(paretoHint());
  // A zoom into the previous dump's fronts means nothing for this one.
  keyChartView()->resetZoom();
  valueChartView()->resetZoom();
  e2ePlans_.reset();
  const QString why = e2eUnavailableReason();
  setE2eAvailable(why.isEmpty(), why);
  if (!dump_) {
    shape_.reset();
    recompute();
    return;
  }
  // The capacity table takes the new shape now, even when the setting does not fit this dump
  // (then takeSetting does not follow); the plans are refreshed by takeSetting when they fit.
  const DumpInfo& info = dump_->info();
  shape_ = ModelShape{info.layers, info.kvHeads, info.headDim};
  if (session()) {
    key_ = session()->keyPlan();
    value_ = session()->valuePlan();
  }
  recompute();
}

void BudgetView::takeSetting(const ViewContext& context) {
  if (!context.info || !session()) return;
  const Plan key = session()->keyPlan(), value = session()->valuePlan();
  setInputs(*context.info, key, value);
  if (e2ePlans_ && (e2ePlans_->first != key || e2ePlans_->second != value)) {
    // The shown (or running) end-to-end check is for other plans.
    e2eRunner_->cancel();
    e2ePlans_.reset();
    setE2eResult(nullptr);
    setE2eMessage(tr("The specs changed; press Run to check these."));
  }
}

void BudgetView::runSearch(const SearchOptions& options) {
  if (!dump_) {
    if (session()) session()->reportError(tr("budget search"), tr("open a dump first"));
    return;
  }
  setSearchMessage(tr("Searching…"));
  paretoReadout_->setText(paretoHint());
  auto dump = dump_;
  searchRunner_->start<std::shared_ptr<const SearchResult>>(
      [dump, options](const Progress& progress) -> Expected<std::shared_ptr<const SearchResult>> {
        auto result = searchBudgets(*dump, options, progress);
        if (!result) return result.status();
        return std::make_shared<const SearchResult>(std::move(result).value());
      },
      [this](std::shared_ptr<const SearchResult> result) {
        setSearchResult(std::move(result));
        emit searchFinished();
        exportReady();
      });
}

bool BudgetView::prepareExport() {
  if (search_ || !dump_) return true;
  if (!searchRunner_->busy()) runSearch(searchOptions());
  return false;
}

void BudgetView::runPlanSearch(const PlanSearchOptions& options) {
  if (!dump_) {
    if (session()) session()->reportError(tr("plan search"), tr("open a dump first"));
    return;
  }
  setPlanMessage(tr("Mapping every candidate per layer, then choosing the plan…"));
  if (!options.engine.empty()) {
    planCandidatesNote_ = tr("candidates: %1's cache types").arg(q(options.engine));
  } else if (options.candidates.empty()) {
    planCandidatesNote_ = tr("candidates: the ladder of %1 specs (run the budget search with these budgets first to add its pair)")
                              .arg(sensitivityCandidates().size());
  } else if (search_ && options.candidates == planCandidatesWith(*search_)) {
    planCandidatesNote_ = tr("candidates: the ladder and the budget search's K %1, V %2")
                              .arg(q(search_->key.spec), q(search_->value.spec));
  } else {
    planCandidatesNote_ = tr("candidates: %1 given specs").arg(options.candidates.size());
  }
  auto dump = dump_;
  planRunner_->start<std::shared_ptr<const PlanSearchResult>>(
      [dump, options](const Progress& progress) -> Expected<std::shared_ptr<const PlanSearchResult>> {
        auto result = planSearch(*dump, options, progress);
        if (!result) return result.status();
        return std::make_shared<const PlanSearchResult>(std::move(result).value());
      },
      [this](std::shared_ptr<const PlanSearchResult> result) {
        setPlanResult(std::move(result));
        emit planSearchFinished();
      });
}

QString BudgetView::e2eUnavailableReason() const {
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

void BudgetView::runE2eCheck() {
  const QString why = e2eUnavailableReason();
  if (!why.isEmpty()) {
    if (session()) session()->reportError(tr("end-to-end check"), why);
    return;
  }
  if (!session()) return;
  const Plan key = session()->keyPlan();
  const Plan value = session()->valuePlan();
  e2ePlans_ = std::make_pair(key, value);
  setE2eResult(nullptr);
  setE2eMessage(tr("Replaying the recording through the model…"));
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
        setE2eResult(std::move(result));
        if (session()) session()->reportStatus(tr("End-to-end check done."));
        emit e2eFinished();
      });
}

void BudgetView::applyCandidate(bool key, const QString& text) {
  if (!session()) return;
  auto spec = parseSpec(text.toStdString());
  if (!spec) {
    session()->reportError(tr("Pareto chart"), q(spec.status().message()));
    return;
  }
  // The candidate was measured on every layer: it replaces that side's plan overrides too.
  Setting s = session()->setting();
  s.source = SettingSource{SettingSource::Kind::Plans, {}};
  if (key) {
    s.key = Plan(*spec);
  } else {
    s.value = Plan(*spec);
    s.linked = false;
  }
  session()->edit(s, key ? tr("key from the Pareto chart") : tr("value from the Pareto chart"));
  session()->reportStatus(tr("Applied %1 to %2 from the Pareto chart.").arg(text, key ? tr("K") : tr("V")));
}

void BudgetView::exportE2eTable() {
  if (!e2e_ || !session()) return;
  QSettings settings;
  const QString folder = settings.value(QStringLiteral("exportFolder")).toString();
  const QString path = QFileDialog::getSaveFileName(this, tr("Export the end-to-end table"),
                                                    QDir(folder).filePath(QStringLiteral("e2e-layers.csv")),
                                                    tr("CSV data (*.csv)"));
  if (path.isEmpty()) return;
  settings.setValue(QStringLiteral("exportFolder"), QFileInfo(path).absolutePath());
  const Status s = exportText(path, (csvHeaderComment(session()->exportMetadata()) + e2eCsv()).toUtf8(),
                              dump_ ? q(dump_->info().path) : QString());
  if (!s.isOk()) session()->reportError(tr("export"), q(s.message()));
  else session()->reportStatus(tr("Wrote %1.").arg(path));
}

void BudgetView::setInputs(const DumpInfo& info, const Plan& key, const Plan& value) {
  shape_ = ModelShape{info.layers, info.kvHeads, info.headDim};
  key_ = key;
  value_ = value;
  recompute();
}

QStringList BudgetView::rowLabels() const {
  const int context = context_->value();
  QStringList rows{tr("K spec"), tr("V spec"), tr("K bits/element @ %1").arg(context), tr("V bits/element @ %1").arg(context),
                   tr("bytes/token @ %1 tokens").arg(context),
                   tr("tokens that fit"), tr("sequences that fit"), tr("batch fits")};
  if (device_->currentIndex() > 0) rows << tr("decode step (s)") << tr("bound by");
  return rows;
}

QStringList BudgetView::column(const CapacityEntry& e, bool grouped) const {
  const auto number = [grouped](double v, int decimals) {
    return grouped ? groupedNumber(v, decimals) : QString::number(v, 'f', decimals);
  };
  QStringList c{q(e.keySpec), q(e.valueSpec), QString::number(e.keyBitsPerElement, 'f', 3),
                QString::number(e.valueBitsPerElement, 'f', 3), number(e.bytesPerToken, 1),
                number(e.tokensFit, 0), number(static_cast<double>(e.sequencesFit), 0),
                e.batchFits ? tr("yes") : tr("no")};
  if (e.decode) {
    c << QString::number(e.decode->seconds, 'g', 4) << (e.decode->memoryBound ? tr("memory") : tr("compute"));
  }
  return c;
}

void BudgetView::recompute() {
  plan_.reset();
  error_.clear();
  table_->clear();
  if (!shape_) {
    notes_->setText(tr("Open a dump to plan for its model's shape."));
    return;
  }
  CapacityRequest request;
  request.shape = *shape_;
  request.key = key_;
  request.value = value_;
  request.memoryBytes = memory_->value() * kGiB;
  request.weightsBytes = weights_->value() * kGiB;
  request.context = context_->value();
  request.batch = batch_->value();
  if (device_->currentIndex() > 0) {
    if (const DeviceInfo* d = findDevice(device_->currentText().toStdString())) {
      request.decode = DecodeHardware{std::string(d->name), d->bandwidth, d->fp16Dense, "dense FP16"};
    }
  }
  auto plan = planCapacity(request);
  if (!plan) {
    error_ = q(plan.status().message());
    notes_->setText(error_);
    return;
  }
  plan_ = std::move(plan).value();
  const QStringList rows = rowLabels();
  table_->setRowCount(static_cast<int>(rows.size()));
  table_->setColumnCount(2);
  table_->setVerticalHeaderLabels(rows);
  table_->setHorizontalHeaderLabels({tr("fp16"), tr("quantized")});
  const QStringList a = column(plan_->fp16, true), b = column(plan_->quantized, true);
  for (int r = 0; r < rows.size(); ++r) {
    for (const auto& [c, text] : {std::pair{0, a.value(r)}, std::pair{1, b.value(r)}}) {
      auto* item = new QTableWidgetItem(text);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(r, c, item);
    }
  }
  table_->resizeColumnsToContents();
  // Every row shows (issue 32 defect 6): the table is as tall as its rows and as wide as its columns.
  fixHeightToRows(table_);
  table_->setMinimumWidth(2 * table_->frameWidth() + table_->verticalHeader()->sizeHint().width() +
                          table_->horizontalHeader()->length());
  QString notes = tr("Available for KV cache: %1.").arg(q(formatBytes(plan_->availableBytes)));
  for (const std::string& n : plan_->notes) notes += QStringLiteral(" ") + q(n);
  notes_->setText(notes);
}

SearchOptions BudgetView::searchOptions() const {
  SearchOptions options;
  options.keyBudget = Budget{static_cast<AttentionField>(keyField_->currentData().toInt()), keyBound_->value()};
  options.valueBudget = Budget{static_cast<AttentionField>(valueField_->currentData().toInt()), valueBound_->value()};
  return options;
}

void BudgetView::setBudgetBounds(double key, double value) {
  if (static_cast<AttentionField>(keyField_->currentData().toInt()) == AttentionField::OutputRelError) keyBound_->setValue(key);
  if (static_cast<AttentionField>(valueField_->currentData().toInt()) == AttentionField::OutputRelError) valueBound_->setValue(value);
}

void BudgetView::setE2eAvailable(bool available, const QString& why) {
  e2eGroup_->setEnabled(available);
  e2eGroup_->setToolTip(available ? QString() : why);
  setE2eResult(nullptr);
  setE2eMessage(available ? tr("Press Run to replay the recording with the current specs.") : why);
}

void BudgetView::setE2eMessage(const QString& message) { e2eInfo_->setText(message); }

void BudgetView::setE2eResult(std::shared_ptr<const E2eResult> result) {
  e2e_ = std::move(result);
  e2eTable_->setRowCount(0);
  e2eExport_->setEnabled(e2e_ != nullptr);
  if (!e2e_) {
    for (QLabel* l : {e2eKlMean_, e2eKlMax_, e2eTop1_, e2ePpl_}) l->setText(QStringLiteral("–"));
    e2eNotes_->clear();
    return;
  }
  e2eTable_->setRowCount(static_cast<int>(e2e_->layers.size()));
  for (int r = 0; r < static_cast<int>(e2e_->layers.size()); ++r) {
    const E2eLayer& l = e2e_->layers[static_cast<size_t>(r)];
    // The CLI's precision (app/cli/cmd_e2e.cpp textReport: %.4g, top-1 %.4f).
    const QStringList cells{QString::number(l.layer), QString::number(l.attentionKlMean, 'g', 4),
                            QString::number(l.attentionKlMax, 'g', 4), QString::number(l.attentionTop1, 'f', 4),
                            QString::number(l.outputRelError, 'g', 4), QString::number(l.hiddenRelError, 'g', 4)};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      item->setToolTip(tr("layer %1: K %2, V %3").arg(l.layer).arg(q(l.keySpec), q(l.valueSpec)));
      e2eTable_->setItem(r, c, item);
    }
  }

  const E2eSummary& s = e2e_->summary;
  e2eKlMean_->setText(QString::number(s.klMean, 'g', 6));
  e2eKlMax_->setText(QString::number(s.klMax, 'g', 6));
  e2eTop1_->setText(QString::number(s.top1Agreement, 'f', 4));
  e2ePpl_->setText(QString::number(s.pplRatio, 'f', 5));
  e2eInfo_->setText(tr("%1, %2 tokens replayed. K %3 (%4); V %5 (%6).")
                        .arg(q(e2e_->model))
                        .arg(e2e_->tokens)
                        .arg(q(e2e_->key.specText), q(e2e_->key.storage), q(e2e_->value.specText),
                             q(e2e_->value.storage)));
  QStringList notes;
  for (const std::string& n : e2e_->notes) notes << tr("note: %1").arg(q(n));
  for (const std::string& w : e2e_->warnings) notes << tr("⚠ %1").arg(q(w));
  e2eNotes_->setText(notes.join(QStringLiteral("\n")));
}

QString BudgetView::e2eFigure(const QString& name) const {
  const QLabel* l = e2eGroup_->findChild<QLabel*>(name);
  return l ? l->text() : QString();
}

QString BudgetView::e2eCsv() const {
  if (!e2e_) return {};
  QString out = QStringLiteral("layer,attn_kl_mean,attn_kl_max,attn_top1,attn_out_rel_err,hidden_rel_err,key_spec,value_spec\n");
  const auto quoted = [](const std::string& s) { return q(s).replace(QLatin1Char('"'), QStringLiteral("\"\"")); };
  for (const E2eLayer& l : e2e_->layers) {
    out += QStringLiteral("%1,%2,%3,%4,%5,%6,\"%7\",\"%8\"\n")
               .arg(l.layer)
               .arg(l.attentionKlMean, 0, 'g', 9)
               .arg(l.attentionKlMax, 0, 'g', 9)
               .arg(l.attentionTop1, 0, 'g', 9)
               .arg(l.outputRelError, 0, 'g', 9)
               .arg(l.hiddenRelError, 0, 'g', 9)
               .arg(quoted(l.keySpec), quoted(l.valueSpec));
  }
  return out;
}

void BudgetView::setSearchMessage(const QString& message) { searchInfo_->setText(message); }

void BudgetView::setSearchRunning(bool running) {
  if (running && !searchProgress_->isVisible()) {
    searchClock_.start();
    searchProgress_->setValue(0);
    searchProgress_->setFormat(QStringLiteral("%p%"));
  }
  searchProgress_->setVisible(running);
  cancelSearch_->setVisible(running);
  run_->setEnabled(!running);
}

void BudgetView::setSearchProgress(double fraction, const QString& what) {
  if (!searchClock_.isValid()) searchClock_.start();
  searchProgress_->setValue(static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 1000));
  const QString left = timeLeftText(searchClock_.elapsed() / 1000.0, fraction);
  searchProgress_->setFormat(left.isEmpty() ? QStringLiteral("%p%") : QStringLiteral("%p% · ") + left);
  searchProgress_->setToolTip(what);
}

InteractiveChartView* BudgetView::keyChartView() { return static_cast<InteractiveChartView*>(keyView_); }
InteractiveChartView* BudgetView::valueChartView() { return static_cast<InteractiveChartView*>(valueView_); }

const TensorChoice* BudgetView::choiceOf(bool key) const {
  if (!search_) return nullptr;
  const TensorChoice& c = key ? search_->key : search_->value;
  return c.searched ? &c : nullptr;
}

QPoint BudgetView::candidatePosition(bool key, int index) const {
  const TensorChoice* choice = choiceOf(key);
  if (!choice || index < 0 || index >= static_cast<int>(choice->candidates.size())) return {-1, -1};
  QChart* chart = key ? keyChart_ : valueChart_;
  const QChartView* view = key ? keyView_ : valueView_;
  const QList<QAbstractSeries*> series = chart->series();
  QAbstractSeries* all = nullptr;
  for (QAbstractSeries* s : series) {
    if (s->name() == tr("candidates")) all = s;
  }
  if (!all) return {-1, -1};
  const CandidateResult& c = choice->candidates[static_cast<size_t>(index)];
  // The y the chart draws (a zero metric sits at the axis floor, as rebuildPareto puts it).
  const auto* yAxis = qobject_cast<const QLogValueAxis*>(chart->axes(Qt::Vertical).value(0));
  const double floor = key ? keyFloor_ : valueFloor_;
  const double y = std::max(c.worst, floor > 0 ? floor : (yAxis ? yAxis->min() : 0));
  const QPointF scene = chart->mapToScene(chart->mapToPosition(QPointF(c.bitsPerElement, y), all));
  return view->mapFromScene(scene);
}

int BudgetView::candidateAt(bool key, const QPoint& viewPos) const {
  const TensorChoice* choice = choiceOf(key);
  if (!choice) return -1;
  int best = -1;
  double bestDistance = kHoverPixels;
  for (int i = 0; i < static_cast<int>(choice->candidates.size()); ++i) {
    if (!choice->candidates[static_cast<size_t>(i)].skipped.empty()) continue;
    const QPoint p = candidatePosition(key, i);
    const double d = std::hypot(p.x() - viewPos.x(), p.y() - viewPos.y());
    // Ties (candidates drawn on one spot): the chosen one, else the first.
    if (d < bestDistance || (d == bestDistance && i == choice->chosen)) {
      best = i;
      bestDistance = d;
    }
  }
  return best;
}

QString BudgetView::candidateText(bool key, int index) const {
  const TensorChoice* choice = choiceOf(key);
  if (!choice || index < 0 || index >= static_cast<int>(choice->candidates.size())) return {};
  const CandidateResult& c = choice->candidates[static_cast<size_t>(index)];
  QStringList tags;
  if (index == choice->chosen) tags << tr("chosen");
  if (c.pareto) tags << tr("Pareto");
  tags << (c.meets ? tr("meets the budget") : tr("over the budget"));
  return tr("%1 %2 · %3 bits/element · worst layer %4 %5 (%6) · click to apply")
      .arg(key ? QStringLiteral("K") : QStringLiteral("V"), q(c.spec))
      .arg(c.bitsPerElement, 0, 'f', 3)
      .arg(QString::fromUtf8(attentionFieldName(choice->budget.field)))
      .arg(c.worst, 0, 'g', 4)
      .arg(tags.join(QStringLiteral(", ")));
}

bool BudgetView::eventFilter(QObject* watched, QEvent* event) {
  const bool isKey = watched == keyView_->viewport();
  if (!isKey && watched != valueView_->viewport()) return QWidget::eventFilter(watched, event);
  const auto pos = [event] { return static_cast<QMouseEvent*>(event)->position().toPoint(); };
  switch (event->type()) {
    case QEvent::MouseMove: {
      const int i = candidateAt(isKey, pos());
      paretoReadout_->setText(i >= 0 ? candidateText(isKey, i) : paretoHint());
      break;
    }
    case QEvent::MouseButtonPress:
      if (static_cast<QMouseEvent*>(event)->button() == Qt::LeftButton) pressPos_ = pos();
      break;
    case QEvent::MouseButtonRelease: {
      // A click (not a box-zoom drag) on a candidate applies its spec; the chart view still
      // gets the event (its zoom and crosshair work as on every chart).
      const auto* mouse = static_cast<QMouseEvent*>(event);
      if (mouse->button() == Qt::LeftButton && !(mouse->modifiers() & Qt::ShiftModifier) &&
          (pos() - pressPos_).manhattanLength() <= 4) {
        const int i = candidateAt(isKey, pos());
        if (i >= 0) {
          paretoReadout_->setText(tr("Applied %1 to %2.")
                                      .arg(q(choiceOf(isKey)->candidates[static_cast<size_t>(i)].spec),
                                           isKey ? tr("K") : tr("V")));
          const QString spec = q(choiceOf(isKey)->candidates[static_cast<size_t>(i)].spec);
          selectCandidate(isKey, i);
          emit candidateChosen(isKey, spec);
          applyCandidate(isKey, spec);
        }
      }
      break;
    }
    default: break;
  }
  return QWidget::eventFilter(watched, event);
}

QString BudgetView::paretoHint() const {
  return tr("Hover a candidate for its spec, bits per element and metric; click it to apply that spec. "
            "Wheel: zoom · drag: box zoom · right drag: pan · double-click: reset.");
}

void BudgetView::setSearchResult(std::shared_ptr<const SearchResult> result) {
  search_ = std::move(result);
  if (search_) {
    const auto describe = [](const TensorChoice& c, const char* name) {
      if (!c.searched) return QStringLiteral("%1 not searched").arg(QString::fromUtf8(name));
      if (!c.found) return QStringLiteral("%1: no candidate meets %2").arg(QString::fromUtf8(name), q(budgetText(c.budget)));
      return QStringLiteral("%1: %2 at %3 bpe (worst %4, %5)")
          .arg(QString::fromUtf8(name), q(c.spec))
          .arg(c.bitsPerElement, 0, 'f', 3)
          .arg(c.worst, 0, 'g', 4)
          .arg(q(budgetText(c.budget)));
    };
    QString text = describe(search_->key, "K") + QStringLiteral(" · ") + describe(search_->value, "V");
    text += tr(" · %1 → %2 bytes/token; the worst layer must meet each budget")
                .arg(groupedNumber(search_->bytesPerTokenBaseline, 0), groupedNumber(search_->bytesPerTokenChosen, 1));
    searchInfo_->setText(text);
  }
  fillCandidates();
  rebuildPareto();
}

void BudgetView::fillCandidates() {
  const QSignalBlocker block(candidatesTable_);
  candidatesTable_->setSortingEnabled(false);
  candidatesTable_->clearSelection();
  candidatesTable_->setRowCount(0);
  const Budget* fields[2] = {nullptr, nullptr};
  if (const TensorChoice* k = choiceOf(true)) fields[0] = &k->budget;
  if (const TensorChoice* v = choiceOf(false)) fields[1] = &v->budget;
  // One metric column: its header names the field when K and V share it.
  QString metric = tr("worst layer");
  if (fields[0] && (!fields[1] || fields[1]->field == fields[0]->field)) {
    metric = tr("worst %1").arg(QString::fromUtf8(attentionFieldName(fields[0]->field)));
  } else if (fields[1] && !fields[0]) {
    metric = tr("worst %1").arg(QString::fromUtf8(attentionFieldName(fields[1]->field)));
  }
  const QStringList headers{tr("tensor"), tr("spec"), tr("bits/element"), tr("bytes/token"), metric,
                            tr("within budget"), tr("Pareto"), tr("chosen")};
  const QStringList tips{
      tr("K (key_only metrics) or V (value_only metrics)"), tr("the candidate's spec string"),
      tr("bits per element at the dump's shape (quantization.md §5)"),
      tr("this tensor's bytes per token over the searched layers at the dump's length"),
      tr("the budget's metric on the worst searched layer (K: key_only, V: value_only)"),
      tr("the worst layer meets the budget"), tr("no other candidate has fewer or equal bits and a better or equal worst layer"),
      tr("the cheapest candidate within the budget")};
  for (int c = 0; c < headers.size(); ++c) {
    auto* item = new QTableWidgetItem(headers[c]);
    item->setToolTip(tips[c]);
    candidatesTable_->setHorizontalHeaderItem(c, item);
  }
  if (search_) {
    const double elements = static_cast<double>(search_->dump.kvHeads) * search_->dump.headDim *
                            static_cast<double>(search_->layers.size());
    for (bool key : {true, false}) {
      const TensorChoice* choice = choiceOf(key);
      if (!choice) continue;
      for (int i = 0; i < static_cast<int>(choice->candidates.size()); ++i) {
        const CandidateResult& c = choice->candidates[static_cast<size_t>(i)];
        const int row = candidatesTable_->rowCount();
        candidatesTable_->insertRow(row);
        auto* side = new QTableWidgetItem(key ? QStringLiteral("K") : QStringLiteral("V"));
        side->setData(Qt::UserRole + 1, key);
        side->setData(Qt::UserRole + 2, i);
        candidatesTable_->setItem(row, 0, side);
        candidatesTable_->setItem(row, 1, new QTableWidgetItem(q(c.spec)));
        candidatesTable_->setItem(row, 2, new NumberItem(QString::number(c.bitsPerElement, 'f', 3), c.bitsPerElement));
        const double bytes = c.bitsPerElement * elements / 8;
        candidatesTable_->setItem(row, 3, new NumberItem(groupedNumber(bytes, 1), bytes));
        const bool skipped = !c.skipped.empty();
        auto* worst = new NumberItem(skipped ? tr("skipped") : QString::number(c.worst, 'g', 4),
                                     skipped ? std::numeric_limits<double>::infinity() : c.worst);
        worst->setToolTip(skipped ? q(c.skipped) : QString::fromUtf8(attentionFieldName(choice->budget.field)));
        candidatesTable_->setItem(row, 4, worst);
        const auto flag = [skipped](bool on) {
          auto* item = new QTableWidgetItem(skipped ? QStringLiteral("–") : on ? tr("yes") : tr("no"));
          item->setTextAlignment(Qt::AlignCenter);
          return item;
        };
        candidatesTable_->setItem(row, 5, flag(c.meets));
        candidatesTable_->setItem(row, 6, flag(c.pareto));
        candidatesTable_->setItem(row, 7, flag(i == choice->chosen));
        if (skipped) {
          for (int col = 0; col < 8; ++col) candidatesTable_->item(row, col)->setForeground(palette().color(QPalette::PlaceholderText));
        }
      }
    }
  }
  // Unsorted until a header is clicked: K then V, each by ascending bits as the search lists them.
  candidatesTable_->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
  candidatesTable_->setSortingEnabled(true);
  candidatesTable_->resizeColumnsToContents();
}

void BudgetView::selectCandidate(bool key, int index) {
  for (int row = 0; row < candidatesTable_->rowCount(); ++row) {
    const QTableWidgetItem* side = candidatesTable_->item(row, 0);
    if (index >= 0 && side && side->data(Qt::UserRole + 1).toBool() == key && side->data(Qt::UserRole + 2).toInt() == index) {
      candidatesTable_->selectRow(row);
      candidatesTable_->scrollToItem(side);
      return;
    }
  }
  candidatesTable_->clearSelection();
}

std::pair<bool, int> BudgetView::selectedCandidate() const {
  const QList<QTableWidgetItem*> items = candidatesTable_->selectedItems();
  for (const QTableWidgetItem* item : items) {
    const QTableWidgetItem* side = candidatesTable_->item(item->row(), 0);
    if (side) return {side->data(Qt::UserRole + 1).toBool(), side->data(Qt::UserRole + 2).toInt()};
  }
  return {true, -1};
}

void BudgetView::showSelected() {
  const auto [key, index] = selectedCandidate();
  for (bool side : {true, false}) {
    QScatterSeries* ring = side ? keySelected_ : valueSelected_;
    if (!ring) continue;
    const TensorChoice* choice = choiceOf(side);
    QList<QPointF> points;
    if (choice && side == key && index >= 0 && index < static_cast<int>(choice->candidates.size())) {
      const CandidateResult& c = choice->candidates[static_cast<size_t>(index)];
      const double floor = side ? keyFloor_ : valueFloor_;
      if (c.skipped.empty()) points << QPointF(c.bitsPerElement, std::max(c.worst, floor));
    }
    ring->replace(points);
  }
}

QStringList BudgetView::paretoLabels(bool key) const {
  QStringList out;
  for (const QGraphicsSimpleTextItem* label : key ? keyLabels_ : valueLabels_) {
    if (label->isVisible()) out << label->text();
  }
  return out;
}

void BudgetView::placeParetoLabels(bool key) {
  QChart* chart = key ? keyChart_ : valueChart_;
  const QList<QGraphicsSimpleTextItem*>& labels = key ? keyLabels_ : valueLabels_;
  if (labels.isEmpty() || chart->series().isEmpty()) return;
  QAbstractSeries* series = chart->series().first();
  const QRectF plot = chart->plotArea();
  // Greedy, left to right: each label takes the first of four places around its point that stays
  // inside the plot and overlaps no label placed before it; a label with none is left out (its
  // point keeps its marker, the table lists it).
  // The Pareto markers are taken first: a label never covers a point of the front.
  QList<QRectF> taken;
  const double marker = 7;
  for (const QGraphicsSimpleTextItem* label : labels) {
    const QPointF at = chart->mapToPosition(label->data(1).toPointF(), series);
    taken << QRectF(at.x() - marker, at.y() - marker, 2 * marker, 2 * marker);
  }
  for (QGraphicsSimpleTextItem* label : labels) {
    const QPointF at = chart->mapToPosition(label->data(1).toPointF(), series);
    const QRectF box = label->boundingRect();
    const double gap = 8;  // clear of the point's own marker
    const std::array<QPointF, 4> places{QPointF(at.x() + gap, at.y() - box.height() - 1), QPointF(at.x() + gap, at.y() + 1),
                                        QPointF(at.x() - box.width() - gap, at.y() - box.height() - 1),
                                        QPointF(at.x() - box.width() - gap, at.y() + 1)};
    bool placed = false;
    for (const QPointF& p : places) {
      const QRectF r(p, box.size());
      if (!plot.contains(at) || !plot.contains(r)) continue;
      if (std::any_of(taken.begin(), taken.end(), [&r](const QRectF& t) { return t.intersects(r); })) continue;
      label->setPos(p);
      taken << r;
      placed = true;
      break;
    }
    label->setVisible(placed);
  }
}

void BudgetView::rebuildPareto() {
  fillChart(true);
  fillChart(false);
  showSelected();
}

void BudgetView::fillChart(bool key) {
  QChart* chart = key ? keyChart_ : valueChart_;
  const TensorChoice* choice = search_ ? (key ? &search_->key : &search_->value) : nullptr;
  double& floor = key ? keyFloor_ : valueFloor_;
  QList<QGraphicsSimpleTextItem*>& labels = key ? keyLabels_ : valueLabels_;
  qDeleteAll(labels);
  labels.clear();
  (key ? keySelected_ : valueSelected_) = nullptr;
  floor = 0;
  chart->removeAllSeries();
  chart->setTitle(key ? tr("K candidates (key_only)") : tr("V candidates (value_only)"));
  // The axes are made once per chart and re-ranged (replacing them leaves stale items drawn).
  if (chart->axes(Qt::Horizontal).isEmpty()) {
    auto* x = new QValueAxis;
    x->setTitleText(tr("bits per element"));
    keepNiceTicks(x);
    auto* yLog = new QLogValueAxis;
    keepLogLabels(yLog);
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(yLog, Qt::AlignLeft);
    // The labels follow the plot: its area (resize, export) and its ranges (zoom, pan).
    connect(chart, &QChart::plotAreaChanged, this, [this, key] { placeParetoLabels(key); });
    connect(x, &QValueAxis::rangeChanged, this, [this, key] { placeParetoLabels(key); });
    connect(yLog, &QLogValueAxis::rangeChanged, this, [this, key] { placeParetoLabels(key); });
  }
  auto* xAxis = static_cast<QValueAxis*>(chart->axes(Qt::Horizontal).first());
  auto* yAxis = static_cast<QLogValueAxis*>(chart->axes(Qt::Vertical).first());
  if (!choice || !choice->searched) {
    // An empty plot still shows its axes (Qt hides axes without a series): 0–16 bits, and
    // the metric's usual decades.
    auto* placeholder = new QLineSeries;
    chart->addSeries(placeholder);
    placeholder->attachAxis(xAxis);
    placeholder->attachAxis(yAxis);
    placeholder->setProperty("kvscopeNoReadout", true);
    for (QLegendMarker* m : chart->legend()->markers(placeholder)) m->setVisible(false);
    setAxisRange(xAxis, 0, 16);
    setDecadeRange(yAxis, 1e-4, 1);
    yAxis->setTitleText(tr("worst layer's metric"));
    return;
  }
  // Log metric axis: candidates span orders of magnitude. Zero sits at a floor below the rest.
  double lo = 1e300, hi = 0, bitsHi = 1;
  for (const CandidateResult& c : choice->candidates) {
    if (!c.skipped.empty()) continue;
    if (c.worst > 0) lo = std::min(lo, c.worst);
    hi = std::max(hi, c.worst);
    bitsHi = std::max(bitsHi, c.bitsPerElement);
  }
  if (hi <= 0) hi = 1;
  if (lo > hi) lo = hi / 10;
  lo = std::min(lo, choice->budget.bound > 0 ? choice->budget.bound : lo) / 2;
  hi = std::max(hi, choice->budget.bound) * 2;
  const auto y = [lo](double v) { return std::max(v, lo); };
  floor = lo;
  // Issue 32 defect 11: Pareto-optimal points in their own shape and colour, the front's line
  // above every marker, the chosen one ringed on top.
  auto* all = new QScatterSeries;
  all->setName(tr("candidates"));
  all->setMarkerSize(7);
  all->setColor(QColor(120, 144, 176));
  all->setBorderColor(QColor(120, 144, 176));
  const QColor paretoColour(230, 120, 0);
  auto* optimal = new QScatterSeries;
  optimal->setName(tr("Pareto-optimal"));
  optimal->setMarkerShape(QScatterSeries::MarkerShapeRotatedRectangle);
  optimal->setMarkerSize(12);
  optimal->setColor(paretoColour);
  optimal->setBorderColor(paretoColour.darker(140));
  auto* front = new QLineSeries;
  front->setName(tr("Pareto front"));
  QPen frontPen(paretoColour.darker(130));
  frontPen.setWidthF(2);
  front->setPen(frontPen);
  auto* chosen = new QScatterSeries;
  chosen->setName(tr("chosen"));
  chosen->setMarkerSize(18);
  chosen->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  chosen->setBrush(QColor(0, 0, 0, 0));  // hollow: the point inside stays visible
  chosen->setPen(QPen(QColor(214, 39, 40), 2.5));
  auto* ring = new QScatterSeries;
  ring->setName(tr("selected"));
  ring->setMarkerSize(22);
  ring->setBrush(QColor(0, 0, 0, 0));
  ring->setPen(QPen(palette().color(QPalette::Text), 2));
  auto* budget = new QLineSeries;
  budget->setName(tr("budget"));
  QPen pen(QColor(127, 127, 127));
  pen.setStyle(Qt::DashLine);
  pen.setWidthF(1.5);
  budget->setPen(pen);
  QFont labelFont = chart->legend()->font();
  for (size_t i = 0; i < choice->candidates.size(); ++i) {
    const CandidateResult& c = choice->candidates[i];
    if (!c.skipped.empty()) continue;
    const QPointF point(c.bitsPerElement, y(c.worst));
    (c.pareto ? optimal : all)->append(point);
    if (c.pareto) {
      front->append(point);
      auto* label = new QGraphicsSimpleTextItem(q(c.spec), chart);
      label->setFont(labelFont);
      label->setBrush(palette().color(QPalette::Text));
      label->setZValue(100);  // above the series
      label->setData(1, point);
      label->hide();
      labels << label;
    }
    if (static_cast<int>(i) == choice->chosen) chosen->append(point);
  }
  budget->append(0, y(choice->budget.bound));
  budget->append(niceRange(0, bitsHi * 1.02).hi, y(choice->budget.bound));
  // Later series draw above earlier ones.
  for (QAbstractSeries* s : std::initializer_list<QAbstractSeries*>{all, budget, optimal, front, chosen, ring}) {
    // No crosshair: the nearest point by x of a scatter is not the one under the cursor. The
    // candidate under the cursor is read out under the charts instead (eventFilter).
    s->setProperty("kvscopeNoReadout", true);
    chart->addSeries(s);
  }
  for (QAbstractSeries* s : {static_cast<QAbstractSeries*>(front), static_cast<QAbstractSeries*>(ring)}) {
    for (QLegendMarker* m : chart->legend()->markers(s)) m->setVisible(false);  // the diamonds name the front
  }
  (key ? keySelected_ : valueSelected_) = ring;
  setAxisRange(xAxis, 0, niceRange(0, bitsHi * 1.02).hi);
  setDecadeRange(yAxis, lo, hi);
  yAxis->setTitleText(q(std::string("worst layer ") + attentionFieldName(choice->budget.field)));
  for (QAbstractSeries* s : chart->series()) {
    s->attachAxis(xAxis);
    s->attachAxis(yAxis);
  }
  placeParetoLabels(key);
}

namespace {

// One legend for both charts of a narrow figure, flowing left to right and wrapping (there each
// chart has no width for its own row of four entries, which Qt Charts would cut to "ca…").
// Returns the height it takes; draws only when `draw`.
double sharedLegend(QPainter& painter, const QRectF& area, const QChart* chart, bool draw) {
  const QFontMetricsF fm(painter.font());
  const double symbol = fm.height() * 0.7, line = fm.lineSpacing() * 1.2;
  double x = area.left(), y = area.top();
  for (QLegendMarker* m : chart->legend()->markers()) {
    if (!m->isVisible() || !m->series()->isVisible()) continue;
    const double w = symbol + 4 + fm.horizontalAdvance(m->label()) + fm.averageCharWidth() * 2;
    if (x > area.left() && x + w > area.right()) {
      x = area.left();
      y += line;
    }
    if (draw) {
      painter.save();
      const QRectF box(x, y + (line - symbol) / 2, symbol, symbol);
      const auto* scatter = qobject_cast<const QScatterSeries*>(m->series());
      if (!scatter) {
        painter.setPen(m->pen());
        painter.drawLine(QPointF(box.left(), box.center().y()), QPointF(box.right(), box.center().y()));
      } else {
        painter.setPen(m->pen());
        painter.setBrush(m->brush());
        if (scatter->markerShape() == QScatterSeries::MarkerShapeCircle) {
          painter.drawEllipse(box);
        } else if (scatter->markerShape() == QScatterSeries::MarkerShapeRotatedRectangle) {
          painter.drawPolygon(QPolygonF({QPointF(box.center().x(), box.top()), QPointF(box.right(), box.center().y()),
                                         QPointF(box.center().x(), box.bottom()), QPointF(box.left(), box.center().y())}));
        } else {
          painter.drawRect(box);
        }
      }
      painter.setPen(chart->legend()->labelColor());
      painter.drawText(QRectF(x + symbol + 4, y, w, line), Qt::AlignLeft | Qt::AlignVCenter, m->label());
      painter.restore();
    }
    x += w;
  }
  return y + line - area.top();
}

}  // namespace

void BudgetView::renderTo(QPainter& painter, const QRectF& target) {
  if (!search_) {
    renderCapacity(painter, target);
    return;
  }
  // The figure's rule: the search's result is written whole (wrapped) at the bottom; the Pareto
  // charts side by side above it; the capacity table between them only where it keeps its lines
  // at a readable size (else it is in budget.csv alone). On a narrow figure the charts share one
  // legend under them.
  const QFontMetricsF fm(painter.font());
  const double lineSpacing = fm.lineSpacing();
  const QString result = (notes_->text() + QStringLiteral("\n") + searchInfo_->text()).trimmed();
  const QRectF textArea(target.left() + 10, 0, target.width() - 20, 1e6);
  const double resultHeight = fm.boundingRect(textArea, Qt::TextWordWrap, result).height() + lineSpacing * 0.5;
  const bool narrow = target.width() < 70 * fm.averageCharWidth();
  const double legendHeight =
      narrow ? sharedLegend(painter, QRectF(target.left() + 10, 0, target.width() - 20, 1e6), keyChart_, false) : 0;
  // renderCapacity's lines: a title, a header, the rows, and its first line's offset.
  const double capacityHeight0 = (static_cast<double>(rowLabels().size()) + 3.5) * fm.height() * 1.5;
  const double rest = target.height() - resultHeight - legendHeight;
  const bool withCapacity = rest - capacityHeight0 >= 12 * lineSpacing;
  const double capacityHeight = withCapacity ? capacityHeight0 : 0;
  const double h = std::max(8.0, rest - capacityHeight);
  std::vector<std::pair<QChart*, bool>> legends;
  for (QChart* chart : {keyChart_, valueChart_}) {
    legends.emplace_back(chart, chart->legend()->isVisible());
    if (narrow) chart->legend()->setVisible(false);
  }
  renderChart(keyChart_, painter, QRectF(target.left(), target.top(), target.width() / 2, h));
  renderChart(valueChart_, painter, QRectF(target.left() + target.width() / 2, target.top(), target.width() / 2, h));
  for (const auto& [chart, visible] : legends) chart->legend()->setVisible(visible);
  double y = target.top() + h;
  painter.save();
  painter.fillRect(QRectF(target.left(), y, target.width(), target.bottom() - y), palette().color(QPalette::Base));
  if (narrow) {
    sharedLegend(painter, QRectF(target.left() + 10, y, target.width() - 20, legendHeight), keyChart_, true);
    y += legendHeight;
  }
  if (withCapacity) {
    renderCapacity(painter, QRectF(target.left(), y, target.width(), capacityHeight), false);
    y += capacityHeight;
  }
  painter.setPen(palette().color(QPalette::Text));
  painter.drawText(QRectF(target.left() + 10, y, target.width() - 20, target.bottom() - y), Qt::TextWordWrap, result);
  painter.restore();
}

void BudgetView::renderCapacity(QPainter& painter, const QRectF& target, bool withNotes) {
  painter.save();
  painter.setClipRect(target);
  painter.fillRect(target, palette().color(QPalette::Base));
  painter.setPen(palette().color(QPalette::Text));
  QFont font = painter.font();
  // Every row fits the target: tighter lines first, then a smaller font (a short figure).
  const double linesNeeded = static_cast<double>(rowLabels().size()) + (withNotes ? 5 : 2);
  double line = QFontMetricsF(font).height() * 1.5;
  if (line * linesNeeded > target.height()) {
    line = std::max(target.height() / linesNeeded, QFontMetricsF(font).height() * 1.1);
    if (line * linesNeeded > target.height() && font.pointSizeF() > 0) {
      font.setPointSizeF(std::max(4.0, font.pointSizeF() * target.height() / (line * linesNeeded)));
      line = target.height() / linesNeeded;
    }
  }
  painter.setFont(font);
  double y = target.top() + line;
  QFont bold = font;
  bold.setBold(true);
  painter.setFont(bold);
  painter.drawText(QPointF(target.left() + 20, y), tr("Capacity: %1 GiB memory, %2 GiB weights, context %3, batch %4")
                                                       .arg(memory_->value()).arg(weights_->value())
                                                       .arg(context_->value()).arg(batch_->value()));
  painter.setFont(font);
  y += line;
  if (plan_) {
    const QStringList rows = rowLabels();
    const QStringList a = column(plan_->fp16, true), b = column(plan_->quantized, true);
    const double c0 = target.left() + 20, c1 = c0 + target.width() * 0.3, c2 = c0 + target.width() * 0.6;
    painter.setFont(bold);
    painter.drawText(QPointF(c1, y), tr("fp16"));
    painter.drawText(QPointF(c2, y), tr("quantized"));
    painter.setFont(font);
    for (int r = 0; r < rows.size(); ++r) {
      y += line;
      painter.drawText(QPointF(c0, y), rows[r]);
      painter.drawText(QPointF(c1, y), a.value(r));
      painter.drawText(QPointF(c2, y), b.value(r));
    }
    y += line;
  }
  if (withNotes) {
    painter.drawText(QRectF(target.left() + 20, y, target.width() - 40, target.bottom() - y),
                     Qt::TextWordWrap, notes_->text() + QStringLiteral("\n") + searchInfo_->text());
  }
  painter.restore();
}

QString BudgetView::toCsv() const {
  if (!plan_) return {};
  QString out = QStringLiteral("quantity,fp16,quantized\n");
  const QStringList rows = rowLabels();
  const QStringList a = column(plan_->fp16, false), b = column(plan_->quantized, false);
  for (int r = 0; r < rows.size(); ++r) {
    out += QStringLiteral("\"%1\",\"%2\",\"%3\"\n").arg(rows[r], a.value(r), b.value(r));
  }
  if (search_) {
    out += QStringLiteral("\ntensor,spec,bits_per_element,worst,meets,pareto,chosen,skipped\n");
    const auto rowsOf = [&out](const TensorChoice& c, const char* name) {
      for (size_t i = 0; i < c.candidates.size(); ++i) {
        const CandidateResult& r = c.candidates[i];
        out += QStringLiteral("%1,\"%2\",%3,%4,%5,%6,%7,\"%8\"\n")
                   .arg(QString::fromUtf8(name), q(r.spec))
                   .arg(r.bitsPerElement, 0, 'g', 9)
                   .arg(r.worst, 0, 'g', 9)
                   .arg(r.meets ? 1 : 0)
                   .arg(r.pareto ? 1 : 0)
                   .arg(static_cast<int>(i) == c.chosen ? 1 : 0)
                   .arg(q(r.skipped));
      }
    };
    rowsOf(search_->key, "K");
    rowsOf(search_->value, "V");
  }
  if (e2e_) out += QStringLiteral("\n") + e2eCsv();
  return out;
}

QStringList BudgetView::csvTableNames() const {
  QStringList names;
  if (search_) names << QStringLiteral("search");
  if (e2e_) names << QStringLiteral("e2e");
  return names;
}

// ---- Engines: everything of the budget view that knows an engine -------------------------------

void fillPlanEngines(QComboBox* box) {
  box->addItem(QObject::tr("any plan"), QString());
  // The engines whose flags a plan can be written in, and each one's plan shape, from the engine rows.
  QString shapes;
  for (const EngineDef* e : planEngines()) {
    box->addItem(q(std::string(e->name)), q(std::string(e->name)));
    shapes += QStringLiteral("\n") + q(std::string(e->name)) + QStringLiteral(": ") + q(std::string(e->planSummary));
  }
  box->setToolTip(QObject::tr("Only plans this engine's flags can express:") + shapes);
}

QString engineFlagsText(const PlanSearchResult& r, QString* why) {
  // Flags of the engines that express the plan; why the others cannot, for the tooltip.
  QString text;
  bool anyFlags = false;
  for (const EngineFlags& f : r.engineFlags) {
    if (!r.engine.empty() && f.engine != r.engine) continue;
    if (f.expressible) {
      text += QStringLiteral("\n") + q(f.engine) + QStringLiteral(": ") + q(f.flags);
      anyFlags = true;
    } else {
      *why += (why->isEmpty() ? QString() : QStringLiteral("\n")) + q(f.engine) + QStringLiteral(": ") + q(f.statement);
    }
  }
  if (!anyFlags) text += QObject::tr("\nno engine's flags express this plan (hover for why)");
  return text;
}

// ---- Plan search ---------------------------------------------------------------------------------

QGroupBox* BudgetView::buildPlanGroup() {
  planGroup_ = new QGroupBox(tr("Plan search (a K and a V spec per layer)"), this);
  planEngine_ = new QComboBox(planGroup_);
  fillPlanEngines(planEngine_);
  planRun_ = new QPushButton(tr("Search plan"), planGroup_);
  planRun_->setToolTip(tr("Map every candidate's damage per layer, then choose per layer the cheapest specs whose "
                          "mean damage over layers meets the K and V budgets above. The candidates are the ladder of "
                          "docs/sensitivity.md plus the budget search's chosen K and V specs when it has run with "
                          "these budgets, so the plan never costs more than that uniform pair."));
  planApply_ = new QPushButton(tr("Apply plan"), planGroup_);
  planApply_->setToolTip(tr("Put the plan into the K and V controls (the plan editor's per-layer overrides)."));
  planApply_->setEnabled(false);
  planSummary_ = new QLabel(tr("Search a plan to see the cheapest spec per layer within the budgets."), planGroup_);
  planSummary_->setWordWrap(true);
  planSummary_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  planSummary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  planTable_ = new QTableWidget(0, 5, planGroup_);
  planTable_->setHorizontalHeaderLabels({tr("layer"), tr("K spec"), tr("V spec"), tr("bits (K / V)"), tr("damage (K / V)")});
  planTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  planTable_->verticalHeader()->setVisible(false);
  setUpFigureTable(planTable_);
  auto* controls = new QVBoxLayout;
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Engine"), planGroup_));
  row->addWidget(planEngine_);
  controls->addLayout(row);
  controls->addWidget(planRun_);
  controls->addWidget(planApply_);
  // The summary (plans, bytes, the uniform pair, the rule, engine flags) scrolls within the tab.
  auto* summaryScroll = new QScrollArea(planGroup_);
  summaryScroll->setWidget(planSummary_);
  summaryScroll->setWidgetResizable(true);
  summaryScroll->setFrameShape(QFrame::NoFrame);
  controls->addWidget(summaryScroll, 1);
  auto* layout = new QHBoxLayout(planGroup_);
  layout->addLayout(controls, 2);
  layout->addWidget(planTable_, 3);
  connect(planRun_, &QPushButton::clicked, this, [this] { runPlanSearch(planSearchOptions()); });
  connect(planApply_, &QPushButton::clicked, this, [this] {
    if (!planResult_ || !planResult_->found || !session()) return;
    session()->setPlans(planResult_->key, planResult_->value, tr("plan from the plan search"));
    session()->reportStatus(tr("Applied the plan: K %1, V %2.").arg(q(toString(planResult_->key)), q(toString(planResult_->value))));
  });
  return planGroup_;
}

PlanSearchOptions BudgetView::planSearchOptions() const {
  const SearchOptions s = searchOptions();
  PlanSearchOptions p;
  p.keyBudget = s.keyBudget;
  p.valueBudget = s.valueBudget;
  p.engine = planEngine_->currentData().toString().toStdString();
  // Issue 32 defect 12: with the budget search's pair among the candidates, the plan (a looser
  // rule over a superset of that pair) never costs more than the pair the search shows.
  const auto same = [](const TensorChoice& c, const std::optional<Budget>& b) {
    return b && c.searched && c.budget.field == b->field && c.budget.bound == b->bound;
  };
  if (p.engine.empty() && search_ && same(search_->key, p.keyBudget) && same(search_->value, p.valueBudget)) {
    p.candidates = planCandidatesWith(*search_);
  }
  return p;
}

void BudgetView::setPlanResult(std::shared_ptr<const PlanSearchResult> result) {
  planResult_ = std::move(result);
  showPlan();
}

void BudgetView::setPlanMessage(const QString& message) {
  planResult_.reset();
  showPlan();
  planSummary_->setText(message);
}

void BudgetView::showPlan() {
  planTable_->setRowCount(0);
  const PlanSearchResult* r = planResult_.get();
  planApply_->setEnabled(r && r->found);
  if (!r) {
    planSummary_->setText(tr("Search a plan to see the cheapest spec per layer within the budgets."));
    return;
  }
  const auto number = [](double v) {
    return std::isfinite(v) ? QString::number(v, 'g', 3) : QStringLiteral("–");
  };
  if (!r->found) {
    QString text = tr("No plan of the candidates meets the budgets.");
    for (const std::string& n : r->notes) text += QStringLiteral("\n") + q(n);
    planSummary_->setText(text);
    return;
  }
  planTable_->setRowCount(static_cast<int>(r->layers.size()));
  for (int i = 0; i < static_cast<int>(r->layers.size()); ++i) {
    const PlanLayerChoice& c = r->layers[static_cast<size_t>(i)];
    const QStringList cells{QString::number(c.layer), q(c.keySpec), q(c.valueSpec),
                            QStringLiteral("%1 / %2").arg(c.keyBits, 0, 'f', 2).arg(c.valueBits, 0, 'f', 2),
                            QStringLiteral("%1 / %2").arg(number(c.keyDamage), number(c.valueDamage))};
    for (int col = 0; col < cells.size(); ++col) {
      auto* item = new QTableWidgetItem(cells[col]);
      if (col == 0 || col >= 3) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      planTable_->setItem(i, col, item);
    }
  }
  QString text = tr("K plan: %1\nV plan: %2\n%3 bytes/token (fp16 %4)")
                     .arg(q(r->keyPlan), q(r->valuePlan))
                     .arg(groupedNumber(r->bytesPerToken, 1), groupedNumber(r->bytesPerTokenBaseline, 1));
  if (r->uniform.found) {
    text += tr("\ncheapest uniform pair of these candidates: K %1, V %2, %3 bytes/token")
                .arg(q(r->uniform.keySpec), q(r->uniform.valueSpec), groupedNumber(r->uniform.bytesPerToken, 1));
  }
  // Why its numbers may differ from the budget search's (docs/gui.md, Budget & capacity).
  text += tr("\njudged on the mean over layers (the budget search: the worst layer)");
  if (!planCandidatesNote_.isEmpty()) text += QStringLiteral("; ") + planCandidatesNote_;
  QString why;
  text += engineFlagsText(*r, &why);
  planSummary_->setToolTip(why);
  if (r->joint && r->joint->summary.attention) {
    const AttentionCases& a = *r->joint->summary.attention;
    text += tr("\njoint: kl_mean %1, output_rel_error %2").arg(number(a.joint.klMean), number(a.joint.outputRelError));
  }
  planSummary_->setText(text);
}

QString BudgetView::tabTitle() const { return tr("Budget && capacity"); }

nlohmann::json BudgetView::saveState() const {
  nlohmann::json state;
  state["capacity"] = {{"memory_gib", memory_->value()},
                       {"weights_gib", weights_->value()},
                       {"context", context_->value()},
                       {"batch", batch_->value()},
                       {"device", device_->currentIndex() > 0 ? device_->currentText().toStdString() : std::string()}};
  state["search"] = {{"key_field", keyField_->currentText().toStdString()},
                     {"key_bound", keyBound_->value()},
                     {"value_field", valueField_->currentText().toStdString()},
                     {"value_bound", valueBound_->value()}};
  return state;
}

void BudgetView::loadState(const nlohmann::json& state) {
  if (state.contains("capacity")) {
    const auto& c = state["capacity"];
    memory_->setValue(c.value("memory_gib", memory_->value()));
    weights_->setValue(c.value("weights_gib", weights_->value()));
    context_->setValue(c.value("context", context_->value()));
    batch_->setValue(c.value("batch", batch_->value()));
    const QString device = QString::fromStdString(c.value("device", std::string()));
    const int index = device.isEmpty() ? 0 : device_->findText(device);
    device_->setCurrentIndex(std::max(0, index));
  }
  if (state.contains("search")) {
    const auto& f = state["search"];
    // Field names, not indices: the list of fields may grow.
    for (auto [box, bound, fieldKey, boundKey] :
         {std::tuple{keyField_, keyBound_, "key_field", "key_bound"},
          std::tuple{valueField_, valueBound_, "value_field", "value_bound"}}) {
      const int index = box->findText(QString::fromStdString(f.value(fieldKey, std::string())));
      if (index >= 0) box->setCurrentIndex(index);
      bound->setValue(f.value(boundKey, bound->value()));
    }
  }
}

}  // namespace kvscope::ui
