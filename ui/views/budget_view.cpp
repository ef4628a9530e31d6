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
#include <QValueAxis>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMouseEvent>
#include <QProgressBar>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <tuple>

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QSettings>

#include "core/capacity/units.h"
#include "core/engine/engine.h"
#include "core/model/e2e.h"
#include "core/model/model.h"
#include "ui/export/exporter.h"
#include "ui/state/session.h"
#include "ui/workers/job_runner.h"
#include "ui/export/chart_render.h"
#include "ui/export/chart_ticks.h"
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
  keyView_->setMinimumWidth(300);
  valueView_->setMinimumWidth(300);
  for (InteractiveChartView* v : {static_cast<InteractiveChartView*>(keyView_), static_cast<InteractiveChartView*>(valueView_)}) {
    v->setHint(tr("click a candidate: apply its spec"));
    v->viewport()->installEventFilter(this);
  }

  auto* top = new QHBoxLayout;
  top->addLayout(form);
  top->addWidget(table_, 1);
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
  e2eTable_->setMinimumHeight(120);
  // Two-line headers and short numbers: the six columns fit the group without scrolling.
  e2eTable_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  e2eExport_ = new QPushButton(tr("Export table…"), e2eGroup_);
  e2eExport_->setToolTip(tr("Write the per-layer table as CSV (the columns kvscope-cli e2e prints)."));
  e2eExport_->setEnabled(false);
  connect(e2eExport_, &QPushButton::clicked, this, &BudgetView::exportE2eTable);
  auto* e2eForm = new QFormLayout;
  e2eForm->addRow(tr("next-token KL mean (nats)"), e2eKlMean_);
  e2eForm->addRow(tr("next-token KL max (nats)"), e2eKlMax_);
  e2eForm->addRow(tr("top-1 agreement"), e2eTop1_);
  e2eForm->addRow(tr("perplexity ratio"), e2ePpl_);
  auto* e2eLayout = new QVBoxLayout(e2eGroup_);
  e2eLayout->addWidget(e2eRun_);
  e2eLayout->addWidget(e2eInfo_);
  e2eLayout->addLayout(e2eForm);
  e2eLayout->addWidget(e2eNotes_);
  e2eLayout->addWidget(e2eTable_, 1);
  e2eLayout->addWidget(e2eExport_);
  e2eGroup_->setMaximumWidth(460);
  setE2eAvailable(false, tr("Open a dump written by kvscope-cli record to run the end-to-end check."));
  connect(e2eRun_, &QPushButton::clicked, this, &BudgetView::runE2eCheck);

  auto* charts = new QHBoxLayout;
  charts->addWidget(keyView_);
  charts->addWidget(valueView_);
  charts->addWidget(e2eGroup_);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(new QLabel(tr("<b>Budget search</b>"), this));
  layout->addLayout(searchRow);
  layout->addWidget(searchInfo_);
  layout->addLayout(charts, 3);
  layout->addWidget(paretoReadout_);
  layout->addWidget(buildPlanGroup(), 2);
  layout->addWidget(new QLabel(tr("<b>Capacity calculator</b>"), this));
  layout->addLayout(top, 2);
  layout->addWidget(notes_);
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
  setPlanResult(nullptr);
  paretoReadout_->setText(paretoHint());
  e2ePlans_.reset();
  const QString why = e2eUnavailableReason();
  setE2eAvailable(why.isEmpty(), why);
  if (!dump_) {
    shape_.reset();
    recompute();
  }
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

QStringList BudgetView::column(const CapacityEntry& e) const {
  QStringList c{q(e.keySpec), q(e.valueSpec), QString::number(e.keyBitsPerElement, 'f', 3),
                QString::number(e.valueBitsPerElement, 'f', 3), QString::number(e.bytesPerToken, 'f', 1),
                QString::number(e.tokensFit, 'f', 0), QString::number(e.sequencesFit),
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
  const QStringList a = column(plan_->fp16), b = column(plan_->quantized);
  for (int r = 0; r < rows.size(); ++r) {
    table_->setItem(r, 0, new QTableWidgetItem(a.value(r)));
    table_->setItem(r, 1, new QTableWidgetItem(b.value(r)));
  }
  table_->resizeColumnsToContents();
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
    text += QStringLiteral(" · %1 → %2 bytes/token").arg(search_->bytesPerTokenBaseline, 0, 'f', 0).arg(search_->bytesPerTokenChosen, 0, 'f', 1);
    searchInfo_->setText(text);
  }
  rebuildPareto();
}

void BudgetView::rebuildPareto() {
  const auto fill = [](QChart* chart, const TensorChoice* choice, const QString& title, double& floor) {
    floor = 0;
    chart->removeAllSeries();
    chart->setTitle(title);
    // The axes are made once per chart and re-ranged (replacing them leaves stale items drawn).
    if (chart->axes(Qt::Horizontal).isEmpty()) {
      auto* x = new QValueAxis;
      x->setTitleText(QObject::tr("bits per element"));
      keepNiceTicks(x);
      auto* yLog = new QLogValueAxis;
      keepLogLabels(yLog);
      chart->addAxis(x, Qt::AlignBottom);
      chart->addAxis(yLog, Qt::AlignLeft);
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
      yAxis->setTitleText(QObject::tr("worst layer's metric"));
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
    auto* all = new QScatterSeries;
    all->setName(QObject::tr("candidates"));
    all->setMarkerSize(7);
    auto* front = new QLineSeries;
    front->setName(QObject::tr("Pareto"));
    auto* chosen = new QScatterSeries;
    chosen->setName(QObject::tr("chosen"));
    chosen->setMarkerSize(16);
    chosen->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    chosen->setColor(QColor(214, 39, 40));
    auto* budget = new QLineSeries;
    budget->setName(QObject::tr("budget"));
    QPen pen(QColor(127, 127, 127));
    pen.setStyle(Qt::DashLine);
    pen.setWidthF(1.5);
    budget->setPen(pen);
    for (size_t i = 0; i < choice->candidates.size(); ++i) {
      const CandidateResult& c = choice->candidates[i];
      if (!c.skipped.empty()) continue;
      all->append(c.bitsPerElement, y(c.worst));
      if (c.pareto) front->append(c.bitsPerElement, y(c.worst));
      if (static_cast<int>(i) == choice->chosen) chosen->append(c.bitsPerElement, y(c.worst));
    }
    budget->append(0, y(choice->budget.bound));
    budget->append(niceRange(0, bitsHi * 1.02).hi, y(choice->budget.bound));
    for (QAbstractSeries* s : std::initializer_list<QAbstractSeries*>{budget, front, all, chosen}) {
      // No crosshair: the nearest point by x of a scatter is not the one under the cursor. The
      // candidate under the cursor is read out under the charts instead (eventFilter).
      s->setProperty("kvscopeNoReadout", true);
      chart->addSeries(s);
    }
    setAxisRange(xAxis, 0, niceRange(0, bitsHi * 1.02).hi);
    setDecadeRange(yAxis, lo, hi);
    yAxis->setTitleText(q(std::string("worst layer ") + attentionFieldName(choice->budget.field)));
    for (QAbstractSeries* s : chart->series()) {
      s->attachAxis(xAxis);
      s->attachAxis(yAxis);
    }
  };
  fill(keyChart_, search_ ? &search_->key : nullptr, tr("K candidates (key_only)"), keyFloor_);
  fill(valueChart_, search_ ? &search_->value : nullptr, tr("V candidates (value_only)"), valueFloor_);
}

void BudgetView::renderTo(QPainter& painter, const QRectF& target) {
  if (search_) {
    // Pareto fronts side by side on top, the capacity table below.
    const double h = target.height() * 0.6;
    renderChart(keyChart_, painter, QRectF(target.left(), target.top(), target.width() / 2, h));
    renderChart(valueChart_, painter, QRectF(target.left() + target.width() / 2, target.top(), target.width() / 2, h));
    renderCapacity(painter, QRectF(target.left(), target.top() + h, target.width(), target.height() - h));
    return;
  }
  renderCapacity(painter, target);
}

void BudgetView::renderCapacity(QPainter& painter, const QRectF& target) {
  painter.save();
  painter.setClipRect(target);
  painter.fillRect(target, palette().color(QPalette::Base));
  painter.setPen(palette().color(QPalette::Text));
  QFont font = painter.font();
  // Every row fits the target: tighter lines first, then a smaller font (a short figure).
  const double linesNeeded = static_cast<double>(rowLabels().size()) + 5;
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
    const QStringList a = column(plan_->fp16), b = column(plan_->quantized);
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
  painter.drawText(QRectF(target.left() + 20, y, target.width() - 40, target.bottom() - y),
                   Qt::TextWordWrap, notes_->text() + QStringLiteral("\n") + searchInfo_->text());
  painter.restore();
}

QString BudgetView::toCsv() const {
  if (!plan_) return {};
  QString out = QStringLiteral("quantity,fp16,quantized\n");
  const QStringList rows = rowLabels();
  const QStringList a = column(plan_->fp16), b = column(plan_->quantized);
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
                          "mean damage over layers meets the K and V budgets above."));
  planApply_ = new QPushButton(tr("Apply plan"), planGroup_);
  planApply_->setToolTip(tr("Put the plan into the K and V controls (the plan editor's per-layer overrides)."));
  planApply_->setEnabled(false);
  planSummary_ = new QLabel(tr("Search a plan to see the cheapest spec per layer within the budgets."), planGroup_);
  planSummary_->setWordWrap(true);
  planSummary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  planTable_ = new QTableWidget(0, 5, planGroup_);
  planTable_->setHorizontalHeaderLabels({tr("layer"), tr("K spec"), tr("V spec"), tr("bits (K / V)"), tr("damage (K / V)")});
  planTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  planTable_->verticalHeader()->setVisible(false);
  planTable_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  planTable_->horizontalHeader()->setStretchLastSection(true);
  auto* controls = new QVBoxLayout;
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Engine"), planGroup_));
  row->addWidget(planEngine_);
  controls->addLayout(row);
  controls->addWidget(planRun_);
  controls->addWidget(planApply_);
  controls->addWidget(planSummary_, 1);
  auto* layout = new QHBoxLayout(planGroup_);
  layout->addLayout(controls, 1);
  layout->addWidget(planTable_, 2);
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
    for (int col = 0; col < cells.size(); ++col) planTable_->setItem(i, col, new QTableWidgetItem(cells[col]));
  }
  QString text = tr("K plan: %1\nV plan: %2\n%3 bytes/token (fp16 %4)")
                     .arg(q(r->keyPlan), q(r->valuePlan))
                     .arg(r->bytesPerToken, 0, 'f', 1)
                     .arg(r->bytesPerTokenBaseline, 0, 'f', 1);
  if (r->uniform.found) {
    text += tr("\ncheapest uniform pair: %1 bytes/token").arg(r->uniform.bytesPerToken, 0, 'f', 1);
  }
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
